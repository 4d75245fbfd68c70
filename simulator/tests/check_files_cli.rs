//! The binary on the wrong kind of file, and a check's counterexample under `run --json` and
//! `explain`'s picture options: a clear word or the asked-for output, never silence.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::PathBuf;

mod common;
use common::{sim, text};

/// A check file with its counterexample: the no-elapsed-check client, found in a second.
fn counterexample(dir: &tempfile::TempDir) -> PathBuf {
    let path = dir.path().join("counterexample.toml");
    let output = sim(&[
        "check",
        "checks/no-elapsed-check.toml",
        "--counterexample",
        path.to_str().unwrap(),
    ]);
    assert!(path.exists(), "{}", text(&output));
    path
}

#[test]
fn check_on_a_scenario_file_says_to_run_it() {
    let output = sim(&["check", "scenarios/conformance.toml"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(out.contains("a scenario, not a check"), "{out}");
    assert!(
        out.contains("redlock-sim run scenarios/conformance.toml"),
        "{out}"
    );
    assert!(!out.contains("wanted exactly"), "{out}");
}

#[test]
fn explain_refuses_picture_options_on_a_check_file_and_still_explains_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = counterexample(&dir);
    let svg = dir.path().join("picture.svg");
    let page = dir.path().join("page.html");
    for args in [
        vec!["--svg", svg.to_str().unwrap()],
        vec!["--html", page.to_str().unwrap()],
        vec!["--seed", "3"],
        vec!["--trace"],
    ] {
        let mut all = vec!["explain", file.to_str().unwrap()];
        all.extend(&args);
        let output = sim(&all);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {out}");
        assert!(out.contains(args[0]), "{args:?}: {out}");
        assert!(out.contains("step by step"), "{args:?}: {out}");
    }
    assert!(!svg.exists() && !page.exists());

    let output = sim(&["explain", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("BREAKS mutual-exclusion"));
}

#[test]
fn run_json_replays_a_counterexample_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = counterexample(&dir);
    let output = sim(&["run", "--json", file.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output));
    let replays: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let replay = &replays[0];
    assert_eq!(replay["outcome"], "violation", "{replay}");
    assert_eq!(replay["expected"], "violation", "{replay}");
    assert_eq!(replay["property"], "mutual-exclusion", "{replay}");
    assert_eq!(replay["matches"], true, "{replay}");
    assert!(replay["steps"].as_u64().unwrap() > 0, "{replay}");

    // One JSON document a call: check files and scenarios go to separate calls.
    let mixed = sim(&[
        "run",
        "--json",
        file.to_str().unwrap(),
        "scenarios/rl-00-baseline.toml",
    ]);
    assert_eq!(mixed.status.code(), Some(2), "{}", text(&mixed));
    assert!(text(&mixed).contains("separate"), "{}", text(&mixed));
}
