//! Keeping a lease alive while work runs: bounded automatic extension, a signal when the
//! lease is lost, and `with_lock`.

use std::fmt;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use super::Lease;
use crate::core::ReleaseReport;
use crate::error::Error;

/// How a kept-alive lease is extended.
///
/// The lease is extended when `extend_before` of its validity remains (a third of the TTL by
/// default), clamped so that an extension round and one retry always fit (at least three
/// per-node timeouts) and so that it never extends more often than every half validity.
/// Extension stops after `max_hold` of holding, or after the client's `max_extensions`: the
/// lease then runs out at its last deadline and is reported lost. It is never indefinite.
///
/// ```
/// use std::time::Duration;
/// use redlock::client::KeepAlive;
///
/// let policy = KeepAlive::default()
///     .extend_before(Duration::from_secs(5))
///     .max_hold(Duration::from_secs(2 * 3600));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeepAlive {
    extend_before: Option<Duration>,
    max_hold: Duration,
}

impl Default for KeepAlive {
    /// Extend with a third of the TTL left; hold at most one hour.
    fn default() -> Self {
        Self {
            extend_before: None,
            max_hold: Duration::from_secs(3600),
        }
    }
}

impl KeepAlive {
    /// Extends when this much validity remains (clamped, see the type's documentation).
    #[must_use]
    pub fn extend_before(mut self, remaining: Duration) -> Self {
        self.extend_before = Some(remaining);
        self
    }

    /// Stops extending once the lease has been held this long.
    ///
    /// The client's [`max_extensions`](crate::RedlockBuilder::max_extensions) (default 100)
    /// ends the hold too, whichever comes first. With the default threshold a lease is
    /// extended about every two thirds of its TTL, so 100 extensions of a 30 s lease last
    /// about 33 minutes, not the default hour: for long holds, raise `max_extensions` to at
    /// least `max_hold / (TTL × 2/3)`.
    #[must_use]
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// The effective threshold for a lease of `ttl` and `validity`, checked per node within
    /// `node_timeout`.
    fn threshold(&self, ttl: Duration, validity: Duration, node_timeout: Duration) -> Duration {
        let wanted = self.extend_before.unwrap_or(ttl / 3);
        let floor = node_timeout.saturating_mul(3);
        let ceiling = (validity / 2).max(floor);
        wanted.clamp(floor, ceiling)
    }
}

/// Why a kept-alive lease was lost.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseLost {
    /// The validity ran out before an extension succeeded (the nodes did not confirm our
    /// keys in time); the last failure is given.
    Expired {
        /// Why the last extension failed.
        last_failure: String,
    },
    /// Extension stopped at the policy's limit (maximum hold time or number of extensions)
    /// and the validity then ran out.
    LimitReached,
}

impl fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expired { last_failure } => {
                write!(
                    f,
                    "its validity ran out before it could be extended ({last_failure})"
                )
            }
            Self::LimitReached => {
                f.write_str("its extension limit was reached and its validity ran out")
            }
        }
    }
}

#[derive(Clone, Debug)]
struct State {
    valid_until: Instant,
    extensions: u32,
    lost: Option<LeaseLost>,
}

