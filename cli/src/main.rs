//! `redlock`: run a command only while holding a Redlock lease on independent Redis nodes
//! (`flock(1)` across servers), show who holds a resource, and check the nodes.
//!
//! `docs/cli.md` documents the commands, the configuration sources and the exit codes.

// Every write goes through `say.rs`: a failed write must never end `redlock`.
#![deny(clippy::print_stderr, clippy::print_stdout)]

#[macro_use]
mod say;
mod args;
mod child;
mod config_file;
mod doctor;
mod duration;
mod exit;
#[cfg(test)]
mod fuzz_tests;
mod generate;
mod man_sections;
mod memory;
mod numbers;
mod quarantine;
mod run;
mod run_report;
mod settings;
mod signals;
mod sources;
mod status;
mod wrap;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

use crate::args::{Cli, Command};
use crate::exit::{Failure, OS_ERROR, USAGE};

fn main() -> ExitCode {
    // Help is wrapped to the terminal that shows it, or to 80 columns in a pipe.
    let parsed = Cli::command()
        .term_width(wrap::width(std::io::stdout()))
        .try_get_matches()
        .and_then(|matches| Cli::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with 0; usage errors exit with EX_USAGE rather
            // than clap's 2, so that every configuration problem has the same code.
            let _ = e.print();
            if let Some(hint) = command_hint(&e) {
                say!("{hint}");
            }
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

/// The hint for the commonest mistake with `redlock run`: the command written without the
/// `--` before it (`redlock run -r job echo hi`), which clap reports as an unexpected
/// argument.
fn command_hint(error: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ErrorKind};
    let is_run = std::env::args_os()
        .nth(1)
        .is_some_and(|first| first == "run");
    if !is_run || error.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let unexpected = error.get(ContextKind::InvalidArg)?.to_string();
    if unexpected.starts_with('-') {
        return None;
    }
    // The user's own line with `--` put before the command, each word quoted when the
    // shell would need it; no hint when a word is not UTF-8, which the hint could not spell.
    let words: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|word| word.into_string().ok().map(|word| shell_word(&word)))
        .collect::<Option<_>>()?;
    // Clap names the first word it could not place; a word right after an option may be
    // that option's value, so a match elsewhere is preferred.
    let wanted = shell_word(&unexpected);
    let matches: Vec<usize> = (1..words.len()).filter(|&i| words[i] == wanted).collect();
    let at = matches
        .iter()
        .copied()
        .find(|&i| !words[i - 1].starts_with('-'))
        .or_else(|| matches.first().copied())?;
    let (options, command) = words.split_at(at);
    Some(format!(
        "hint: put the command after `--`: redlock {} -- {}",
        options.join(" "),
        command.join(" ")
    ))
}

/// `word` as a shell reads it back: as it is when it is plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

fn fail(failure: &Failure) -> ExitCode {
    if !failure.message.is_empty() {
        let width = wrap::width(std::io::stderr());
        say!(
            "{}",
            wrap::fill(&format!("redlock: {failure}"), width, "  ")
        );
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
