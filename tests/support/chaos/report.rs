//! What a chaos run observed, and its one-screen summary.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::detector::Overlap;
use super::faults::FaultKind;
use super::worker::WorkerStats;

/// The figures of a chaos run. [`ChaosReport::problems`] lists every broken promise.
#[derive(Clone, Debug, Default)]
pub struct ChaosReport {
    /// The seed of the fault schedule and of the clients' choices.
    pub seed: u64,
    /// Wall time of the whole run, fleet start and final checks included.
    pub wall_time: Duration,
    /// Granted leases.
    pub acquisitions: u64,
    /// Granted leases that needed more than one round.
    pub contended: u64,
    /// Acquisitions refused because another client held the resource.
    pub taken: u64,
    /// Acquisitions refused for lack of a quorum (faults).
    pub no_quorum: u64,
    /// Acquisitions whose quorum came too late to leave any validity.
    pub validity_exhausted: u64,
    /// Successful extensions.
    pub extensions: u64,
    /// Extensions refused or failed (the lease then ran to its old deadline).
    pub extend_failed: u64,
    /// Releases.
    pub releases: u64,
    /// Fault episodes (each one to three faults, applied and healed together).
    pub episodes: u64,
    /// Faults injected, by kind.
    pub faults: BTreeMap<FaultKind, u64>,
    /// Times a holder entered a critical section another holder was still in.
    pub overlaps: u64,
    /// The first overlaps, in detail.
    pub overlap_examples: Vec<Overlap>,
    /// Critical sections that found their lease expired when they left.
    pub overruns: u64,
    /// Leases that were already invalid when `acquire` returned them (never used).
    pub expired_on_arrival: u64,
    /// Calls that took longer than their documented bound plus the slack.
    pub over_bound: Vec<String>,
    /// Errors no fault explains.
    pub unexpected: Vec<String>,
    /// The longest calls.
    pub longest_acquire: Duration,
    /// The longest extension.
    pub longest_extend: Duration,
    /// The longest release.
    pub longest_release: Duration,
    /// The documented bound of an acquisition (`acquire_budget()`).
    pub acquire_bound: Duration,
    /// The documented bound of an extension or a release (two per-node timeouts).
    pub extend_release_bound: Duration,
    /// The slack allowed on top of a bound.
    pub slack: Duration,
    /// The most an acquisition went past `acquire_bound` (zero when none did).
    pub acquire_overshoot: Duration,
    /// The most an extension or a release went past `extend_release_bound`.
    pub extend_release_overshoot: Duration,
    /// Latency of the successful acquisitions: median, 99th percentile, maximum.
    pub acquire_p50: Duration,
    /// See [`acquire_p50`](Self::acquire_p50).
    pub acquire_p99: Duration,
    /// See [`acquire_p50`](Self::acquire_p50).
    pub acquire_max: Duration,
    /// Episodes after whose healing no acquisition succeeded within the recovery limit.
    pub unrecovered: Vec<String>,
    /// The longest time from a heal to the next successful acquisition.
    pub longest_recovery: Duration,
    /// The episode that took the longest to recover from.
    pub slowest_episode: String,
    /// Lock keys still on the nodes after the final wait (should be none).
    pub leftover_keys: Vec<String>,
    /// How long after the end the nodes were free of lock keys.
    pub clean_after: Duration,
}

impl ChaosReport {
    pub(crate) fn add_worker(&mut self, stats: WorkerStats, latencies: &mut Vec<Duration>) {
        self.acquisitions += stats.acquisitions;
        self.contended += stats.contended;
        self.taken += stats.taken;
        self.no_quorum += stats.no_quorum;
        self.validity_exhausted += stats.validity_exhausted;
        self.extensions += stats.extensions;
        self.extend_failed += stats.extend_failed;
        self.releases += stats.releases;
        self.overruns += stats.overruns;
        self.expired_on_arrival += stats.expired_on_arrival;
        self.over_bound.extend(stats.over_bound);
        self.unexpected.extend(stats.unexpected);
        self.longest_acquire = self.longest_acquire.max(stats.longest_acquire);
        self.longest_extend = self.longest_extend.max(stats.longest_extend);
        self.longest_release = self.longest_release.max(stats.longest_release);
        self.acquire_overshoot = self.acquire_overshoot.max(stats.acquire_overshoot);
        self.extend_release_overshoot = self
            .extend_release_overshoot
            .max(stats.extend_release_overshoot);
        latencies.extend(stats.acquire_latency);
    }

