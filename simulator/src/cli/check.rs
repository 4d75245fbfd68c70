//! `redlock-sim check`, and the replay of a check's counterexample by `run` and `explain`.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use std::sync::OnceLock;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use redlock_sim::check::{self, CheckSpec, Options, Outcome, Progress, memory};
use redlock_sim::runs::jsonl::{self, Line};
use redlock_sim::runs::shard::{self, Shard};

// What `check` was asked; the variant's comment in main.rs is the command's help.
#[derive(clap::Args)]
pub(crate) struct CheckArgs {
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
    /// Count states that differ only in which client is which separately (`--no-symmetry`
    /// is its older name).
    #[arg(long, alias = "no-symmetry")]
    no_client_symmetry: bool,
    /// Count states that differ only in which node is which separately.
    #[arg(long)]
    no_node_symmetry: bool,
    /// Take every interleaving of independent steps (no partial-order reduction).
    #[arg(long)]
    no_reduction: bool,
    /// Depth first, keeping only the states that begin a tick in the visited set and those
    /// within a tick in a set of that tick's own, dropped when the search leaves the tick:
    /// memory for the ticks' beginnings alone, at the cost of expanding again a state
    /// reached from two ticks' beginnings.
    #[arg(long, conflicts_with = "swarm")]
    tick_local: bool,
    /// Search as member I of a swarm of N (1 <= I <= N), or `auto` (the job engine's
    /// variables, as `run --shard auto` reads them): depth first on one thread, in an order
    /// of steps and with a fingerprint hash seeded by I, until --max-states or the memory
    /// bound (normal for a member). Not exhaustive: `redlock-sim merge` joins the members'
    /// --jsonl records.
    #[arg(long, value_name = "I/N", value_parser = check::swarm::parse_arg, conflicts_with = "threads")]
    swarm: Option<check::swarm::Member>,
    /// With --swarm: write the member's record as one JSON line here, for `redlock-sim
    /// merge`; `{shard}` in the path becomes the member, as `2-of-4`.
    #[arg(long, requires = "swarm")]
    jsonl: Option<PathBuf>,
}

/// The progress line's spinner (a callback cannot capture it).
static BAR: OnceLock<ProgressBar> = OnceLock::new();

fn progress(p: &Progress) {
    if let Some(bar) = BAR.get() {
        bar.set_message(progress_line(p));
    }
}

/// One line of progress: the counts, where the search is, and the memory against its bound.
fn progress_line(p: &Progress) -> String {
    let mut line = format!(
        "{} states, {} distinct, depth {}",
        count(p.states),
        count(p.distinct),
        p.depth
    );
    if p.depth_first {
        line.push_str(", depth first");
    } else if p.frontier > 0 {
        line.push_str(&format!(", level of {}", count(p.frontier)));
        if p.growth > 0.0 {
            // The projection: the next level if this one's growth holds.
            line.push_str(&format!(
                " (x{:.2} a level, next about {})",
                p.growth,
                count((p.frontier as f64 * p.growth) as u64)
            ));
        }
    }
    line.push_str(&format!(
        ", memory {} of {}",
        memory::format_size(p.memory),
        memory::format_size(p.max_memory)
    ));
    line
}

/// A count for people: `1.2M`.
fn count(n: u64) -> String {
    match n {
        0..10_000 => n.to_string(),
        10_000..10_000_000 => format!("{:.1}k", n as f64 / 1e3),
        10_000_000..10_000_000_000 => format!("{:.1}M", n as f64 / 1e6),
        _ => format!("{:.2}G", n as f64 / 1e9),
    }
}

/// What fits before the search starts: the bound, and how many distinct states the
/// fingerprint set holds within it.
fn estimate(max_memory: u64, chosen: bool) -> String {
    // The fingerprint tables take 20 to 40 bytes a state; the breadth-first levels take
    // at most a quarter of the bound.
    let states = (max_memory - max_memory / 4) / 40;
    format!(
        "memory bound {} ({}): room for at least {} distinct states",
        memory::format_size(max_memory),
        if chosen {
            "--max-memory"
        } else {
            "half the memory available; --max-memory to change it"
        },
        count(states)
    )
}

