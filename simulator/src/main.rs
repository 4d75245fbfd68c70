//! `redlock-sim`: run scenario files and check their expected verdicts; explain a
//! counterexample as a timeline and a space-time diagram.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use redlock_sim::Scenario;
use redlock_sim::run_output::RunFormat;

mod cli;

/// The width help is wrapped to: `COLUMNS` when set, else the terminal's, else 80 (a pipe).
fn help_width() -> usize {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok());
    let terminal =
        || terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0));
    columns.or_else(terminal).filter(|&w| w > 0).unwrap_or(80)
}

#[derive(Parser)]
#[command(
    name = "redlock-sim",
    version,
    about = "Deterministic Redlock simulator: run scenarios, check verdicts, explain counterexamples"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run scenario files (or every .toml in the given directories) and compare each verdict
    /// with the file's expectation. Exits 1 when any differs.
    Run {
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
    },
    /// Vary one parameter of a scenario over a range, run many seeds per value, and chart
    /// the rate of each verdict against it.
    Sweep {
        /// The scenario file.
        file: PathBuf,
        /// The parameter: client-pause, client-clock-slow, node-clock-fast, restart-delay,
        /// latency, nodes, persistence, resource-delay.
        #[arg(long)]
        param: String,
        /// The client or node it applies to (default: the first client, or the first node
        /// the scenario configures).
        #[arg(long)]
        target: Option<String>,
        /// The first value.
        #[arg(long, allow_negative_numbers = true)]
        from: Option<f64>,
        /// The last value.
        #[arg(long, allow_negative_numbers = true)]
        to: Option<f64>,
        /// How many evenly spaced values from --from to --to.
        #[arg(long, default_value_t = 11)]
        steps: usize,
        /// Explicit values instead of --from/--to/--steps (comma separated).
        #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
        values: Vec<f64>,
        /// Seeds per value.
        #[arg(long, default_value_t = 20)]
        seeds: u64,
        /// The first seed.
        #[arg(long, default_value_t = 1)]
        first_seed: u64,
        /// Run without background noise.
        #[arg(long)]
        no_noise: bool,
        /// Worker threads (default: every core).
        #[arg(long)]
        threads: Option<usize>,
        /// Write every run as CSV here.
        #[arg(long)]
        csv: Option<PathBuf>,
        /// Write the chart (SVG) here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Write pages into this directory: index.html with the chart, each point linking
        /// to the page of one run at that value (under runs/).
        #[arg(long)]
        html: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Draw the boundary at this value instead of the parameter's own analysis.
        #[arg(long, allow_negative_numbers = true)]
        threshold: Option<f64>,
        /// The label of --threshold.
        #[arg(long, default_value = "expected boundary")]
        threshold_label: String,
        #[command(flatten)]
        shard: ShardArgs,
    },
    /// The scenario catalogue embedded in this binary: list it, show one file, or write
    /// them all into a directory.
    Scenarios {
        #[command(subcommand)]
        command: cli::scenarios::ScenariosCommand,
    },
    /// Merge the --jsonl files of a sharded run or sweep: prints the table (and writes the
    /// CSV and chart) one unsharded run prints, after checking every run is there once.
    Merge(cli::merge::MergeArgs),
    /// Explore every interleaving of the core's machines in a bounded model (a check file:
    /// nodes, clients, ticks of true time, clock bounds, a fault budget) and judge every
    /// state. Exits 0 when every *always* property held, 1 with a counterexample.
    Check {
        /// The check file.
        file: PathBuf,
        /// Worker threads (default 1).
        #[arg(long)]
        threads: Option<usize>,
        /// Stop after this many distinct states (the result is then incomplete).
        #[arg(long)]
        max_states: Option<u64>,
        /// Stop (incomplete) when the process's memory passes this size, e.g. 4GiB
        /// (default: half the memory available).
        #[arg(long, value_name = "SIZE")]
        max_memory: Option<String>,
        /// Write a violation here as the check file plus its path, which `run` and
        /// `explain` replay.
        #[arg(long)]
        counterexample: Option<PathBuf>,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Count states that differ only in which client is which separately.
        #[arg(long)]
        no_symmetry: bool,
    },
    /// Print the first counterexample of one scenario as a timeline; write a space-time
    /// diagram with --svg. On a check file, print its counterexample step by step.
    Explain {
        /// The scenario file.
        file: PathBuf,
        /// The seed (default: the scenario's own).
        #[arg(long)]
        seed: Option<u64>,
        /// Write the space-time diagram (SVG) here.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also print the full event trace.
        #[arg(long)]
        trace: bool,
        #[command(flatten)]
        pages: cli::explain::PageArgs,
    },
}

