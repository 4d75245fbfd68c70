//! Same scenario and seed, byte-identical trace; another seed, another trace.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;

use redlock_sim::Scenario;

fn load(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn same_seed_gives_a_byte_identical_trace_timeline_and_diagram() {
    for name in [
        "rl-18-duplicated-messages.toml",
        "rl-04-node-clock-jump-bare-majority.toml",
        "rl-16-redis-derived-tokens.toml",
        "rl-07-failover-lagging-replica.toml",
    ] {
        let scenario = load(name);
        let first = redlock_sim::run(&scenario, 42, true).unwrap();
        let second = redlock_sim::run(&scenario, 42, true).unwrap();
        let (a, b) = (
            first.trace.as_deref().unwrap(),
            second.trace.as_deref().unwrap(),
        );
        assert!(
            a.lines().count() > 100,
            "{name}: the trace is suspiciously short"
        );
        assert_eq!(a, b, "{name}: traces differ for the same seed");
        assert_eq!(first.history, second.history, "{name}");
        assert_eq!(
            redlock_sim::explain::svg(&scenario, &first),
            redlock_sim::explain::svg(&scenario, &second),
            "{name}"
        );
        assert_eq!(
            redlock_sim::explain::timeline(&scenario, &first),
            redlock_sim::explain::timeline(&scenario, &second),
            "{name}"
        );
    }
}

#[test]
fn another_seed_gives_another_trace() {
    let scenario = load("rl-18-duplicated-messages.toml");
    let a = redlock_sim::run(&scenario, 1, true).unwrap().trace.unwrap();
    let b = redlock_sim::run(&scenario, 2, true).unwrap().trace.unwrap();
    assert_ne!(a, b, "the seed does not reach the simulation");
}

#[test]
fn tracing_does_not_change_the_run() {
    let scenario = load("rl-18-duplicated-messages.toml");
    let traced = redlock_sim::run(&scenario, 9, true).unwrap();
    let quiet = redlock_sim::run(&scenario, 9, false).unwrap();
    assert_eq!(traced.history, quiet.history);
    assert_eq!(traced.report.events, quiet.report.events);
}

/// A sweep spreads its runs over threads and collects them by index: the same sweep on one
/// thread and on four gives the same CSV, byte for byte (noise included).
#[test]
fn a_sweep_does_not_depend_on_the_number_of_threads() {
    use redlock_sim::runs::sweep::{Knob, SweepSpec, sweep};

    let scenario = load("rl-09-client-clock-slow-2pc.toml");
    let spec = |threads| SweepSpec {
        knob: Knob::ClientClockSlow,
        target: None,
        values: vec![0.0, 1.0, 1.25, 1.5, 2.0],
        seeds: 6,
        first_seed: 7,
        noise: true,
        threshold: None,
        threads,
    };
    let one = sweep(&scenario, &spec(1), &|_, _| {}).unwrap();
    let four = sweep(&scenario, &spec(4), &|_, _| {}).unwrap();
    assert_eq!(one.runs.len(), 30);
    assert!(
        one.csv() == four.csv(),
        "one thread:\n{}\nfour threads:\n{}",
        one.csv(),
        four.csv()
    );
    // Not a constant: the noise and the clock error change what happens across the range.
    let violated: Vec<f64> = one.points.iter().map(|p| p.violated[0]).collect();
    assert!(violated[0] == 0.0 && violated[4] > 0.0, "{violated:?}");
}
