//! Acquisitions: the core's [`Acquire`] machine over the nodes, and the waiting between its
//! rounds.
//!
//! A lost round tells the core how long the holder's keys live and who holds them; the core
//! narrows the retry window to that. Between rounds the driver waits for the start it picked
//! in the window, or for the earlier one the core's [`Waiting`](redlock_core::Waiting) gives
//! when the holders it saw release (a node's notification or a release by this client, see
//! [`waiting`](super::waiting)). Whatever wakes it, the next round is an ordinary quorum
//! round.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::clock::Clock;
use super::drive::drive;
use super::flight::Flight;
use super::lanes::Lanes;
use super::waiting::Waiter;
use super::{FenceSource, Fencing, Lease, Redlock};
use crate::error::Error;
use redlock_core::{
    Acquire, AcquireEvent, AcquireFailure, FailureReason, Grant, Held, LockConfig, Machine,
    RetryPolicy, RetryWindow, RoundFailure, Target, Timestamp,
};

/// How long an acquisition may wait for the lease: what each acquisition method and
/// [`AcquireOptions`](super::AcquireOptions) ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Wait {
    /// One round, nothing else (`try_acquire`).
    OneRound,
    /// As many rounds as the handle's retry policy allows.
    #[default]
    Policy,
    /// Rounds until this much time has passed, whatever the retry count.
    For(Duration),
}

impl Redlock {
    pub(super) async fn acquire_target(&self, target: Target, wait: Wait) -> Result<Lease, Error> {
        let span = tracing::debug_span!("acquire", resource = %target.describe());
        Acquisition::new(self, &target, wait)
            .run()
            .instrument(span)
            .await
    }
}

/// How much an acquisition may spend, fixed when it starts (and cut to one last round when
/// its turn in this client's line never came).
struct Budget {
    /// The handle's lock parameters, without retries for a single round.
    config: LockConfig,
    /// The last instant a round may start, on the client's clock; `None` leaves the limit
    /// to the retry policy.
    deadline: Option<Timestamp>,
    /// How long this acquisition may stand in line behind this client's other waiters, on
    /// the client's clock (turned into an `Instant` only when it does stand in line).
    in_line_until: Timestamp,
    /// Whether it may wait at all (not for `try_acquire`).
    may_wait: bool,
}

impl Budget {
    fn new(config: &LockConfig, wait: Wait, clock: &Clock) -> Self {
        // One reading for the budget's two limits.
        let started = clock.now();
        let (config, deadline) = match wait {
            Wait::OneRound => (config.clone().with_retry(RetryPolicy::no_retry()), None),
            Wait::Policy => (config.clone(), None),
            Wait::For(wait) => (config.clone(), Some(started.saturating_add(wait))),
        };
        let in_line_until =
            deadline.unwrap_or_else(|| started.saturating_add(config.retry().max_wait()));
        Self {
            config,
            deadline,
            in_line_until,
            may_wait: !matches!(wait, Wait::OneRound),
        }
    }

    /// No turn within the budget: one last round, for an answer from the nodes.
    fn last_round(&mut self) {
        self.config = self.config.clone().with_retry(RetryPolicy::no_retry());
        self.deadline = None;
    }
}

/// What a lost round leaves for the wait before the next one.
struct Lost {
    window: RetryWindow,
    failure: RoundFailure,
    wake_on_release: bool,
}

/// One acquisition: the rounds the core's [`Acquire`] runs, and between them the waits the
/// core's [`Waiting`](redlock_core::Waiting) decides (through the [`Waiter`]).
struct Acquisition<'a> {
    redlock: &'a Redlock,
    target: &'a Target,
    budget: Budget,
    /// When the caller asked, for the acquisition-time histogram.
    called: Instant,
}

impl<'a> Acquisition<'a> {
    fn new(redlock: &'a Redlock, target: &'a Target, wait: Wait) -> Self {
        Self {
            redlock,
            target,
            budget: Budget::new(&redlock.config, wait, redlock.clock()),
            called: Instant::now(),
        }
    }

