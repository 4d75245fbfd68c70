//! Two explorers on one model, side by side: this crate's (`redlock-sim check`) and
//! stateright's (0.31, a model checker made for this), through an adapter that implements
//! stateright's `Model` for a check's model ([`ModelSteps`]). Each explorer runs on each
//! check in a child process of its own, so that the peak memory it reports (`VmHWM`) is
//! its own; both explore every state and every interleaving (no client symmetry, which
//! stateright would take as a `Representative`, and no sleep sets on this side), so their
//! counts of states and distinct states must agree, and the run fails if the distinct
//! counts do not.
//!
//! ```text
//! cargo bench -p redlock-benches --bench explorers
//! EXPLORERS_CHECKS=stop-first,teeth-s2-drift EXPLORERS_THREADS=1,2 cargo bench -p redlock-benches --bench explorers
//! ```
//!
//! It prints one table row per (check, explorer, threads): states generated, distinct
//! states, wall seconds, the child's CPU seconds (user and system, which a loaded machine
//! does not inflate as it does wall time), states per CPU second, peak memory and bytes per
//! distinct state.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use redlock_sim::check::{self, Action, CheckSpec, ModelState, ModelSteps, Options};
use stateright::{Checker, Model, Property};

/// The catalogue checks compared by default: three that complete without a violation in
/// seconds to minutes on two cores.
const DEFAULT_CHECKS: &[&str] = &["keep-alive-never-stops", "teeth-s2-drift", "stop-first"];

/// A check's model as stateright sees it.
struct Adapter(ModelSteps);

impl Model for Adapter {
    type State = ModelState;
    type Action = Action;

    fn init_states(&self) -> Vec<ModelState> {
        vec![self.0.initial()]
    }

    fn actions(&self, state: &ModelState, actions: &mut Vec<Action>) {
        self.0.actions(state, actions);
    }

    fn next_state(&self, state: &ModelState, action: Action) -> Option<ModelState> {
        Some(self.0.successor(state, action))
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always("no violation", |_, state: &ModelState| {
            state.violation().is_none()
        })]
    }
}

/// What one explorer reported on one check.
struct Run {
    states: u64,
    distinct: u64,
    seconds: f64,
    cpu_seconds: f64,
    peak_bytes: u64,
    violation: bool,
}

fn checks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../simulator/checks")
}

fn list(variable: &str, default: &[&str]) -> Vec<String> {
    std::env::var(variable).map_or_else(
        |_| default.iter().map(|s| (*s).to_owned()).collect(),
        |v| v.split(',').map(|s| s.trim().to_owned()).collect(),
    )
}

/// The process's peak resident memory, from `/proc/self/status`.
fn peak_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The CPU time (user and system) this process has used, in seconds.
fn cpu_seconds() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    seconds(usage.user_time()) + seconds(usage.system_time())
}

/// In the child: runs `explorer` on the check at `path` and prints one `RESULT` line.
fn child(explorer: &str, threads: usize, path: &Path) {
    let spec = CheckSpec::load(path).unwrap_or_else(|e| panic!("{e}"));
    let started = Instant::now();
    let cpu_before = cpu_seconds();
    let (states, distinct, violation) = match explorer {
        "ours" => {
            // Every interleaving, as stateright takes them: no sleep sets, no symmetry.
            let options = Options {
                threads,
                symmetry: false,
                node_symmetry: false,
                reduction: false,
                ..Options::default()
            };
            let report = check::check(spec, options);
            assert!(report.exploration.complete, "{}", report.text());
            (
                report.exploration.states,
                report.exploration.distinct,
                report.exploration.violation.is_some(),
            )
        }
        "stateright" => {
            let checker = Adapter(ModelSteps::new(spec))
                .checker()
                .threads(threads)
                .spawn_bfs()
                .join();
            (
                checker.state_count() as u64,
                checker.unique_state_count() as u64,
                !checker.discoveries().is_empty(),
            )
        }
        other => panic!("unknown explorer {other}"),
    };
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "RESULT {states} {distinct} {seconds} {} {} {}",
        cpu_seconds() - cpu_before,
        peak_bytes(),
        u8::from(violation)
    );
}

/// Runs `explorer` in a child process and reads its result.
fn run(explorer: &str, threads: usize, path: &Path) -> Run {
    let exe = std::env::current_exe().expect("the benchmark's own path");
    let output = Command::new(exe)
        .args(["--child", explorer, &threads.to_string()])
        .arg(path)
        .output()
        .expect("run the explorer in a child process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "{explorer} on {} gave no result: {}{}",
                path.display(),
                stdout,
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let f: Vec<&str> = line.split(' ').collect();
    let number = |i: usize| f[i].parse::<f64>().expect("a number");
    Run {
        states: number(0) as u64,
        distinct: number(1) as u64,
        seconds: number(2),
        cpu_seconds: number(3),
        peak_bytes: number(4) as u64,
        violation: f[5] == "1",
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        let threads = args[at + 2].parse().expect("a thread count");
        child(&args[at + 1], threads, Path::new(&args[at + 3]));
        return;
    }
    let threads: Vec<usize> = list("EXPLORERS_THREADS", &["1", "2"])
        .iter()
        .map(|t| t.parse().expect("EXPLORERS_THREADS: thread counts"))
        .collect();
    println!(
        "| check | explorer | threads | states | distinct | wall s | CPU s | states per CPU s | peak MiB | bytes/distinct |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for name in list("EXPLORERS_CHECKS", DEFAULT_CHECKS) {
        let path = checks_dir().join(format!("{name}.toml"));
        let mut distinct = None;
        for &t in &threads {
            for explorer in ["ours", "stateright"] {
                let r = run(explorer, t, &path);
                println!(
                    "| {name} | {explorer} | {t} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} | {:.0} |",
                    r.states,
                    r.distinct,
                    r.seconds,
                    r.cpu_seconds,
                    r.states as f64 / r.cpu_seconds,
                    r.peak_bytes as f64 / f64::from(1 << 20),
                    r.peak_bytes as f64 / r.distinct as f64,
                );
                assert!(!r.violation, "{explorer} found a violation in {name}");
                let expected = *distinct.get_or_insert(r.distinct);
                assert_eq!(
                    r.distinct, expected,
                    "{explorer} on {threads:?} threads counted {} distinct states of {name}, \
                     another run {expected}",
                    r.distinct
                );
            }
        }
    }
}
