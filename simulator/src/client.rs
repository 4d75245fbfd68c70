//! A simulated client: a workload loop that drives the very same `redlock::core` machines as
//! the tokio client does, over the simulated network and the client's own clock.
//!
//! The implementation-fault variants (plain `DEL`, extend as re-acquire, wall clock, no
//! elapsed check, late start time) are faults of the *driver*: they change which Redis
//! operation a command becomes, or which time the machine is told. The core is never
//! altered, so a `SAFE` verdict for the correct client is a verdict on the shipped code.

use std::sync::Arc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use redlock::core::{
    Acquire, AcquireEvent, Command, Extend, ExtendFailure, ExtendOutcome, LockKey, Machine,
    Release, Timestamp, Token, Transmit, quorum,
};

use crate::clock::ClockModel;
use crate::history::{AccessKind, AccessRecord, ClientOutcome, History, LeaseRecord};
use crate::message::{Msg, NodeOp, NodeReply, Tag};
use crate::scenario::{
    ClientSpec, ClockKind, ExtendImpl, ReleaseImpl, Step, TimingImpl, TokenSource,
};
use crate::time::Nanos;

/// What a client asks the world to do.
pub(crate) enum Outgoing {
    /// Send to node address `address` (the world routes it to a server).
    Node { address: usize, msg: Msg },
    /// Send to the protected resource.
    Resource { msg: Msg },
    /// Call `on_wake` at this true time with this generation.
    Wake { at: Nanos, generation: u64 },
    /// Stop the world for this client until the given true time.
    Pause { until: Nanos },
}

/// The world's services, lent to a client for one event.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Nanos,
    pub(crate) rng: &'a mut ChaCha8Rng,
    pub(crate) out: &'a mut Vec<Outgoing>,
    pub(crate) history: &'a mut History,
    pub(crate) epochs: &'a mut u64,
    pub(crate) tokens: TokenSource,
    pub(crate) trace: &'a mut Option<String>,
}

impl Ctx<'_> {
    fn trace(&mut self, who: &str, what: std::fmt::Arguments<'_>) {
        if let Some(trace) = self.trace {
            use std::fmt::Write;
            let _ = writeln!(
                trace,
                "{:>16} {who:<10} {what}",
                crate::time::fmt_ms(self.now)
            );
        }
    }
}

/// The lease a client holds.
#[derive(Debug)]
struct Held {
    record: usize,
    epoch: u64,
    fence: u64,
    token: Token,
    acquired_at: Timestamp,
    valid_until: Timestamp,
    extensions: u32,
}

/// What the client waits for while working.
#[derive(Debug)]
enum Work {
    /// Until its clock reads this.
    Sleep(Timestamp),
    /// The resource's answer to this access (or the timeout); `rmw` means a write follows.
    Access {
        access: usize,
        deadline: Timestamp,
        rmw: bool,
    },
    /// The end of a stop-the-world pause.
    Pause,
}

#[derive(Debug)]
enum Phase {
    /// Before the start or between iterations: acquire when the clock reads this.
    Waiting(Option<Timestamp>),
    // Boxed: the machine is much larger than the other phases.
    Acquiring(Box<Acquiring>),
    Minting(Minting),
    Working {
        step: usize,
        wait: Option<Work>,
    },
    Extending {
        step: usize,
        machine: Extend,
    },
    Releasing(Release),
    Done,
}

#[derive(Debug)]
struct Acquiring {
    machine: Acquire,
    /// The start of the current round (client clock).
    round_start: Timestamp,
    /// When the round's first reply arrived (for the late-start-time variant).
    first_reply: Option<Timestamp>,
    /// When the next round may start, once the current one failed.
    retry_at: Option<Timestamp>,
}

#[derive(Debug)]
struct Minting {
    acquired_at: Timestamp,
    valid_until: Timestamp,
    token: Token,
    epoch: u64,
    granted_at: Nanos,
    counters: Vec<Option<i64>>,
    deadline: Timestamp,
}

