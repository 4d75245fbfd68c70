//! `run`: the scenarios' seeds (this shard's, when sharded), after the corpus's failing
//! seeds; the table, the JSON Lines and the corpus's new entries.

use std::path::{Path, PathBuf};

use redlock_sim::runs::corpus::{self, Entry};
use redlock_sim::runs::jsonl::{self, COMMIT, Line, RunLine};
use redlock_sim::runs::run_output::{RunFormat, render};
use redlock_sim::runs::shard::{Shard, fill_path, run_key};
use redlock_sim::{Report, Scenario};

use super::inputs::{load, parse_tokens, scenario_files};
use super::progress::progress_bar;
use super::shard::ShardArgs;

// The variant's comment in main.rs is the command's help.
#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// Scenario files or directories; `catalogue:NAME` names a scenario of the catalogue
    /// embedded in this binary (`redlock-sim scenarios list`).
    #[arg(required_unless_present = "catalogue")]
    paths: Vec<PathBuf>,
    /// Run the whole catalogue embedded in this binary (after PATHS, if any).
    #[arg(long)]
    catalogue: bool,
    /// The first seed (default: each scenario's own).
    #[arg(long)]
    seed: Option<u64>,
    /// How many consecutive seeds to run per scenario.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Print every column and the full scenario names, one line per run (about 270
    /// columns for the catalogue) instead of the table that fits 100 columns.
    #[arg(long, conflicts_with = "json")]
    wide: bool,
    /// With --seeds: one row per run in the table that fits 100 columns, instead of one
    /// row per scenario with how many seeds matched and the seeds that differ.
    #[arg(long, conflicts_with_all = ["json", "wide"])]
    each_seed: bool,
    /// Run with this fencing-token source instead of the file's: linearizable,
    /// redis-counter or quorum-minted. The expectations then no longer apply: the result
    /// column shows "-" and the exit code ignores them.
    #[arg(long)]
    tokens: Option<String>,
    #[command(flatten)]
    shard: ShardArgs,
    /// Replay the failing seeds kept in this JSON Lines file first, then add the runs
    /// that fail now (created when missing).
    #[arg(long)]
    corpus: Option<PathBuf>,
}

impl RunArgs {
    /// The output format the flags ask for.
    fn format(&self) -> RunFormat {
        match (self.json, self.wide, self.each_seed) {
            (true, _, _) => RunFormat::Json,
            (false, true, _) => RunFormat::Wide,
            (false, false, true) => RunFormat::EachSeed,
            (false, false, false) => RunFormat::Table,
        }
    }

    /// The paths given, then the whole catalogue when `--catalogue` asks for it.
    fn paths(&self) -> Vec<PathBuf> {
        let mut paths = self.paths.clone();
        if self.catalogue {
            paths.extend(
                redlock_sim::scenario::catalogue::files()
                    .iter()
                    .map(|(file, _)| {
                        PathBuf::from(format!(
                            "{}{file}",
                            redlock_sim::scenario::catalogue::PREFIX
                        ))
                    }),
            );
        }
        paths
    }
}

/// What `run` does, read from its arguments.
struct Plan<'a> {
    seed: Option<u64>,
    seeds: u64,
    format: RunFormat,
    tokens: Option<&'a str>,
    shard: Option<Shard>,
    jsonl: Option<&'a Path>,
    corpus: Option<&'a Path>,
}

/// One run to make: the scenario (by index), the seed, and its place in the whole run.
struct Job {
    scenario: usize,
    seed: u64,
    index: u64,
}

/// Runs the jobs; a run that cannot finish is an error naming the file and seed.
fn run_jobs(
    scenarios: &[Scenario],
    files: &[PathBuf],
    jobs: &[Job],
    checked: bool,
    what: &str,
) -> Result<Vec<Report>, String> {
    let bar = progress_bar(jobs.len() as u64, what);
    let mut reports = Vec::with_capacity(jobs.len());
    for job in jobs {
        let run = redlock_sim::run(&scenarios[job.scenario], job.seed, false).map_err(|e| {
            bar.finish_and_clear();
            format!("{}: seed {}: {e}", files[job.scenario].display(), job.seed)
        })?;
        let mut report = run.report;
        if !checked {
            // The file's expectations were written for its own token source.
            report.uncheck();
        }
        reports.push(report);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(reports)
}

/// Runs the scenarios `args` names (replaying the check files among them): `Ok(false)` when
/// a verdict differs from its expectation or a corpus run still fails.
pub(crate) fn run(args: &RunArgs) -> Result<bool, String> {
    let plan = Plan {
        seed: args.seed,
        seeds: args.seeds,
        format: args.format(),
        tokens: args.tokens.as_deref(),
        shard: args.shard.shard,
        jsonl: args.shard.jsonl.as_deref(),
        corpus: args.corpus.as_deref(),
    };
    // Check files among the paths: their counterexamples are replayed, not simulated.
    let (checks, files) = super::check::split(scenario_files(&args.paths())?);
    let json = plan.format == RunFormat::Json;
    if json && !checks.is_empty() && !files.is_empty() {
        return Err(
            "--json prints one JSON document a call: give check files and scenarios to \
             separate `redlock-sim run --json` calls"
                .to_owned(),
        );
    }
    let checks_match = super::check::replay_all(&checks, json)?;
    if files.is_empty() {
        return Ok(checks_match);
    }
    let tokens = plan.tokens.map(parse_tokens).transpose()?;
    let mut scenarios = files
        .iter()
        .map(|file| load(file))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(tokens) = tokens {
        scenarios = scenarios
            .into_iter()
            .map(|s| s.with_tokens(tokens))
            .collect();
    }
    let runs = Runs {
        plan: &plan,
        scenarios: &scenarios,
        files: &files,
        checked: tokens.is_none(),
        started: std::time::Instant::now(),
    };
    let corpus_failures = match plan.corpus {
        Some(path) => runs.replay_corpus(path)?,
        None => 0,
    };
    let all_match = runs.run_seeds()?;
    Ok(all_match && corpus_failures == 0 && checks_match)
}

/// The scenarios to run, with the plan.
struct Runs<'a> {
    plan: &'a Plan<'a>,
    scenarios: &'a [Scenario],
    files: &'a [PathBuf],
    /// Whether the files' expectations apply (not with another token source).
    checked: bool,
    /// When the runs began, the corpus's replay included.
    started: std::time::Instant,
}