    /// Runs rounds until the core grants the lease or gives up.
    async fn run(mut self) -> Result<Lease, Error> {
        let clock = self.redlock.clock();
        let mut waiter = Waiter::new(&self.redlock.shared, self.target);
        // Others of this client already wait for it: stand in line behind them. Otherwise
        // the first round runs at once, and the line is joined only if it fails.
        if self.budget.may_wait && self.redlock.shared.waiting.has_line(self.target) {
            self.behind_others(&mut waiter).await;
        }
        let mut op = self.first_round(&mut waiter);
        loop {
            match drive(&mut op.machine, &mut op.flight, clock).await {
                Some(AcquireEvent::Acquired(grant)) => {
                    return self.granted(grant, op, waiter).await;
                }
                Some(AcquireEvent::Retry {
                    window,
                    failure,
                    wake_on_release,
                    ..
                }) => {
                    self.round_lost(&op.machine, &failure);
                    if !waiter.joined() && !self.first_in_line(&mut op, &mut waiter).await {
                        // Others of this client were first and the budget is gone.
                        return Err(self.gave_up(op.machine.attempt(), failure));
                    }
                    let lost = Lost {
                        window,
                        failure,
                        wake_on_release,
                    };
                    self.until_next_round(&mut op, &mut waiter, &lost).await;
                    self.next_round(&mut op, &mut waiter);
                }
                Some(AcquireEvent::Failed(failure)) => return Err(self.failed(failure)),
                Some(_) => return Err(Error::Internal("an acquisition event of a newer core")),
                None => return Err(Error::Internal("the acquisition stalled")),
            }
        }
    }

    /// Waits for this acquisition's turn in the client's line, then, while a lease of this
    /// client holds the target, for its release. Cuts the budget to one last round if the
    /// turn does not come in time.
    async fn behind_others(&mut self, waiter: &mut Waiter<'_>) {
        let clock = self.redlock.clock();
        waiter.join();
        if waiter.turn(clock.instant(self.budget.in_line_until)).await {
            let fallback = self
                .budget
                .config
                .retry()
                .window_after(clock.now())
                .pick(&mut rand::rng());
            waiter.while_held_here(clock.instant(fallback)).await;
            waiter.after_yield(clock).await;
        } else {
            self.budget.last_round();
        }
    }

    /// Starts the first round.
    fn first_round(&self, waiter: &mut Waiter<'_>) -> AcquireOperation {
        let shared = &self.redlock.shared;
        let token = shared.tokens.next();
        let now = self.redlock.clock().now();
        waiter.round_starts(now);
        let mut machine = Acquire::new(&self.budget.config, self.target.clone(), token, now);
        if let Some(deadline) = self.budget.deadline {
            machine = machine.waiting_until(deadline);
        }
        AcquireOperation {
            flight: self
                .redlock
                .flight(&self.budget.config, shared.lanes.of(self.target)),
            machine,
        }
    }

    /// Starts the next round, with a fresh token.
    fn next_round(&self, op: &mut AcquireOperation, waiter: &mut Waiter<'_>) {
        let token = self.redlock.shared.tokens.next();
        let now = self.redlock.clock().now();
        waiter.round_starts(now);
        op.machine.retry(token, now);
    }

    /// Counts and logs a lost round, and shows the nodes what it saw of other leases.
    fn round_lost(&self, machine: &Acquire, failure: &RoundFailure) {
        let shared = &self.redlock.shared;
        shared
            .telemetry
            .round(failure.reason == FailureReason::Contended);
        shared.nodes.other_leases(failure);
        tracing::debug!(
            resource = %self.target.describe(),
            attempt = machine.attempt(),
            reason = %failure.reason,
            "acquisition round failed; retrying"
        );
    }

    /// After the first lost round: joins the client's line and waits to be first in it,
    /// while the lost round's cleanup keeps moving (the requests of those ahead in line
    /// queue behind it on each node). `false` if the budget ran out first.
    async fn first_in_line(&self, op: &mut AcquireOperation, waiter: &mut Waiter<'_>) -> bool {
        waiter.join();
        let until = self.redlock.clock().instant(self.budget.in_line_until);
        op.flight.run_until(waiter.turn(until)).await
    }

    /// Waits until the core's `Waiting` says the next round starts: the start picked in the
    /// lost round's window, or earlier once the holders it saw released. Cleanup releases
    /// and stragglers keep moving meanwhile.
    async fn until_next_round(
        &self,
        op: &mut AcquireOperation,
        waiter: &mut Waiter<'_>,
        lost: &Lost,
    ) {
        // Subscribed first: the marks of `round_lost` wait for the subscription.
        waiter.listen();
        let timer = lost.window.pick(&mut rand::rng());
        waiter.round_lost(
            &self.budget.config,
            &lost.failure,
            lost.wake_on_release,
            timer,
            || self.redlock.flight(&self.budget.config, Lanes::apart()),
        );
        let clock = self.redlock.clock();
        op.flight.run_until(waiter.until_next_round(clock)).await;
        op.flight.run_until(waiter.after_yield(clock)).await;
    }

