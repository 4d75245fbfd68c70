//! The published crate's examples (`redlock/examples/`) run to their end against real
//! `redis-server` nodes that this test starts: each exits with an error when what it shows
//! does not happen (a late fenced write applied, an import not stopped), so a change that
//! breaks what it teaches fails here.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Runs `cargo run -p redlock-quorum --example <name>` with `REDLOCK_NODES` set to the fleet,
/// and returns its standard output.
fn run_example(name: &str, fleet: &redlock_tests::RedisFleet) -> String {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "-p", "redlock-quorum", "--example", name])
        .env("REDLOCK_NODES", fleet.urls().join(","))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "example {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// Five nodes old enough for the examples' longest TTL (5 s) to pass the restart quarantine,
/// which the examples keep on as against a real fleet.
fn fleet_for_examples() -> redlock_tests::RedisFleet {
    let started = Instant::now();
    let fleet = fleet(5);
    wait_until_older_than(started, Duration::from_secs(5));
    fleet
}

#[test]
fn the_published_examples_run_against_real_nodes() {
    let fleet = fleet_for_examples();
    let stock = run_example("warehouse_stock_sync", &fleet);
    assert!(stock.contains("south: tick skipped"), "{stock}");
    assert!(stock.contains("late write with token"), "{stock}");
    let import = run_example("long_import", &fleet);
    assert!(import.contains("stopped cleanly"), "{import}");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
}

#[test]
fn an_example_without_nodes_says_what_it_needs() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "-p",
            "redlock-quorum",
            "--example",
            "long_import",
        ])
        .env_remove("REDLOCK_NODES")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("set REDLOCK_NODES"), "{stderr}");
}
