//! The critical section a simulated client runs under its lease: reads, writes,
//! read-modify-writes, sleeps, validity checks, manual extensions, pauses and crashes.
//!
//! With a supervisor (the `redlock` command's model) the workload is the supervised command:
//! a process of its own, which keeps running while its supervisor is paused, and which only
//! stops when the supervisor kills it (it ignores `SIGTERM`, the worst case).
//!
//! Under a keep-alive (`with_lock`) the workload is a task of its own too: told to stop when
//! the lease is lost, it stops only when its current step ends (a sleep runs out, an access
//! is answered or times out), the worst case of work that reaches its next `.await` late.
//! Until then it still acts under the lease, and the judge counts its holder's window as
//! open; the lease side releases only when the core's keeper allows it.

use std::time::Duration;

use redlock_core::Timestamp;

use super::lock::Lock;
use super::{Client, Ctx, Outgoing, Timer};
use crate::judge::history::{AccessKind, AccessRecord, ClientOutcome};
use crate::net::message::Msg;
use crate::scenario::Step;
use crate::time::Nanos;

/// Where the workload stands.
#[derive(Debug)]
pub(super) enum Work {
    /// Not running (no lease yet, or between iterations).
    Idle,
    /// At `step`, waiting for `wait` if anything.
    Running { step: usize, wait: Option<Wait> },
    /// Ended or stopped; the lease side releases.
    Stopped,
}

/// The lease the workload acts under, and whether it was told to stop.
#[derive(Clone, Copy, Debug)]
pub(super) struct Under {
    /// The lease's record in the history.
    record: usize,
    /// Told to stop: it stops when its current step ends.
    stopping: bool,
}

/// What a running step waits for.
#[derive(Clone, Copy, Debug)]
pub(super) enum Wait {
    /// Until the client's clock reads this.
    Sleep(Timestamp),
    /// The resource's answer to this access (or the timeout); `rmw` means a write follows.
    Access {
        access: usize,
        deadline: Timestamp,
        rmw: bool,
    },
    /// The end of a stop-the-world pause of the whole client.
    Pause,
    /// A pause of the supervised command alone, until this true time.
    Until(Nanos),
    /// The outcome of an `extend` step.
    Extend,
}

impl Client {
    pub(super) fn start_work(&mut self, ctx: &mut Ctx<'_>) {
        let Lock::Holding(holding) = &self.lock else {
            return;
        };
        let record = holding.record;
        // An earlier lease's work still finishing its last step is overtaken here.
        self.stop_work(ctx);
        ctx.history.leases[record].work_started = true;
        self.under = Some(Under {
            record,
            stopping: false,
        });
        self.work = Work::Running {
            step: 0,
            wait: None,
        };
        self.run_work(ctx, 0);
    }

    /// Stops the workload where it is, now (accesses already sent still travel), and
    /// records when its lease's work stopped.
    pub(super) fn stop_work(&mut self, ctx: &mut Ctx<'_>) {
        if self.work_running() {
            self.work = Work::Stopped;
            self.cancel(Timer::Work);
        }
        if let Some(under) = self.under.take() {
            let record = &mut ctx.history.leases[under.record];
            record.work_stopped_at.get_or_insert(ctx.now);
        }
    }

    /// Tells the workload to stop when its current step ends; returns whether it has
    /// stopped already (it was not running).
    pub(super) fn request_stop(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let running = self.work_running();
        match &mut self.under {
            Some(under) if running => {
                if !under.stopping {
                    under.stopping = true;
                    ctx.trace(
                        &self.spec.name,
                        format_args!("work told to stop; it stops when its step ends"),
                    );
                }
                false
            }
            _ => {
                self.stop_work(ctx);
                true
            }
        }
    }

    /// Whether the workload was told to stop and is still finishing its step.
    pub(super) fn work_stopping(&self) -> bool {
        self.work_running() && self.under.is_some_and(|under| under.stopping)
    }

    pub(super) fn work_running(&self) -> bool {
        matches!(self.work, Work::Running { .. })
    }

    fn wait(&mut self, step: usize, wait: Wait) {
        self.work = Work::Running {
            step,
            wait: Some(wait),
        };
    }

