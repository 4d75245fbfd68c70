//! `scripts/demo` builds only what it runs: the quickstart is a binary of this package, whose
//! build takes the package's normal dependencies, never the tests' dev-dependencies (a
//! TLS stack with a C build, the simulator and its charts, proptest), as an example's
//! would.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;
use std::process::Command;

fn cargo(args: &[&str]) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn the_demo_runs_the_quickstart_binary() {
    let script =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/demo"))
            .unwrap();
    assert!(
        script.contains("cargo run --release --locked -p redlock-tests --bin quickstart"),
        "{script}"
    );
    let metadata: serde_json::Value = serde_json::from_str(&cargo(&[
        "metadata",
        "--format-version",
        "1",
        "--no-deps",
        "--locked",
    ]))
    .unwrap();
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "redlock-tests")
        .unwrap();
    let quickstart: Vec<&serde_json::Value> = package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "quickstart")
        .collect();
    assert_eq!(quickstart.len(), 1, "{quickstart:?}");
    assert_eq!(quickstart[0]["kind"], serde_json::json!(["bin"]));
}

/// What building the binary compiles: this package's normal and build dependencies, all of
/// them, on every platform. None of the tests' heavy dev-dependencies may be among them.
#[test]
fn the_quickstart_builds_without_the_tests_dev_dependencies() {
    let tree = cargo(&[
        "tree",
        "--locked",
        "-p",
        "redlock-tests",
        "-e",
        "normal,build",
        "--target",
        "all",
        "--prefix",
        "none",
    ]);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split(' ').next())
        .collect();
    for needed in ["redlock-quorum", "tokio", "tracing-subscriber"] {
        assert!(crates.contains(&needed), "{needed} missing from\n{tree}");
    }
    let unwanted: Vec<&&str> = [
        "ring",
        "rustls",
        "rcgen",
        "redlock-sim",
        "plotters",
        "proptest",
        "metrics",
        "clap",
    ]
    .iter()
    .filter(|name| crates.contains(name))
    .collect();
    assert!(
        unwanted.is_empty(),
        "the demo would build {unwanted:?}:\n{tree}"
    );
}
