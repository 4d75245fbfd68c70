//! Keeping a lease alive while work runs: a task that drives the core's [`Keeper`], a signal
//! that work can watch, and the handle that releases the lease.
//!
//! When to extend, when to try again, when to give the lease up and when it may be released
//! are the core's decisions (see [`redlock_core::Keeper`]); this module sends what the keeper
//! asks for, wakes it on the client's clock (which counts suspended time), publishes what it
//! decides, and tells it when the work has stopped, or that the handle was dropped. A lease
//! is never released by the keeper task while the work may still run: the release waits for
//! the handle's [`KeptLease::release`] (the work has stopped) or for the release deadline
//! (the last extension attempt's start plus the TTL and twice the drift allowance, see
//! [`LeaseSignal::release_deadline`]).

use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::Lease;
use super::background::{Background, Running};
use super::clock::Clock;
use super::lease::{Releasing, Until};
use redlock_core::{
    Held, Keeper, KeeperEvent, Machine, ReleaseReport, ReleaseWhen, Timestamp, Token,
};
pub use redlock_core::{KeepAlive, LeaseLost};

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

    /// When the lease is released even if nobody confirms that the work has stopped: the
    /// last extension attempt's start plus the TTL, on the client's clock, whether that
    /// attempt succeeded (then it is the end of validity plus the drift allowance) or its
    /// replies never came (its commands may still have extended the keys), plus twice the
    /// drift allowance, for node clocks that run slow. It moves with every attempt. The
    /// holder's validity has long ended then; the keys an attempt wrote expire by then, up
    /// to a one-way latency, on nodes whose clocks run slow by no more than the drift factor (a command held in the network for longer may
    /// set a key that lives on, and the release deletes it). Before that, a lost lease is
    /// only released once [`KeptLease::release`] says the work stopped.
    pub fn release_deadline(&self) -> Timestamp {
        self.state.borrow().release_deadline
    }

    /// The validity left now.
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(self.clock.now())
    }

    /// Whether work may still act under the lease: it is still kept (not lost, not released,
    /// its handle not dropped: see [`lost_reason`](LeaseSignal::lost_reason)), and its loss
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

    /// Why the lease is no longer kept, if it is not: lost, [released](LeaseLost::Released),
    /// or [abandoned](LeaseLost::Abandoned) (its handle dropped, or released unconfirmed).
    pub fn lost_reason(&self) -> Option<LeaseLost> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when something changes that this signal has not seen yet: an extension, the
    /// hold limit, the loss, the release or the handle's drop. Once the keep-alive has ended
    /// and its last state was seen, it never resolves again (the last state stays readable):
    /// wait on it alongside [`lost`](LeaseSignal::lost), which resolves by then.
    pub async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            // The keeper is gone; its last state stays readable.
            std::future::pending::<()>().await;
        }
    }

    /// Resolves when the lease is no longer kept (immediately if it already is): lost, or
    /// released, or its handle dropped (see [`lost_reason`](LeaseSignal::lost_reason)).
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
/// work under it has stopped. The release is ordered after every extension command already
/// sent to each node, so no extension can revive a released lease.
///
/// Dropping the handle does not say that the work stopped: work that holds a
/// [`LeaseSignal`] (a spawned task, a thread) may still run. A dropped handle stops the
/// extensions at once and makes the signal [invalid](LeaseSignal::is_valid) (its
/// [`lost`](LeaseSignal::lost) resolves with [`LeaseLost::Abandoned`]); the lease is released
/// at its [release deadline](LeaseSignal::release_deadline), once its validity is long over,
/// so nobody else holds the resource while the work may still act under it. When the work
/// has stopped, say so: [`release`](KeptLease::release), or
/// [`release_in_background`](KeptLease::release_in_background) where nothing can wait.
///
/// When the lease is lost, nothing is released until the handle says the work has stopped
/// (or its [release deadline](LeaseSignal::release_deadline) has passed, when its validity
/// is long over): a release wakes every
/// waiter, and one of them would hold the resource about a round trip later, while work
/// that was told of the loss may still be finishing its current step.
#[must_use = "a dropped kept lease is released only at its release deadline; call `release().await` once the work stopped"]
#[derive(Debug)]
pub struct KeptLease {
    signal: LeaseSignal,
    stop: Option<oneshot::Sender<Stop>>,
    /// The client's background work, which a release the work's end asks for joins.
    background: Background,
}

/// What the handle tells the keeper task when it lets the lease go.
#[derive(Debug)]
enum Stop {
    /// The work has stopped: release now, returning at a quorum or at every node's answer
    /// (nobody waits for the report when the sender's receiver is gone). The release is
    /// counted as the client's background work from the moment it is asked for (the keeper
    /// task may not have run yet when [`settle`](crate::Redlock::settle) looks) until it
    /// has ended.
    Confirmed(oneshot::Sender<ReleaseReport>, Until, Running),
    /// The work may outlive the lease: stop extending, release at the release deadline.
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

    /// Stops extending and releases the lease, returning once every node has answered or its
    /// per-node timeout has passed (see [`Lease::release`]). Call it once the work under the
    /// lease has stopped (it returned, its future was dropped, its processes are gone): that
    /// is what lets a lost lease be released before its keys expire. The signal is
    /// [invalid](LeaseSignal::is_valid) from the moment the release is sent. If the keeper
    /// had already released the lease (it was lost and its release deadline passed), the
    /// report is that release's.
    pub async fn release(self) -> ReleaseReport {
        let counted = self.background.hold();
        self.stop(|reply| Stop::Confirmed(reply, Until::AllNodes, counted))
            .await
    }

