//! Keeping a lease alive while work runs: a task that drives the core's [`Keeper`], a signal
//! that work can watch, and the handle that releases the lease.
//!
//! When to extend, when to try again, when to give the lease up and when it may be released
//! are the core's decisions (see [`crate::core::Keeper`]); this module sends what the keeper
//! asks for, wakes it on the client's clock (which counts suspended time), publishes what it
//! decides, and tells it when the work has stopped. A lost lease is never released by the
//! keeper task while the work may still run: the release waits for the handle's
//! [`KeptLease::release`] (the work has stopped) or for the keys' expiry.

use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::Lease;
use super::clock::Clock;
use super::lease::{Until, release};
use crate::core::{
    Held, Keeper, KeeperEvent, Machine, ReleaseReport, ReleaseWhen, Timestamp, Token,
};
pub use crate::core::{KeepAlive, LeaseLost};

#[derive(Clone, Debug)]
struct State {
    valid_until: Timestamp,
    lost_at: Timestamp,
    release_deadline: Timestamp,
    extensions: u32,
    hold_limit: bool,
    lost: Option<LeaseLost>,
}

impl State {
    fn of(keeper: &Keeper) -> Self {
        Self {
            valid_until: keeper.held().valid_until(),
            lost_at: keeper.lost_at(),
            release_deadline: keeper.release_deadline(),
            extensions: keeper.held().extensions(),
            hold_limit: false,
            lost: None,
        }
    }
}

/// A view of a kept-alive lease that work can hold and watch: its token, its validity, and a
/// future that resolves when it is lost. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LeaseSignal {
    resource: String,
    fence: Option<u64>,
    owner: Token,
    clock: Clock,
    state: watch::Receiver<State>,
}

impl LeaseSignal {
    /// The resource (the first of a multi-resource lease).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The lease's fencing token, if it has one.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// The owner token stored under the key (what tells this lease from another one with the
    /// same fencing token; see [`crate::fencing::Fence`]).
    pub fn token(&self) -> Token {
        self.owner
    }

    /// The current end of validity, as an `Instant` computed from now.
    pub fn valid_until(&self) -> Instant {
        self.clock.instant(self.deadline())
    }

    /// The current end of validity on the client's clock (see [`Redlock::now`]).
    ///
    /// [`Redlock::now`]: super::Redlock::now
    pub fn deadline(&self) -> Timestamp {
        self.state.borrow().valid_until
    }

    /// When the lease is reported lost unless it is extended first: the end of validity minus
    /// the keep-alive's margin, on the client's clock.
    pub fn loss_deadline(&self) -> Timestamp {
        self.state.borrow().lost_at
    }

    /// When the lease is released even if nobody confirms that the work has stopped: the end
    /// of validity plus the drift allowance, when the keys have expired on the nodes. Before
    /// that, a lost lease is only released once [`KeptLease::release`] says the work stopped.
    pub fn release_deadline(&self) -> Timestamp {
        self.state.borrow().release_deadline
    }

    /// The validity left now.
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(self.clock.now())
    }

    /// Whether work may still act under the lease: it has not been given up, and its loss
    /// deadline (the end of validity minus the margin) has not passed.
    pub fn is_valid(&self) -> bool {
        let state = self.state.borrow();
        state.lost.is_none() && self.clock.now() < state.lost_at
    }

    /// How many times the lease was extended.
    pub fn extensions(&self) -> u32 {
        self.state.borrow().extensions
    }

    /// Whether extensions stopped at the longest hold (the lease then runs out).
    pub fn hold_limit_reached(&self) -> bool {
        self.state.borrow().hold_limit
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<LeaseLost> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when something changes: an extension, the hold limit, the loss, or the end
    /// of the keep-alive (then at once, every time).
    pub async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            // The keeper is gone; its last state stays readable.
            std::future::pending::<()>().await;
        }
    }

    /// Resolves when the lease is lost (immediately if it already is).
    pub async fn lost(&self) -> LeaseLost {
        let mut state = self.state.clone();
        loop {
            if let Some(reason) = state.borrow_and_update().lost.clone() {
                return reason;
            }
            if state.changed().await.is_err() {
                // The keeper is gone without a loss: the lease was released.
                return state
                    .borrow()
                    .lost
                    .clone()
                    .unwrap_or(LeaseLost::Expired { last_failure: None });
            }
        }
    }
}