pub(crate) struct Client {
    pub(crate) id: usize,
    pub(crate) spec: ClientSpec,
    pub(crate) clock: ClockModel,
    key: LockKey,
    key_str: Arc<str>,
    fence_key: Arc<str>,
    phase: Phase,
    /// Current operation; replies to older ones are ignored.
    op: u64,
    generation: u64,
    iteration: u32,
    held: Option<Held>,
    pub(crate) paused_until: Option<Nanos>,
    pub(crate) crashed: bool,
}

impl Client {
    pub(crate) fn new(id: usize, spec: ClientSpec, resource: &str) -> Self {
        // A monotonic clock never steps; only a client that reads the wall clock sees steps.
        let clock = match spec.clock_kind {
            ClockKind::Wall => spec.clock.clone(),
            ClockKind::Monotonic => ClockModel::new(0, spec.clock.rate_ppm(), Vec::new()),
        };
        let key = LockKey::new("redlock:", resource).unwrap_or_else(|_| {
            LockKey::new("redlock:", "resource").expect("a constant, valid resource name")
        });
        let key_str: Arc<str> = key.as_str().into();
        // The same counter key as the client's scripts use (`LockKey::fence_key`).
        let fence_key = key.fence_key().into();
        Self {
            id,
            clock,
            key,
            key_str,
            fence_key,
            phase: Phase::Waiting(None),
            op: 0,
            generation: 0,
            iteration: 0,
            held: None,
            paused_until: None,
            crashed: false,
            spec,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.crashed || matches!(self.phase, Phase::Done)
    }

    /// The client's clock at true time `t`.
    fn local(&self, t: Nanos) -> Timestamp {
        Timestamp::from_nanos(self.clock.read(t))
    }

    fn wake_at(&mut self, ctx: &mut Ctx<'_>, local: Timestamp) {
        self.generation += 1;
        let at = self.clock.when(local.as_nanos(), ctx.now);
        ctx.out.push(Outgoing::Wake {
            at,
            generation: self.generation,
        });
    }

    fn outcome(&self, ctx: &mut Ctx<'_>, what: ClientOutcome) {
        ctx.trace(&self.spec.name, format_args!("{what}"));
        ctx.history.outcomes[self.id].push(what);
    }

    // ----- events ---------------------------------------------------------------------

    pub(crate) fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        self.begin_acquire(ctx);
    }

