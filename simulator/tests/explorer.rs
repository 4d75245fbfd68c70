//! The explorer's search strategies and bounds: breadth first, depth first and both on
//! several threads visit exactly the states the explorer visited before any of them (the
//! counts below were taken with the breadth-first explorer that kept whole states in its
//! visited map); a depth-first counterexample replays; the memory bound stops a check with
//! an incomplete result and a hint, never a kill.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;

use redlock_sim::check::{self, CheckSpec, Options, Outcome, Stop};

mod common;

const SMALL: &str = r#"
name = "small"
[model]
horizon_ticks = 3
[expect]
outcome = "no-violation"
"#;

const SMALL_DROP: &str = r#"
name = "small drop"
[model]
nodes = 2
horizon_ticks = 3
work_ticks = 2
[faults]
budget = 1
drop = true
[expect]
outcome = "no-violation"
"#;

/// `shipped-drift.toml` as it was when the counts below were taken (the catalogue's file
/// has longer bounds since).
const DRIFT: &str = r#"
# The shipped client with clocks that stray within the drift allowance: in any window of one
# TTL, a client clock may lose a tick (the allowance is 1.2 ticks of a 6-tick TTL), at any
# tick of any interleaving.
name = "shipped defaults: client clocks slow within the drift factor"

[model]
nodes = 3
clients = 2
ttl_ticks = 6
horizon_ticks = 8
work_ticks = 2
drift_factor = 0.2

[clocks]
client_slow_ticks = 1

[expect]
outcome = "no-violation"
"#;

/// Each search: breadth first only, depth first from the start, and a mix, on 1 and 2
/// threads.
fn searches() -> Vec<(&'static str, Options)> {
    let base = Options {
        max_memory: u64::MAX,
        ..Options::default()
    };
    vec![
        (
            "breadth first",
            Options {
                breadth_first_memory: u64::MAX,
                ..base
            },
        ),
        (
            "depth first",
            Options {
                breadth_first_memory: 0,
                ..base
            },
        ),
        (
            "depth first, 2 threads",
            Options {
                breadth_first_memory: 0,
                threads: 2,
                ..base
            },
        ),
        (
            "breadth first, 2 threads",
            Options {
                breadth_first_memory: u64::MAX,
                threads: 2,
                ..base
            },
        ),
    ]
}

#[test]
fn every_search_visits_the_states_the_first_explorer_visited() {
    // (check, symmetry, states generated, distinct, depth) as the explorer of the first
    // release counted them.
    let cases = [
        (SMALL, true, 50_033, 18_116, 32),
        (SMALL, false, 50_785, 18_575, 32),
        (SMALL_DROP, true, 191_707, 91_259, 45),
        (SMALL_DROP, false, 302_755, 144_895, 45),
        (DRIFT, true, 382_421, 139_992, 39),
    ];
    for (text, symmetry, states, distinct, depth) in cases {
        let spec = check::parse(text, "inline").unwrap();
        for (search, options) in searches() {
            let options = Options {
                symmetry,
                ..options
            };
            let report = check::check(spec.clone(), options);
            let e = &report.exploration;
            let what = format!("{} ({search}, symmetry {symmetry})", spec.name);
            // The outcome, not `matches()`: these small models need not reach every
            // *sometimes* property, which only the catalogue's checks must.
            assert!(
                e.complete && report.outcome() == Outcome::NoViolation,
                "{what}: {}",
                report.text()
            );
            assert_eq!((e.states, e.distinct), (states, distinct), "{what}");
            if options.breadth_first_memory == 0 {
                assert_eq!(e.depth_first_from, Some(0), "{what}");
                // Depth first, a state may be reached first along a longer path.
                assert!(e.depth >= depth, "{what}: depth {}", e.depth);
            } else {
                assert_eq!((e.depth, e.depth_first_from), (depth, None), "{what}");
            }
        }
    }
}

#[test]
fn a_counterexample_found_depth_first_replays() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("checks/no-restart-quarantine.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    for (search, options) in searches() {
        let report = check::check(CheckSpec::load(&file).unwrap(), options);
        assert!(report.matches(), "{search}: {}", report.text());
        let (property, path) = report.exploration.violation.clone().unwrap();
        if options.breadth_first_memory == u64::MAX {
            // Breadth first, the counterexample is a shortest one.
            assert_eq!(path.len(), 16, "{search}");
        }
        let counterexample = report.counterexample_file(&text).unwrap();
        let replay = check::replay(check::parse(&counterexample, "found").unwrap()).unwrap();
        assert_eq!(replay.violation, Some(property), "{search}");
    }
}

#[test]
fn the_memory_bound_stops_with_an_incomplete_result_and_says_what_to_lower() {
    // In the library: a bound below what the process already holds stops at the first look.
    let spec = check::parse(SMALL_DROP, "inline").unwrap();
    let report = check::check(
        spec,
        Options {
            max_memory: 1 << 20,
            ..Options::default()
        },
    );
    let e = &report.exploration;
    assert_eq!(e.stopped, Some(Stop::MaxMemory(1 << 20)));
    assert!(!e.complete && !report.matches(), "{}", report.text());
    assert!(e.distinct < 91_259, "{}", report.text());
    // From the command line: an exit with the hint, not a kill.
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("checks/shipped-crash.toml");
    let out = common::sim(&["check", file.to_str().unwrap(), "--max-memory", "1MiB"]);
    let text = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("INCOMPLETE: the memory bound (1.0 MiB, --max-memory) was reached")
            && text.contains("lower horizon_ticks, the fault budget, clients or nodes"),
        "{text}"
    );
    let out = common::sim(&["check", file.to_str().unwrap(), "--max-memory", "lots"]);
    let text = common::text(&out);
    assert!(
        !out.status.success() && text.contains("--max-memory: `lots` is not a size"),
        "{text}"
    );
}

#[test]
fn the_report_prints_the_collision_bound_from_the_distinct_states() {
    let report = check::check(check::parse(SMALL, "inline").unwrap(), Options::default());
    let bound = check::collision_bound(report.exploration.distinct);
    assert!(bound > 0.0 && bound < 1e-29, "{bound}");
    let text = report.text();
    assert!(
        text.contains(&format!("P(two states shared one) <= {bound:.1e}")),
        "{text}"
    );
    assert_eq!(report.json()["collision_bound"], bound);
}