/// A lease extended in the background until it is released.
///
/// Made by [`Lease::keep_alive`]. Release it with [`release`](KeptLease::release) once the
/// work under it has stopped; dropping it says the same and releases in the background. The
/// release is ordered after every extension command already sent to each node, so no
/// extension can revive a released lease.
///
/// When the lease is lost, nothing is released until the handle says the work has stopped
/// (or the keys have expired, at [`LeaseSignal::release_deadline`]): a release wakes every
/// waiter, and one of them would hold the resource about a round trip later, while work
/// that was told of the loss may still be finishing its current step.
#[must_use = "a dropped kept lease is released in the background; call `release().await`"]
#[derive(Debug)]
pub struct KeptLease {
    signal: LeaseSignal,
    stop: Option<oneshot::Sender<Stop>>,
}

/// What the handle tells the keeper task when it lets the lease go.
#[derive(Debug)]
enum Stop {
    /// The work has stopped: release now, returning at a quorum or at every node's answer.
    Confirmed(oneshot::Sender<ReleaseReport>, Until),
    /// The work may outlive the lease: stop extending, release when the keys have expired.
    Unconfirmed(oneshot::Sender<ReleaseReport>),
}

impl KeptLease {
    /// A signal to hand to work.
    pub fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    /// The lease's fencing token, if it has one.
    pub fn fence(&self) -> Option<u64> {
        self.signal.fence
    }

    /// The owner token stored under the key.
    pub fn token(&self) -> Token {
        self.signal.owner
    }

    /// Whether the lease is still valid (see [`LeaseSignal::is_valid`]).
    pub fn is_valid(&self) -> bool {
        self.signal.is_valid()
    }

    /// Resolves when the lease is lost.
    pub async fn lost(&self) -> LeaseLost {
        self.signal.lost().await
    }

    /// Stops extending and releases the lease. Call it once the work under the lease has
    /// stopped (it returned, its future was dropped, its processes are gone): that is what
    /// lets a lost lease be released before its keys expire.
    pub async fn release(self) -> ReleaseReport {
        self.stop(|reply| Stop::Confirmed(reply, Until::Quorum))
            .await
    }

    /// Like [`release`](KeptLease::release), but the release waits for every node's
    /// answer, each bounded by the per-node timeout (see
    /// [`Lease::release_all`]). If the keeper had already released the lease (it was lost
    /// and its keys expired), the report is that release's.
    pub async fn release_all(self) -> ReleaseReport {
        self.stop(|reply| Stop::Confirmed(reply, Until::AllNodes))
            .await
    }

    /// Stops extending, and releases the lease at its [release
    /// deadline](LeaseSignal::release_deadline), when its keys have expired on the nodes:
    /// for work that cannot be confirmed stopped (a process that does not die). Resolves
    /// with the release's report then (at once if the keeper already released).
    pub async fn release_unconfirmed(self) -> ReleaseReport {
        self.stop(Stop::Unconfirmed).await
    }

    async fn stop(
        mut self,
        how: impl FnOnce(oneshot::Sender<ReleaseReport>) -> Stop,
    ) -> ReleaseReport {
        let (reply, report) = oneshot::channel();
        if let Some(stop) = self.stop.take()
            && stop.send(how(reply)).is_ok()
            && let Ok(report) = report.await
        {
            return report;
        }
        ReleaseReport::default()
    }
}

impl Lease {
    /// Keeps this lease alive in the background under `policy` (see [`crate::core::Keeper`]
    /// for the schedule): a task extends it before its validity runs out, retries a failed
    /// extension while one can still finish in time, and reports the lease lost at the end of
    /// validity minus the policy's margin, or at once when the nodes show that a quorum no
    /// longer holds it. Extensions stop at the client's
    /// [`max_hold`](crate::RedlockBuilder::max_hold). A lost lease is released once the
    /// handle's [`release`](KeptLease::release) says the work stopped, or when its keys have
    /// expired, never while the work may still act under it.
    ///
    /// Requires a tokio runtime.
    pub fn keep_alive(self, policy: KeepAlive) -> KeptLease {
        let resource = self.resource().to_owned();
        let fence = self.fence();
        let owner = self.token();
        let (redlock, held, lanes, granted_at) = self.into_parts();
        let keeper = Keeper::new(redlock.config(), policy, held);
        let (tx, rx) = watch::channel(State::of(&keeper));
        let (stop, stopped) = oneshot::channel();
        let signal = LeaseSignal {
            resource,
            fence,
            owner,
            clock: *redlock.clock(),
            state: rx,
        };
        tokio::spawn(keep(redlock, keeper, lanes, granted_at, tx, stopped));
        KeptLease {
            signal,
            stop: Some(stop),
        }
    }
}