    pub(crate) fn on_wake(&mut self, ctx: &mut Ctx<'_>, generation: u64) {
        if generation != self.generation || self.is_done() {
            return;
        }
        let now = self.local(ctx.now);
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Waiting(at) => {
                if at.is_some_and(|at| now < at) {
                    self.phase = Phase::Waiting(at);
                    self.wake_at(ctx, at.unwrap_or(now));
                } else {
                    self.begin_acquire(ctx);
                }
            }
            Phase::Acquiring(mut acquiring) => {
                match acquiring.retry_at {
                    Some(at) if now >= at => {
                        self.op += 1;
                        acquiring.retry_at = None;
                        acquiring.round_start = now;
                        acquiring.first_reply = None;
                        acquiring.machine.retry(Token::random(ctx.rng), now);
                    }
                    Some(_) => {}
                    None => {
                        let machine_now = self.machine_time(&acquiring, now, false);
                        acquiring.machine.handle_timeout(machine_now);
                    }
                }
                self.pump_acquire(ctx, acquiring);
            }
            Phase::Minting(minting) => {
                if now >= minting.deadline {
                    self.finish_minting(ctx, minting);
                } else {
                    let deadline = minting.deadline;
                    self.phase = Phase::Minting(minting);
                    self.wake_at(ctx, deadline);
                }
            }
            Phase::Working { step, wait } => match wait {
                Some(Work::Sleep(until)) if now < until => {
                    self.phase = Phase::Working {
                        step,
                        wait: Some(Work::Sleep(until)),
                    };
                    self.wake_at(ctx, until);
                }
                Some(Work::Access {
                    access,
                    deadline,
                    rmw,
                }) if now < deadline => {
                    self.phase = Phase::Working {
                        step,
                        wait: Some(Work::Access {
                            access,
                            deadline,
                            rmw,
                        }),
                    };
                    self.wake_at(ctx, deadline);
                }
                Some(Work::Access { .. }) => {
                    self.outcome(ctx, ClientOutcome::AccessTimedOut);
                    self.work(ctx, step + 1);
                }
                Some(Work::Sleep(_)) => self.work(ctx, step + 1),
                Some(Work::Pause) | None => self.phase = Phase::Working { step, wait },
            },
            Phase::Extending { step, mut machine } => {
                machine.handle_timeout(now);
                self.pump_extend(ctx, step, machine);
            }
            Phase::Releasing(mut machine) => {
                machine.handle_timeout(now);
                self.pump_release(ctx, machine);
            }
            Phase::Done => {}
        }
    }

    pub(crate) fn on_reply(&mut self, ctx: &mut Ctx<'_>, op: u64, tag: Tag, reply: NodeReply) {
        if op != self.op || self.is_done() {
            return;
        }
        let now = self.local(ctx.now);
        let core_reply = match reply {
            NodeReply::Core(reply) => Ok(reply),
            NodeReply::Counter(_) => Err(redlock::core::NodeFailure::Protocol("a counter".into())),
        };
        match (std::mem::replace(&mut self.phase, Phase::Done), tag) {
            (Phase::Acquiring(mut acquiring), Tag::Core(request)) => {
                if acquiring.first_reply.is_none() && acquiring.retry_at.is_none() {
                    acquiring.first_reply = Some(now);
                }
                let machine_now = self.machine_time(&acquiring, now, true);
                acquiring
                    .machine
                    .handle_reply(request, core_reply, machine_now);
                self.pump_acquire(ctx, acquiring);
            }
            (Phase::Minting(mut minting), Tag::Mint(slot)) => {
                if let (NodeReply::Counter(value), Some(entry)) =
                    (reply, minting.counters.get_mut(slot))
                    && entry.is_none()
                {
                    *entry = Some(value);
                }
                let answered = minting.counters.iter().filter(|c| c.is_some()).count();
                if answered >= quorum(minting.counters.len()) {
                    self.finish_minting(ctx, minting);
                } else {
                    self.phase = Phase::Minting(minting);
                }
            }
            (Phase::Extending { step, mut machine }, Tag::Core(request)) => {
                machine.handle_reply(request, core_reply, now);
                self.pump_extend(ctx, step, machine);
            }
            (Phase::Releasing(mut machine), Tag::Core(request)) => {
                machine.handle_reply(request, core_reply, now);
                self.pump_release(ctx, machine);
            }
            (phase, _) => self.phase = phase,
        }
    }

    pub(crate) fn on_access_ack(&mut self, ctx: &mut Ctx<'_>, access: usize) {
        if self.is_done() {
            return;
        }
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Working {
                step,
                wait:
                    Some(Work::Access {
                        access: waited,
                        rmw,
                        ..
                    }),
            } if waited == access => {
                if rmw {
                    let deadline = self.send_access(ctx, AccessKind::Write);
                    self.phase = Phase::Working {
                        step,
                        wait: deadline.map(|(access, deadline)| Work::Access {
                            access,
                            deadline,
                            rmw: false,
                        }),
                    };
                    if let Some((_, deadline)) = deadline {
                        self.wake_at(ctx, deadline);
                    }
                } else {
                    self.work(ctx, step + 1);
                }
            }
            phase => self.phase = phase,
        }
    }

    /// A stop-the-world pause ended.
    pub(crate) fn on_resume(&mut self, ctx: &mut Ctx<'_>) {
        if let Phase::Working {
            step,
            wait: Some(Work::Pause),
        } = self.phase
        {
            self.work(ctx, step + 1);
        }
    }

    pub(crate) fn crash(&mut self, ctx: &mut Ctx<'_>) {
        if self.crashed {
            return;
        }
        self.crashed = true;
        self.phase = Phase::Done;
        if let Some(held) = self.held.take() {
            ctx.history.leases[held.record].crashed_at = Some(ctx.now);
        }
        self.outcome(ctx, ClientOutcome::Crashed);
    }

    // ----- acquisition ----------------------------------------------------------------

    fn begin_acquire(&mut self, ctx: &mut Ctx<'_>) {
        self.op += 1;
        ctx.history.acquire_calls += 1;
        let now = self.local(ctx.now);
        let machine = Acquire::new(
            &self.spec.config,
            self.key.clone(),
            Token::random(ctx.rng),
            now,
        );
        let acquiring = Box::new(Acquiring {
            machine,
            round_start: now,
            first_reply: None,
            retry_at: None,
        });
        self.pump_acquire(ctx, acquiring);
    }

    /// The time the machine is told: the client's clock, unless a timing fault lies to it.
    fn machine_time(&self, acquiring: &Acquiring, now: Timestamp, reply: bool) -> Timestamp {
        match self.spec.timing {
            TimingImpl::Correct => now,
            // The round is treated as instantaneous: replies arrive "at the start".
            TimingImpl::NoElapsedCheck if reply => acquiring.round_start,
            TimingImpl::NoElapsedCheck => now,
            // Everything is measured from the first reply instead of the first send.
            TimingImpl::StartAfterFirstReply => now.saturating_sub(self.late_start(acquiring)),
        }
    }

    fn late_start(&self, acquiring: &Acquiring) -> Duration {
        acquiring.first_reply.map_or(Duration::ZERO, |first| {
            first.saturating_duration_since(acquiring.round_start)
        })
    }

    fn pump_acquire(&mut self, ctx: &mut Ctx<'_>, mut acquiring: Box<Acquiring>) {
        while let Some(transmit) = acquiring.machine.poll_transmit() {
            self.send_core(ctx, transmit);
        }
        match acquiring.machine.poll_outcome() {
            None => {
                let shift = match self.spec.timing {
                    TimingImpl::StartAfterFirstReply => self.late_start(&acquiring),
                    _ => Duration::ZERO,
                };
                let wake = acquiring.retry_at.or_else(|| {
                    acquiring
                        .machine
                        .poll_timeout()
                        .map(|t| t.saturating_add(shift))
                });
                self.phase = Phase::Acquiring(acquiring);
                if let Some(at) = wake {
                    self.wake_at(ctx, at);
                }
            }
            Some(AcquireEvent::Acquired(grant)) => {
                let now = self.local(ctx.now);
                // The deadline as the (possibly faulty) client believes it.
                let believed = match self.spec.timing {
                    TimingImpl::Correct => grant.valid_until,
                    TimingImpl::NoElapsedCheck => grant
                        .valid_until
                        .saturating_add(now.saturating_duration_since(acquiring.round_start)),
                    TimingImpl::StartAfterFirstReply => grant
                        .valid_until
                        .saturating_add(self.late_start(&acquiring)),
                };
                *ctx.epochs += 1;
                let epoch = *ctx.epochs;
                self.outcome(
                    ctx,
                    ClientOutcome::Acquired {
                        round: grant.attempts,
                    },
                );
                match ctx.tokens {
                    TokenSource::Linearizable => {
                        self.hold(
                            ctx,
                            grant.token,
                            epoch,
                            epoch,
                            grant.started_at,
                            believed,
                            ctx.now,
                        );
                    }
                    TokenSource::QuorumMinted => {
                        let fence = grant.fence.unwrap_or(0);
                        self.hold(
                            ctx,
                            grant.token,
                            epoch,
                            fence,
                            grant.started_at,
                            believed,
                            ctx.now,
                        );
                    }
                    TokenSource::RedisCounter => {
                        self.op += 1;
                        let nodes = self.spec.nodes.len();
                        for slot in 0..nodes {
                            let msg = Msg::Request {
                                client: self.id,
                                op: self.op,
                                tag: Tag::Mint(slot),
                                cmd: NodeOp::Incr {
                                    key: self.fence_key.clone(),
                                },
                            };
                            ctx.out.push(Outgoing::Node {
                                address: self.spec.nodes[slot],
                                msg,
                            });
                        }
                        let deadline = now.saturating_add(self.spec.config.node_timeout());
                        self.phase = Phase::Minting(Minting {
                            acquired_at: grant.started_at,
                            valid_until: believed,
                            token: grant.token,
                            epoch,
                            granted_at: ctx.now,
                            counters: vec![None; nodes],
                            deadline,
                        });
                        self.wake_at(ctx, deadline);
                    }
                }
            }
            Some(AcquireEvent::Retry { window, failure }) => {
                let shift = match self.spec.timing {
                    TimingImpl::StartAfterFirstReply => self.late_start(&acquiring),
                    _ => Duration::ZERO,
                };
                ctx.trace(
                    &self.spec.name,
                    format_args!(
                        "round {} failed: {}",
                        acquiring.machine.attempt(),
                        failure.reason
                    ),
                );
                let at = window.pick(ctx.rng).saturating_add(shift);
                acquiring.retry_at = Some(at);
                self.phase = Phase::Acquiring(acquiring);
                self.wake_at(ctx, at);
            }
            Some(AcquireEvent::Failed(failure)) => {
                ctx.history.acquire_failures += 1;
                let outcome = ClientOutcome::AcquireFailed {
                    reason: failure.last_round.reason.to_string(),
                    rounds: failure.attempts,
                };
                self.outcome(ctx, outcome);
                self.finish_iteration(ctx);
            }
            Some(_) => self.finish_iteration(ctx),
        }
    }

    fn finish_minting(&mut self, ctx: &mut Ctx<'_>, minting: Minting) {
        let fence = minting
            .counters
            .iter()
            .flatten()
            .copied()
            .max()
            .unwrap_or(0);
        let fence = u64::try_from(fence).unwrap_or(0);
        self.hold(
            ctx,
            minting.token,
            minting.epoch,
            fence,
            minting.acquired_at,
            minting.valid_until,
            minting.granted_at,
        );
    }

    #[allow(clippy::too_many_arguments)] // Rewritten with the generic pump.
    fn hold(
        &mut self,
        ctx: &mut Ctx<'_>,
        token: Token,
        epoch: u64,
        fence: u64,
        acquired_at: Timestamp,
        valid_until: Timestamp,
        granted_at: Nanos,
    ) {
        ctx.history.leases.push(LeaseRecord {
            client: self.id,
            epoch,
            fence,
            token,
            granted_at,
            valid_until_local: valid_until.as_nanos(),
            extensions: Vec::new(),
            released_at: None,
            crashed_at: None,
            window_end: 0,
        });
        self.held = Some(Held {
            record: ctx.history.leases.len() - 1,
            epoch,
            fence,
            token,
            acquired_at,
            valid_until,
            extensions: 0,
        });
        ctx.trace(
            &self.spec.name,
            format_args!("holds epoch {epoch} fence {fence} until local {valid_until}"),
        );
        self.work(ctx, 0);
    }

    // ----- the critical section -------------------------------------------------------

    fn send_access(&mut self, ctx: &mut Ctx<'_>, kind: AccessKind) -> Option<(usize, Timestamp)> {
        let held = self.held.as_ref()?;
        ctx.history.accesses.push(AccessRecord {
            client: self.id,
            lease: held.record,
            epoch: held.epoch,
            fence: held.fence,
            kind,
            sent_at: ctx.now,
            arrived_at: None,
        });
        let access = ctx.history.accesses.len() - 1;
        ctx.trace(
            &self.spec.name,
            format_args!("{kind:?} #{access} sent (fence {})", held.fence),
        );
        ctx.out.push(Outgoing::Resource {
            msg: Msg::Access { access },
        });
        let deadline = self
            .local(ctx.now)
            .saturating_add(Duration::from_nanos(self.spec.access_timeout));
        Some((access, deadline))
    }

    /// Runs the critical section from `step` until something must be waited for.
    fn work(&mut self, ctx: &mut Ctx<'_>, mut step: usize) {
        loop {
            let Some(action) = self.spec.steps.get(step).cloned() else {
                self.begin_release(ctx);
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
                    let rmw = action == Step::ReadModifyWrite;
                    let Some((access, deadline)) = self.send_access(ctx, kind) else {
                        self.begin_release(ctx);
                        return;
                    };
                    self.phase = Phase::Working {
                        step,
                        wait: Some(Work::Access {
                            access,
                            deadline,
                            rmw,
                        }),
                    };
                    self.wake_at(ctx, deadline);
                    return;
                }
                Step::Sleep(duration) => {
                    let until = now.saturating_add(Duration::from_nanos(duration));
                    self.phase = Phase::Working {
                        step,
                        wait: Some(Work::Sleep(until)),
                    };
                    self.wake_at(ctx, until);
                    return;
                }
                Step::Check => {
                    let valid = self.held.as_ref().is_some_and(|h| now < h.valid_until);
                    if !valid {
                        self.outcome(ctx, ClientOutcome::CheckFailed);
                        self.begin_release(ctx);
                        return;
                    }
                    step += 1;
                }
                Step::Extend => {
                    self.begin_extend(ctx, step);
                    return;
                }
                Step::Pause(duration) => {
                    self.phase = Phase::Working {
                        step,
                        wait: Some(Work::Pause),
                    };
                    ctx.out.push(Outgoing::Pause {
                        until: ctx.now + duration,
                    });
                    return;
                }
                Step::Crash => {
                    self.crash(ctx);
                    return;
                }
            }
        }
    }

    fn begin_extend(&mut self, ctx: &mut Ctx<'_>, step: usize) {
        let Some(held) = &self.held else { return };
        self.op += 1;
        let now = self.local(ctx.now);
        // The re-acquiring variant does not check its own validity first.
        let valid_until = match self.spec.extend {
            ExtendImpl::Script => held.valid_until,
            ExtendImpl::Reacquire => Timestamp::MAX,
        };
        let machine = Extend::new(
            &self.spec.config,
            self.key.clone(),
            held.token,
            valid_until,
            held.acquired_at,
            now,
        );
        self.pump_extend(ctx, step, machine);
    }

    fn pump_extend(&mut self, ctx: &mut Ctx<'_>, step: usize, mut machine: Extend) {
        while let Some(transmit) = machine.poll_transmit() {
            self.send_core(ctx, transmit);
        }
        match machine.poll_outcome() {
            None => {
                let wake = machine.poll_timeout();
                self.phase = Phase::Extending { step, machine };
                if let Some(at) = wake {
                    self.wake_at(ctx, at);
                }
            }
            Some(ExtendOutcome::Extended(extension)) => {
                if let Some(held) = &mut self.held {
                    held.valid_until = extension.valid_until;
                    held.extensions += 1;
                    let record = &mut ctx.history.leases[held.record];
                    record.valid_until_local = extension.valid_until.as_nanos();
                    record
                        .extensions
                        .push((ctx.now, extension.valid_until.as_nanos()));
                }
                self.outcome(ctx, ClientOutcome::Extended);
                self.work(ctx, step + 1);
            }
            Some(ExtendOutcome::Failed(failure)) => {
                let why = match failure {
                    ExtendFailure::Expired => "the lease had expired".to_owned(),
                    ExtendFailure::HoldLimit { max_hold } => {
                        format!("longest hold of {max_hold:?} reached")
                    }
                    ExtendFailure::Round(round) => round.reason.to_string(),
                    _ => "unknown".to_owned(),
                };
                self.outcome(ctx, ClientOutcome::ExtendFailed { reason: why });
                self.begin_release(ctx);
            }
            Some(_) => self.begin_release(ctx),
        }
    }

    // ----- release --------------------------------------------------------------------

    fn begin_release(&mut self, ctx: &mut Ctx<'_>) {
        let Some(held) = &self.held else {
            self.finish_iteration(ctx);
            return;
        };
        ctx.history.leases[held.record].released_at = Some(ctx.now);
        self.op += 1;
        let now = self.local(ctx.now);
        let machine = Release::new(&self.spec.config, self.key.clone(), held.token, now);
        self.pump_release(ctx, machine);
    }

    fn pump_release(&mut self, ctx: &mut Ctx<'_>, mut machine: Release) {
        while let Some(transmit) = machine.poll_transmit() {
            self.send_core(ctx, transmit);
        }
        match machine.poll_outcome() {
            None => {
                let wake = machine.poll_timeout();
                self.phase = Phase::Releasing(machine);
                if let Some(at) = wake {
                    self.wake_at(ctx, at);
                }
            }
            Some(report) => {
                self.held = None;
                let outcome = ClientOutcome::Released {
                    released: report.released(),
                    not_held: report.not_held(),
                    held_by_other: report.held_by_other(),
                    failed: report.failed(),
                    pending: report.pending(),
                };
                self.outcome(ctx, outcome);
                self.finish_iteration(ctx);
            }
        }
    }

    fn finish_iteration(&mut self, ctx: &mut Ctx<'_>) {
        self.iteration += 1;
        if self.iteration >= self.spec.iterations {
            self.phase = Phase::Done;
            return;
        }
        let at = self
            .local(ctx.now)
            .saturating_add(Duration::from_nanos(self.spec.gap));
        self.phase = Phase::Waiting(Some(at));
        self.wake_at(ctx, at);
    }

    // ----- the wire ---------------------------------------------------------------------

    /// Turns a core command into the server operation this client's implementation sends.
    fn send_core(&self, ctx: &mut Ctx<'_>, transmit: Transmit) {
        let key = self.key_str.clone();
        let millis = |ttl: Duration| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let cmd = match transmit.command {
            Command::SetIfAbsent { token, ttl, .. } => NodeOp::SetNx {
                key,
                token,
                ttl_ms: millis(ttl),
            },
            Command::ReleaseIfOwner { token, .. } => match self.spec.release {
                ReleaseImpl::Script => NodeOp::ReleaseIfOwner { key, token },
                ReleaseImpl::PlainDel => NodeOp::Del { key },
            },
            Command::SetIfAbsentReadFence { token, ttl, .. } => NodeOp::SetNxReadFence {
                key,
                fence_key: self.fence_key.clone(),
                token,
                ttl_ms: millis(ttl),
            },
            Command::RaiseFence { token, fence, .. } => NodeOp::RaiseFence {
                key,
                fence_key: self.fence_key.clone(),
                token,
                fence,
            },
            Command::ExtendIfOwner { token, ttl, .. } => match self.spec.extend {
                ExtendImpl::Script => NodeOp::ExtendIfOwner {
                    key,
                    token,
                    ttl_ms: millis(ttl),
                },
                ExtendImpl::Reacquire => NodeOp::SetOrExtend {
                    key,
                    token,
                    ttl_ms: millis(ttl),
                },
            },
            _ => return,
        };
        let Some(&address) = self.spec.nodes.get(transmit.node.index()) else {
            return;
        };
        ctx.out.push(Outgoing::Node {
            address,
            msg: Msg::Request {
                client: self.id,
                op: self.op,
                tag: Tag::Core(transmit.request),
                cmd,
            },
        });
    }
}
