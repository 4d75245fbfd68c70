//! A lease that can no longer be extended ends the command: `SIGTERM` while some validity is
//! left, `SIGKILL` by the time it ends, and exit code 74.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use redlock_tests::RedisFleet;

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
            && done.stderr.contains("sent SIGTERM"),
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

/// Wall-clock nanoseconds: what `date +%s%N` prints, so that the test and the command's
/// shell compare readings of one clock.
fn wall_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A command that ignores SIGTERM and appends `date +%s%N` to `$LINES` every few
/// milliseconds, with a background child of its own that ignores SIGTERM too.
const TICKING: &str = "trap '' TERM; (trap '' TERM; exec sleep 60) & echo \"child $!\" >> \"$LINES\"; \
                       while :; do date +%s%N >> \"$LINES\"; sleep 0.001; done";

/// The ticks and the child's pid a `TICKING` command wrote.
fn ticks(path: &std::path::Path) -> (Vec<u128>, Pid) {
    let ticks = lines(path).iter().filter_map(|l| l.parse().ok()).collect();
    (ticks, child_pid(path))
}

#[test]
fn a_command_that_ignores_sigterm_is_killed_with_its_children_before_the_keys_expire() {
    let mut fleet = fleet(5);
    let files = Files::new();
    let args = ["--resource", "import", "--ttl", "4s", "--kill-after", "1s"];
    let mut command = run_sh(&fleet, &args, TICKING);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || ticks_written(&files.lines) > 0));

    pause_majority(&mut fleet);
    // When the lease's keys expire on a node that still answers: nobody else can take the
    // resource before then, and the command must be gone by then.
    let mut node = fleet.connect(4).unwrap();
    let pttl: u64 = redis::cmd("PTTL")
        .arg("redlock:import")
        .query(&mut node)
        .unwrap();
    let keys_expire = wall_nanos() + u128::from(pttl) * 1_000_000;
    let done = running.finish();
    resume_majority(&mut fleet);

    assert_eq!(done.code, Some(74), "{}", done.text());
    assert!(done.stderr.contains("sent SIGKILL"), "{}", done.text());
    let (ticks, child) = ticks(&files.lines);
    let last = *ticks.last().unwrap();
    // The validity ends a drift allowance (4 s × 1 % + 2 ms) before the keys expire, at the
    // latest; SIGKILL goes out one per-node timeout (50 ms) before that. The last tick comes
    // at least half of that before the end of the validity (a command killed at the end of
    // its validity, or later, fails this).
    let validity_end = keys_expire - 42_000_000;
    let killed_by = validity_end - 25_000_000;
    assert!(
        last < killed_by,
        "the command ticked until {} ms before the end of its lease's validity",
        (validity_end.saturating_sub(last)) / 1_000_000
    );
    // The whole process group got SIGKILL before redlock exited: the child too.
    assert!(!alive(child), "the command's child survived");
}

/// The recipe of the lease's edge: the shell's `wait` is cut by SIGTERM, so the group's
/// leader exits at once while its child, which ignores SIGTERM, runs on. The group must be
/// killed anyway, before the lease is released.
#[test]
fn a_child_that_outlives_its_terminated_leader_is_killed_before_the_release() {
    let mut fleet = fleet(3);
    let files = Files::new();
    let script = "(trap '' TERM; exec sleep 60) & echo \"child $!\" >> \"$LINES\"; wait";
    let mut command = run_sh(&fleet, &["--resource", "pg", "--ttl", "2s"], script);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || !lines(&files.lines).is_empty()));
    for node in [0, 1] {
        fleet.pause(node).unwrap();
    }
    let done = running.finish();
    let child = child_pid(&files.lines);
    let survived = alive(child);
    for node in [0, 1] {
        fleet.resume(node).unwrap();
    }
    assert_eq!(done.code, Some(74), "{}", done.text());
    assert!(!survived, "the child outlived the lease: {}", done.text());
}

