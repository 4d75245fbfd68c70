//! Sweeps: one scenario, one parameter varied over a range, many seeds per value, and the
//! rate of each verdict against the parameter.
//!
//! Runs are independent and deterministic, so they are spread over threads and collected by
//! index: the results do not depend on the number of threads.

mod knob;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};

pub use knob::{Knob, Target};

use crate::runs::shard::{Shard, sweep_key};
use knob::Resolved;

use crate::scenario::{Cause, Scenario, Verdict};
use crate::time::MS;
use crate::{SimError, run};

/// What to sweep.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// The parameter.
    pub knob: Knob,
    /// Which client or node it applies to (the knob's default when `None`).
    pub target: Option<Target>,
    /// The values, in order.
    pub values: Vec<f64>,
    /// Seeds per value: `first_seed..first_seed + seeds`.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Whether to add background noise (latency jitter and rare delay spikes).
    pub noise: bool,
    /// A boundary to draw instead of the knob's own analysis: (value, label).
    pub threshold: Option<(f64, String)>,
    /// Worker threads (at least one).
    pub threads: usize,
}

/// One run of the sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepRun {
    /// The parameter's value.
    pub value: f64,
    /// The seed.
    pub seed: u64,
    /// Mutual exclusion.
    pub exclusion: Verdict,
    /// Verdicts per resource mode: plain, fenced, strict.
    pub verdicts: [Verdict; 3],
    /// Cause, if any.
    pub cause: Option<Cause>,
    /// Leases granted.
    pub leases: usize,
    /// Window overlaps.
    pub overlaps: usize,
    /// Stale accesses applied per mode.
    pub stale_applied: [usize; 3],
    /// Acquisition calls made, and how many ended without a lease.
    pub acquire_calls: u64,
    /// Acquisition calls that failed.
    pub acquire_failures: u64,
    /// Events processed.
    pub events: u64,
}

/// The rate of each verdict at one value.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// The parameter's value.
    pub value: f64,
    /// Runs at this value.
    pub runs: usize,
    /// Fraction of runs whose mutual exclusion is `VIOLATED` (two windows overlapped).
    pub exclusion_violated: f64,
    /// Fraction of runs `VIOLATED`, per mode (plain, fenced, strict).
    pub violated: [f64; 3],
    /// Fraction of runs `PREVENTED_BY_FENCING`, per mode.
    pub prevented: [f64; 3],
    /// Fraction of acquisition calls that got a lease (availability).
    pub acquired: f64,
}

/// A finished sweep.
#[derive(Clone, Debug, Serialize)]
pub struct Sweep {
    /// The scenario's name.
    pub scenario: String,
    /// The parameter, with its unit.
    pub parameter: String,
    /// Every run, ordered by value then seed.
    pub runs: Vec<SweepRun>,
    /// The rates, one point per value.
    pub points: Vec<SweepPoint>,
    /// Where analysis puts the boundary between safe and unsafe, when known.
    pub threshold: Option<(f64, String)>,
}

