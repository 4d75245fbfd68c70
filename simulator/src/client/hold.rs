//! Holding a lease in a simulated client: the core's keep-alive (`with_lock`) and supervisor
//! (`redlock run`) when the scenario asks for them, and manual `extend` steps.
//!
//! The order of stop and release is the keeper's, as in the shipped client: a loss tells the
//! work to stop, the work stops when its current step ends (or is killed by the
//! supervisor), the keeper is told, and only its [`KeeperEvent::Release`] releases the
//! lease (or the keys' expiry, when the stop never comes). The `loss_order = "release-first"`
//! fault releases at the loss instead, as the client did before.

use redlock_core::{
    ExtendOutcome, Held, Keeper, KeeperEvent, Machine, Supervisor, SupervisorAction, Timestamp,
};

use super::holding::Holding;
use super::lock::Lock;
use super::pump::{Pumped, pump};
use super::{Client, Ctx, Timer};
use crate::judge::history::{ClientOutcome, LeaseRecord};

impl Client {
    pub(super) fn hold(
        &mut self,
        ctx: &mut Ctx<'_>,
        epoch: u64,
        held: Held,
        granted_at: crate::time::Nanos,
    ) {
        ctx.history.leases.push(LeaseRecord {
            client: self.id,
            epoch,
            fence: held.fence().unwrap_or(0),
            token: held.token(),
            granted_at,
            valid_until_local: held.valid_until().as_nanos(),
            extensions: Vec::new(),
            released_at: None,
            crashed_at: None,
            work_started: false,
            work_stopped_at: None,
            window_end: 0,
        });
        ctx.trace(
            &self.spec.name,
            format_args!(
                "holds epoch {epoch} fence {} until local {}",
                held.fence().unwrap_or(0),
                held.valid_until()
            ),
        );
        let config = &self.spec.config;
        let keeper = self
            .spec
            .keep_alive
            .clone()
            .map(|policy| Keeper::new(config, policy, held.clone()));
        let supervisor = self.spec.supervisor.map(|grace| {
            let margin = self
                .spec
                .keep_alive
                .as_ref()
                .map_or_else(|| config.node_timeout(), |policy| policy.margin(config));
            Supervisor::new(grace, margin, held.valid_until())
        });
        let holding = Holding {
            record: ctx.history.leases.len() - 1,
            epoch,
            held,
            keeper,
            supervisor,
            extending: None,
            handle_dropped: false,
        };
        self.op += 1;
        self.lock = Lock::Holding(Box::new(holding));
        self.drive(ctx);
        self.start_work(ctx);
    }

    /// Starts a manual extension (an `extend` step); the work waits for its outcome.
    pub(super) fn begin_extend(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        if let Lock::Holding(holding) = &mut self.lock {
            holding.extending = Some(self.faults.extend(&self.spec.config, &holding.held, now));
            self.op += 1;
        }
        self.drive(ctx);
    }

