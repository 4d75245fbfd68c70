//! A lease that can no longer be extended ends the command: `SIGTERM` while some validity is
//! left, `SIGKILL` by the time it ends, and exit code 74.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redlock_fleet::RedisFleet;

/// Stops three of five nodes: no extension can reach a quorum any more.
fn pause_majority(fleet: &mut RedisFleet) {
    for node in 0..3 {
        fleet.pause(node).unwrap();
    }
}

fn resume_majority(fleet: &mut RedisFleet) {
    for node in 0..3 {
        fleet.resume(node).unwrap();
    }
}

#[test]
fn paused_nodes_end_the_lease_the_command_gets_sigterm_and_redlock_exits_74() {
    let mut fleet = fleet(5);
    let files = Files::new();
    let script = format!(
        "trap 'echo TERM >> \"$LINES\"; exit 3' TERM; echo started >> \"$LINES\"; {WAIT_FOR_GO}"
    );
    let mut command = run_sh(&fleet, &["--resource", "import", "--ttl", "2s"], &script);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["started"]));

    pause_majority(&mut fleet);
    let paused = Instant::now();
    let done = running.finish();
    resume_majority(&mut fleet);

    assert_eq!(done.code, Some(74), "{}", done.text());
    assert_eq!(lines(&files.lines), ["started", "TERM"]);
    assert!(
        done.stderr
            .contains("the lease on `import` was not extended in time")
            && done.stderr.contains("sending SIGTERM"),
        "{}",
        done.text()
    );
    // The validity left at the pause is under one TTL.
    let noticed = done.ended - paused;
    assert!(
        noticed < Duration::from_secs(3),
        "ended {noticed:?} after the pause"
    );
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_with_its_children_before_the_keys_expire() {
    let mut fleet = fleet(5);
    let files = Files::new();
    // The shell notes SIGTERM and carries on; its background child ignores it (a trapped
    // signal is reset to the default in children, an ignored one stays ignored). Only
    // SIGKILL ends them.
    let script = "trap 'echo TERM >> \"$LINES\"' TERM; \
                  (trap '' TERM; exec sleep 60) & child=$!; echo $child >> \"$LINES\"; \
                  while kill -0 $child 2>/dev/null; do wait $child; done";
    let args = ["--resource", "import", "--ttl", "4s", "--kill-after", "1s"];
    let mut command = run_sh(&fleet, &args, script);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines).len() == 1));
    let grandchild: i32 = lines(&files.lines)[0].parse().unwrap();

    pause_majority(&mut fleet);
    // When the lease's keys expire on a node that still answers: nobody else can take the
    // resource before then, and the command must be gone by then.
    let mut node = fleet.connect(4).unwrap();
    let pttl: u64 = redis::cmd("PTTL")
        .arg("redlock:import")
        .query(&mut node)
        .unwrap();
    let keys_expire = Instant::now() + Duration::from_millis(pttl);
    let done = running.finish();
    resume_majority(&mut fleet);

    assert_eq!(done.code, Some(74), "{}", done.text());
    assert!(done.stderr.contains("sending SIGKILL"), "{}", done.text());
    assert_eq!(lines(&files.lines)[1..], ["TERM"]);
    // SIGKILL is sent when the validity ends, which is before the keys expire by the drift
    // allowance; the slack covers scheduling on a loaded machine. Sending SIGTERM only once
    // the lease is lost would end a second later.
    let slack = Duration::from_millis(400);
    assert!(
        done.ended < keys_expire + slack,
        "redlock ended {:?} after the keys expired",
        done.ended - keys_expire
    );
    // The whole process group got SIGKILL, the shell's child too.
    let pid = Pid::from_raw(grandchild);
    assert!(
        eventually(Duration::from_secs(2), || kill(pid, None)
            == Err(Errno::ESRCH)),
        "the command's child {grandchild} survived"
    );
}

#[test]
fn the_longest_hold_ends_the_lease_like_a_loss() {
    let fleet = fleet(3);
    let files = Files::new();
    let args = ["--resource", "import", "--ttl", "1s", "--max-hold", "1s"];
    let mut command = run_sh(&fleet, &args, WAIT_FOR_GO);
    files.env(&mut command);
    let started = Instant::now();
    let done = finish(&mut command);
    assert_eq!(done.code, Some(74), "{}", done.text());
    assert!(
        done.stderr.contains("reached the longest hold (1s)"),
        "{}",
        done.text()
    );
    // Extensions stop after 1 s; the last one leaves under 1 s of validity.
    let held = started.elapsed();
    assert!(
        held >= Duration::from_millis(1_000) && held < Duration::from_secs(5),
        "{held:?}"
    );
    assert!(eventually(Duration::from_secs(2), || lock_keys(
        &fleet, PREFIX
    )
    .is_empty()));
}

#[test]
fn a_paused_redlock_reports_that_the_lease_ran_out_even_if_the_command_finished() {
    let fleet = fleet(3);
    let files = Files::new();
    let script = format!("echo started >> \"$LINES\"; {WAIT_FOR_GO}");
    let mut command = run_sh(&fleet, &["--resource", "import", "--ttl", "1s"], &script);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["started"]));

    // redlock is stopped (a frozen VM) past its lease; the command finishes meanwhile.
    running.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(1_500));
    files.go();
    std::thread::sleep(Duration::from_millis(200));
    running.signal(Signal::SIGCONT);
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.text());
    assert!(
        done.stderr.contains("the lease on `import`"),
        "{}",
        done.text()
    );
}
