//! A held lease: its deadline on the monotonic clock, extension and release.

use std::fmt;
use std::time::{Duration, Instant};

use tracing::Instrument;

use super::Redlock;
use super::drive::drive;
use super::flight::{Flight, Lanes};
use crate::core::{
    Extend, ExtendFailure, ExtendOutcome, Grant, Release, ReleaseReport, Target, Timestamp, Token,
};
use crate::error::{Error, NodeReport};

/// A lease on one resource, held on a quorum of nodes until [`valid_until`](Lease::valid_until).
///
/// Release it with [`release`](Lease::release). If it is dropped instead, a best-effort
/// release is spawned on the current tokio runtime and a warning is logged; either way the
/// keys expire with their TTL, so a crashed holder never blocks the resource for longer.
///
/// Validity is a deadline on the local monotonic clock, measured from the start of the
/// winning round minus the drift allowance. Check [`is_valid`](Lease::is_valid) before each
/// external effect of the critical section; a pause between that check and the effect can
/// still outlast the lease, which only fencing tokens can catch.
#[must_use = "a dropped lease is only released on a best-effort basis; call `release().await`"]
pub struct Lease {
    redlock: Redlock,
    target: Target,
    token: Token,
    valid_until: Timestamp,
    attempts: u32,
    extensions: u32,
    fence: Option<u64>,
    granted_at: Instant,
    lanes: Lanes,
    released: bool,
}

impl Lease {
    pub(crate) fn new(redlock: Redlock, grant: Grant, lanes: Lanes) -> Self {
        Self {
            redlock,
            target: grant.target,
            token: grant.token,
            valid_until: grant.valid_until,
            attempts: grant.attempts,
            extensions: 0,
            fence: grant.fence,
            granted_at: Instant::now(),
            lanes,
            released: false,
        }
    }

    pub(crate) fn config(&self) -> &crate::core::LockConfig {
        &self.redlock.config
    }

    pub(crate) fn set_fence(&mut self, fence: u64) {
        self.fence = Some(fence);
    }

    /// The fencing token of this lease, when the handle that acquired it was made with
    /// [`Redlock::with_fencing`]. Pass it with every access to the protected resource, which
    /// must reject tokens older than the newest it has seen (see [`crate::fencing`]).
    /// Extensions keep the token.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// The resource name (the first, in sorted order, of a multi-resource lease).
    pub fn resource(&self) -> &str {
        self.target.keys()[0].resource()
    }

    /// Every resource name, comma-separated: what log lines and errors call the lease.
    pub(crate) fn described(&self) -> String {
        self.target.describe()
    }

    /// Every resource the lease holds, sorted.
    pub fn resources(&self) -> impl Iterator<Item = &str> {
        self.target.keys().iter().map(|k| k.resource())
    }

    /// The Redis key that holds the lease on every node (prefix + resource; the first key of a
    /// multi-resource lease).
    pub fn key(&self) -> &str {
        self.target.keys()[0].as_str()
    }

    /// Everything the lease holds.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The owner token stored under the key.
    pub fn token(&self) -> Token {
        self.token
    }

    /// When the lease stops being valid, on the local monotonic clock.
    pub fn valid_until(&self) -> Instant {
        self.redlock.shared.clock.instant(self.valid_until)
    }

    /// The validity left now; zero once it has ended.
    pub fn remaining(&self) -> Duration {
        self.valid_until
            .saturating_duration_since(self.redlock.shared.clock.now())
    }

    /// Whether the validity has not ended yet.
    pub fn is_valid(&self) -> bool {
        self.redlock.shared.clock.now() < self.valid_until
    }

