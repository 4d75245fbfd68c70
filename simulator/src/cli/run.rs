//! `run`: the scenarios' seeds (this shard's, when sharded), after the corpus's failing
//! seeds; the table, the JSON Lines and the corpus's new entries.

use std::path::{Path, PathBuf};

use redlock_sim::corpus::{self, Entry};
use redlock_sim::jsonl::{self, COMMIT, Line, RunLine};
use redlock_sim::run_output::{RunFormat, render};
use redlock_sim::shard::{Shard, fill_path, run_key};
use redlock_sim::{Report, Scenario};

use crate::{load, parse_tokens, progress_bar, scenario_files};

/// The arguments of `run`.
pub(crate) struct RunArgs<'a> {
    pub(crate) paths: &'a [PathBuf],
    pub(crate) seed: Option<u64>,
    pub(crate) seeds: u64,
    pub(crate) format: RunFormat,
    pub(crate) tokens: Option<&'a str>,
    pub(crate) shard: Option<Shard>,
    pub(crate) jsonl: Option<&'a Path>,
    pub(crate) corpus: Option<&'a Path>,
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

pub(crate) fn run(args: &RunArgs<'_>) -> Result<bool, String> {
    // Check files among the paths: their counterexamples are replayed, not simulated.
    let (checks, files) = super::check::split(scenario_files(args.paths)?);
    let json = args.format == RunFormat::Json;
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
    let tokens = args.tokens.map(parse_tokens).transpose()?;
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
    let in_shard = |name: &str, seed: u64| {
        args.shard
            .is_none_or(|shard| shard.contains(run_key(name, seed)))
    };
    let per_scenario = args.seeds.max(1);
    let total = files.len() as u64 * per_scenario;
    let started = std::time::Instant::now();

    let mut corpus_failures = 0;
    if let Some(path) = args.corpus {
        let entries = corpus::read(path).map_err(|e| e.to_string())?;
        let jobs: Vec<Job> = entries
            .iter()
            .filter_map(|entry| {
                let scenario = scenarios.iter().position(|s| s.name == entry.scenario)?;
                in_shard(&entry.scenario, entry.seed).then_some(Job {
                    scenario,
                    seed: entry.seed,
                    index: 0,
                })
            })
            .collect();
        let reports = run_jobs(&scenarios, &files, &jobs, tokens.is_none(), "corpus")?;
        let failing: Vec<&Report> = reports.iter().filter(|r| r.mismatched()).collect();
        corpus_failures = failing.len();
        if args.format != RunFormat::Json {
            println!(
                "corpus {}: replayed {} of its {} failing runs first (the others are of other \
                 scenarios or shards): {} still fail",
                path.display(),
                jobs.len(),
                entries.len(),
                failing.len()
            );
            for report in failing {
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
    }

    let mut jobs = Vec::new();
    for (s, scenario) in scenarios.iter().enumerate() {
        let first = args.seed.unwrap_or(scenario.seed);
        for offset in 0..per_scenario {
            let seed = first.wrapping_add(offset);
            if in_shard(&scenario.name, seed) {
                jobs.push(Job {
                    scenario: s,
                    seed,
                    index: s as u64 * per_scenario + offset,
                });
            }
        }
    }
    let reports = run_jobs(&scenarios, &files, &jobs, tokens.is_none(), "run")?;
    let lines: Vec<RunLine> = jobs
        .iter()
        .zip(reports)
        .map(|(job, report)| RunLine {
            commit: COMMIT.to_owned(),
            shard: args.shard.map(|s| s.to_string()),
            index: job.index,
            runs: total,
            scenarios: files.len() as u64,
            tokens: args.tokens.map(str::to_owned),
            mismatch: report.mismatch(),
            report,
        })
        .collect();
    let wall = started.elapsed();
    if let Some(path) = args.jsonl {
        let out: Vec<Line> = lines.iter().cloned().map(Line::Run).collect();
        jsonl::write(&fill_path(path, args.shard), &out).map_err(|e| e.to_string())?;
    }
    let text =
        render(&lines, files.len() as u64, args.format, Some(wall)).map_err(|e| e.to_string())?;
    print!("{text}");
    let all_match = !lines.iter().any(|l| l.report.mismatched());
    if let Some(shard) = args.shard
        && args.format != RunFormat::Json
    {
        println!(
            "shard {shard}: {} of {total} runs; `redlock-sim merge` joins the shards' --jsonl files",
            lines.len()
        );
    }
    if let Some(path) = args.corpus {
        let found: Vec<Entry> = lines
            .iter()
            .filter_map(|l| {
                let mismatch = l.mismatch.as_deref()?;
                Some(Entry::new(&l.report.scenario, l.report.seed, mismatch))
            })
            .collect();
        let added = corpus::add(path, &found).map_err(|e| e.to_string())?;
        if args.format != RunFormat::Json && added > 0 {
            let runs = if added == 1 { "run" } else { "runs" };
            println!("corpus {}: added {added} failing {runs}", path.display());
        }
    }
    Ok(all_match && corpus_failures == 0 && checks_match)
}
