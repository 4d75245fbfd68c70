//! What `run` prints, from its runs' lines: the same text whether the runs were just made
//! or merged from shards' JSON Lines.

use std::fmt::Write;
use std::time::Duration;

use crate::Report;
use crate::judge::report::{COMPACT_LEGEND, compact_table, table};
use crate::runs::jsonl::RunLine;
use crate::runs::seed_summary::{has_several_seeds, summary_table};

/// How `run` prints its reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunFormat {
    /// The table that fits 100 columns, with its legend: one row per scenario when some
    /// scenario ran several seeds (`--seeds N`), one row per run otherwise.
    Table,
    /// The table that fits 100 columns, one row per run (`--each-seed`).
    EachSeed,
    /// Every column, full names.
    Wide,
    /// The reports as a JSON array.
    Json,
}

/// `1 run`, `65 runs`: the summary line stays within 100 columns up to millions of runs.
fn counted(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The output of `run` for `lines` (in run order) from `scenarios` scenario files. With
/// `wall`, the summary ends with the time the runs took; merged runs have none, so their
/// output is the unsharded run's up to that clause.
///
/// # Errors
///
/// When the reports cannot be written as JSON.
pub fn render(
    lines: &[RunLine],
    scenarios: u64,
    format: RunFormat,
    wall: Option<Duration>,
) -> Result<String, serde_json::Error> {
    let reports: Vec<Report> = lines.iter().map(|l| l.report.clone()).collect();
    if format == RunFormat::Json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(&reports)?));
    }
    let mut out = String::new();
    if format == RunFormat::Wide {
        out.push_str(&table(&reports));
    } else if format == RunFormat::Table && has_several_seeds(&reports) {
        out.push_str(&summary_table(&reports));
        out.push('\n');
        out.push_str(COMPACT_LEGEND);
        out.push_str("--each-seed: one row per run\n");
    } else {
        out.push_str(&compact_table(&reports));
        out.push('\n');
        out.push_str(COMPACT_LEGEND);
    }
    let events: u64 = reports.iter().map(|r| r.events).sum();
    let _ = write!(
        out,
        "\n{} of {}: {} matched, {} mismatched{}; {events} events",
        counted(reports.len() as u64, "run"),
        counted(scenarios, "scenario"),
        reports.iter().filter(|r| r.matches).count(),
        reports.iter().filter(|r| r.mismatched()).count(),
        match reports.iter().filter(|r| r.unchecked).count() {
            0 => String::new(),
            n => format!(", {n} unchecked"),
        },
    );
    if let Some(wall) = wall {
        let _ = write!(
            out,
            " in {wall:.2?} ({:.0} events/s)",
            events as f64 / wall.as_secs_f64().max(1e-9)
        );
    }
    out.push('\n');
    for line in lines {
        if let Some(mismatch) = &line.mismatch {
            let report = &line.report;
            let _ = writeln!(
                out,
                "MISMATCH {} (seed {}): {mismatch}\n  replay: redlock-sim explain {} --seed {}",
                report.scenario, report.seed, report.source, report.seed
            );
        }
    }
    Ok(out)
}
