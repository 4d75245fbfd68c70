//! `redlock-sim`: run scenario files and check their expected verdicts; explain a
//! counterexample as a timeline and a space-time diagram.
//!
//! This file parses the command line and dispatches; each command lives in `cli/`.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

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
    Run(cli::run::RunArgs),
    /// Vary one parameter of a scenario over a range, run many seeds per value, and chart
    /// the rate of each verdict against it.
    Sweep(cli::sweep::SweepArgs),
    /// The scenario catalogue embedded in this binary: list it, show one file, or write
    /// them all into a directory.
    Scenarios {
        #[command(subcommand)]
        command: cli::scenarios::ScenariosCommand,
    },
    /// Merge the --jsonl files of a sharded run or sweep: prints the table (and writes the
    /// CSV and chart) one unsharded run prints, after checking every run is there once. Or
    /// merge the members of a `check --swarm`: the states they covered and any violation.
    Merge(cli::merge::MergeArgs),
    /// Explore every interleaving of the core's machines in a bounded model (a check file:
    /// nodes, clients, ticks of true time, clock bounds, a fault budget) and judge every
    /// state. Exits 0 when every *always* property held, 1 with a counterexample. With
    /// --swarm I/N, one member of a swarm: a bounded search in an order of its own.
    Check(cli::check::CheckArgs),
    /// Print the first counterexample of one scenario as a timeline; write a space-time
    /// diagram with --svg. On a check file, print its counterexample step by step.
    Explain(cli::explain::ExplainArgs),
}

fn main() -> ExitCode {
    let matches = Cli::command().term_width(help_width()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match &cli.command {
        Command::Run(args) => cli::run::run(args),
        Command::Sweep(args) => cli::sweep::sweep(args),
        Command::Scenarios { command } => cli::scenarios::scenarios(command),
        Command::Merge(args) => cli::merge::merge(args),
        Command::Check(args) => cli::check::check(args),
        Command::Explain(args) => cli::explain::explain(args),
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
