//! `merge`: the JSON Lines of a sharded run or sweep put back together, in the order one
//! unsharded run makes them, after checking that they are all there exactly once and come
//! from one build and one command; or the members of a swarm of `check` joined
//! (`swarm.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::runs::jsonl::{self, Line, RunLine, SweepLine};
use crate::runs::swarm::{self, Swarm, SwarmLine};
use crate::runs::sweep::Sweep;

/// The merged runs.
#[derive(Debug)]
pub enum Merged {
    /// The runs of `run`, in the unsharded order, and how many scenario files it had.
    Runs {
        /// One per run, in order.
        lines: Vec<RunLine>,
        /// Scenario files in the whole run.
        scenarios: u64,
    },
    /// The whole sweep.
    Sweep(Sweep),
    /// The members of a swarm of `check`.
    Swarm(Swarm),
}

/// Why the files do not merge.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A file or line could not be read.
    #[error(transparent)]
    Read(#[from] jsonl::JsonlError),
    /// The lines do not make one whole run.
    #[error("{0}")]
    Mismatch(String),
}

/// Where a line came from, for messages: `file:line`.
fn place(path: &Path, line: usize) -> String {
    format!("{}:{line}", path.display())
}

/// Reads and merges `files`.
///
/// # Errors
///
/// When a file or line cannot be read; when lines come from different builds, commands or
/// kinds (run and sweep); when a run appears twice; and when runs are missing (a shard's
/// file left out).
pub fn merge(files: &[PathBuf]) -> Result<Merged, MergeError> {
    let mut runs: Vec<(String, RunLine)> = Vec::new();
    let mut sweeps: Vec<(String, SweepLine)> = Vec::new();
    let mut members: Vec<(String, SwarmLine)> = Vec::new();
    for path in files {
        for (number, line) in jsonl::read(path)? {
            let at = place(path, number);
            match line {
                Line::Run(run) => runs.push((at, run)),
                Line::Sweep(sweep) => sweeps.push((at, sweep)),
                Line::Swarm(member) => members.push((at, member)),
            }
        }
    }
    // The first line of each kind, to name two kinds that were given together.
    let kinds: Vec<(&str, &str)> = [
        runs.first().map(|(at, _)| (at.as_str(), "a run of `run`")),
        sweeps
            .first()
            .map(|(at, _)| (at.as_str(), "a run of `sweep`")),
        members
            .first()
            .map(|(at, _)| (at.as_str(), "a member of `check --swarm`")),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let [(a_at, a), (b_at, b), ..] = kinds[..] {
        return Err(MergeError::Mismatch(format!(
            "{a_at} is {a} but {b_at} {b}: merge them apart"
        )));
    }
    if !runs.is_empty() {
        merge_runs(runs)
    } else if !sweeps.is_empty() {
        merge_sweep(sweeps)
    } else if !members.is_empty() {
        swarm::merge(members).map(Merged::Swarm)
    } else {
        Err(MergeError::Mismatch(format!("no runs in {}", list(files))))
    }
}

fn list(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Fails when `what` differs between the first line and `line`.
fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    first: (&str, &T),
    line: (&str, &T),
) -> Result<(), MergeError> {
    if first.1 == line.1 {
        return Ok(());
    }
    Err(MergeError::Mismatch(format!(
        "{} has {what} {:?} but {} has {:?}: merge only the shards of one command and one build",
        first.0, first.1, line.0, line.1
    )))
}

/// The shards named by the lines, for the message about missing runs.
fn shards_seen<'a>(shards: impl Iterator<Item = &'a Option<String>>) -> String {
    let mut seen: Vec<&str> = shards
        .map(|s| s.as_deref().unwrap_or("unsharded"))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    seen.join(", ")
}