/// Runs one check: `Ok(true)` when every *always* property held, `Ok(false)` with a
/// violation.
pub(crate) fn check(args: &CheckArgs) -> Result<bool, String> {
    let text =
        std::fs::read_to_string(&args.file).map_err(|e| format!("{}: {e}", args.file.display()))?;
    if !has_model(&text) && redlock_sim::Scenario::load(&args.file).is_ok() {
        // The check reader would fail on the scenario's first table with serde's words.
        return Err(format!(
            "{file}: a scenario, not a check (a check file has a [model] table, as the files of \
             simulator/checks/ do): run it with `redlock-sim run {file}`",
            file = args.file.display()
        ));
    }
    let spec = check::parse(&text, &args.file.display().to_string()).map_err(|e| e.to_string())?;
    let max_memory = match args.max_memory.as_deref() {
        Some(size) => memory::parse_size(size).map_err(|e| format!("--max-memory: {e}"))?,
        None => memory::default_bound(),
    };
    let terminal = std::io::stderr().is_terminal() && !args.json;
    if terminal {
        eprintln!("{}", estimate(max_memory, args.max_memory.is_some()));
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {elapsed} {wide_msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(250));
        let _ = BAR.set(bar);
    }
    let options = Options {
        threads: args.threads.unwrap_or(1).max(1),
        max_states: args.max_states.unwrap_or(u64::MAX),
        max_memory,
        symmetry: !args.no_client_symmetry,
        node_symmetry: !args.no_node_symmetry,
        reduction: !args.no_reduction,
        tick_local: args.tick_local,
        progress: terminal.then_some(progress as fn(&Progress)),
        swarm: args.swarm,
        ..Options::default()
    };
    let report = check::check(spec, options);
    if let Some(bar) = BAR.get() {
        bar.finish_and_clear();
    }
    if let Some(member) = args.swarm {
        return swarm_member(args, &report, member, &text, options.max_states);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.text());
    }
    if let Some(path) = &args.counterexample
        && let Some(file) = report.counterexample_file(&text)
    {
        std::fs::write(path, file).map_err(|e| format!("{}: {e}", path.display()))?;
        if !args.json {
            println!("  counterexample written to {}", path.display());
        }
    }
    // A search cut short by a bound (--max-states, --max-memory) proves nothing; nor does
    // one that never reached a sometimes property the file does not allow to stay unreached.
    Ok(report.passed())
}

/// The output of a swarm member: its record as one JSON line (`--json`, and `--jsonl`'s
/// file), or the report; `Ok(false)` only with a violation (a member that stops at its
/// bound has done its share; `merge` judges the whole).
fn swarm_member(
    args: &CheckArgs,
    report: &check::CheckReport,
    member: check::swarm::Member,
    text: &str,
    max_states: u64,
) -> Result<bool, String> {
    let line = check::swarm::line(report, member, text, max_states);
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&Line::Swarm(line.clone())).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", report.text());
    }
    let shard = Shard::new(member.index(), member.count()).map_err(|e| e.to_string())?;
    if let Some(path) = &args.jsonl {
        let path = shard::fill_path(path, Some(shard));
        jsonl::write(&path, &[Line::Swarm(line)]).map_err(|e| e.to_string())?;
        if !args.json {
            println!("  record written to {}", path.display());
        }
    }
    if let Some(path) = &args.counterexample
        && let Some(file) = report.counterexample_file(text)
    {
        let path = shard::fill_path(path, Some(shard));
        std::fs::write(&path, file).map_err(|e| format!("{}: {e}", path.display()))?;
        if !args.json {
            println!("  counterexample written to {}", path.display());
        }
    }
    Ok(report.exploration.violation.is_none())
}

/// Whether `path` holds a check (a `[model]` table) rather than a scenario.
pub(crate) fn is_check_file(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| has_model(&text))
}

