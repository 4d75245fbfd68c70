//! What the client counts: a [`Stats`] snapshot for everyone, and the same figures through
//! the `metrics` facade with the `metrics` feature. The metric names and the `tracing`
//! fields are listed in the client module's documentation (Observability).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Counters of one client (shared by all its handles), since it was built.
///
/// ```no_run
/// # fn demo(redlock: redlock::Redlock) {
/// let stats = redlock.stats();
/// println!(
///     "{} leases, {} contended rounds, {} expired before release, mean acquire {:?}",
///     stats.acquisitions, stats.contention, stats.expirations, stats.acquire_latency_mean()
/// );
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Acquisition rounds run (retries included).
    pub rounds: u64,
    /// Leases granted.
    pub acquisitions: u64,
    /// Rounds lost because another owner held the resource.
    pub contention: u64,
    /// Acquisitions that failed because too few nodes answered.
    pub no_quorum: u64,
    /// Acquisitions that failed, for any reason.
    pub acquire_failures: u64,
    /// Successful extensions.
    pub extensions: u64,
    /// Failed extensions.
    pub extension_failures: u64,
    /// Leases whose validity ended before they were released (lost leases).
    pub expirations: u64,
    /// Releases.
    pub releases: u64,
    /// Total time spent acquiring the granted leases.
    pub acquire_latency_total: Duration,
    /// The longest time one granted acquisition took.
    pub acquire_latency_max: Duration,
    /// Total time leases were held (grant to release).
    pub hold_time_total: Duration,
}

impl Stats {
    /// The mean time from `acquire` to the grant.
    pub fn acquire_latency_mean(&self) -> Duration {
        mean(self.acquire_latency_total, self.acquisitions)
    }

    /// The mean time a lease was held.
    pub fn hold_time_mean(&self) -> Duration {
        mean(self.hold_time_total, self.releases)
    }
}

fn mean(total: Duration, count: u64) -> Duration {
    if count == 0 {
        Duration::ZERO
    } else {
        total / u32::try_from(count).unwrap_or(u32::MAX)
    }
}

/// The live counters behind [`Stats`].
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    rounds: AtomicU64,
    acquisitions: AtomicU64,
    contention: AtomicU64,
    no_quorum: AtomicU64,
    acquire_failures: AtomicU64,
    extensions: AtomicU64,
    extension_failures: AtomicU64,
    expirations: AtomicU64,
    releases: AtomicU64,
    acquire_nanos: AtomicU64,
    acquire_nanos_max: AtomicU64,
    hold_nanos: AtomicU64,
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Telemetry {
    pub(crate) fn round(&self, contended: bool) {
        bump(&self.rounds);
        #[cfg(feature = "metrics")]
        metrics::counter!("redlock_rounds_total").increment(1);
        if contended {
            bump(&self.contention);
            #[cfg(feature = "metrics")]
            metrics::counter!("redlock_contention_total").increment(1);
        }
    }

    pub(crate) fn acquired(&self, latency: Duration) {
        bump(&self.acquisitions);
        self.acquire_nanos
            .fetch_add(nanos(latency), Ordering::Relaxed);
        self.acquire_nanos_max
            .fetch_max(nanos(latency), Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            metrics::counter!("redlock_acquisitions_total").increment(1);
            metrics::histogram!("redlock_acquire_seconds").record(latency.as_secs_f64());
        }
    }

    pub(crate) fn acquire_failed(&self, no_quorum: bool) {
        bump(&self.acquire_failures);
        #[cfg(feature = "metrics")]
        metrics::counter!("redlock_acquire_failures_total").increment(1);
        if no_quorum {
            bump(&self.no_quorum);
            #[cfg(feature = "metrics")]
            metrics::counter!("redlock_no_quorum_total").increment(1);
        }
    }

    pub(crate) fn extended(&self, ok: bool) {
        if ok {
            bump(&self.extensions);
            #[cfg(feature = "metrics")]
            metrics::counter!("redlock_extensions_total").increment(1);
        } else {
            bump(&self.extension_failures);
            #[cfg(feature = "metrics")]
            metrics::counter!("redlock_extension_failures_total").increment(1);
        }
    }

    pub(crate) fn released(&self, held: Duration, expired: bool) {
        bump(&self.releases);
        self.hold_nanos.fetch_add(nanos(held), Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        {
            metrics::counter!("redlock_releases_total").increment(1);
            metrics::histogram!("redlock_hold_seconds").record(held.as_secs_f64());
        }
        if expired {
            bump(&self.expirations);
            #[cfg(feature = "metrics")]
            metrics::counter!("redlock_expirations_total").increment(1);
        }
    }

    pub(crate) fn snapshot(&self) -> Stats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Stats {
            rounds: get(&self.rounds),
            acquisitions: get(&self.acquisitions),
            contention: get(&self.contention),
            no_quorum: get(&self.no_quorum),
            acquire_failures: get(&self.acquire_failures),
            extensions: get(&self.extensions),
            extension_failures: get(&self.extension_failures),
            expirations: get(&self.expirations),
            releases: get(&self.releases),
            acquire_latency_total: Duration::from_nanos(get(&self.acquire_nanos)),
            acquire_latency_max: Duration::from_nanos(get(&self.acquire_nanos_max)),
            hold_time_total: Duration::from_nanos(get(&self.hold_nanos)),
        }
    }
}
