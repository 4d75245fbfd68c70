//! A held lease: the core's [`Held`] plus the lanes that keep its commands in order.

use std::fmt;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::Redlock;
use super::drive::drive;
use super::lanes::Lanes;
use crate::error::{Error, NodeReport};
use redlock_core::{ExtendFailure, ExtendOutcome, Held, Machine, ReleaseReport, Target, Token};

/// A lease on one resource, held on a quorum of nodes until [`valid_until`](Lease::valid_until).
///
/// Release it with [`release`](Lease::release). If it is dropped instead, a best-effort
/// release is spawned on the current tokio runtime and a warning is logged; either way the
/// keys expire with their TTL, so a crashed holder never blocks the resource for longer.
///
/// Validity is a deadline on the client's clock (which keeps counting while the system is
/// suspended), measured from the start of the winning round minus the drift allowance. Check
/// [`is_valid`](Lease::is_valid) before each external effect of the critical section; a pause
/// between that check and the effect can still outlast the lease, which only fencing tokens
/// can catch.
#[must_use = "a dropped lease is only released on a best-effort basis; call `release().await`"]
pub struct Lease {
    redlock: Redlock,
    held: Held,
    granted_at: Instant,
    lanes: Lanes,
    released: bool,
}

impl Lease {
    pub(crate) fn new(redlock: Redlock, held: Held, lanes: Lanes) -> Self {
        redlock.shared.own_leases.insert(held.token());
        Self {
            redlock,
            held,
            granted_at: Instant::now(),
            lanes,
            released: false,
        }
    }

    pub(crate) fn redlock(&self) -> &Redlock {
        &self.redlock
    }

    pub(crate) fn held_mut(&mut self) -> &mut Held {
        &mut self.held
    }

    /// Hands the lease's parts to a keeper, which releases it in the end. Nothing is
    /// released when `self` goes away.
    pub(crate) fn into_parts(mut self) -> (Redlock, Held, Lanes, Instant) {
        self.released = true;
        (
            self.redlock.clone(),
            self.held.clone(),
            self.lanes.clone(),
            self.granted_at,
        )
    }

    /// The fencing token of this lease, when the handle that acquired it was made with
    /// [`Redlock::with_fencing`]. Pass it with every access to the protected resource, which
    /// must reject tokens older than the newest it has seen (see [`crate::fencing`]).
    /// Extensions keep the token.
    pub fn fence(&self) -> Option<u64> {
        self.held.fence()
    }

    /// The resource name (the first, in sorted order, of a multi-resource lease).
    pub fn resource(&self) -> &str {
        self.held.target().keys()[0].resource()
    }

    /// Every resource name, comma-separated: what log lines and errors call the lease.
    pub(crate) fn described(&self) -> String {
        self.held.target().describe()
    }

