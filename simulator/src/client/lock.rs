//! The lease's life in a simulated client: acquire (with retries), mint a token, hold (see
//! [`super::hold`]), release.

use redlock_core::{
    Acquire, AcquireEvent, Grant, Held, Machine, NodeFailure, NodeId, Release, Reply, RequestId,
    Timestamp, Token, Waiting,
};

use super::faults::RoundClock;
use super::holding::Holding;
use super::pump::{Pumped, pump};
use super::tokens::Minting;
use super::{Client, Ctx, Timer};
use crate::judge::history::ClientOutcome;
use crate::net::message::{NodeOp, Tag};
use crate::scenario::TokenSource;

/// Where the lease side of a client stands.
#[derive(Debug)]
pub(super) enum Lock {
    /// Waiting to acquire, from this reading of the client's clock (`None`: at once).
    Idle(Option<Timestamp>),
    Acquiring(Box<Acquiring>),
    Minting(Box<Minting>),
    Holding(Box<Holding>),
    Releasing(Box<Release>),
    Done,
}

#[derive(Debug)]
pub(super) struct Acquiring {
    machine: Acquire,
    round: RoundClock,
    /// When the next round may start, once the current one failed (`next_round`, `None`
    /// while a round runs): the core's [`Waiting`] says, from the retry timer and the
    /// release notifications heard.
    waiting: Waiting,
}

impl Lock {
    /// The history record of the lease held, if one is.
    pub(super) fn record(&self) -> Option<usize> {
        match self {
            Self::Holding(holding) => Some(holding.record),
            _ => None,
        }
    }
}

impl Client {
    // ----- acquisition ----------------------------------------------------------------

    pub(super) fn begin_acquire(&mut self, ctx: &mut Ctx<'_>) {
        self.op += 1;
        ctx.history.acquire_calls += 1;
        let now = self.local(ctx.now);
        let machine = Acquire::new(
            &self.spec.config,
            self.key.clone(),
            Token::random(ctx.rng),
            now,
        );
        self.lock = Lock::Acquiring(Box::new(Acquiring {
            machine,
            round: RoundClock {
                start: now,
                first_reply: None,
            },
            // Marks its interest on the nodes after a lost round, as the shipped client does:
            // the release scripts publish only where a mark is.
            waiting: Waiting::new(&self.spec.config, self.key.clone())
                .marking(Token::random(ctx.rng), self.spec.config.ttl()),
        }));
        self.drive(ctx);
    }

    /// Runs the lease side's current machine as far as it goes.
    pub(super) fn drive(&mut self, ctx: &mut Ctx<'_>) {
        match std::mem::replace(&mut self.lock, Lock::Done) {
            Lock::Acquiring(acquiring) => self.drive_acquire(ctx, acquiring),
            Lock::Holding(holding) => self.drive_holding(ctx, holding),
            Lock::Releasing(release) => self.drive_release(ctx, release),
            other => self.lock = other,
        }
    }

    fn drive_acquire(&mut self, ctx: &mut Ctx<'_>, mut acquiring: Box<Acquiring>) {
        match pump(&mut acquiring.machine, |t| self.send(ctx, t)) {
            Pumped::Waiting(timer) => {
                let wake = acquiring
                    .waiting
                    .next_round()
                    .or_else(|| timer.map(|at| self.faults.acquire_timer(acquiring.round, at)));
                self.lock = Lock::Acquiring(acquiring);
                if let Some(at) = wake {
                    self.wake_at(ctx, Timer::Lock, at);
                }
            }
            Pumped::Outcome(AcquireEvent::Acquired(grant)) => {
                self.unmark(ctx, &mut acquiring.waiting);
                self.granted(ctx, grant, acquiring.round);
            }
            Pumped::Outcome(AcquireEvent::Retry {
                window,
                failure,
                wake_on_release,
                ..
            }) => {
                ctx.trace(
                    &self.spec.name,
                    format_args!(
                        "round {} failed: {}",
                        acquiring.machine.attempt(),
                        failure.reason
                    ),
                );
                let timer = self
                    .faults
                    .acquire_timer(acquiring.round, window.pick(ctx.rng));
                acquiring
                    .waiting
                    .round_lost(&failure, wake_on_release, timer);
                while let Some(mark) = acquiring.waiting.poll_transmit() {
                    self.send(ctx, mark);
                }
                let at = acquiring.waiting.next_round().unwrap_or(timer);
                self.lock = Lock::Acquiring(acquiring);
                self.wake_at(ctx, Timer::Lock, at);
            }
            Pumped::Outcome(AcquireEvent::Failed(failure)) => {
                self.unmark(ctx, &mut acquiring.waiting);
                ctx.history.acquire_failures += 1;
                let outcome = ClientOutcome::AcquireFailed {
                    reason: failure.last_round.reason.to_string(),
                    rounds: failure.attempts,
                };
                self.outcome(ctx, outcome);
                self.finish_iteration(ctx);
            }
            Pumped::Outcome(_) => self.finish_iteration(ctx),
        }
    }