/// A view of a kept-alive lease that work can hold and watch: its token, its validity, and a
/// future that resolves when it is lost. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LeaseSignal {
    resource: String,
    fence: Option<u64>,
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

    /// The current end of validity.
    pub fn valid_until(&self) -> Instant {
        self.state.borrow().valid_until
    }

    /// The validity left now.
    pub fn remaining(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lease is still valid (held and not past its deadline).
    pub fn is_valid(&self) -> bool {
        let state = self.state.borrow();
        state.lost.is_none() && Instant::now() < state.valid_until
    }

    /// How many times the lease was extended.
    pub fn extensions(&self) -> u32 {
        self.state.borrow().extensions
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<LeaseLost> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when the lease is lost (immediately if it already is).
    pub async fn lost(&self) -> LeaseLost {
        let mut state = self.state.clone();
        loop {
            if let Some(reason) = state.borrow_and_update().lost.clone() {
                return reason;
            }
            if state.changed().await.is_err() {
                // The keeper is gone: the lease was released or its task ended.
                return state
                    .borrow()
                    .lost
                    .clone()
                    .unwrap_or(LeaseLost::LimitReached);
            }
        }
    }
}

/// A lease extended in the background until it is released.
///
/// Made by [`Lease::keep_alive`]. Release it with [`release`](KeptLease::release); dropping
/// it releases in the background too. An extension in flight is always finished before the
/// release is sent (one task does both, in order), so no extension can revive a released
/// lease.
#[must_use = "a dropped kept lease is released in the background; call `release().await`"]
#[derive(Debug)]
pub struct KeptLease {
    signal: LeaseSignal,
    stop: Option<oneshot::Sender<oneshot::Sender<ReleaseReport>>>,
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

    /// Whether the lease is still valid.
    pub fn is_valid(&self) -> bool {
        self.signal.is_valid()
    }

    /// Resolves when the lease is lost.
    pub async fn lost(&self) -> LeaseLost {
        self.signal.lost().await
    }

    /// Stops extending (after any extension in flight) and releases the lease.
    pub async fn release(mut self) -> ReleaseReport {
        let (reply, report) = oneshot::channel();
        if let Some(stop) = self.stop.take()
            && stop.send(reply).is_ok()
            && let Ok(report) = report.await
        {
            return report;
        }
        ReleaseReport { nodes: Vec::new() }
    }
}

impl Lease {
    /// Keeps this lease alive in the background under `policy`: a task extends it before its
    /// validity runs out, retries a failed extension while validity remains, and reports the
    /// lease lost (and releases it) if validity runs out anyway or the policy's limit is
    /// reached.
    ///
    /// Requires a tokio runtime.
    pub fn keep_alive(self, policy: KeepAlive) -> KeptLease {
        let state = State {
            valid_until: self.valid_until(),
            extensions: self.extensions(),
            lost: None,
        };
        let (tx, rx) = watch::channel(state);
        let (stop, stopped) = oneshot::channel();
        let signal = LeaseSignal {
            resource: self.resource().to_owned(),
            fence: self.fence(),
            state: rx,
        };
        tokio::spawn(keep(self, policy, tx, stopped));
        KeptLease {
            signal,
            stop: Some(stop),
        }
    }
}

/// The keeper task: owns the lease, extends it, and releases it when told (or when the
/// handle is dropped, or when the lease is lost).
async fn keep(
    mut lease: Lease,
    policy: KeepAlive,
    state: watch::Sender<State>,
    mut stopped: oneshot::Receiver<oneshot::Sender<ReleaseReport>>,
) {
    let started = Instant::now();
    let config = lease.config().clone();
    let node_timeout = config.node_timeout();
    let validity = config.ttl().saturating_sub(config.drift());
    let threshold = policy.threshold(config.ttl(), validity, node_timeout);
    let mut can_extend = true;
    let mut last_failure: Option<String> = None;
    let mut next_try: Option<Instant> = None;
    let reason = loop {
        let valid_until = lease.valid_until();
        let extend_at =
            next_try.unwrap_or_else(|| valid_until.checked_sub(threshold).unwrap_or(valid_until));
        tokio::select! {
            biased;
            request = &mut stopped => {
                // Released (or the handle dropped): any extension has already finished,
                // since this task runs one thing at a time.
                let report = lease.release().await;
                if let Ok(reply) = request {
                    let _ = reply.send(report);
                }
                return;
            }
            () = tokio::time::sleep_until(extend_at.into()), if can_extend => {
                if started.elapsed() >= policy.max_hold {
                    can_extend = false;
                    continue;
                }
                match lease.extend().await {
                    Ok(_) => {
                        next_try = None;
                        last_failure = None;
                        state.send_modify(|s| {
                            s.valid_until = lease.valid_until();
                            s.extensions = lease.extensions();
                        });
                    }
                    Err(Error::ExtensionLimit { .. }) => can_extend = false,
                    Err(e) => {
                        // A failed extension deletes nothing: try again shortly while
                        // validity remains.
                        tracing::debug!(resource = %lease.described(), error = %e, "extension failed; retrying");
                        last_failure = Some(e.to_string());
                        next_try = Some(Instant::now() + node_timeout.saturating_mul(2));
                    }
                }
            }
            () = tokio::time::sleep_until(valid_until.into()) => {
                if Instant::now() < lease.valid_until() {
                    continue;
                }
                break match last_failure.take() {
                    Some(last_failure) => LeaseLost::Expired { last_failure },
                    None => LeaseLost::LimitReached,
                };
            }
        }
    };
    tracing::warn!(resource = %lease.described(), %reason, "lease lost");
    state.send_modify(|s| s.lost = Some(reason));
    // Free whatever keys are left at once; the handle's release gets this report.
    let report = lease.release().await;
    if let Ok(reply) = stopped.await {
        let _ = reply.send(report);
    }
}
