//! `redlock`: run a command only while holding a Redlock lease on independent Redis nodes
//! (`flock(1)` across servers), show who holds a resource, and check the nodes.
//!
//! `docs/cli.md` documents the commands, the configuration sources and the exit codes.

mod args;
mod child;
mod config_file;
mod doctor;
mod duration;
mod exit;
#[cfg(test)]
mod fuzz_tests;
mod generate;
mod memory;
mod numbers;
mod quarantine;
mod run;
mod run_report;
mod settings;
mod signals;
mod sources;
mod status;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::exit::{Failure, OS_ERROR, USAGE};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors exit with EX_USAGE rather
            // than clap's 2, so that every configuration problem has the same code.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { USAGE } else { 0 });
        }
    };
    init_tracing();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(&Failure::new(
                OS_ERROR,
                format!("cannot start a runtime: {e}"),
            ));
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(args).await,
            Command::Status(args) => status::status(args).await,
            Command::Doctor(args) => doctor::doctor(args).await,
            Command::Completions(args) => generate::completions(&args),
            Command::Man(args) => generate::man(&args),
        }
    });
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => fail(&failure),
    }
}

fn fail(failure: &Failure) -> ExitCode {
    if !failure.message.is_empty() {
        eprintln!("redlock: {failure}");
    }
    ExitCode::from(failure.code)
}

/// The library's own log lines (extensions, retries) go to stderr when `RUST_LOG` asks for
/// them, e.g. `RUST_LOG=redlock=debug`; by default `redlock` prints only its own messages.
/// They are coloured only on a terminal, and never under `NO_COLOR` (no-color.org): escape
/// codes in a log file or a cron mail are noise.
fn init_tracing() {
    use std::io::IsTerminal;
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal() && !no_color)
            .init();
    }
}