    /// Every resource the lease holds, sorted.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        self.held.target().keys().iter().map(|k| k.resource())
    }

    /// The Redis key that holds the lease on every node (prefix + resource; the first key of a
    /// multi-resource lease).
    pub fn key(&self) -> &str {
        self.held.target().keys()[0].as_str()
    }

    /// Everything the lease holds.
    pub fn target(&self) -> &Target {
        self.held.target()
    }

    /// The owner token stored under the key.
    pub fn token(&self) -> Token {
        self.held.token()
    }

    /// When the lease stops being valid, as an `Instant` computed from now (the client's own
    /// clock also counts suspended time, which `Instant` may not: prefer
    /// [`remaining`](Lease::remaining) and [`is_valid`](Lease::is_valid) after a suspend).
    pub fn valid_until(&self) -> Instant {
        self.redlock.clock().instant(self.held.valid_until())
    }

    /// The validity left now; zero once it has ended.
    pub fn remaining(&self) -> Duration {
        self.held.remaining(self.redlock.clock().now())
    }

    /// Whether the validity has not ended yet.
    pub fn is_valid(&self) -> bool {
        self.held.is_valid(self.redlock.clock().now())
    }

    /// How many rounds the acquisition took.
    pub fn attempts(&self) -> u32 {
        self.held.attempts()
    }

    /// How many times the lease was extended.
    pub fn extensions(&self) -> u32 {
        self.held.extensions()
    }

    /// Extends the lease by the configured TTL, measured from now.
    ///
    /// Succeeds only if a quorum of nodes still holds our token and validity remains when the
    /// quorum is reached; returns the new validity. A key that expired on a node is never
    /// re-created there.
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseExpired`] if the validity had already ended (nothing is sent);
    /// - [`Error::HoldLimit`] once the lease has been held for the configured
    ///   [`max_hold`](crate::RedlockBuilder::max_hold) (nothing is sent);
    /// - [`Error::ExtendFailed`] if no quorum extended in time. The lease is then unchanged
    ///   (still valid until its old deadline), no key was deleted, and extending again may
    ///   succeed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the lease as it was; commands already sent finish in the
    /// background and at most push the keys' expiry further. The lease's next command to a
    /// node still waits for them.
    pub async fn extend(&mut self) -> Result<Duration, Error> {
        let span = tracing::debug_span!("extend", resource = %self.described());
        self.extend_round().instrument(span).await
    }

    async fn extend_round(&mut self) -> Result<Duration, Error> {
        let redlock = self.redlock.clone();
        let config = redlock.config();
        let clock = redlock.clock();
        let mut machine = self.held.extend(config, clock.now());
        let mut flight = redlock.flight(config, self.lanes.clone());
        let outcome = drive(&mut machine, &mut flight, clock).await;
        match outcome {
            Some(ExtendOutcome::Extended(extension)) => {
                self.held.apply(&extension);
                redlock.telemetry().extended(true);
                tracing::debug!(
                    resource = %self.described(),
                    extensions = self.held.extensions(),
                    validity_ms = extension.validity().as_millis(),
                    "lease extended"
                );
                Ok(extension.validity())
            }
            Some(ExtendOutcome::Failed(failure)) => {
                redlock.telemetry().extended(false);
                Err(extend_error(&redlock, self.described(), failure))
            }
            Some(_) => Err(Error::Internal("an extension outcome of a newer core")),
            None => Err(Error::Internal("the extension stalled")),
        }
    }

    /// Releases the lease on every node with a compare-and-delete, and reports what each
    /// node did.
    ///
    /// Never fails: releasing a lease that already expired reports the nodes as
    /// [`NotHeld`](redlock_core::Reply::NotHeld), and a node that does not answer is reported
    /// as failed (its key expires with the TTL). It returns once every node has answered or
    /// its per-node timeout has passed, so the report [is complete](ReleaseReport::is_complete)
    /// (on healthy nodes: the key was deleted everywhere), and a program that ends right
    /// after it leaves no key behind. It costs the slowest node's round trip (at most the
    /// per-node timeout); [`release_at_quorum`](Lease::release_at_quorum) returns at the
    /// quorum's.
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// let lease = redlock.acquire("nightly-report").await?;
    /// let report = lease.release().await;
    /// assert!(report.is_complete());
    /// println!("{report}"); // released on 3 of 3 nodes
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it is first polled releases in the background as `Drop`
    /// does; dropping it later lets the requests already sent finish in the background.
    pub async fn release(self) -> ReleaseReport {
        self.release_until(Until::AllNodes).await
    }

    /// Like [`release`](Lease::release), but returns as soon as a quorum of nodes no longer
    /// holds the key, when the resource is free for others. The remaining requests finish in
    /// the background and the report shows those nodes [in flight](ReleaseReport::in_flight),
    /// so on three healthy nodes it typically says `released on 2 of 3 nodes, 1 still in
    /// flight`. A program that ends right after it must [`settle`](Redlock::settle) first,
    /// or the requests still in flight are cut off and their keys wait for the TTL.
    ///
    /// # Cancel safety
    ///
    /// As [`release`](Lease::release).
    pub async fn release_at_quorum(self) -> ReleaseReport {
        self.release_until(Until::Quorum).await
    }

    async fn release_until(mut self, until: Until) -> ReleaseReport {
        self.released = true;
        let lanes = self.lanes.clone();
        Releasing::start(
            &self.redlock,
            &self.held,
            lanes,
            self.granted_at,
            false,
            until,
        )
        .finish(&self.redlock, &self.held)
        .await
    }
}

/// Tells this client's waiters of a release whose report nobody waits for any more (its
/// future dropped unfinished: a caller's timeout, a `select!`). Its commands are queued, and
/// go on in the background; the next in line, whose round is queued behind them in the
/// lanes, would otherwise wait for its fallback, the retry delay. Without a report, the
/// release counts as one that no other process waited for.
struct TellsWaiters<'a> {
    redlock: &'a Redlock,
    held: &'a Held,
    sent_at: redlock_core::Timestamp,
    unfinished: bool,
}

impl TellsWaiters<'_> {
    /// This client's waiters need not wait for the nodes' notifications (unless the
    /// release yields to another process's waiter, as `report` says).
    fn tell(&mut self, report: &ReleaseReport) {
        self.unfinished = false;
        let now = self.redlock.clock().now();
        self.redlock.waiting().released(
            self.held.target(),
            self.held.token(),
            report,
            self.sent_at,
            now,
        );
    }
}

impl Drop for TellsWaiters<'_> {
    fn drop(&mut self) {
        if self.unfinished {
            self.tell(&ReleaseReport::default());
        }
    }
}

