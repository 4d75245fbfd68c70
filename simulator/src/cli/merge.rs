//! `merge`: the shards' JSON Lines back into the output of one unsharded run or sweep.

use std::path::PathBuf;

use redlock_sim::runs::corpus::{self, Entry};
use redlock_sim::runs::merge::{Merged, merge as merge_files};
use redlock_sim::runs::run_output::{RunFormat, render};

use super::sweep_output::{Outputs, write};

/// The arguments of `merge`.
#[derive(clap::Args)]
pub(crate) struct MergeArgs {
    /// The shards' --jsonl files (all runs of one `run` or one `sweep` command).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Runs: every column, one line per run (as `run --wide`).
    #[arg(long, conflicts_with = "json")]
    wide: bool,
    /// Sweeps: write every run as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Sweeps: write the chart (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Runs: add the failing runs to this corpus file (see `run --corpus`).
    #[arg(long)]
    corpus: Option<PathBuf>,
}

/// Prints the merged output; `Ok(false)` when a run's verdicts differ from its expectation,
/// as `run` exits.
pub(crate) fn merge(args: &MergeArgs) -> Result<bool, String> {
    match merge_files(&args.files).map_err(|e| e.to_string())? {
        Merged::Runs { lines, scenarios } => {
            if args.csv.is_some() || args.svg.is_some() {
                return Err(
                    "--csv and --svg are for sweeps; these files hold runs of `run`".into(),
                );
            }
            let format = match (args.json, args.wide) {
                (true, _) => RunFormat::Json,
                (false, true) => RunFormat::Wide,
                (false, false) => RunFormat::Table,
            };
            print!(
                "{}",
                render(&lines, scenarios, format, None).map_err(|e| e.to_string())?
            );
            if let Some(path) = &args.corpus {
                let found: Vec<Entry> = lines
                    .iter()
                    .filter_map(|l| {
                        let mismatch = l.mismatch.as_deref()?;
                        Some(Entry::new(&l.report.scenario, l.report.seed, mismatch))
                    })
                    .collect();
                corpus::add(path, &found).map_err(|e| e.to_string())?;
            }
            Ok(!lines.iter().any(|l| l.report.mismatched()))
        }
        Merged::Sweep(sweep) => {
            if args.wide || args.corpus.is_some() {
                return Err(
                    "--wide and --corpus are for runs of `run`; these files hold a sweep".into(),
                );
            }
            let outputs = Outputs {
                json: args.json,
                csv: args.csv.as_deref(),
                svg: args.svg.as_deref(),
            };
            write(&sweep, &outputs, None)?;
            Ok(true)
        }
    }
}