/// Runs the sweep; `progress` is called after each run with (done, total).
///
/// # Errors
///
/// A [`SimError`] from any run, or a knob that does not apply to the scenario.
pub fn sweep(
    scenario: &Scenario,
    spec: &SweepSpec,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Sweep, SweepError> {
    sweep_shard(scenario, spec, None, progress)
}

/// Runs the runs of the sweep that belong to `shard` (all of them when `None`): those whose
/// [`sweep_key`] of (scenario, parameter, target, value, seed) the shard contains. The
/// points are the rates of the runs this shard made.
///
/// # Errors
///
/// As [`sweep`].
pub fn sweep_shard(
    scenario: &Scenario,
    spec: &SweepSpec,
    shard: Option<Shard>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Sweep, SweepError> {
    let target = spec.knob.resolve_target(scenario, spec.target.as_ref())?;
    let target_name = target_name(scenario, target);
    let label = spec.knob.label();
    let jobs: Vec<(usize, u64)> = (0..spec.values.len())
        .flat_map(|v| (0..spec.seeds).map(move |s| (v, spec.first_seed.wrapping_add(s))))
        .filter(|&(v, seed)| {
            shard.is_none_or(|shard| {
                shard.contains(sweep_key(
                    &scenario.name,
                    label,
                    &target_name,
                    spec.values[v],
                    seed,
                ))
            })
        })
        .collect();
    let scenarios: Vec<Scenario> = spec
        .values
        .iter()
        .map(|&value| spec.scenario_at(scenario, value))
        .collect::<Result<_, SweepError>>()?;

    let results: Vec<Mutex<Option<Result<SweepRun, SimError>>>> =
        jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..spec.threads.max(1) {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(value_index, seed)) = jobs.get(index) else {
                        break;
                    };
                    let outcome = run(&scenarios[value_index], seed, false).map(|r| SweepRun {
                        value: spec.values[value_index],
                        seed,
                        exclusion: r.report.exclusion,
                        verdicts: r.report.verdicts,
                        cause: r.report.cause,
                        leases: r.report.counts.leases,
                        overlaps: r.report.counts.overlaps,
                        stale_applied: r.report.counts.stale_applied,
                        acquire_calls: r.report.acquire_calls,
                        acquire_failures: r.report.acquire_failures,
                        events: r.report.events,
                    });
                    if let Ok(mut slot) = results[index].lock() {
                        *slot = Some(outcome);
                    }
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, jobs.len());
                }
            });
        }
    });
    let mut runs = Vec::with_capacity(jobs.len());
    for slot in results {
        let outcome = slot
            .into_inner()
            .ok()
            .flatten()
            .ok_or(SweepError::Incomplete)?;
        runs.push(outcome?);
    }
    let threshold = spec
        .threshold
        .clone()
        .or_else(|| spec.knob.threshold(scenario, &target));
    Ok(Sweep::from_runs(
        scenario.name.clone(),
        label.to_owned(),
        &spec.values,
        runs,
        threshold,
    ))
}

impl SweepSpec {
    /// The scenario the sweep runs at `value`: the knob set, and the noise added if asked.
    ///
    /// # Errors
    ///
    /// When the knob does not apply to the scenario.
    pub fn scenario_at(&self, scenario: &Scenario, value: f64) -> Result<Scenario, SweepError> {
        let target = self.knob.resolve_target(scenario, self.target.as_ref())?;
        let mut adjusted = self.knob.apply(scenario, &target, value)?;
        if self.noise && self.knob != Knob::Latency {
            add_noise(&mut adjusted);
        }
        Ok(adjusted)
    }

    /// The name of the client or node the knob applies to in `scenario` (empty when it
    /// takes none): part of each run's identity for sharding.
    ///
    /// # Errors
    ///
    /// When the target does not exist or the knob takes none.
    pub fn target_name(&self, scenario: &Scenario) -> Result<String, SweepError> {
        let target = self.knob.resolve_target(scenario, self.target.as_ref())?;
        Ok(target_name(scenario, target))
    }
}

/// The name of what the knob applies to: a client's, a node's, or empty.
pub(crate) fn target_name(scenario: &Scenario, target: Resolved) -> String {
    match target {
        Resolved::None => String::new(),
        Resolved::Client(c) => scenario.clients[c].name.clone(),
        Resolved::Node(n) => scenario.servers[n].name.clone(),
    }
}