fn has_model(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|table| table.contains_key("model"))
}

/// Separates the check files among `files` from the scenarios.
pub(crate) fn split(files: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    files.into_iter().partition(|f| is_check_file(f))
}

fn load(path: &Path) -> Result<CheckSpec, String> {
    CheckSpec::load(path).map_err(|e| e.to_string())
}

/// One check file under `run`: its counterexample replayed, or none to replay.
#[derive(serde::Serialize)]
struct Replayed {
    check: String,
    file: String,
    /// Steps replayed; `None` for a check without a counterexample.
    steps: Option<usize>,
    outcome: Option<&'static str>,
    /// The property the last state breaks.
    property: Option<&'static str>,
    expected: &'static str,
    /// Whether the outcome is the expected one (`true` when there was nothing to replay).
    matches: bool,
}

impl Replayed {
    fn line(&self) -> String {
        let Some(steps) = self.steps else {
            return format!(
                "{}: a check without a counterexample, nothing to replay (explore it with \
                 `redlock-sim check {}`)",
                self.check, self.file
            );
        };
        format!(
            "{}: counterexample replayed, {steps} steps: {}{} (expected {}): {}",
            self.check,
            self.outcome.unwrap_or_default(),
            self.property
                .map(|p| format!(" of {p}"))
                .unwrap_or_default(),
            self.expected,
            if self.matches { "match" } else { "MISMATCH" }
        )
    }
}

fn replay_one(file: &Path) -> Result<Replayed, String> {
    let spec = load(file)?;
    let mut replayed = Replayed {
        check: spec.name.clone(),
        file: file.display().to_string(),
        steps: None,
        outcome: None,
        property: None,
        expected: spec.expect.name(),
        matches: true,
    };
    if spec.counterexample.is_none() {
        return Ok(replayed);
    }
    let expect = spec.expect;
    let replay = check::replay(spec).map_err(|e| format!("{}: {e}", file.display()))?;
    let outcome = if replay.violation.is_some() {
        Outcome::Violation
    } else {
        Outcome::NoViolation
    };
    replayed.steps = Some(replay.steps.len() - 1);
    replayed.outcome = Some(outcome.name());
    replayed.property = replay.violation.map(|p| p.name());
    replayed.matches = outcome == expect;
    Ok(replayed)
}

/// `run` on check files: each counterexample replayed, its verdict against the file's
/// expectation, as lines or (`json`) one JSON array. `Ok(false)` when any differs.
pub(crate) fn replay_all(files: &[PathBuf], json: bool) -> Result<bool, String> {
    if files.is_empty() {
        // Nothing to print: under --json, the scenarios' document is the only one.
        return Ok(true);
    }
    let replays = files
        .iter()
        .map(|file| replay_one(file))
        .collect::<Result<Vec<_>, _>>()?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&replays).map_err(|e| e.to_string())?
        );
    } else {
        for replay in &replays {
            println!("{}", replay.line());
        }
    }
    Ok(replays.iter().all(|r| r.matches))
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
        Property::WaiterTold => {
            "a release deleted its key on a node where a waiter's mark was, and told nobody"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_line_projects_the_next_level_and_shows_the_memory() {
        let p = Progress {
            states: 2_500_000,
            distinct: 900_000,
            depth: 23,
            frontier: 120_000,
            growth: 1.5,
            memory: 3 << 29,
            max_memory: 12 << 30,
            ..Progress::default()
        };
        assert_eq!(
            progress_line(&p),
            "2500.0k states, 900.0k distinct, depth 23, level of 120.0k (x1.50 a level, next \
             about 180.0k), memory 1.5 GiB of 12.0 GiB"
        );
        let deep = Progress {
            depth_first: true,
            ..p
        };
        assert!(progress_line(&deep).contains("depth 23, depth first, memory"));
        assert_eq!(
            estimate(4 << 30, true),
            "memory bound 4.0 GiB (--max-memory): room for at least 80.5M distinct states"
        );
    }
}
