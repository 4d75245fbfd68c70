//! Acquisitions: the core's [`Acquire`] machine over the nodes, and the waiting between its
//! rounds.
//!
//! A lost round tells the core how long the holder's keys live and who holds them; the core
//! narrows the retry window to that. Between rounds the driver waits for the start it picked
//! in the window, or for the earlier one the core's [`Waiting`](crate::core::Waiting) gives
//! when the holders it saw release (a node's notification or a release by this client, see
//! [`waiting`](super::waiting)). Whatever wakes it, the next round is an ordinary quorum
//! round.

use std::time::{Duration, Instant};

use tracing::Instrument;

use super::drive::drive;
use super::flight::Flight;
use super::waiting::Waiter;
use super::{FenceSource, Fencing, Lease, Redlock};
use crate::core::{
    Acquire, AcquireEvent, FailureReason, Held, Machine, RetryPolicy, Target, Timestamp,
};
use crate::error::Error;

/// How long an acquisition may wait for the lease.
#[derive(Clone, Copy, Debug)]
pub(super) enum Wait {
    /// One round, nothing else (`try_acquire`).
    OneRound,
    /// As many rounds as the handle's retry policy allows.
    Policy,
    /// Rounds until this much time has passed, whatever the retry count.
    For(Duration),
}

impl Redlock {
    pub(super) async fn acquire_target(&self, target: Target, wait: Wait) -> Result<Lease, Error> {
        let span = tracing::debug_span!("acquire", resource = %target.describe());
        self.acquire_rounds(target, wait).instrument(span).await
    }

    async fn acquire_rounds(&self, target: Target, wait: Wait) -> Result<Lease, Error> {
        let shared = &self.shared;
        let clock = self.clock();
        let described = target.describe();
        let resource = described.as_str();
        let called = Instant::now();
        let mut config = (*self.config).clone();
        // The last instant a round may start, on the client's clock.
        let mut deadline = match wait {
            Wait::OneRound => {
                config = config.with_retry(RetryPolicy::no_retry());
                None
            }
            Wait::Policy => None,
            Wait::For(wait) => Some(clock.now().saturating_add(wait)),
        };
        // How long this acquisition may stand in line behind this client's other waiters.
        let in_line_until = clock.instant(
            deadline.unwrap_or_else(|| clock.now().saturating_add(config.retry().max_wait())),
        );
        let mut waiter = Waiter::new(shared, &target);
        // Others of this client already wait for it: stand in line behind them. Otherwise
        // the first round runs at once, and the line is joined only if it fails.
        if !matches!(wait, Wait::OneRound) && shared.waiting.has_line(&target) {
            waiter.join();
            if waiter.turn(in_line_until).await {
                let fallback = config
                    .retry()
                    .window_after(clock.now())
                    .pick(&mut rand::rng());
                waiter.while_held_here(clock.instant(fallback)).await;
            } else {
                // No turn within the budget: one last round, for an answer from the nodes.
                config = config.with_retry(RetryPolicy::no_retry());
                deadline = None;
            }
        }
        let token = shared.tokens.next();
        waiter.round_starts(clock.now());
        let mut machine = Acquire::new(&config, target.clone(), token, clock.now());
        if let Some(deadline) = deadline {
            machine = machine.waiting_until(deadline);
        }
        let mut op = AcquireOperation {
            flight: self.flight(&config, shared.lanes.of(&target)),
            machine,
            finished: false,
        };
        loop {
            let event = drive(&mut op.machine, &mut op.flight, clock).await;
            match event {
                Some(AcquireEvent::Acquired(grant)) => {
                    op.finished = true;
                    shared.telemetry.round(false);
                    shared.telemetry.acquired(called.elapsed());
                    tracing::debug!(
                        resource,
                        attempt = grant.attempts,
                        validity_ms = grant.validity().as_millis(),
                        fence = grant.fence,
                        "lease acquired"
                    );
                    let handle = Self {
                        shared: std::sync::Arc::clone(shared),
                        config: std::sync::Arc::new(config.clone()),
                        fencing: self.fencing.clone(),
                        keep_alive: self.keep_alive.clone(),
                    };
                    shared.waiting.granted(&target);
                    let mut lease = Lease::new(handle, Held::new(grant), op.flight.lanes());
                    // The next in line starts its rounds.
                    drop(waiter);
                    if let Fencing::Source(source) = &self.fencing
                        && let Err(e) = mint(source.as_ref(), &mut lease).await
                    {
                        lease.release().await;
                        return Err(e);
                    }
                    return Ok(lease);
                }
                Some(AcquireEvent::Retry {
                    window,
                    failure,
                    wake_on_release,
                    ..
                }) => {
                    shared
                        .telemetry
                        .round(failure.reason == FailureReason::Contended);
                    shared.nodes.other_leases(&failure);
                    tracing::debug!(
                        resource,
                        attempt = op.machine.attempt(),
                        reason = %failure.reason,
                        "acquisition round failed; retrying"
                    );
                    if !waiter.joined() {
                        waiter.join();
                        // The lost round's cleanup keeps moving meanwhile: the requests of
                        // those ahead in line queue behind it on each node.
                        let mut first = false;
                        op.flight
                            .run_until(async { first = waiter.turn(in_line_until).await })
                            .await;
                        if !first {
                            // Others of this client were first and the budget is gone.
                            op.finished = true;
                            return Err(Error::from_round(
                                resource,
                                op.machine.attempt(),
                                failure,
                                &shared.addresses,
                            ));
                        }
                    }
                    waiter.listen();
                    let timer = window.pick(&mut rand::rng());
                    // Cleanup releases and stragglers keep moving while we wait.
                    op.flight
                        .run_until(waiter.until_next_round(
                            &config,
                            &failure,
                            wake_on_release,
                            timer,
                            clock,
                        ))
                        .await;
                    let token = shared.tokens.next();
                    let now = clock.now();
                    waiter.round_starts(now);
                    op.machine.retry(token, now);
                }
                Some(AcquireEvent::Failed(failure)) => {
                    op.finished = true;
                    let reason = failure.last_round.reason;
                    shared.telemetry.round(reason == FailureReason::Contended);
                    shared.nodes.other_leases(&failure.last_round);
                    shared
                        .telemetry
                        .acquire_failed(reason == FailureReason::Unavailable);
                    // The cleanup releases finish in the background (dropping the flight),
                    // ahead of any later command on this resource in its lanes.
                    tracing::debug!(
                        resource,
                        attempt = failure.attempts,
                        reason = %failure.last_round.reason,
                        "acquisition failed"
                    );
                    return Err(Error::from_round(
                        resource,
                        failure.attempts,
                        failure.last_round,
                        &shared.addresses,
                    ));
                }
                None => return Err(Error::Internal("the acquisition stalled")),
            }
        }
    }
}

/// An acquisition in progress. If it is dropped before it finished (the caller's future was
/// cancelled), the running round is abandoned and its token released everywhere.
struct AcquireOperation {
    machine: Acquire,
    flight: Flight,
    finished: bool,
}

impl Drop for AcquireOperation {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.machine.cancel();
        while let Some(transmit) = self.machine.poll_transmit() {
            self.flight.send(transmit);
        }
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
