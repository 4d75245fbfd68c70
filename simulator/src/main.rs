//! `redlock-sim`: run scenario files and check their expected verdicts; explain a
//! counterexample as a timeline and a space-time diagram.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use redlock_sim::{Report, Scenario};

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
        /// Scenario files or directories.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// The first seed (default: each scenario's own).
        #[arg(long)]
        seed: Option<u64>,
        /// How many consecutive seeds to run per scenario.
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the first counterexample of one scenario as a timeline; write a space-time
    /// diagram with --svg.
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
    },
}

fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
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

fn load(path: &Path) -> Result<Scenario, String> {
    Scenario::load(path).map_err(|e| e.to_string())
}

fn run(paths: &[PathBuf], seed: Option<u64>, seeds: u64, json: bool) -> Result<bool, String> {
    let files = scenario_files(paths)?;
    let mut reports: Vec<Report> = Vec::new();
    let started = std::time::Instant::now();
    for file in &files {
        let scenario = load(file)?;
        let first = seed.unwrap_or(scenario.seed);
        for offset in 0..seeds.max(1) {
            let seed = first.wrapping_add(offset);
            let run = redlock_sim::run(&scenario, seed, false)
                .map_err(|e| format!("{}: seed {seed}: {e}", file.display()))?;
            reports.push(run.report);
        }
    }
    let all_match = reports.iter().all(|r| r.matches);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", redlock_sim::report::table(&reports));
        let events: u64 = reports.iter().map(|r| r.events).sum();
        let wall = started.elapsed();
        println!(
            "\n{} run(s) of {} scenario(s): {} matched, {} mismatched; {events} events in {wall:.2?} ({:.0} events/s)",
            reports.len(),
            files.len(),
            reports.iter().filter(|r| r.matches).count(),
            reports.iter().filter(|r| !r.matches).count(),
            events as f64 / wall.as_secs_f64().max(1e-9),
        );
        for report in reports.iter().filter(|r| !r.matches) {
            println!(
                "MISMATCH {} (seed {}): {}\n  replay: redlock-sim explain {} --seed {}",
                report.scenario,
                report.seed,
                report.mismatch().unwrap_or_default(),
                report.source,
                report.seed
            );
        }
    }
    Ok(all_match)
}

fn explain(
    file: &Path,
    seed: Option<u64>,
    svg: Option<&Path>,
    trace: bool,
) -> Result<bool, String> {
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
    Ok(run.report.matches)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Run {
            paths,
            seed,
            seeds,
            json,
        } => run(paths, *seed, *seeds, *json),
        Command::Explain {
            file,
            seed,
            svg,
            trace,
        } => explain(file, *seed, svg.as_deref(), *trace),
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