/// Sharding and JSON Lines output, shared by `run` and `sweep`.
#[derive(clap::Args)]
struct ShardArgs {
    /// Run only shard I of N (1 <= I <= N), or `auto`: from REDLOCK_SIM_SHARD=I/N,
    /// JOB_COMPLETION_INDEX with REDLOCK_SIM_SHARD_COUNT (Kubernetes), or
    /// SLURM_ARRAY_TASK_ID, _MIN and _COUNT (Slurm).
    #[arg(long, value_parser = redlock_sim::shard::parse_arg)]
    shard: Option<redlock_sim::shard::Shard>,
    /// Write one JSON line per run here, for `redlock-sim merge`; `{shard}` in the path
    /// becomes the shard, as `2-of-4` (`all` when unsharded).
    #[arg(long)]
    jsonl: Option<PathBuf>,
}

pub(crate) fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if let Some(name) = redlock_sim::catalogue::name_of(path) {
            let (file, _) =
                redlock_sim::catalogue::find(name).ok_or_else(|| cli::scenarios::unknown(name))?;
            files.push(PathBuf::from(format!(
                "{}{file}",
                redlock_sim::catalogue::PREFIX
            )));
        } else if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("{}: no such file or directory", path.display()));
        }
    }
    Ok(files)
}

pub(crate) fn load(path: &Path) -> Result<Scenario, String> {
    Scenario::load(path).map_err(|e| e.to_string())
}

pub(crate) fn parse_tokens(name: &str) -> Result<redlock_sim::scenario::TokenSource, String> {
    use redlock_sim::scenario::TokenSource;
    match name {
        "linearizable" => Ok(TokenSource::Linearizable),
        "redis-counter" => Ok(TokenSource::RedisCounter),
        "quorum-minted" => Ok(TokenSource::QuorumMinted),
        other => Err(format!(
            "unknown token source `{other}`; expected linearizable, redis-counter or quorum-minted"
        )),
    }
}

/// A progress bar on stderr for `total` runs, drawn only when stderr is a terminal:
/// indicatif hides a bar whose target is not one, so that a pipe or a file receives exactly
/// the output a script reads, with no carriage returns.
pub(crate) fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} {wide_bar} {pos}/{len} runs, {elapsed} elapsed, about {eta} left",
    ) {
        bar.set_style(style);
    }
    bar.set_message(what.to_owned());
    // One long run would otherwise freeze the elapsed time.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

fn explain(
    file: &Path,
    seed: Option<u64>,
    svg: Option<&Path>,
    trace: bool,
    pages: &cli::explain::PageArgs,
) -> Result<bool, String> {
    if cli::check::is_check_file(file) {
        let asked = [
            ("--seed", seed.is_some()),
            ("--svg", svg.is_some()),
            ("--trace", trace),
        ]
        .into_iter()
        .chain(pages.asked());
        if let Some((option, _)) = asked.into_iter().find(|(_, given)| *given) {
            // A check's counterexample is a path through the model, not a simulated run:
            // there is no seed to choose and no run to draw.
            return Err(format!(
                "{option} is for scenarios: {} is a check, whose counterexample `explain` \
                 prints step by step (drop {option})",
                file.display()
            ));
        }
        return cli::check::explain(file);
    }
    let scenario = load(file)?;
    let seed = seed.unwrap_or(scenario.seed);
    let run = redlock_sim::run(&scenario, seed, true).map_err(|e| e.to_string())?;
    print!("{}", redlock_sim::explain::timeline(&scenario, &run));
    if trace {
        println!(
            "\nfull trace:\n{}",
            run.trace.as_deref().unwrap_or_default()
        );
    }
    if let Some(path) = svg {
        std::fs::write(path, redlock_sim::explain::svg(&scenario, &run))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("\nspace-time diagram written to {}", path.display());
    }
    pages.write(&scenario, &run)?;
    Ok(run.report.matches)
}

struct SweepArgs<'a> {
    file: &'a Path,
    param: &'a str,
    target: Option<&'a String>,
    values: Vec<f64>,
    seeds: u64,
    first_seed: u64,
    noise: bool,
    threads: Option<usize>,
    csv: Option<&'a Path>,
    svg: Option<&'a Path>,
    html: Option<&'a Path>,
    json: bool,
    threshold: Option<(f64, String)>,
    shard: Option<redlock_sim::shard::Shard>,
    jsonl: Option<&'a Path>,
}