    /// How many rounds the acquisition took.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How many times the lease was extended.
    pub fn extensions(&self) -> u32 {
        self.extensions
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
    /// - [`Error::ExtensionLimit`] after the configured number of extensions;
    /// - [`Error::ExtendFailed`] if no quorum extended in time. The lease is then unchanged
    ///   (still valid until its old deadline), no key was deleted, and extending again may
    ///   succeed.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the lease as it was; commands already sent finish in the
    /// background and at most push the keys' expiry further.
    pub async fn extend(&mut self) -> Result<Duration, Error> {
        let span = tracing::debug_span!("extend", resource = %self.target.describe());
        self.extend_rounds().instrument(span).await
    }

    async fn extend_rounds(&mut self) -> Result<Duration, Error> {
        let shared = &self.redlock.shared;
        let config = &self.redlock.config;
        let mut machine = Extend::new(
            config,
            self.target.clone(),
            self.token,
            self.valid_until,
            self.extensions,
            shared.clock.now(),
        );
        let mut flight = Flight::new(
            shared.nodes.clone(),
            shared.background.clone(),
            config.node_timeout(),
            self.lanes.clone(),
        );
        let outcome = drive(&mut machine, &mut flight, &shared.clock).await;
        self.lanes = flight.into_lanes();
        shared
            .telemetry
            .extended(matches!(outcome, Some(ExtendOutcome::Extended(_))));
        let resource = self.target.describe();
        match outcome {
            Some(ExtendOutcome::Extended(extension)) => {
                self.valid_until = extension.valid_until;
                self.extensions += 1;
                let validity = extension
                    .valid_until
                    .saturating_duration_since(extension.decided_at);
                tracing::debug!(
                    resource,
                    extensions = self.extensions,
                    validity_ms = validity.as_millis(),
                    "lease extended"
                );
                Ok(validity)
            }
            Some(ExtendOutcome::Failed(ExtendFailure::Expired)) => {
                Err(Error::LeaseExpired { resource })
            }
            Some(ExtendOutcome::Failed(ExtendFailure::LimitReached { limit })) => {
                Err(Error::ExtensionLimit { resource, limit })
            }
            Some(ExtendOutcome::Failed(ExtendFailure::Round(round))) => {
                tracing::debug!(resource, reason = %round.reason, "lease extension failed");
                Err(Error::ExtendFailed {
                    resource,
                    reason: round.reason,
                    nodes: NodeReport::new(&shared.addresses, round.nodes),
                })
            }
            None => Err(Error::Internal("the extension stalled")),
        }
    }

    /// Releases the lease on every node with a compare-and-delete, and reports what each
    /// node did.
    ///
    /// Never fails: releasing a lease that already expired reports the nodes as
    /// [`NotHeld`](crate::core::Reply::NotHeld), and a node that does not answer is reported
    /// as failed (its key expires with the TTL). It returns as soon as a quorum of nodes no
    /// longer holds the key; the remaining requests finish in the background.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it is first polled releases in the background as `Drop`
    /// does; dropping it later lets the requests already sent finish in the background.
    pub async fn release(mut self) -> ReleaseReport {
        self.released = true;
        let expired = !self.is_valid();
        self.redlock
            .shared
            .telemetry
            .released(self.granted_at.elapsed(), expired);
        let lanes = std::mem::take(&mut self.lanes);
        let span = tracing::debug_span!("release", resource = %self.described());
        let report = release(&self.redlock, &self.target, self.token, lanes)
            .instrument(span)
            .await;
        tracing::debug!(
            resource = %self.described(),
            released = report.released(),
            not_held = report.not_held(),
            "lease released"
        );
        report
    }
}

/// Runs a release of `token` on `target`, ordered after the lease's earlier commands.
async fn release(redlock: &Redlock, target: &Target, token: Token, lanes: Lanes) -> ReleaseReport {
    let shared = &redlock.shared;
    let config = &redlock.config;
    let mut machine = Release::new(config, target.clone(), token, shared.clock.now());
    let mut flight = Flight::new(
        shared.nodes.clone(),
        shared.background.clone(),
        config.node_timeout(),
        lanes,
    );
    drive(&mut machine, &mut flight, &shared.clock)
        .await
        .unwrap_or_else(|| ReleaseReport { nodes: Vec::new() })
}

impl Drop for Lease {
    fn drop(&mut self) {
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
        let expired = !self.is_valid();
        self.redlock
            .shared
            .telemetry
            .released(self.granted_at.elapsed(), expired);
        let redlock = self.redlock.clone();
        let target = self.target.clone();
        let token = self.token;
        let lanes = std::mem::take(&mut self.lanes);
        let background = redlock.shared.background.clone();
        background.spawn(&runtime, async move {
            release(&redlock, &target, token, lanes).await;
        });
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("resource", &self.resource())
            .field("token", &self.token.short())
            .field("remaining", &self.remaining())
            .field("extensions", &self.extensions)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}
