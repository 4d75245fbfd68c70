//! `redlock-sim check`, and the replay of a check's counterexample by `run` and `explain`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use redlock_sim::check::{self, CheckSpec, Options, Outcome, Progress};

/// What `check` was asked.
pub(crate) struct CheckArgs<'a> {
    pub(crate) file: &'a Path,
    pub(crate) threads: Option<usize>,
    pub(crate) max_states: Option<u64>,
    pub(crate) counterexample: Option<&'a Path>,
    pub(crate) json: bool,
    pub(crate) symmetry: bool,
}

fn progress(p: &Progress) {
    eprint!(
        "\r{} states, {} distinct, depth {}, {:.0?}    ",
        p.states, p.distinct, p.depth, p.elapsed
    );
}

/// Runs one check: `Ok(true)` when every *always* property held, `Ok(false)` with a
/// violation.
pub(crate) fn check(args: &CheckArgs<'_>) -> Result<bool, String> {
    let text =
        std::fs::read_to_string(args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let spec = check::parse(&text, &args.file.display().to_string()).map_err(|e| e.to_string())?;
    let terminal = std::io::stderr().is_terminal() && !args.json;
    let options = Options {
        threads: args.threads.unwrap_or(1).max(1),
        max_states: args.max_states.unwrap_or(u64::MAX),
        symmetry: args.symmetry,
        progress: terminal.then_some(progress as fn(&Progress)),
    };
    let report = check::check(spec, options);
    if terminal {
        eprint!("\r\x1b[K");
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.text());
    }
    if let Some(path) = args.counterexample
        && let Some(file) = report.counterexample_file(&text)
    {
        std::fs::write(path, file).map_err(|e| format!("{}: {e}", path.display()))?;
        if !args.json {
            println!("  counterexample written to {}", path.display());
        }
    }
    // A search cut short by --max-states proves nothing; nor does one that never reached
    // a sometimes property the file does not allow to stay unreached.
    Ok(report.passed())
}

/// Whether `path` holds a check (a `[model]` table) rather than a scenario.
pub(crate) fn is_check_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| {
        text.parse::<toml::Table>()
            .is_ok_and(|table| table.contains_key("model"))
    })
}

/// Separates the check files among `files` from the scenarios.
pub(crate) fn split(files: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    files.into_iter().partition(|f| is_check_file(f))
}

fn load(path: &Path) -> Result<CheckSpec, String> {
    CheckSpec::load(path).map_err(|e| e.to_string())
}

/// `run` on check files: each counterexample replayed, its verdict against the file's
/// expectation. `Ok(false)` when any differs.
pub(crate) fn replay_all(files: &[PathBuf]) -> Result<bool, String> {
    let mut all_match = true;
    for file in files {
        let spec = load(file)?;
        let (name, expect) = (spec.name.clone(), spec.expect);
        if spec.counterexample.is_none() {
            println!(
                "{name}: a check without a counterexample, nothing to replay (explore it with \
                 `redlock-sim check {}`)",
                file.display()
            );
            continue;
        }
        let replay = check::replay(spec).map_err(|e| format!("{}: {e}", file.display()))?;
        let outcome = if replay.violation.is_some() {
            Outcome::Violation
        } else {
            Outcome::NoViolation
        };
        let matched = outcome == expect;
        all_match &= matched;
        println!(
            "{name}: counterexample replayed, {} steps: {}{} (expected {}): {}",
            replay.steps.len() - 1,
            outcome.name(),
            replay
                .violation
                .map(|p| format!(" of {}", p.name()))
                .unwrap_or_default(),
            expect.name(),
            if matched { "match" } else { "MISMATCH" }
        );
    }
    Ok(all_match)
}

/// `explain` on a check file: its counterexample step by step.
pub(crate) fn explain(file: &Path) -> Result<bool, String> {
    let spec = load(file)?;
    let (name, expect) = (spec.name.clone(), spec.expect);
    let replay = check::replay(spec).map_err(|e| format!("{}: {e}", file.display()))?;
    println!("{name}: the counterexample, step by step (true time t in ticks)");
    for step in &replay.steps {
        println!("  {step}");
    }
    match replay.violation {
        Some(property) => println!(
            "the last state breaks {}: {}",
            property.name(),
            explain_property(property)
        ),
        None => println!("no property is broken at the end of this path"),
    }
    Ok((replay.violation.is_some()) == (expect == Outcome::Violation))
}

fn explain_property(property: check::Property) -> &'static str {
    use check::Property;
    match property {
        Property::MutualExclusion => {
            "two clients believe they hold the lease at once (each one's clock reads before its \
             lease's deadline, and it has not both released and stopped its work)"
        }
        Property::FencesIncrease => "a grant's fencing token is not above an earlier grant's",
        Property::StopBeforeRelease => {
            "a lease was released while its work still ran and its keys could still exist"
        }
        _ => "",
    }
}
