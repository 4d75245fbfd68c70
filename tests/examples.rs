//! The published crate's examples (`redlock/examples/`) run to their end against real
//! `redis-server` nodes that this test starts: each exits with an error when what it shows
//! does not happen (a late fenced write applied, an import not stopped), so a change that
//! breaks what it teaches fails here.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Builds the example `name` the way the workspace's tests are built (`cargo build
/// --workspace`: the same features of every dependency, so nothing is compiled twice; with
/// `-p redlock-quorum` cargo would build tokio and redis again for that package's features
/// alone) and returns the path of its executable.
fn example(name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    // What cargo sets for this test process describes this package, not the build: a build
    // script that reads one (ring's reads `CARGO_MANIFEST_DIR`) would run again, and its
    // crate and every crate above it (rustls, redis, this client) would be compiled again
    // here and once more by the next build outside.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_PRIMARY_",
            "CARGO_TARGET_TMPDIR",
        ]
        .iter()
        .any(|prefix| key.starts_with(prefix))
        {
            build.env_remove(key.as_ref());
        }
    }
    let output = build
        .args(["build", "--quiet", "--workspace", "--example", name])
        .args(["--message-format", "json-render-diagnostics"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "example {name} does not build:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|message| {
            message["reason"] == "compiler-artifact" && message["target"]["name"] == name
        })
        .and_then(|artifact| artifact["executable"].as_str().map(PathBuf::from))
        .unwrap_or_else(|| panic!("cargo named no executable for the example {name}"))
}

/// Runs the example `name` with `REDLOCK_NODES` set to the fleet, and returns its standard
/// output.
fn run_example(name: &str, fleet: &redlock_tests::RedisFleet) -> String {
    let output = Command::new(example(name))
        .env("REDLOCK_NODES", fleet.urls().join(","))
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
    // Side by side: they lock different resources and change nothing else on the nodes, and
    // most of their time is waiting out leases.
    let (stock, import) = std::thread::scope(|scope| {
        let stock = scope.spawn(|| run_example("warehouse_stock_sync", &fleet));
        let import = run_example("long_import", &fleet);
        (stock.join().unwrap(), import)
    });
    assert!(stock.contains("south: tick skipped"), "{stock}");
    assert!(stock.contains("late write with token"), "{stock}");
    assert!(import.contains("stopped cleanly"), "{import}");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
}

#[test]
fn an_example_without_nodes_says_what_it_needs() {
    let output = Command::new(example("long_import"))
        .env_remove("REDLOCK_NODES")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("set REDLOCK_NODES"), "{stderr}");
}