fn merge_runs(runs: Vec<(String, RunLine)>) -> Result<Merged, MergeError> {
    let (first_at, first) = &runs[0];
    let mut by_index: BTreeMap<u64, (String, RunLine)> = BTreeMap::new();
    for (at, line) in &runs {
        same("commit", (first_at, &first.commit), (at, &line.commit))?;
        same("runs", (first_at, &first.runs), (at, &line.runs))?;
        same(
            "scenarios",
            (first_at, &first.scenarios),
            (at, &line.scenarios),
        )?;
        same("tokens", (first_at, &first.tokens), (at, &line.tokens))?;
        if line.index >= line.runs {
            return Err(MergeError::Mismatch(format!(
                "{at}: run {} of a run of {} runs",
                line.index, line.runs
            )));
        }
        if let Some((earlier, _)) = by_index.get(&line.index) {
            return Err(MergeError::Mismatch(format!(
                "{earlier} and {at} are the same run ({} seed {}): was a shard's file given twice?",
                line.report.scenario, line.report.seed
            )));
        }
        by_index.insert(line.index, (at.clone(), line.clone()));
    }
    let total = first.runs;
    let scenarios = first.scenarios;
    if by_index.len() as u64 != total {
        let missing = (0..total).find(|i| !by_index.contains_key(i)).unwrap_or(0);
        return Err(MergeError::Mismatch(format!(
            "{} of {total} runs are missing (the first is run {missing}); the files hold \
             shards {}: is a shard's file left out?",
            total - by_index.len() as u64,
            shards_seen(runs.iter().map(|(_, l)| &l.shard))
        )));
    }
    Ok(Merged::Runs {
        lines: by_index.into_values().map(|(_, line)| line).collect(),
        scenarios,
    })
}

fn merge_sweep(sweeps: Vec<(String, SweepLine)>) -> Result<Merged, MergeError> {
    let (first_at, first) = &sweeps[0];
    let mut values: Vec<Option<f64>> = vec![None; first.values];
    let mut by_place: BTreeMap<(usize, u64), (String, &SweepLine)> = BTreeMap::new();
    for (at, line) in &sweeps {
        same("commit", (first_at, &first.commit), (at, &line.commit))?;
        same(
            "scenario",
            (first_at, &first.scenario),
            (at, &line.scenario),
        )?;
        same(
            "parameter",
            (first_at, &first.parameter),
            (at, &line.parameter),
        )?;
        same("target", (first_at, &first.target), (at, &line.target))?;
        same(
            "threshold",
            (first_at, &first.threshold),
            (at, &line.threshold),
        )?;
        same("values", (first_at, &first.values), (at, &line.values))?;
        same("seeds", (first_at, &first.seeds), (at, &line.seeds))?;
        same(
            "first_seed",
            (first_at, &first.first_seed),
            (at, &line.first_seed),
        )?;
        same("noise", (first_at, &first.noise), (at, &line.noise))?;
        let offset = line.run.seed.wrapping_sub(line.first_seed);
        let Some(slot) = values
            .get_mut(line.value_index)
            .filter(|_| offset < line.seeds)
        else {
            return Err(MergeError::Mismatch(format!(
                "{at}: value {} seed {} is outside a sweep of {} values and seeds {}..{}",
                line.value_index,
                line.run.seed,
                line.values,
                line.first_seed,
                line.first_seed.wrapping_add(line.seeds)
            )));
        };
        if slot.is_some_and(|v| v.to_bits() != line.run.value.to_bits()) {
            return Err(MergeError::Mismatch(format!(
                "{at}: value {} is {} here but {slot:?} elsewhere",
                line.value_index, line.run.value
            )));
        }
        *slot = Some(line.run.value);
        if let Some((earlier, _)) = by_place.get(&(line.value_index, offset)) {
            return Err(MergeError::Mismatch(format!(
                "{earlier} and {at} are the same run (value {} seed {}): was a shard's file \
                 given twice?",
                line.run.value, line.run.seed
            )));
        }
        by_place.insert((line.value_index, offset), (at.clone(), line));
    }
    let total = first.values as u64 * first.seeds;
    if by_place.len() as u64 != total {
        return Err(MergeError::Mismatch(format!(
            "{} of {total} runs are missing; the files hold shards {}: is a shard's file left out?",
            total - by_place.len() as u64,
            shards_seen(sweeps.iter().map(|(_, l)| &l.shard))
        )));
    }
    // Every place is filled, so every value was seen.
    let values: Vec<f64> = values.into_iter().map(Option::unwrap_or_default).collect();
    let runs = by_place
        .into_values()
        .map(|(_, line)| line.run.clone())
        .collect();
    Ok(Merged::Sweep(Sweep::from_runs(
        first.scenario.clone(),
        first.parameter.clone(),
        &values,
        runs,
        first.threshold.clone(),
    )))
}