/// The normal path: a command that exits 0 while something it started in the background
/// still runs does not leave that running once the lease is released.
#[test]
fn a_background_job_left_by_a_finished_command_is_killed_before_the_release() {
    let fleet = fleet(3);
    let files = Files::new();
    let script = "sleep 60 & echo \"child $!\" >> \"$LINES\"; exit 0";
    let mut command = run_sh(&fleet, &["--resource", "pg"], script);
    files.env(&mut command);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());
    let child = child_pid(&files.lines);
    assert!(!alive(child), "the background job outlived the lease");
}

/// `redlock run … 2>&1 | logger` whose reader has gone: every write to stderr fails with
/// EPIPE (Rust ignores SIGPIPE). With `-q` the first write is the lease's loss, and a write
/// that failed must not end `redlock` before the command is stopped: it would leave the
/// command running with no lease while another host takes it.
#[test]
fn a_closed_stderr_does_not_leave_the_command_running_past_its_lease() {
    let mut fleet = fleet(3);
    let files = Files::new();
    // Its output goes elsewhere: a command left running would otherwise hold `redlock`'s
    // stdout open, and the test would wait for it rather than see it.
    let script = "echo \"child $$\" >> \"$LINES\"; exec sleep 60 >/dev/null 2>&1";
    let mut command = run_sh(&fleet, &["-q", "--resource", "pg", "--ttl", "2s"], script);
    files.env(&mut command);
    let (reader, writer) = nix::unistd::pipe().unwrap();
    drop(reader);
    command.stderr(std::process::Stdio::from(writer));
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || !lines(&files.lines).is_empty()));
    let child = child_pid(&files.lines);
    for node in [0, 1] {
        fleet.pause(node).unwrap();
    }
    let done = running.finish();
    let survived = alive(child);
    if survived {
        let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
    }
    for node in [0, 1] {
        fleet.resume(node).unwrap();
    }
    assert!(!survived, "the command outlived the lease: {}", done.text());
    assert_eq!(done.code, Some(74), "{}", done.text());
}

/// The pid a script wrote as `child <pid>`.
fn child_pid(path: &std::path::Path) -> Pid {
    let line = lines(path)
        .into_iter()
        .find_map(|line| line.strip_prefix("child ").map(str::to_owned))
        .unwrap();
    Pid::from_raw(line.parse().unwrap())
}

/// How many ticks a `TICKING` command has written so far.
fn ticks_written(path: &std::path::Path) -> usize {
    lines(path)
        .iter()
        .filter(|l| l.parse::<u128>().is_ok())
        .count()
}

/// redlock stopped (a frozen VM, an overloaded host) past the kill instant: on resume the
/// command is killed at once, not given the grace period again.
#[test]
fn a_redlock_resumed_after_the_kill_instant_kills_the_command_at_once() {
    let fleet = fleet(3);
    let files = Files::new();
    let args = ["--resource", "import", "--ttl", "4s", "--kill-after", "1s"];
    let mut command = run_sh(&fleet, &args, TICKING);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || ticks_written(&files.lines) > 0));
    running.signal(Signal::SIGSTOP);
    std::thread::sleep(Duration::from_secs(5));
    let resumed = wall_nanos();
    running.signal(Signal::SIGCONT);
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.text());
    let (ticks, child) = ticks(&files.lines);
    let after = ticks.iter().filter(|&&t| t > resumed).count();
    let last = *ticks.last().unwrap();
    // A tick every 10 ms: the command may finish the one it is in, no more. (It used to get
    // the whole second of grace after the resume.)
    assert!(
        last < resumed + 100_000_000,
        "the command ran {} ms past the resume ({after} ticks)",
        (last.saturating_sub(resumed)) / 1_000_000
    );
    assert!(!alive(child), "the command's child survived");
    assert!(done.stderr.contains("SIGKILL at once"), "{}", done.text());
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