    /// The acquisition ended: its waiting marks are removed from the nodes.
    fn unmark(&mut self, ctx: &mut Ctx<'_>, waiting: &mut Waiting) {
        waiting.stop();
        while let Some(unmark) = waiting.poll_transmit() {
            self.send(ctx, unmark);
        }
    }

    /// A quorum agreed: the lease is the client's, once it has its token.
    fn granted(&mut self, ctx: &mut Ctx<'_>, grant: Grant, round: RoundClock) {
        let now = self.local(ctx.now);
        let grant = self.faults.believed(grant, round, now);
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
                let mut held = Held::new(grant);
                // Minted at the grant instant: always inside the validity.
                let _ = held.set_fence(epoch, now);
                self.hold(ctx, epoch, held, ctx.now);
            }
            TokenSource::QuorumMinted => self.hold(ctx, epoch, Held::new(grant), ctx.now),
            TokenSource::RedisCounter => {
                self.op += 1;
                let nodes = self.spec.nodes.len();
                for slot in 0..nodes {
                    let msg = self.links.raw(
                        self.op,
                        Tag::Mint(slot),
                        slot,
                        NodeOp::Incr {
                            key: self.keys.fence_key.clone(),
                        },
                        now,
                    );
                    self.send_to_node(ctx, slot, msg);
                }
                let deadline = now.saturating_add(self.spec.config.node_timeout());
                self.lock = Lock::Minting(Box::new(Minting::new(
                    grant, epoch, ctx.now, nodes, deadline,
                )));
                self.wake_at(ctx, Timer::Lock, deadline);
            }
        }
    }

    pub(super) fn minted(&mut self, ctx: &mut Ctx<'_>, slot: usize, value: i64) {
        if let Lock::Minting(minting) = &mut self.lock
            && minting.counted(slot, value)
        {
            self.finish_minting(ctx);
        }
    }

    fn finish_minting(&mut self, ctx: &mut Ctx<'_>) {
        let Lock::Minting(minting) = std::mem::replace(&mut self.lock, Lock::Done) else {
            return;
        };
        let now = self.local(ctx.now);
        let mut held = Held::new(minting.grant.clone());
        match held.set_fence(minting.fence(), now) {
            Ok(()) => self.hold(ctx, minting.epoch, held, minting.granted_at),
            Err(late) => {
                // The core's rule: a lease whose token came too late is never used.
                ctx.trace(&self.spec.name, format_args!("token refused: {late}"));
                self.op += 1;
                let release = held.release(&self.spec.config, now);
                self.drive_release(ctx, Box::new(release));
            }
        }
    }

    // ----- release ----------------------------------------------------------------------

    pub(super) fn begin_release(&mut self, ctx: &mut Ctx<'_>) {
        let Lock::Holding(holding) = std::mem::replace(&mut self.lock, Lock::Done) else {
            self.finish_iteration(ctx);
            return;
        };
        if !self.work_stopping() {
            self.stop_work(ctx);
        }
        ctx.history.leases[holding.record].released_at = Some(ctx.now);
        self.op += 1;
        let now = self.local(ctx.now);
        let release = holding.held.release(&self.spec.config, now);
        self.drive_release(ctx, Box::new(release));
    }

    pub(super) fn drive_release(&mut self, ctx: &mut Ctx<'_>, mut release: Box<Release>) {
        match pump(&mut *release, |t| self.send(ctx, t)) {
            Pumped::Waiting(wake) => {
                self.lock = Lock::Releasing(release);
                if let Some(at) = wake {
                    self.wake_at(ctx, Timer::Lock, at);
                }
            }
            Pumped::Outcome(report) => {
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
        if !self.work_stopping() {
            self.cancel(Timer::Work);
        }
        if self.iteration >= self.spec.iterations {
            self.lock = Lock::Done;
            return;
        }
        let at = self
            .local(ctx.now)
            .saturating_add(std::time::Duration::from_nanos(self.spec.gap));
        self.lock = Lock::Idle(Some(at));
        self.wake_at(ctx, Timer::Lock, at);
    }

    // ----- the lease side's events ------------------------------------------------------

    pub(super) fn lock_timer(&mut self, ctx: &mut Ctx<'_>) {
        let now = self.local(ctx.now);
        match &mut self.lock {
            Lock::Idle(at) => match *at {
                Some(at) if now < at => self.wake_at(ctx, Timer::Lock, at),
                _ => self.begin_acquire(ctx),
            },
            Lock::Acquiring(acquiring) => {
                match acquiring.waiting.next_round() {
                    Some(at) if now >= at => {
                        if acquiring.waiting.is_early(now) {
                            ctx.trace(
                                &self.spec.name,
                                format_args!("the holder released: an early round"),
                            );
                        }
                        acquiring.round = RoundClock {
                            start: now,
                            first_reply: None,
                        };
                        acquiring.waiting.round_started(now);
                        acquiring.machine.retry(Token::random(ctx.rng), now);
                    }
                    Some(_) => {}
                    None => {
                        let machine_now = self.faults.acquire_now(acquiring.round, now, false);
                        acquiring.machine.handle_timeout(machine_now);
                    }
                }
                self.drive(ctx);
            }
            Lock::Minting(minting) => {
                if now >= minting.deadline {
                    self.finish_minting(ctx);
                } else {
                    let deadline = minting.deadline;
                    self.wake_at(ctx, Timer::Lock, deadline);
                }
            }
            Lock::Holding(holding) => {
                holding.handle_timeout(now);
                self.drive(ctx);
            }
            Lock::Releasing(release) => {
                release.handle_timeout(now);
                self.drive(ctx);
            }
            Lock::Done => {}
        }
    }

    /// A message on the lock key's channel from the client's `node`-th node: the core's
    /// [`Waiting`] judges whether it moves the next round earlier.
    pub(super) fn notified(
        &mut self,
        ctx: &mut Ctx<'_>,
        node: usize,
        channel: &str,
        payload: &[u8],
    ) {
        let now = self.local(ctx.now);
        let Lock::Acquiring(acquiring) = &mut self.lock else {
            return;
        };
        // While a round runs there is no next round: the waiting keeps what it heard for when
        // that round is lost.
        let before = acquiring.waiting.next_round();
        acquiring
            .waiting
            .notified(NodeId::new(node), channel.as_bytes(), payload, now);
        let next = acquiring.waiting.next_round();
        if let Some(at) = next
            && next != before
        {
            self.wake_at(ctx, Timer::Lock, at);
        }
    }

    pub(super) fn lock_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        request: RequestId,
        result: Result<Reply, NodeFailure>,
    ) {
        let now = self.local(ctx.now);
        if Waiting::sent(request) {
            // A mark's answer (an unmark's, after the acquisition, says nothing).
            if let Lock::Acquiring(acquiring) = &mut self.lock {
                let before = acquiring.waiting.next_round();
                acquiring.waiting.handle_reply(request, result, now);
                let next = acquiring.waiting.next_round();
                if let Some(at) = next
                    && next != before
                {
                    self.wake_at(ctx, Timer::Lock, at);
                }
            }
            return;
        }
        match &mut self.lock {
            Lock::Acquiring(acquiring) => {
                if acquiring.round.first_reply.is_none() && acquiring.machine.expects(request) {
                    acquiring.round.first_reply = Some(now);
                }
                let machine_now = self.faults.acquire_now(acquiring.round, now, true);
                acquiring.machine.handle_reply(request, result, machine_now);
            }
            Lock::Holding(holding) => holding.handle_reply(request, result, now),
            Lock::Releasing(release) => release.handle_reply(request, result, now),
            Lock::Idle(_) | Lock::Minting(_) | Lock::Done => return,
        }
        self.drive(ctx);
    }
}