    /// Runs the workload from `step` until something must be waited for.
    fn run_work(&mut self, ctx: &mut Ctx<'_>, mut step: usize) {
        loop {
            if !self.work_running() {
                return;
            }
            if self.work_stopping() {
                // The step it was in when told to stop has ended: this is its stop point.
                ctx.trace(&self.spec.name, format_args!("work stopped"));
                self.stop_work(ctx);
                self.work_reached_stop(ctx);
                return;
            }
            let Some(action) = self.spec.steps.get(step).cloned() else {
                self.stop_work(ctx);
                self.command_exited(ctx);
                return;
            };
            let now = self.local(ctx.now);
            match action {
                Step::Read | Step::Write | Step::ReadModifyWrite => {
                    let kind = if action == Step::Write {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    };
                    let Some((access, deadline)) = self.send_access(ctx, kind) else {
                        self.stop_work(ctx);
                        self.work_ended(ctx);
                        return;
                    };
                    let rmw = action == Step::ReadModifyWrite;
                    self.wait(
                        step,
                        Wait::Access {
                            access,
                            deadline,
                            rmw,
                        },
                    );
                    self.wake_at(ctx, Timer::Work, deadline);
                    return;
                }
                Step::Sleep(duration) => {
                    let until = now.saturating_add(Duration::from_nanos(duration));
                    self.wait(step, Wait::Sleep(until));
                    self.wake_at(ctx, Timer::Work, until);
                    return;
                }
                Step::Check => {
                    let valid = match &self.lock {
                        Lock::Holding(holding) => holding.is_valid(now),
                        _ => false,
                    };
                    if !valid {
                        self.outcome(ctx, ClientOutcome::CheckFailed);
                        self.stop_work(ctx);
                        self.work_ended(ctx);
                        return;
                    }
                    step += 1;
                }
                Step::Extend => {
                    self.wait(step, Wait::Extend);
                    self.begin_extend(ctx);
                    return;
                }
                Step::Pause(duration) if self.spec.supervisor.is_some() => {
                    let until = ctx.now + duration;
                    self.wait(step, Wait::Until(until));
                    self.wake_true(ctx, Timer::Work, until);
                    return;
                }
                Step::Pause(duration) => {
                    self.wait(step, Wait::Pause);
                    ctx.out.push(Outgoing::Pause {
                        until: ctx.now + duration,
                    });
                    return;
                }
                Step::Crash => {
                    self.crash(ctx);
                    return;
                }
                Step::DropHandle(duration) => {
                    // The work runs on for `duration`, then stops (its stop point).
                    self.request_stop(ctx);
                    self.drop_handle(ctx);
                    let until = now.saturating_add(Duration::from_nanos(duration));
                    self.wait(step, Wait::Sleep(until));
                    self.wake_at(ctx, Timer::Work, until);
                    return;
                }
            }
        }
    }

    /// Sends one access under the lease held; `None` when there is none.
    fn send_access(&mut self, ctx: &mut Ctx<'_>, kind: AccessKind) -> Option<(usize, Timestamp)> {
        let Lock::Holding(holding) = &self.lock else {
            return None;
        };
        let fence = holding.held.fence().unwrap_or(0);
        ctx.history.accesses.push(AccessRecord {
            client: self.id,
            lease: holding.record,
            epoch: holding.epoch,
            fence,
            kind,
            sent_at: ctx.now,
            arrived_at: None,
        });
        let access = ctx.history.accesses.len() - 1;
        ctx.trace(
            &self.spec.name,
            format_args!("{kind:?} #{access} sent (fence {fence})"),
        );
        ctx.out.push(Outgoing::Resource {
            msg: Msg::Access { access },
        });
        let deadline = self
            .local(ctx.now)
            .saturating_add(Duration::from_nanos(self.spec.access_timeout));
        Some((access, deadline))
    }

    pub(super) fn work_timer(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        let Work::Running {
            step,
            wait: Some(wait),
        } = self.work
        else {
            return;
        };
        match wait {
            Wait::Sleep(until) if now < until => self.wake_at(ctx, Timer::Work, until),
            Wait::Access { deadline, .. } if now < deadline => {
                self.wake_at(ctx, Timer::Work, deadline);
            }
            Wait::Until(until) if ctx.now < until => self.wake_true(ctx, Timer::Work, until),
            Wait::Access { .. } => {
                self.outcome(ctx, ClientOutcome::AccessTimedOut);
                self.next_step(ctx, step);
            }
            Wait::Sleep(_) | Wait::Until(_) => self.next_step(ctx, step),
            Wait::Pause | Wait::Extend => {}
        }
    }

    fn next_step(&mut self, ctx: &mut Ctx<'_>, step: usize) {
        self.work = Work::Running {
            step: step + 1,
            wait: None,
        };
        self.run_work(ctx, step + 1);
    }

    pub(super) fn access_answered(&mut self, ctx: &mut Ctx<'_>, access: usize) {
        let Work::Running {
            step,
            wait:
                Some(Wait::Access {
                    access: waited,
                    rmw,
                    ..
                }),
        } = self.work
        else {
            return;
        };
        if waited != access {
            return;
        }
        // A read-modify-write told to stop between its read and its write stops there.
        if !rmw || self.work_stopping() {
            return self.next_step(ctx, step);
        }
        match self.send_access(ctx, AccessKind::Write) {
            Some((access, deadline)) => {
                self.wait(
                    step,
                    Wait::Access {
                        access,
                        deadline,
                        rmw: false,
                    },
                );
                self.wake_at(ctx, Timer::Work, deadline);
            }
            None => {
                self.stop_work(ctx);
                self.work_ended(ctx);
            }
        }
    }

    /// An `extend` step succeeded: the workload goes on.
    pub(super) fn work_extended(&mut self, ctx: &mut Ctx<'_>) {
        if let Work::Running {
            step,
            wait: Some(Wait::Extend),
        } = self.work
        {
            self.next_step(ctx, step);
        }
    }

    pub(super) fn pause_ended(&mut self, ctx: &mut Ctx<'_>) {
        if let Work::Running {
            step,
            wait: Some(Wait::Pause),
        } = self.work
        {
            self.next_step(ctx, step);
        }
    }
}