fn values(
    from: Option<f64>,
    to: Option<f64>,
    steps: usize,
    explicit: &[f64],
) -> Result<Vec<f64>, String> {
    if !explicit.is_empty() {
        return Ok(explicit.to_vec());
    }
    let (Some(from), Some(to)) = (from, to) else {
        return Err("give --from and --to, or --values".into());
    };
    if steps < 2 {
        return Err("--steps must be at least 2".into());
    }
    Ok((0..steps)
        .map(|i| from + (to - from) * i as f64 / (steps - 1) as f64)
        .map(|v| (v * 1e9).round() / 1e9)
        .collect())
}

fn sweep(args: SweepArgs<'_>) -> Result<bool, String> {
    use redlock_sim::sweep::{Knob, SweepSpec, Target};
    let scenario = load(args.file)?;
    let knob: Knob = args.param.parse()?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let spec = SweepSpec {
        knob,
        target: args.target.map(|t| Target(t.clone())),
        values: args.values,
        seeds: args.seeds.max(1),
        first_seed: args.first_seed,
        noise: args.noise,
        threshold: args.threshold,
        threads,
    };
    let total = spec.values.len() as u64 * spec.seeds;
    let bar = progress_bar(total, &format!("sweep {}", args.param));
    let started = std::time::Instant::now();
    let result = redlock_sim::sweep::sweep_shard(&scenario, &spec, args.shard, &|done, _| {
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let result = result.map_err(|e| e.to_string())?;
    if let Some(path) = args.jsonl {
        cli::sweep::write_jsonl(path, &scenario, &spec, &result, args.shard)?;
    }
    let outputs = cli::sweep::Outputs {
        json: args.json,
        csv: args.csv,
        svg: args.svg,
    };
    cli::sweep::write(&result, &outputs, Some((threads, started.elapsed())))?;
    if let Some(dir) = args.html {
        cli::sweep::write_pages(dir, &scenario, &spec, &result, args.json)?;
    }
    if let Some(shard) = args.shard
        && !args.json
    {
        println!(
            "shard {shard}: {} of {total} runs; `redlock-sim merge` joins the shards' --jsonl files",
            result.runs.len()
        );
    }
    Ok(true)
}

fn main() -> ExitCode {
    let matches = Cli::command().term_width(help_width()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match &cli.command {
        Command::Run {
            paths,
            seed,
            seeds,
            catalogue,
            json,
            wide,
            each_seed,
            tokens,
            shard,
            corpus,
        } => {
            let format = match (*json, *wide, *each_seed) {
                (true, _, _) => RunFormat::Json,
                (false, true, _) => RunFormat::Wide,
                (false, false, true) => RunFormat::EachSeed,
                (false, false, false) => RunFormat::Table,
            };
            let mut paths = paths.clone();
            if *catalogue {
                paths.extend(redlock_sim::catalogue::files().iter().map(|(file, _)| {
                    PathBuf::from(format!("{}{file}", redlock_sim::catalogue::PREFIX))
                }));
            }
            cli::run::run(&cli::run::RunArgs {
                paths: &paths,
                seed: *seed,
                seeds: *seeds,
                format,
                tokens: tokens.as_deref(),
                shard: shard.shard,
                jsonl: shard.jsonl.as_deref(),
                corpus: corpus.as_deref(),
            })
        }
        Command::Merge(args) => cli::merge::merge(args),
        Command::Scenarios { command } => cli::scenarios::scenarios(command),
        Command::Check {
            file,
            threads,
            max_states,
            max_memory,
            counterexample,
            json,
            no_symmetry,
        } => cli::check::check(&cli::check::CheckArgs {
            file,
            threads: *threads,
            max_states: *max_states,
            max_memory: max_memory.as_deref(),
            counterexample: counterexample.as_deref(),
            json: *json,
            symmetry: !*no_symmetry,
        }),
        Command::Explain {
            file,
            seed,
            svg,
            trace,
            pages,
        } => explain(file, *seed, svg.as_deref(), *trace, pages),
        Command::Sweep {
            file,
            param,
            target,
            from,
            to,
            steps,
            values: explicit,
            seeds,
            first_seed,
            no_noise,
            threads,
            csv,
            svg,
            html,
            json,
            threshold,
            threshold_label,
            shard,
        } => values(*from, *to, *steps, explicit).and_then(|values| {
            sweep(SweepArgs {
                file,
                param,
                target: target.as_ref(),
                values,
                seeds: *seeds,
                first_seed: *first_seed,
                noise: !*no_noise,
                threads: *threads,
                csv: csv.as_deref(),
                svg: svg.as_deref(),
                html: html.as_deref(),
                json: *json,
                threshold: threshold.map(|at| (at, threshold_label.clone())),
                shard: shard.shard,
                jsonl: shard.jsonl.as_deref(),
            })
        }),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(message) => {
            eprintln!("redlock-sim: {message}");
            ExitCode::from(2)
        }
    }
}
