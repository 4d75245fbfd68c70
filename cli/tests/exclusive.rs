//! `redlock run` on one resource from several processes: the command runs once at a time,
//! a refused run exits 75, and `--wait` runs it after the holder is done.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// A generous per-node timeout: contention tests must not fail a round because a loaded
/// machine answered a local node late.
const CALM: [&str; 4] = ["--ttl", "10s", "--node-timeout", "500ms"];

/// Appends `$NAME` to `$LINES`, then waits for `$GO`.
fn job() -> String {
    format!("echo \"$NAME\" >> \"$LINES\"; {WAIT_FOR_GO}")
}

#[test]
fn two_runs_at_once_run_the_command_once_and_the_other_exits_75() {
    let fleet = fleet(5);
    let files = Files::new();
    let start = |name: &str| {
        let mut command = run_sh(
            &fleet,
            &[&CALM[..], &["--resource", "report"]].concat(),
            &job(),
        );
        files.env(&mut command);
        command.env("NAME", name);
        Running::start(&mut command)
    };
    let mut first = start("a");
    let mut second = start("b");

    // The loser gives up after one round while the winner's command waits for `go`.
    assert!(
        eventually(HANG, || first.exited() || second.exited()),
        "neither run ended"
    );
    let (loser, winner) = if first.exited() {
        (first, second)
    } else {
        (second, first)
    };
    let refused = loser.finish();
    assert_eq!(refused.code, Some(75), "{}", refused.text());
    assert!(
        refused.stderr.contains("`report` is held by another owner"),
        "{}",
        refused.text()
    );
    // The winner may still be starting its command when the loser has exited.
    assert!(
        eventually(HANG, || lines(&files.lines).len() == 1),
        "{:?}",
        lines(&files.lines)
    );

    files.go();
    let ran = winner.finish();
    assert_eq!(ran.code, Some(0), "{}", ran.text());
    assert_eq!(lines(&files.lines).len(), 1, "{:?}", lines(&files.lines));
    assert_free(&fleet, "redlock:report");
}

#[test]
fn a_split_vote_among_simultaneous_starters_does_not_skip_the_job() {
    let fleet = fleet(5);
    // Two other starters took two nodes each and, having lost, are about to release them
    // (here, their keys expire 250 ms from now). Nobody holds a quorum: a run without
    // --wait must not give up after its first round, which sees four nodes taken; its
    // retries (100-200 ms apart) come after the keys are gone.
    for (node, owner) in [(0, "a"), (1, "a"), (2, "b"), (3, "b")] {
        let mut connection = fleet.connect(node).unwrap();
        let _: () = redis::cmd("SET")
            .arg("redlock:report")
            .arg(owner.repeat(32))
            .arg("PX")
            .arg(250)
            .query(&mut connection)
            .unwrap();
    }
    let files = Files::new();
    let mut command = run_sh(&fleet, &["--resource", "report"], "echo ran >> \"$LINES\"");
    files.env(&mut command);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());
    assert_eq!(lines(&files.lines), ["ran"]);
}

#[test]
fn wait_runs_the_second_command_once_the_first_is_done() {
    let fleet = fleet(5);
    let files = Files::new();
    let start = |name: &str, wait: &str| {
        let args = [&CALM[..], &["--resource", "report", "--wait", wait]].concat();
        let mut command = run_sh(&fleet, &args, &job());
        files.env(&mut command);
        command.env("NAME", name);
        Running::start(&mut command)
    };
    let holder = start("first", "0s");
    assert!(eventually(HANG, || lines(&files.lines) == ["first"]));

    // --quiet: refused without a word, for cron.
    let mut quiet = run_sh(
        &fleet,
        &["--resource", "report", "--quiet"],
        "echo ran >> \"$LINES\"",
    );
    files.env(&mut quiet);
    let silent = finish(&mut quiet);
    assert_eq!(
        (silent.code, silent.stderr.as_str()),
        (Some(75), ""),
        "{}",
        silent.text()
    );

    // A short wait runs out while the first still holds the resource.
    let impatient = start("impatient", "300ms");
    let waiter = start("second", "20s");
    let started = Instant::now();
    let gave_up = impatient.finish();
    assert_eq!(gave_up.code, Some(75), "{}", gave_up.text());
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "gave up after {:?}",
        started.elapsed()
    );
    assert!(gave_up.stderr.contains("rounds over"), "{}", gave_up.text());
    assert_eq!(lines(&files.lines), ["first"]);

    // The patient one runs as soon as the first is done (its command then finds `go`).
    files.go();
    let first = holder.finish();
    assert_eq!(first.code, Some(0), "{}", first.text());
    let second = waiter.finish();
    assert_eq!(second.code, Some(0), "{}", second.text());
    assert_eq!(lines(&files.lines), ["first", "second"]);
    assert_free(&fleet, "redlock:report");
}