    /// The lease is granted: a handle with this acquisition's parameters, the next in line
    /// let go, and the token of the fence source attached if there is one.
    async fn granted(
        self,
        grant: Grant,
        op: AcquireOperation,
        waiter: Waiter<'_>,
    ) -> Result<Lease, Error> {
        let redlock = self.redlock;
        let shared = &redlock.shared;
        shared.telemetry.round(false);
        shared.telemetry.acquired(self.called.elapsed());
        tracing::debug!(
            resource = %self.target.describe(),
            attempt = grant.attempts,
            validity_ms = grant.validity().as_millis(),
            fence = grant.fence,
            "lease acquired"
        );
        let handle = Redlock {
            shared: Arc::clone(shared),
            config: Arc::new(self.budget.config),
            fencing: redlock.fencing.clone(),
            keep_alive: redlock.keep_alive.clone(),
        };
        shared.waiting.granted(self.target);
        let mut lease = Lease::new(handle, Held::new(grant), op.flight.lanes());
        // The acquisition's requests still out (the slower nodes' `SET`s) go on by
        // themselves: the lease's commands wait for them in the lanes, and nobody polls this
        // flight while a token is minted (a release after a failed mint waited out its
        // per-node timeout behind them).
        drop(op);
        // The next in line starts its rounds.
        drop(waiter);
        if let Fencing::Source(source) = &redlock.fencing
            && let Err(e) = mint(source.as_ref(), &mut lease).await
        {
            lease.release().await;
            return Err(e);
        }
        Ok(lease)
    }

    /// The core gave up: the last round's failure, counted and logged. Its cleanup releases
    /// finish in the background (the flight is dropped), ahead of any later command on this
    /// resource in its lanes.
    fn failed(&self, failure: AcquireFailure) -> Error {
        let shared = &self.redlock.shared;
        let reason = failure.last_round.reason;
        shared.telemetry.round(reason == FailureReason::Contended);
        shared.nodes.other_leases(&failure.last_round);
        self.gave_up(failure.attempts, failure.last_round)
    }

    /// The acquisition ends without a lease after `attempts` rounds, the last one (counted
    /// already) lost as `last_round` says: in the core's own time, or in this client's line
    /// behind others. Either way a failure: counted, logged, and its error.
    fn gave_up(&self, attempts: u32, last_round: RoundFailure) -> Error {
        let shared = &self.redlock.shared;
        shared
            .telemetry
            .acquire_failed(last_round.reason == FailureReason::Unavailable);
        tracing::debug!(
            resource = %self.target.describe(),
            attempt = attempts,
            reason = %last_round.reason,
            "acquisition failed"
        );
        let held_here = shared.own_leases.held_any(&last_round.nodes);
        let mut error = self.error(attempts, last_round);
        if held_here && let Error::Taken { nodes, .. } = &mut error {
            nodes.held_here();
        }
        error
    }

    /// The error for an acquisition that ended after `attempts` rounds, the last one lost
    /// as `failure` says.
    fn error(&self, attempts: u32, failure: RoundFailure) -> Error {
        Error::from_round(
            &self.target.describe(),
            attempts,
            failure,
            &self.redlock.shared.addresses,
        )
    }
}

/// An acquisition's machine and its requests. If it is dropped while a round runs (the
/// caller's future was cancelled), the round is abandoned and its token released
/// everywhere; the machine knows whether one runs, so a decided acquisition drops quietly.
struct AcquireOperation {
    machine: Acquire,
    flight: Flight,
}

impl Drop for AcquireOperation {
    fn drop(&mut self) {
        // Queues nothing unless a round is running.
        self.machine.cancel();
        self.flight.send_all(|| self.machine.poll_transmit());
        // Dropping the flight hands every request to a background task.
    }
}

/// Asks `source` for the lease's token within its remaining validity, and attaches it only
/// if the lease is still valid when it arrives (the core's rule): an acquisition never
/// returns a lease that is already over.
async fn mint(source: &dyn FenceSource, lease: &mut Lease) -> Result<(), Error> {
    let described = lease.target().describe();
    let failed = |reason: String| Error::Fence {
        resource: described.clone(),
        reason,
    };
    let token = match tokio::time::timeout(lease.remaining(), source.next_fence(&described)).await {
        Ok(Ok(token)) => token,
        Ok(Err(e)) => return Err(failed(e.to_string())),
        Err(_) => {
            return Err(failed(
                "no token before the lease's validity ran out".into(),
            ));
        }
    };
    let now: Timestamp = lease.redlock().now();
    lease
        .held_mut()
        .set_fence(token, now)
        .map_err(|late| failed(late.to_string()))
}