impl Runs<'_> {
    /// Whether this shard makes the run of `name` with `seed`.
    fn in_shard(&self, name: &str, seed: u64) -> bool {
        self.plan
            .shard
            .is_none_or(|shard| shard.contains(run_key(name, seed)))
    }

    /// Replays the corpus's failing runs of these scenarios and this shard first; returns
    /// how many still fail.
    fn replay_corpus(&self, path: &Path) -> Result<usize, String> {
        let entries = corpus::read(path).map_err(|e| e.to_string())?;
        let jobs: Vec<Job> = entries
            .iter()
            .filter_map(|entry| {
                let scenario = self
                    .scenarios
                    .iter()
                    .position(|s| s.name == entry.scenario)?;
                self.in_shard(&entry.scenario, entry.seed).then_some(Job {
                    scenario,
                    seed: entry.seed,
                    index: 0,
                })
            })
            .collect();
        let reports = run_jobs(self.scenarios, self.files, &jobs, self.checked, "corpus")?;
        let failing: Vec<&Report> = reports.iter().filter(|r| r.mismatched()).collect();
        if self.plan.format != RunFormat::Json {
            println!(
                "corpus {}: replayed {} of its {} failing runs first (the others are of other \
                 scenarios or shards): {} still fail",
                path.display(),
                jobs.len(),
                entries.len(),
                failing.len()
            );
            for report in &failing {
                println!(
                    "MISMATCH {} (seed {}): {}\n  replay: redlock-sim explain {} --seed {}",
                    report.scenario,
                    report.seed,
                    report.mismatch().unwrap_or_default(),
                    report.source,
                    report.seed
                );
            }
            println!();
        }
        Ok(failing.len())
    }

    /// Runs every scenario's seeds (this shard's), prints the table, writes the JSON Lines
    /// and adds the runs that fail to the corpus; returns whether every verdict matched.
    fn run_seeds(&self) -> Result<bool, String> {
        let plan = self.plan;
        let per_scenario = plan.seeds.max(1);
        let total = self.files.len() as u64 * per_scenario;
        let mut jobs = Vec::new();
        for (s, scenario) in self.scenarios.iter().enumerate() {
            let first = plan.seed.unwrap_or(scenario.seed);
            for offset in 0..per_scenario {
                let seed = first.wrapping_add(offset);
                if self.in_shard(&scenario.name, seed) {
                    jobs.push(Job {
                        scenario: s,
                        seed,
                        index: s as u64 * per_scenario + offset,
                    });
                }
            }
        }
        let reports = run_jobs(self.scenarios, self.files, &jobs, self.checked, "run")?;
        let lines: Vec<RunLine> = jobs
            .iter()
            .zip(reports)
            .map(|(job, report)| RunLine {
                commit: COMMIT.to_owned(),
                shard: plan.shard.map(|s| s.to_string()),
                index: job.index,
                runs: total,
                scenarios: self.files.len() as u64,
                tokens: plan.tokens.map(str::to_owned),
                mismatch: report.mismatch(),
                report,
            })
            .collect();
        let wall = self.started.elapsed();
        if let Some(path) = plan.jsonl {
            let out: Vec<Line> = lines.iter().cloned().map(Line::Run).collect();
            jsonl::write(&fill_path(path, plan.shard), &out).map_err(|e| e.to_string())?;
        }
        let text = render(&lines, self.files.len() as u64, plan.format, Some(wall))
            .map_err(|e| e.to_string())?;
        print!("{text}");
        if let Some(shard) = plan.shard
            && plan.format != RunFormat::Json
        {
            println!(
                "shard {shard}: {} of {total} runs; `redlock-sim merge` joins the shards' --jsonl files",
                lines.len()
            );
        }
        if let Some(path) = plan.corpus {
            add_to_corpus(path, &lines, plan.format)?;
        }
        Ok(!lines.iter().any(|l| l.report.mismatched()))
    }
}

/// Adds the runs that failed to the corpus, and says how many were new.
fn add_to_corpus(path: &Path, lines: &[RunLine], format: RunFormat) -> Result<(), String> {
    let found: Vec<Entry> = lines
        .iter()
        .filter_map(|l| {
            let mismatch = l.mismatch.as_deref()?;
            Some(Entry::new(&l.report.scenario, l.report.seed, mismatch))
        })
        .collect();
    let added = corpus::add(path, &found).map_err(|e| e.to_string())?;
    if format != RunFormat::Json && added > 0 {
        let runs = if added == 1 { "run" } else { "runs" };
        println!("corpus {}: added {added} failing {runs}", path.display());
    }
    Ok(())
}