/// The keeper task: drives the keeper until it says the lease may be released (the handle
/// reported the work stopped, or dropped itself, or the keys have expired after a loss), then
/// releases the lease.
async fn keep(
    redlock: super::Redlock,
    mut keeper: Keeper,
    lanes: super::lanes::Lanes,
    granted_at: Instant,
    state: watch::Sender<State>,
    stop: oneshot::Receiver<Stop>,
) {
    let clock = *redlock.clock();
    let resource = keeper.held().target().describe();
    let mut flight = redlock.flight(redlock.config(), lanes.clone());
    let mut stop = Some(stop);
    let mut reply = None;
    let mut until = Until::Quorum;
    while !keeper.is_released() {
        while let Some(transmit) = keeper.poll_transmit() {
            flight.send(transmit);
        }
        while let Some(event) = keeper.poll_outcome() {
            publish(&redlock, &keeper, &state, &resource, event);
        }
        if keeper.is_released() {
            break;
        }
        let timer = keeper.poll_timeout();
        tokio::select! {
            biased;
            request = stopped(stop.as_mut()), if stop.is_some() => {
                stop = None;
                let now = clock.now();
                match request {
                    Ok(Stop::Unconfirmed(sender)) => {
                        reply = Some(sender);
                        keeper.stop_unconfirmed(now);
                    }
                    Ok(Stop::Confirmed(sender, asked)) => {
                        reply = Some(sender);
                        until = asked;
                        keeper.work_stopped(now);
                    }
                    // A dropped handle says the work is over, as a release does.
                    Err(_) => keeper.work_stopped(now),
                }
            }
            Some(done) = flight.next() => keeper.handle_reply(done.request, done.result, clock.now()),
            () = sleep(&clock, timer) => keeper.handle_timeout(clock.now()),
        }
    }
    // An attempt still in flight finishes in the background; the release waits for its
    // command on each node (the lanes).
    drop(flight);
    let lost = keeper.is_lost();
    let held: Held = keeper.into_held();
    let report = release(&redlock, &held, lanes, granted_at, lost, until).await;
    let reply = match (reply, stop) {
        (Some(reply), _) => Some(reply),
        // Released at the keys' expiry: the handle's release (if it ever comes) gets this
        // report.
        (None, Some(stop)) => stop.await.ok().map(|request| match request {
            Stop::Confirmed(reply, _) | Stop::Unconfirmed(reply) => reply,
        }),
        (None, None) => None,
    };
    if let Some(reply) = reply {
        let _ = reply.send(report);
    }
}

fn publish(
    redlock: &super::Redlock,
    keeper: &Keeper,
    state: &watch::Sender<State>,
    resource: &str,
    event: KeeperEvent,
) {
    match event {
        KeeperEvent::Extended(extension) => {
            redlock.telemetry().extended(true);
            tracing::debug!(
                resource,
                extensions = keeper.held().extensions(),
                validity_ms = extension.validity().as_millis(),
                "lease extended"
            );
            state.send_modify(|s| {
                s.valid_until = keeper.held().valid_until();
                s.lost_at = keeper.lost_at();
                s.extensions = keeper.held().extensions();
            });
        }
        KeeperEvent::ExtendFailed(failure) => {
            redlock.telemetry().extended(false);
            tracing::debug!(resource, error = %failure, "extension failed; retrying");
        }
        KeeperEvent::HoldLimitReached => state.send_modify(|s| s.hold_limit = true),
        KeeperEvent::Lost(reason) => {
            tracing::warn!(resource, %reason, "lease lost; stopping the work before the release");
            state.send_modify(|s| s.lost = Some(reason));
        }
        KeeperEvent::Release(ReleaseWhen::KeysExpired) => tracing::warn!(
            resource,
            "the work under the lost lease was not reported stopped; releasing after its keys' expiry"
        ),
        KeeperEvent::Release(_) => {}
        other => tracing::debug!(resource, event = ?other, "keep-alive"),
    }
}

/// The handle's word, once it comes.
async fn stopped(
    stop: Option<&mut oneshot::Receiver<Stop>>,
) -> Result<Stop, oneshot::error::RecvError> {
    match stop {
        Some(stop) => stop.await,
        None => std::future::pending().await,
    }
}

async fn sleep(clock: &Clock, until: Option<Timestamp>) {
    match until {
        Some(at) => clock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}
