//! One chaos client: acquires, works inside the critical section, sometimes extends,
//! releases; times every call against its documented bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redlock::{Error, Lease, Redlock};

use super::detector::Detector;

/// The time each call may take: its documented bound plus the scheduling slack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// `acquire_budget()`.
    pub(crate) acquire: Duration,
    /// Two per-node timeouts: an extension or a release is decided at one.
    pub(crate) extend_or_release: Duration,
    pub(crate) slack: Duration,
}

/// What one client saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) acquisitions: u64,
    pub(crate) contended: u64,
    pub(crate) taken: u64,
    pub(crate) no_quorum: u64,
    pub(crate) validity_exhausted: u64,
    pub(crate) unexpected: Vec<String>,
    pub(crate) acquire_latency: Vec<Duration>,
    pub(crate) longest_acquire: Duration,
    pub(crate) longest_extend: Duration,
    pub(crate) longest_release: Duration,
    pub(crate) over_bound: Vec<String>,
    /// The most an acquisition went past its bound (zero when none did).
    pub(crate) acquire_overshoot: Duration,
    /// The most an extension or a release went past its bound.
    pub(crate) extend_release_overshoot: Duration,
    pub(crate) extensions: u64,
    pub(crate) extend_failed: u64,
    pub(crate) expired_on_arrival: u64,
    pub(crate) overruns: u64,
    pub(crate) releases: u64,
}

/// Everything a client shares with the run.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) id: usize,
    pub(crate) redlock: Redlock,
    pub(crate) detector: Arc<Detector>,
    pub(crate) resources: usize,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) acquired: Arc<AtomicU64>,
    pub(crate) seed: u64,
    pub(crate) bounds: Bounds,
}

/// The resource name of resource `index`.
pub(crate) fn resource_name(index: usize) -> String {
    format!("chaos-{index}")
}

impl Worker {
    /// Runs until the stop flag is raised.
    pub(crate) async fn run(self) -> WorkerStats {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ (self.id as u64).wrapping_mul(0x9E37));
        let mut stats = WorkerStats::default();
        while !self.stop.load(Ordering::SeqCst) {
            let resource = rng.random_range(0..self.resources);
            let started = Instant::now();
            let acquired = self.redlock.acquire(&resource_name(resource)).await;
            let took = started.elapsed();
            self.check_bound(&mut stats, "acquire", took, self.bounds.acquire);
            stats.longest_acquire = stats.longest_acquire.max(took);
            match acquired {
                Ok(lease) => {
                    stats.acquisitions += 1;
                    self.acquired.fetch_add(1, Ordering::SeqCst);
                    stats.acquire_latency.push(took);
                    if lease.attempts() > 1 {
                        stats.contended += 1;
                    }
                    self.hold(lease, resource, &mut rng, &mut stats).await;
                }
                Err(Error::Taken { .. }) => stats.taken += 1,
                Err(Error::NoQuorum { .. }) => stats.no_quorum += 1,
                Err(Error::ValidityExhausted { .. }) => stats.validity_exhausted += 1,
                Err(other) => stats.unexpected.push(format!("acquire: {other}")),
            }
        }
        stats
    }

    /// The critical section: entered only with a valid lease, left before the release; a
    /// holder that finds its lease invalid stops using the resource.
    async fn hold(
        &self,
        mut lease: Lease,
        resource: usize,
        rng: &mut ChaCha8Rng,
        stats: &mut WorkerStats,
    ) {
        if !lease.is_valid() {
            stats.expired_on_arrival += 1;
            self.release(lease, stats).await;
            return;
        }
        let (inside, _alone) = self.detector.enter(resource, self.id);
        // Short work, never planned past the validity (a margin for the wake-up).
        let work = Duration::from_micros(rng.random_range(0..=3_000));
        let margin = Duration::from_millis(20);
        tokio::time::sleep(work.min(lease.remaining().saturating_sub(margin))).await;
        if rng.random_bool(0.15) && lease.is_valid() {
            let started = Instant::now();
            let extended = lease.extend().await;
            let took = started.elapsed();
            self.check_bound(stats, "extend", took, self.bounds.extend_or_release);
            stats.longest_extend = stats.longest_extend.max(took);
            match extended {
                Ok(_) => stats.extensions += 1,
                // The lease is unchanged by a failed extension: still valid until its old
                // deadline, which the check below enforces.
                Err(Error::ExtendFailed { .. } | Error::LeaseExpired { .. }) => {
                    stats.extend_failed += 1;
                }
                Err(other) => stats.unexpected.push(format!("extend: {other}")),
            }
        }
        self.detector.leave(inside);
        // Read after leaving: if the lease is still valid now, the whole section was inside
        // its validity.
        if !lease.is_valid() {
            stats.overruns += 1;
        }
        self.release(lease, stats).await;
    }

    async fn release(&self, lease: Lease, stats: &mut WorkerStats) {
        let started = Instant::now();
        let _report = lease.release().await;
        let took = started.elapsed();
        stats.releases += 1;
        self.check_bound(stats, "release", took, self.bounds.extend_or_release);
        stats.longest_release = stats.longest_release.max(took);
    }

    fn check_bound(&self, stats: &mut WorkerStats, call: &str, took: Duration, bound: Duration) {
        let overshoot = took.saturating_sub(bound);
        let worst = if call == "acquire" {
            &mut stats.acquire_overshoot
        } else {
            &mut stats.extend_release_overshoot
        };
        *worst = (*worst).max(overshoot);
        if took > bound + self.bounds.slack {
            stats.over_bound.push(format!(
                "client {}: {call} took {took:?}, bound {bound:?} + slack {:?}",
                self.id, self.bounds.slack
            ));
        }
    }
}
