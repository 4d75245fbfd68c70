//! The restart quarantine from the command line: every `redlock run` is a fresh process that
//! has never seen the nodes before, and must still leave out a node that restarted empty.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// A holds `q` on nodes 0–2 only (3 and 4 are taken by someone else for
/// half a second); node 2 is killed and starts again empty; B, a new process, must not count
/// it, or it wins nodes 2–4 while A still holds.
#[test]
fn a_new_process_leaves_out_a_node_that_restarted_empty() {
    let mut fleet = fleet(5);
    let started = Instant::now();
    fleet
        .occupy(&[3, 4], "redlock:q", Duration::from_millis(500))
        .unwrap();
    let files = Files::new();
    let script = format!("echo A >> \"$LINES\"; {WAIT_FOR_GO}");
    // A knows the fleet is new (no restart to guard against).
    let mut a = run_sh(&fleet, &["--resource", "q", "--ttl", "20s"], &script);
    files.env(&mut a);
    let a = Running::start(&mut a);
    assert!(eventually(HANG, || lines(&files.lines) == ["A"]));

    // Every node is older than B's quarantine but node 2, which restarts empty.
    let old_enough = Duration::from_millis(3_100);
    std::thread::sleep(old_enough.saturating_sub(started.elapsed()));
    fleet.restart(2).unwrap();
    let args = [
        "--resource",
        "q",
        "--ttl",
        "20s",
        "--restart-quarantine",
        "2s",
    ];
    let mut b = run_sh(&fleet, &args, "echo B >> \"$LINES\"");
    files.env(&mut b);
    let b = finish(&mut b);
    files.go();
    let a = a.finish();

    assert_eq!(b.code, Some(75), "B ran while A held: {}", b.text());
    assert!(b.stderr.contains("restart quarantine"), "{}", b.text());
    assert_eq!(lines(&files.lines), ["A"], "{}", b.text());
    assert_eq!(a.code, Some(0), "{}", a.text());
}

/// `--restart-quarantine` set too short for the nodes' age, with the default: a fleet that
/// started less than a TTL ago refuses new processes for the rest of that TTL (the cost of
/// the rule), with a message saying so.
#[test]
fn a_fleet_younger_than_the_ttl_is_refused_until_it_is_old_enough() {
    let fleet = fleet(3);
    let args = [
        "--resource",
        "q",
        "--ttl",
        "2s",
        "--restart-quarantine",
        "2s",
    ];
    let done = finish(&mut run_sh(&fleet, &args, "true"));
    assert_eq!(done.code, Some(69), "{}", done.text());
    assert!(
        done.stderr.contains("restart quarantine"),
        "{}",
        done.text()
    );
    let waited = finish(&mut run_sh(
        &fleet,
        &[
            "--wait",
            "5s",
            "--resource",
            "q",
            "--ttl",
            "2s",
            "--restart-quarantine",
            "2s",
        ],
        "true",
    ));
    assert_eq!(waited.code, Some(0), "{}", waited.text());
}