impl Sweep {
    /// The sweep made of these runs (ordered by value, then seed), with one point per value.
    pub fn from_runs(
        scenario: String,
        parameter: String,
        values: &[f64],
        runs: Vec<SweepRun>,
        threshold: Option<(f64, String)>,
    ) -> Self {
        let points = values
            .iter()
            .map(|&value| {
                let at: Vec<&SweepRun> = runs.iter().filter(|r| r.value == value).collect();
                let share = |hit: &dyn Fn(&SweepRun) -> bool| {
                    at.iter().filter(|r| hit(r)).count() as f64 / at.len().max(1) as f64
                };
                let rate = |verdict: Verdict, mode: usize| share(&|r| r.verdicts[mode] == verdict);
                let calls: u64 = at.iter().map(|r| r.acquire_calls).sum();
                let failures: u64 = at.iter().map(|r| r.acquire_failures).sum();
                SweepPoint {
                    value,
                    runs: at.len(),
                    exclusion_violated: share(&|r| r.exclusion == Verdict::Violated),
                    violated: [0, 1, 2].map(|m| rate(Verdict::Violated, m)),
                    prevented: [0, 1, 2].map(|m| rate(Verdict::PreventedByFencing, m)),
                    acquired: if calls == 0 {
                        1.0
                    } else {
                        (calls - failures) as f64 / calls as f64
                    },
                }
            })
            .collect();
        Self {
            scenario,
            parameter,
            runs,
            points,
            threshold,
        }
    }
}

/// Light background noise: latency jitter up to 3 ms and 1 % of messages 5 ms late.
fn add_noise(scenario: &mut Scenario) {
    let link = &mut scenario.network.default;
    link.latency = (link.latency.0, link.latency.1.max(3 * MS));
    link.spike_probability = link.spike_probability.max(0.01);
    link.spike = link.spike.max(5 * MS);
}

/// Why a sweep could not run.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// The knob does not apply to this scenario (or the target does not exist).
    #[error("{0}")]
    Knob(String),
    /// A run failed.
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A worker stopped without a result (a bug).
    #[error("a sweep worker stopped without a result")]
    Incomplete,
}

impl Sweep {
    /// The runs as CSV: a header naming every column, then one line per run.
    pub fn csv(&self) -> String {
        let header: [&str; 16] = [
            "parameter",
            "value",
            "seed",
            "exclusion",
            "plain",
            "fenced",
            "strict",
            "cause",
            "leases",
            "overlaps",
            "stale_plain",
            "stale_fenced",
            "stale_strict",
            "acquire_calls",
            "acquire_failures",
            "events",
        ];
        let mut out = header.join(",");
        out.push('\n');
        for r in &self.runs {
            let row: [String; 16] = [
                self.parameter.replace(',', ";"),
                r.value.to_string(),
                r.seed.to_string(),
                r.exclusion.to_string(),
                r.verdicts[0].to_string(),
                r.verdicts[1].to_string(),
                r.verdicts[2].to_string(),
                r.cause.map_or_else(String::new, |c| c.to_string()),
                r.leases.to_string(),
                r.overlaps.to_string(),
                r.stale_applied[0].to_string(),
                r.stale_applied[1].to_string(),
                r.stale_applied[2].to_string(),
                r.acquire_calls.to_string(),
                r.acquire_failures.to_string(),
                r.events.to_string(),
            ];
            out.push_str(&row.join(","));
            out.push('\n');
        }
        out
    }

    /// The rates as an aligned text table.
    pub fn table(&self) -> String {
        let mut out = format!("{}\n", self.parameter);
        out.push_str(&format!(
            "{:>14}  {:>6}  {:>11}  {:>10} {:>10} {:>10}  {:>10} {:>10}  {:>9}\n",
            "value",
            "runs",
            "exclusion V",
            "plain V",
            "fenced V",
            "strict V",
            "fenced P",
            "strict P",
            "acquired"
        ));
        for p in &self.points {
            out.push_str(&format!(
                "{:>14}  {:>6}  {:>11.3}  {:>10.3} {:>10.3} {:>10.3}  {:>10.3} {:>10.3}  {:>9.3}\n",
                p.value,
                p.runs,
                p.exclusion_violated,
                p.violated[0],
                p.violated[1],
                p.violated[2],
                p.prevented[1],
                p.prevented[2],
                p.acquired
            ));
        }
        if let Some((at, why)) = &self.threshold {
            out.push_str(&format!("threshold: {at} ({why})\n"));
        }
        out
    }
}