/// When a release returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// At a quorum of nodes no longer holding the key: the others stay in flight.
    Quorum,
    /// At every node's answer or the per-node timeout.
    AllNodes,
}

/// The client error for a failed extension of the lease called `resource`.
pub(crate) fn extend_error(redlock: &Redlock, resource: String, failure: ExtendFailure) -> Error {
    match failure {
        ExtendFailure::Expired => Error::LeaseExpired { resource },
        ExtendFailure::HoldLimit { max_hold } => Error::HoldLimit { resource, max_hold },
        ExtendFailure::Round(round) => {
            tracing::debug!(resource, reason = %round.reason, "lease extension failed");
            Error::ExtendFailed {
                resource,
                reason: round.reason,
                nodes: NodeReport::new(redlock.addresses(), round.nodes),
            }
        }
        _ => Error::Internal("an extension failure of a newer core"),
    }
}

/// The release of `held`, ordered after the lease's earlier commands: started
/// ([`Releasing::start`]: recorded, its first commands queued in the lanes, where it is
/// started, so that a dropped lease's release is queued before the dropping task's next
/// command on the resource, not when its own task first runs), then driven to its report
/// ([`Releasing::finish`]).
pub(crate) struct Releasing {
    machine: redlock_core::Release,
    flight: super::flight::Flight,
    now: redlock_core::Timestamp,
    span: tracing::Span,
}

impl Releasing {
    /// Records the release, as an expiration when its validity had ended or when `lost` (a
    /// keep-alive gave it up), and queues its commands.
    pub(crate) fn start(
        redlock: &Redlock,
        held: &Held,
        lanes: Lanes,
        granted_at: Instant,
        lost: bool,
        until: Until,
    ) -> Self {
        let now = redlock.clock().now();
        redlock
            .telemetry()
            .released(granted_at.elapsed(), lost || !held.is_valid(now));
        // Named in logs only: described (an allocation) only when a subscriber listens.
        let span = tracing::debug_span!("release", resource = %held.target().describe());
        let mut machine = held.release(redlock.config(), now);
        if until == Until::AllNodes {
            machine = machine.waiting_for_all();
        }
        let mut flight = redlock.flight(redlock.config(), lanes);
        span.in_scope(|| flight.send_all(|| machine.poll_transmit()));
        Self {
            machine,
            flight,
            now,
            span,
        }
    }

    /// Drives the release to its report.
    pub(crate) async fn finish(self, redlock: &Redlock, held: &Held) -> ReleaseReport {
        let Self {
            mut machine,
            mut flight,
            now,
            span,
        } = self;
        let clock = redlock.clock();
        let mut tells = TellsWaiters {
            redlock,
            held,
            sent_at: now,
            unfinished: true,
        };
        let report = async {
            let report = drive(&mut machine, &mut flight, clock)
                .await
                .unwrap_or_default();
            flight.linger().await;
            report
        }
        .instrument(span.clone())
        .await;
        // Dropped inside the span: what the flight hands to the background (the requests
        // still in flight) is logged as the release's.
        span.in_scope(|| drop(flight));
        tells.tell(&report);
        tracing::debug!(
            resource = %held.target().describe(),
            released = report.released(),
            not_held = report.not_held(),
            in_flight = report.in_flight(),
            "lease released"
        );
        report
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Released or not, the lease is no longer this client's to use: a later round that
        // meets its token (a release that missed a node) is told of another owner.
        self.redlock.shared.own_leases.remove(&self.held.token());
        if self.released {
            return;
        }
        self.released = true;
        let resource = self.described();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                resource = %resource,
                "lease dropped without release() outside a tokio runtime; its keys expire with their TTL"
            );
            return;
        };
        tracing::warn!(
            resource = %resource,
            "lease dropped without release(); releasing it in the background"
        );
        let redlock = self.redlock.clone();
        let held = self.held.clone();
        // Queued now, so that the next command of this task on the resource waits behind it.
        let releasing = Releasing::start(
            &redlock,
            &held,
            self.lanes.clone(),
            self.granted_at,
            false,
            Until::Quorum,
        );
        let background = redlock.background().clone();
        background.spawn(&runtime, async move {
            releasing.finish(&redlock, &held).await;
        });
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("resource", &self.resource())
            .field("token", &self.token().short())
            .field("remaining", &self.remaining())
            .field("extensions", &self.extensions())
            .field("fence", &self.fence())
            .finish_non_exhaustive()
    }
}

/// The lease's owner token, so that [`Holder::is_held_by`](redlock_core::Holder::is_held_by)
/// takes `&lease`.
impl From<&Lease> for Token {
    fn from(lease: &Lease) -> Self {
        lease.token()
    }
}
