//! `merge`: the shards' JSON Lines back into the output of one unsharded run or sweep, or
//! a swarm's members' records (`check --swarm I/N --jsonl`) into what they covered.

use std::path::PathBuf;

use redlock_sim::check;
use redlock_sim::runs::corpus::{self, Entry};
use redlock_sim::runs::merge::{Merged, merge as merge_files};
use redlock_sim::runs::run_output::{RunFormat, render};

use super::sweep_output::{Outputs, write};

/// The arguments of `merge`.
#[derive(clap::Args)]
pub(crate) struct MergeArgs {
    /// The shards' --jsonl files (all runs of one `run` or one `sweep` command), or the
    /// members' --jsonl files of one `check --swarm` (every member of one swarm).
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
    /// Swarms: write the violation found (the shortest, if several members found one) as
    /// the check file plus its path, which `run` and `explain` replay.
    #[arg(long)]
    counterexample: Option<PathBuf>,
}

/// Prints the merged output; `Ok(false)` when a run's verdicts differ from its expectation,
/// as `run` exits.
pub(crate) fn merge(args: &MergeArgs) -> Result<bool, String> {
    let merged = merge_files(&args.files).map_err(|e| e.to_string())?;
    if args.counterexample.is_some() && !matches!(merged, Merged::Swarm(_)) {
        return Err(
            "--counterexample is for the members of `check --swarm`; these files hold runs".into(),
        );
    }
    match merged {
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
        Merged::Swarm(swarm) => {
            if args.wide || args.corpus.is_some() || args.csv.is_some() || args.svg.is_some() {
                return Err(
                    "--wide, --corpus, --csv and --svg are for runs and sweeps; these \
                            files hold the members of `check --swarm`"
                        .into(),
                );
            }
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&swarm.json()).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", swarm.text());
            }
            if let Some(path) = &args.counterexample
                && let Some((member, violation)) = swarm.violation()
            {
                let file =
                    check::counterexample_file(&member.file, &violation.property, &violation.path);
                std::fs::write(path, file).map_err(|e| format!("{}: {e}", path.display()))?;
                if !args.json {
                    println!("  counterexample written to {}", path.display());
                }
            }
            // As `check`: 1 with a violation, or with a sometimes property no member reached.
            Ok(swarm.passed())
        }
    }
}
