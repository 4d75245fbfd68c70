//! The check catalogue (`simulator/checks/`): every check reaches its expected outcome, and
//! every violation found replays, as a counterexample file, in `redlock-sim run` and
//! `explain` with the same verdict.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};

use redlock_sim::check::{self, CheckSpec, Options, Outcome};

mod common;

fn check_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("checks");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the checks directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn options() -> Options {
    Options {
        threads: 2,
        ..Options::default()
    }
}

/// Runs `redlock-sim`: whether it succeeded, and what it printed.
fn sim_ok(args: &[&str]) -> (bool, String) {
    let out = common::sim(args);
    (out.status.success(), common::text(&out))
}

#[test]
fn every_check_reaches_its_expected_outcome_and_its_counterexample_replays() {
    let files = check_files();
    assert!(
        files.len() >= 8,
        "the check catalogue shrank to {}",
        files.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let spec = CheckSpec::load(file).unwrap_or_else(|e| panic!("{e}"));
        let report = check::check(spec, options());
        if !report.matches() {
            failures.push(format!("{}:\n{}", file.display(), report.text()));
            continue;
        }
        // A check that expects no violation must not pass because nothing happens.
        if report.spec.expect == Outcome::NoViolation {
            let reached: Vec<_> = report.properties();
            for wanted in ["grant", "contended-hand-off"] {
                assert!(
                    reached
                        .iter()
                        .any(|(p, r)| p.name() == wanted && *r == "reached"),
                    "{}: never reached {wanted}",
                    file.display()
                );
            }
        }
        let Some(counterexample) = report.counterexample_file(&text) else {
            continue;
        };
        let (property, _) = report.exploration.violation.as_ref().unwrap();
        let path = dir.path().join(file.file_name().unwrap());
        std::fs::write(&path, &counterexample).unwrap();
        let replay = check::replay(CheckSpec::load(&path).unwrap()).unwrap();
        assert_eq!(replay.violation, Some(*property), "{}", file.display());
        let path = path.to_str().unwrap();
        let (ok, out) = sim_ok(&["run", path]);
        assert!(ok, "{}: run did not match:\n{out}", file.display());
        assert!(
            out.contains(&format!("violation of {}", property.name())) && out.contains("match"),
            "{}: {out}",
            file.display()
        );
        let (ok, out) = sim_ok(&["explain", path]);
        assert!(ok, "{}: explain:\n{out}", file.display());
        assert!(
            out.contains(&format!("BREAKS {}", property.name())),
            "{out}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const SMALL: &str = r#"
name = "small"
[model]
horizon_ticks = 3
[expect]
outcome = "no-violation"
"#;

#[test]
fn the_same_check_explores_the_same_states() {
    let run = || check::check(check::parse(SMALL, "small").unwrap(), Options::default());
    let (a, b) = (run(), run());
    assert_eq!(
        (
            a.exploration.states,
            a.exploration.distinct,
            a.exploration.depth
        ),
        (
            b.exploration.states,
            b.exploration.distinct,
            b.exploration.depth
        )
    );
    assert!(a.exploration.complete && a.matches());
}

#[test]
fn client_symmetry_only_merges_states() {
    let spec = check::parse(SMALL, "small").unwrap();
    let with = check::check(spec.clone(), Options::default());
    let without = check::check(
        spec,
        Options {
            symmetry: false,
            ..Options::default()
        },
    );
    assert!(with.exploration.distinct < without.exploration.distinct);
    assert_eq!(with.outcome(), without.outcome());
}

#[test]
fn a_counterexample_that_no_longer_applies_is_refused_not_replayed() {
    let text = format!("{SMALL}\n[counterexample]\npath = [\"crash n0\"]\n");
    let error = check::replay(check::parse(&text, "edited").unwrap()).unwrap_err();
    assert!(
        error.contains("counterexample.path[0]") && error.contains("not possible"),
        "{error}"
    );
}

#[test]
fn bad_check_files_name_the_line_and_field() {
    let cases = [
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\nnodes = 0\n[expect]\noutcome = \"violation\"\n",
            "model.nodes",
            4,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[expect]\noutcome = \"maybe\"\n",
            "expect.outcome",
            5,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\ncolour = 1\n[expect]\noutcome = \"violation\"\n",
            "model",
            4,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[expect]\noutcome = \"violation\"\nalways = [\"liveness\"]\n",
            "expect.always",
            6,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[clocks]\nclient_slow_ticks = 9\n[expect]\noutcome = \"violation\"\n",
            "clocks.client_slow_ticks",
            5,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[client]\nstart_within_ticks = 3\n[expect]\noutcome = \"violation\"\n",
            "client.start_within_ticks",
            5,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[client]\nstop = \"never\"\nstop_ticks = 2\n[expect]\noutcome = \"violation\"\n",
            "client.stop_ticks",
            6,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[client]\nstop_ticks = 61\n[expect]\noutcome = \"violation\"\n",
            "client.stop_ticks",
            5,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[client]\nstop = \"later\"\n[expect]\noutcome = \"violation\"\n",
            "client.stop",
            5,
        ),
        (
            "name = \"x\"\n[model]\nhorizon_ticks = 3\n[expect]\noutcome = \"violation\"\nmay_stay_unreached = [\"mutual-exclusion\"]\n",
            "expect.may_stay_unreached",
            6,
        ),
    ];
    for (text, field, line) in cases {
        let error = check::parse(text, "bad.toml").unwrap_err();
        assert_eq!(error.line(), Some(line), "{error}");
        assert!(
            error.field().unwrap_or_default().starts_with(field),
            "{error}"
        );
    }
    let (ok, out) = sim_ok(&["check", "no-such-file.toml"]);
    assert!(!ok && out.contains("no-such-file.toml"), "{out}");
}
