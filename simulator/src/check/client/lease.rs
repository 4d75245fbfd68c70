//! A lease a client holds: the work under it, its keep-alive, an extension by hand, and its
//! release, driven until the work has stopped and the release is done.

use redlock_core::{
    DriftFactor, Extend, ExtendOutcome, Held, Keeper, KeeperEvent, LockConfig, Machine, Release,
    Timestamp,
};

use super::{Client, Env, Phase};
use crate::check::spec::{CheckSpec, WorkStop};

/// What the work under a lease is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Work {
    /// Running until the client's clock reads this tick.
    Running(u32),
    /// Told to stop: it stops at any point before its client's clock reads `by` (`None`: it
    /// ignores the stop), or at its own end, `until`, if that comes first.
    Stopping {
        by: Option<u32>,
        until: u32,
    },
    Stopped,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(in crate::check) struct Lease {
    /// The keep-alive's operation.
    pub(super) op: u16,
    pub(super) held: Held,
    pub(super) keeper: Option<Keeper>,
    pub(super) work: Work,
    /// The release, once started (its operation and machine; `None` once done).
    pub(super) releasing: Option<(u16, Option<Release>)>,
    /// When (client clock, ticks) the work extends the lease by hand, until it has.
    pub(super) extend_at: Option<u32>,
    /// The work's own extension, while it runs (its operation and machine).
    pub(super) extending: Option<(u16, Extend)>,
    /// How many grants the world had made once this lease was granted (its own included).
    pub(super) grants_before: u16,
}

impl Lease {
    /// Its work has stopped: the keeper (if any) is told, and releases when it will;
    /// without one, the release starts now (unless it has already).
    pub(super) fn work_stopped(&mut self, op: &mut u16, spec: &CheckSpec, now: Timestamp) {
        let config = &spec.config;
        self.work = Work::Stopped;
        match &mut self.keeper {
            Some(keeper) if !keeper.is_released() => report_stop(keeper, spec, now),
            Some(_) => {}
            None if self.releasing.is_none() => self.begin_release(op, config, now),
            None => {}
        }
    }

    /// Starts the release, as operation `op + 1`.
    fn begin_release(&mut self, op: &mut u16, config: &LockConfig, now: Timestamp) {
        *op += 1;
        self.releasing = Some((*op, Some(self.held.release(config, now))));
    }

    /// Whether the release has started.
    pub(super) fn released(&self) -> bool {
        self.releasing.is_some()
    }
}

/// The configuration the keep-alive runs: the clients', or (the fault
/// `release_deadline = "without-drift"`) the same without the drift allowance, which makes
/// its release deadline the validity's end.
pub(super) fn keeper_config(spec: &CheckSpec) -> LockConfig {
    match DriftFactor::from_ppm(0) {
        Some(none) if spec.keeper_without_drift => spec.config.clone().with_drift_factor(none),
        _ => spec.config.clone(),
    }
}

/// Tells `keeper` that the work has stopped, as the holder can: confirmed
/// (`work_stopped`), or not (`stop_unconfirmed`, when the check's works stop unconfirmed).
fn report_stop(keeper: &mut Keeper, spec: &CheckSpec, now: Timestamp) {
    if spec.work_stop == WorkStop::Unconfirmed {
        keeper.stop_unconfirmed(now);
    } else {
        keeper.work_stopped(now);
    }
}

impl Client {
    pub(super) fn settle_lease(&mut self, mut lease: Lease, env: &mut Env<'_>) -> bool {
        let now = self.now(env.spec);
        let mut progressed = false;
        if let Some(mut keeper) = lease.keeper.take() {
            loop {
                while let Some(transmit) = keeper.poll_transmit() {
                    self.issue(lease.op, transmit, env);
                }
                let Some(event) = keeper.poll_outcome() else {
                    break;
                };
                match event {
                    KeeperEvent::Extended(_) => {
                        // As for an extension by hand: one that lands after the deadline
                        // makes the lease believed throughout.
                        if now >= lease.held.valid_until() && env.grants > lease.grants_before {
                            env.happened.revived_over_another = true;
                        }
                        lease.held = keeper.held().clone();
                        env.happened.extended = true;
                    }
                    KeeperEvent::Lost(_) => {
                        if let Work::Running(until) = lease.work {
                            let by = (env.spec.work_stop != WorkStop::Never)
                                .then(|| self.clock.saturating_add(env.spec.stop_ticks));
                            lease.work = Work::Stopping { by, until };
                        }
                        if self.faults.releases_before_stop() && lease.releasing.is_none() {
                            // The fault: released at the loss, while the work finishes its
                            // step.
                            lease.begin_release(&mut self.op, &env.spec.config, now);
                        } else if lease.work == Work::Stopped {
                            report_stop(&mut keeper, env.spec, now);
                        }
                    }
                    KeeperEvent::Release(_) if lease.releasing.is_none() => {
                        lease.begin_release(&mut self.op, &env.spec.config, now);
                    }
                    _ => {}
                }
            }
            lease.keeper = Some(keeper);
        }
        if let Some((op, mut extend)) = lease.extending.take() {
            while let Some(transmit) = extend.poll_transmit() {
                self.issue(op, transmit, env);
            }
            match extend.poll_outcome() {
                None => lease.extending = Some((op, extend)),
                Some(ExtendOutcome::Extended(extension)) => {
                    if now >= lease.held.valid_until() && env.grants > lease.grants_before {
                        env.happened.revived_over_another = true;
                    }
                    lease.held.apply(&extension);
                    env.happened.extended = true;
                }
                Some(_) => {
                    // The work was waiting for this step: it ends here.
                    lease.work_stopped(&mut self.op, env.spec, now);
                    progressed = true;
                }
            }
        }
        if let Some((op, Some(release))) = &mut lease.releasing {
            while let Some(transmit) = release.poll_transmit() {
                let op = *op;
                self.issue(op, transmit, env);
            }
            if release.poll_outcome().is_some() {
                lease.releasing = Some((*op, None));
                progressed = true;
            }
        }
        if matches!(lease.releasing, Some((_, None))) && lease.work == Work::Stopped {
            self.next_iteration(env);
            return true;
        }
        *self.phase.make_mut() = Phase::Holding(lease);
        progressed
    }
}
