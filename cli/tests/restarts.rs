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

/// The README's first lease from the shell, on a fleet started a moment ago, with the default
/// quarantine (the TTL): every node answers, and the refusal says that the quarantine left
/// them out, which nodes, how long is left and both ways out, with durations a person reads.
#[test]
fn a_first_run_on_fresh_nodes_names_the_quarantine_and_the_time_left() {
    let fleet = fleet(3);
    let mut command = redlock();
    command.arg("run");
    for url in fleet.urls() {
        command.args(["--node", &url]);
    }
    command.args(["--resource", "nightly-report", "--ttl", "30s", "--", "true"]);
    let done = finish(&mut command);
    let text = done.text();
    assert_eq!(done.code, Some(69), "{text}");
    assert!(
        done.stderr.contains("the restart quarantine leaves out")
            && done.stderr.contains("the command did not run"),
        "{text}"
    );
    assert!(!done.stderr.contains("too few nodes answered"), "{text}");
    let named = fleet
        .urls()
        .iter()
        .filter(|url| {
            let address = url.trim_start_matches("redis://");
            done.stderr.contains(&format!("{address} for another "))
        })
        .count();
    // Every node is fresh, and every one is named and counted, also one the last round did
    // not get to.
    assert_eq!(named, 3, "{text}");
    assert!(done.stderr.contains("leaves out 3 of 3 nodes"), "{text}");
    assert!(done.stderr.contains("A quorum can form in "), "{text}");
    assert!(
        done.stderr.contains("`--wait ")
            && done.stderr.contains("`--restart-quarantine off`")
            && done
                .stderr
                .contains("\"Persistence and restarts\" in docs/operations.md"),
        "{text}"
    );
    assert_at_most_three_decimals(&done.stderr);

    // The declared way out works at once.
    let mut off = redlock();
    off.arg("run").args(FRESH_NODES);
    for url in fleet.urls() {
        off.args(["--node", &url]);
    }
    off.args(["--resource", "nightly-report", "--ttl", "30s", "--", "true"]);
    let done = finish(&mut off);
    assert_eq!(done.code, Some(0), "{}", done.text());
}

/// Every decimal number in `text` followed by a unit has at most three decimals.
fn assert_at_most_three_decimals(text: &str) {
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == 'µ')) {
        if let Some((whole, fraction)) = word.split_once('.') {
            let digits = fraction.trim_end_matches(|c: char| c.is_alphabetic());
            if !whole.is_empty()
                && whole.chars().all(|c| c.is_ascii_digit())
                && digits.chars().all(|c| c.is_ascii_digit())
                && digits.len() < fraction.len()
            {
                assert!(digits.len() <= 3, "`{word}` in: {text}");
            }
        }
    }
}
