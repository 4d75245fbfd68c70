//! What `sweep` and `merge` write for a sweep: the table (or JSON), the CSV and the chart,
//! and the shard's JSON Lines.

use std::path::Path;
use std::time::Duration;

use redlock_sim::runs::jsonl::{self, COMMIT, Line, SweepLine};
use redlock_sim::runs::shard::Shard;
use redlock_sim::runs::sweep::{Sweep, SweepSpec};
use redlock_sim::scenario::Scenario;

/// Where a sweep's results go besides the table.
pub(crate) struct Outputs<'a> {
    /// Print the points as JSON instead of the table.
    pub(crate) json: bool,
    /// The CSV of every run.
    pub(crate) csv: Option<&'a Path>,
    /// The chart.
    pub(crate) svg: Option<&'a Path>,
}

/// Prints the sweep and writes its files. `live` is (threads, time taken) for a sweep just
/// run; a merged sweep has none, and prints the same up to that clause.
pub(crate) fn write(
    result: &Sweep,
    outputs: &Outputs<'_>,
    live: Option<(usize, Duration)>,
) -> Result<(), String> {
    if outputs.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result.points).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", result.table());
        let events: u64 = result.runs.iter().map(|r| r.events).sum();
        let runs = result.runs.len();
        match live {
            Some((threads, took)) => {
                println!("{runs} runs, {events} events; on {threads} thread(s) in {took:.2?}");
            }
            None => println!("{runs} runs, {events} events"),
        }
    }
    if let Some(path) = outputs.csv {
        std::fs::write(path, result.csv()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if let Some(path) = outputs.svg {
        let chart = redlock_sim::explain::sweep_chart::svg(result)?;
        std::fs::write(path, chart).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Writes one JSON line per run of the sweep (this shard's runs when sharded).
pub(crate) fn write_jsonl(
    path: &Path,
    scenario: &Scenario,
    spec: &SweepSpec,
    result: &Sweep,
    shard: Option<Shard>,
) -> Result<(), String> {
    // A run is found by its value's position: the same value twice would make two runs one.
    for (i, value) in spec.values.iter().enumerate() {
        if spec.values[..i].contains(value) {
            return Err(format!(
                "--jsonl: the value {value} is given twice; give each value once"
            ));
        }
    }
    let target = spec.target_name(scenario).map_err(|e| e.to_string())?;
    let lines: Vec<Line> = result
        .runs
        .iter()
        .map(|run| {
            Line::Sweep(SweepLine {
                commit: COMMIT.to_owned(),
                shard: shard.map(|s| s.to_string()),
                scenario: result.scenario.clone(),
                parameter: result.parameter.clone(),
                target: target.clone(),
                threshold: result.threshold.clone(),
                values: spec.values.len(),
                value_index: spec
                    .values
                    .iter()
                    .position(|v| v.to_bits() == run.value.to_bits())
                    .unwrap_or_default(),
                seeds: spec.seeds,
                first_seed: spec.first_seed,
                noise: spec.noise,
                run: run.clone(),
            })
        })
        .collect();
    jsonl::write(&redlock_sim::runs::shard::fill_path(path, shard), &lines)
        .map_err(|e| e.to_string())
}

/// Writes the sweep's pages into `dir`: index.html and runs/; says so unless the output is
/// JSON.
pub(crate) fn write_pages(
    dir: &Path,
    scenario: &Scenario,
    spec: &SweepSpec,
    result: &Sweep,
    json: bool,
) -> Result<(), String> {
    let pages = redlock_sim::explain::sweep_pages::pages(scenario, spec, result)
        .map_err(|e| e.to_string())?;
    let io = |path: &Path, e: std::io::Error| format!("{}: {e}", path.display());
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).map_err(|e| io(&runs, e))?;
    let index = dir.join("index.html");
    std::fs::write(&index, &pages.index).map_err(|e| io(&index, e))?;
    for (file, page) in &pages.runs {
        let path = dir.join(file);
        std::fs::write(&path, page).map_err(|e| io(&path, e))?;
    }
    if !json {
        println!(
            "pages written to {} ({} run pages)",
            index.display(),
            pages.runs.len()
        );
    }
    Ok(())
}