    pub(super) fn drive_holding(&mut self, ctx: &mut Ctx<'_>, mut holding: Box<Holding>) {
        let now = self.local(ctx.now);
        let mut wake: Option<Timestamp> = None;
        let mut earliest = |at: Option<Timestamp>| {
            wake = match (wake, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        // The keep-alive: several events may be waiting.
        if let Some(mut keeper) = holding.keeper.take() {
            loop {
                match pump(&mut keeper, |t| self.send(ctx, t)) {
                    Pumped::Waiting(at) => {
                        earliest(at);
                        break;
                    }
                    Pumped::Outcome(event) => {
                        match self.kept(ctx, &mut holding, &keeper, event, now) {
                            After::Continue => {}
                            // Its release follows as the keeper's next event.
                            After::WorkStopped => keeper.work_stopped(now),
                            After::Stop(stop) => {
                                holding.keeper = Some(keeper);
                                return self.stop_holding(ctx, holding, stop);
                            }
                        }
                    }
                }
            }
            holding.keeper = Some(keeper);
        }
        let mut extended_step = false;
        if let Some(mut extend) = holding.extending.take() {
            match pump(&mut extend, |t| self.send(ctx, t)) {
                Pumped::Waiting(at) => {
                    earliest(at);
                    holding.extending = Some(extend);
                }
                Pumped::Outcome(ExtendOutcome::Extended(extension)) => {
                    holding.held.apply(&extension);
                    self.extended(ctx, &holding, extension.valid_until);
                    extended_step = true;
                }
                Pumped::Outcome(outcome) => {
                    let reason = match outcome {
                        ExtendOutcome::Failed(failure) => failure.to_string(),
                        other => format!("{other:?}"),
                    };
                    self.outcome(ctx, ClientOutcome::ExtendFailed { reason });
                    // The work was waiting for this step, which ends here, and so does it.
                    return self.stop_holding(ctx, holding, Stop::Ended);
                }
            }
        }
        if let Some(supervisor) = &mut holding.supervisor {
            while let Some(action) = supervisor.poll_action() {
                match action {
                    SupervisorAction::Terminate { cause, kill_at } => ctx.trace(
                        &self.spec.name,
                        format_args!(
                            "supervisor: SIGTERM (the command ignores it; SIGKILL at local {kill_at}): {cause}"
                        ),
                    ),
                    // After the command ended on its own, the kill only clears what it left.
                    SupervisorAction::Kill if self.work_running() => {
                        return self.stop_holding(ctx, holding, Stop::Killed);
                    }
                    SupervisorAction::Kill => {
                        return self.stop_holding(ctx, holding, Stop::Ended);
                    }
                    other => ctx.trace(&self.spec.name, format_args!("supervisor: {other:?}")),
                }
            }
            earliest(supervisor.poll_timeout());
        }
        self.lock = Lock::Holding(holding);
        if let Some(at) = wake {
            self.wake_at(ctx, Timer::Lock, at);
        }
        if extended_step {
            // With the lease back in place: the work may extend again or release.
            self.work_extended(ctx);
        }
    }

    /// Handles one keep-alive event; says what follows.
    fn kept(
        &mut self,
        ctx: &mut Ctx<'_>,
        holding: &mut Holding,
        keeper: &Keeper,
        event: KeeperEvent,
        now: Timestamp,
    ) -> After {
        match event {
            KeeperEvent::Extended(_) => {
                holding.held = keeper.held().clone();
                let valid_until = holding.held.valid_until();
                self.extended(ctx, holding, valid_until);
                if let Some(supervisor) = &mut holding.supervisor {
                    supervisor.extended(valid_until);
                }
                After::Continue
            }
            KeeperEvent::ExtendFailed(failure) => {
                ctx.trace(
                    &self.spec.name,
                    format_args!("extension failed; retrying: {failure}"),
                );
                After::Continue
            }
            KeeperEvent::HoldLimitReached => {
                if let Some(supervisor) = &mut holding.supervisor {
                    supervisor.hold_limit_reached();
                }
                After::Continue
            }
            KeeperEvent::Lost(reason) => {
                self.outcome(
                    ctx,
                    ClientOutcome::Lost {
                        reason: reason.to_string(),
                    },
                );
                match &mut holding.supervisor {
                    // The supervisor kills the command; its next poll says so.
                    Some(supervisor) => {
                        supervisor.lost(reason, now);
                        After::Continue
                    }
                    // The fault: the release goes out at the loss, while the work finishes
                    // its step.
                    None if self.faults.releases_before_stop() => {
                        self.request_stop(ctx);
                        After::Stop(Stop::Allowed)
                    }
                    // `with_lock`: the work stops at the end of its step, then tells the
                    // keeper.
                    None if self.request_stop(ctx) => After::WorkStopped,
                    None => After::Continue,
                }
            }
            KeeperEvent::Release(when) => {
                ctx.trace(
                    &self.spec.name,
                    format_args!("keep-alive: release ({when:?})"),
                );
                After::Stop(Stop::Allowed)
            }
            other => {
                ctx.trace(&self.spec.name, format_args!("keep-alive: {other:?}"));
                After::Continue
            }
        }
    }

    /// The work, told to stop, has reached its stop point: the keeper is told, and its
    /// release follows.
    pub(super) fn work_reached_stop(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        if let Lock::Holding(holding) = &mut self.lock
            && !holding.handle_dropped
            && let Some(keeper) = &mut holding.keeper
        {
            keeper.work_stopped(now);
            self.drive(ctx);
        }
    }

    /// The owner drops the handle of its kept-alive lease (a `drop-handle` step) while the
    /// work runs on: the keeper is told (the shipped client: an unconfirmed stop; the
    /// `drop-releases` fault: the work's stop), and the work stops when this step ends,
    /// which nobody can tell the keeper.
    pub(super) fn drop_handle(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        let releases = self.faults.drop_releases();
        if let Lock::Holding(holding) = &mut self.lock
            && let Some(keeper) = &mut holding.keeper
        {
            holding.handle_dropped = true;
            if releases {
                keeper.work_stopped(now);
            } else {
                keeper.handle_dropped(now);
            }
            ctx.trace(
                &self.spec.name,
                format_args!("handle dropped; the work runs on"),
            );
            self.drive(ctx);
        }
    }

    /// The work ended on its own (its last step, a failed check, nothing to act under):
    /// the lease is released, through the keeper when one keeps it.
    pub(super) fn work_ended(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        match &mut self.lock {
            // Nobody holds the handle to say so: the keeper releases at its deadline.
            Lock::Holding(holding) if holding.handle_dropped => {}
            Lock::Holding(holding) => match &mut holding.keeper {
                Some(keeper) => {
                    keeper.work_stopped(now);
                    self.drive(ctx);
                }
                None => self.begin_release(ctx),
            },
            _ => self.begin_release(ctx),
        }
    }

    fn extended(&mut self, ctx: &mut Ctx<'_>, holding: &Holding, valid_until: Timestamp) {
        let record = &mut ctx.history.leases[holding.record];
        record.valid_until_local = valid_until.as_nanos();
        record.extensions.push((ctx.now, valid_until.as_nanos()));
        self.outcome(ctx, ClientOutcome::Extended);
    }

    /// The command ended on its own (a supervised client): the supervisor kills whatever it
    /// left, then the lease is released.
    pub(super) fn command_exited(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        match &mut self.lock {
            Lock::Holding(holding) if holding.supervisor.is_some() => {
                if let Some(supervisor) = &mut holding.supervisor {
                    let ending = supervisor.leader_exited(now);
                    ctx.trace(&self.spec.name, format_args!("command ended: {ending:?}"));
                }
                self.drive(ctx);
            }
            _ => self.work_ended(ctx),
        }
    }

    fn stop_holding(&mut self, ctx: &mut Ctx<'_>, mut holding: Box<Holding>, stop: Stop) {
        match stop {
            Stop::Killed => {
                self.outcome(ctx, ClientOutcome::Killed);
                self.stop_work(ctx);
            }
            Stop::Ended => self.stop_work(ctx),
            // The keeper allowed it: the work stopped, or the keys have expired (the work
            // may still finish its step), or the fault releases first.
            Stop::Allowed => {}
        }
        let now = self.local(ctx.now);
        if stop != Stop::Allowed
            && let Some(keeper) = &mut holding.keeper
            && !keeper.is_released()
        {
            // Killed or ended: the stop is confirmed, and the keeper's release follows.
            keeper.work_stopped(now);
            while let Some(event) = keeper.poll_outcome() {
                ctx.trace(&self.spec.name, format_args!("keep-alive: {event:?}"));
            }
        }
        self.lock = Lock::Holding(holding);
        self.begin_release(ctx);
    }
}

/// What follows a keep-alive event.
enum After {
    /// Nothing yet.
    Continue,
    /// The work has stopped already: tell the keeper.
    WorkStopped,
    /// Stop holding.
    Stop(Stop),
}

/// How a held lease ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// The work has ended (its command exited, a failed extension step): release.
    Ended,
    /// The supervisor killed the command: release.
    Killed,
    /// The keeper allowed the release.
    Allowed,
}