    pub(crate) fn set_latencies(&mut self, mut latencies: Vec<Duration>) {
        latencies.sort_unstable();
        self.acquire_p50 = percentile(&latencies, 50);
        self.acquire_p99 = percentile(&latencies, 99);
        self.acquire_max = latencies.last().copied().unwrap_or_default();
    }

    /// How many faults were injected in all.
    pub fn faults_injected(&self) -> u64 {
        self.faults.values().sum()
    }

    /// Every broken promise: overlaps, overruns, calls over their bound, unexpected errors,
    /// unrecovered episodes, leftover keys. Empty when the run kept them all.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.overlaps > 0 {
            problems.push(format!(
                "{} overlap(s), first ones: {:?}",
                self.overlaps, self.overlap_examples
            ));
        }
        if self.overruns > 0 {
            problems.push(format!(
                "{} critical section(s) outlived their lease",
                self.overruns
            ));
        }
        problems.extend(self.over_bound.iter().take(10).cloned());
        problems.extend(self.unexpected.iter().take(10).cloned());
        problems.extend(self.unrecovered.iter().take(10).cloned());
        if !self.leftover_keys.is_empty() {
            problems.push(format!("keys left behind: {:?}", self.leftover_keys));
        }
        problems
    }
}

/// The `p`-th percentile of sorted samples (nearest rank).
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} | wall time {:.1?}", self.seed, self.wall_time)?;
        writeln!(
            f,
            "acquisitions {} (contended {}) | refused: taken {}, no quorum {}, validity exhausted {} | extensions {} (failed {}) | releases {}",
            self.acquisitions,
            self.contended,
            self.taken,
            self.no_quorum,
            self.validity_exhausted,
            self.extensions,
            self.extend_failed,
            self.releases
        )?;
        let kinds: Vec<String> = self
            .faults
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        writeln!(
            f,
            "faults injected {} in {} episodes: {}",
            self.faults_injected(),
            self.episodes,
            kinds.join(", ")
        )?;
        writeln!(
            f,
            "overlaps {} | overruns {} | expired on arrival {} | unexpected errors {} | calls over bound {}",
            self.overlaps,
            self.overruns,
            self.expired_on_arrival,
            self.unexpected.len(),
            self.over_bound.len()
        )?;
        writeln!(
            f,
            "acquire latency (granted) p50 {:.1?}, p99 {:.1?}, max {:.1?}",
            self.acquire_p50, self.acquire_p99, self.acquire_max,
        )?;
        writeln!(
            f,
            "longest acquire {:.1?} (bound {:?}, worst overshoot {:.1?}) | longest extend {:.1?}, release {:.1?} (bound {:?}, worst overshoot {:.1?}) | slack {:?}",
            self.longest_acquire,
            self.acquire_bound,
            self.acquire_overshoot,
            self.longest_extend,
            self.longest_release,
            self.extend_release_bound,
            self.extend_release_overshoot,
            self.slack
        )?;
        write!(
            f,
            "longest recovery after a heal {:.1?} ({}) | unrecovered episodes {} | keys left {} (clean {:.1?} after the end)",
            self.longest_recovery,
            self.slowest_episode,
            self.unrecovered.len(),
            self.leftover_keys.len(),
            self.clean_after
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let samples: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&samples, 50), ms(50));
        assert_eq!(percentile(&samples, 99), ms(99));
        assert_eq!(percentile(&[ms(7)], 99), ms(7));
        assert_eq!(percentile(&[], 50), Duration::ZERO);
    }

    #[test]
    fn a_clean_report_has_no_problems_and_each_broken_promise_is_one() {
        let mut report = ChaosReport::default();
        assert!(report.problems().is_empty());
        report.overlaps = 1;
        report.leftover_keys.push("redlock:x".into());
        assert_eq!(report.problems().len(), 2);
    }
}