    /// Like [`release`](KeptLease::release), but returns as soon as a quorum of nodes no
    /// longer holds the key (see [`Lease::release_at_quorum`]): the other requests finish in
    /// the background, and a process that exits right after it must
    /// [`settle`](crate::Redlock::settle) first or leave keys to their TTL.
    pub async fn release_at_quorum(self) -> ReleaseReport {
        let counted = self.background.hold();
        self.stop(|reply| Stop::Confirmed(reply, Until::Quorum, counted))
            .await
    }

    /// Says that the work has stopped and releases the lease in the background, on every
    /// node, without waiting: for code that cannot wait (a `Drop`). The release counts as
    /// the client's background work ([`settle`](crate::Redlock::settle) waits for it).
    pub fn release_in_background(mut self) {
        let (reply, _report) = oneshot::channel();
        if let Some(stop) = self.stop.take() {
            let counted = self.background.hold();
            let _ = stop.send(Stop::Confirmed(reply, Until::AllNodes, counted));
        }
    }

    /// Stops extending, and releases the lease at its [release
    /// deadline](LeaseSignal::release_deadline), once its validity is long over: for work
    /// that cannot be confirmed stopped (a process that does not die). The signal is
    /// invalid from now on. Resolves with the release's report then (at once if the keeper
    /// already released).
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

/// A kept lease whose work is known to stop when this guard goes: the `with_lock` family
/// runs the work inside the call and drops it before this guard, so a call cancelled half-way
/// (its future dropped) or a work that panicked has stopped, and the guard's drop says so
/// (the release goes out at once), unlike a dropped [`KeptLease`].
pub(crate) struct StopsWithWork {
    kept: Option<KeptLease>,
    signal: LeaseSignal,
}

impl StopsWithWork {
    pub(crate) fn new(kept: KeptLease) -> Self {
        let signal = kept.signal();
        Self {
            kept: Some(kept),
            signal,
        }
    }

    pub(crate) fn signal(&self) -> LeaseSignal {
        self.signal.clone()
    }

    /// The work has stopped: releases the lease on every node (see [`KeptLease::release`]).
    pub(crate) async fn release(mut self) -> ReleaseReport {
        match self.kept.take() {
            Some(kept) => kept.release().await,
            None => ReleaseReport::default(),
        }
    }
}

impl Drop for StopsWithWork {
    fn drop(&mut self) {
        if let Some(kept) = self.kept.take() {
            kept.release_in_background();
        }
    }
}

impl Lease {
    /// Keeps this lease alive in the background under `policy` (see [`redlock_core::Keeper`]
    /// for the schedule): a task extends it before its validity runs out, retries a failed
    /// extension while one can still finish in time, and reports the lease lost at the end of
    /// validity minus the policy's margin, or at once when the nodes show that a quorum no
    /// longer holds it. Extensions stop at the client's
    /// [`max_hold`](crate::RedlockBuilder::max_hold). A lease is released once the
    /// handle's [`release`](KeptLease::release) says the work stopped, or at its release
    /// deadline (after a loss, or once the handle was dropped), never while the work may
    /// still act under it.
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
        let background = redlock.background().clone();
        tokio::spawn(keep(redlock, keeper, lanes, granted_at, tx, stopped));
        KeptLease {
            signal,
            stop: Some(stop),
            background,
        }
    }
}

/// The keeper task: drives the keeper until it says the lease may be released (the handle
/// reported the work stopped, or the release deadline passed after a loss or a dropped
/// handle), then releases the lease.
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
    // Held until the release has ended, when the work's end asked for it.
    let mut release_counted = None;
    let mut until = Until::AllNodes;
    while !keeper.is_released() {
        flight.send_all(|| keeper.poll_transmit());
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
                    Ok(Stop::Confirmed(sender, asked, counted)) => {
                        reply = Some(sender);
                        release_counted = Some(counted);
                        until = asked;
                        keeper.work_stopped(now);
                    }
                    // A dropped handle does not say the work is over: the core decides.
                    Err(_) => keeper.handle_dropped(now),
                }
                // Work watching the signal stops acting before any release is sent.
                publish_end(&keeper, &state);
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
    let report = Releasing::start(&redlock, &held, lanes, granted_at, lost, until)
        .finish(&redlock, &held)
        .await;
    let reply = match (reply, stop) {
        (Some(reply), _) => Some(reply),
        // Released at the release deadline: the handle's release (if it ever comes) gets this
        // report.
        (None, Some(stop)) => stop.await.ok().map(|request| match request {
            Stop::Confirmed(reply, ..) | Stop::Unconfirmed(reply) => reply,
        }),
        (None, None) => None,
    };
    if let Some(reply) = reply {
        let _ = reply.send(report);
    }
    drop(release_counted);
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
                s.release_deadline = keeper.release_deadline();
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
            "the work under the lease was not reported stopped; releasing at its release deadline"
        ),
        KeeperEvent::Release(_) => {}
        other => tracing::debug!(resource, event = ?other, "keep-alive"),
    }
}

/// Publishes why the keeper no longer keeps the lease, once it does not (the signal is
/// invalid from then on).
fn publish_end(keeper: &Keeper, state: &watch::Sender<State>) {
    if let Some(ended) = keeper.ended() {
        state.send_if_modified(|s| {
            if s.lost.is_some() {
                return false;
            }
            s.lost = Some(ended.clone());
            true
        });
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
