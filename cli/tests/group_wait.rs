//! The wait between the command's end and the release: `redlock` kills what is left of the
//! command's process group and releases the lease only once the group is confirmed gone.
//! Meanwhile it keeps the lease extended and keeps listening to its own signals.
//!
//! A member that does not go away on its own is made here by the test itself: a `sleep`
//! started by the test *in the command's process group* (same session, `setpgid`). The
//! kill reaches it, and it stays a zombie, still a member of the group, until the test (its
//! parent) reaps it: the test decides when the group is gone.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::Signal;
use redlock_tests::RedisFleet;

/// The command's script: its shell's pid (the group's id) in `$LINES`, then `rest`.
fn script(rest: &str) -> String {
    format!("echo $$ > \"$LINES\"; {rest}")
}

/// A `sleep` that the test starts in the command's process group, once the command has
/// said its group.
fn join_the_group(files: &Files) -> Child {
    assert!(
        eventually(HANG, || !lines(&files.lines).is_empty()),
        "the command never started"
    );
    let group: i32 = lines(&files.lines)[0].parse().unwrap();
    Command::new("sleep")
        .arg("60")
        .process_group(group)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn key_exists(node: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query(node).unwrap()
}

/// Polls `key` on node 0 until it is gone; returns when it was seen gone.
fn key_gone_at(fleet: &RedisFleet, key: &str, within: Duration) -> Option<Instant> {
    let mut node = fleet.connect(0).unwrap();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if !key_exists(&mut node, key) {
            return Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

/// A `SIGTERM` to `redlock` while it waits for the command's killed group to be gone is not
/// swallowed: `redlock` stops extending the lease, leaves its keys to expire (the group is
/// not confirmed gone, so nothing is released) and exits at once with 128 + 15.
#[test]
fn a_sigterm_while_the_group_dies_is_honoured() {
    let fleet = fleet(3);
    let files = Files::new();
    let args = ["--resource", "dying", "--ttl", "10s"];
    let mut command = run_sh(&fleet, &args, &script(&format!("{WAIT_FOR_GO}; exit 0")));
    files.env(&mut command);
    let running = Running::start(&mut command);
    let mut member = join_the_group(&files);
    files.go();
    // The command has ended, the member is killed but not reaped: redlock waits.
    std::thread::sleep(Duration::from_millis(700));
    let mut node = fleet.connect(0).unwrap();
    assert!(key_exists(&mut node, "redlock:dying"), "released too early");
    let sent = Instant::now();
    running.signal(Signal::SIGTERM);
    let done = running.finish();
    let took = done.ended.duration_since(sent);
    let still_held = key_exists(&mut node, "redlock:dying");
    let _ = member.wait();
    let text = done.text();
    assert!(
        took < Duration::from_secs(2),
        "redlock exited {took:?} after SIGTERM: {text}"
    );
    assert_eq!(done.code, Some(128 + 15), "{text}");
    assert!(done.stderr.contains("interrupted by SIGTERM"), "{text}");
    assert!(
        still_held,
        "the lease was released while a member of the group was not confirmed gone: {text}"
    );
}

/// A command that outlives its first TTL (`--ttl 2s`, about 3 s of work) leaves a member
/// that is slow to go: the lease stays extended while it goes, and is released as soon as
/// the group is gone, not when the keys expire.
#[test]
fn a_command_that_outlives_its_first_ttl_is_released_once_the_group_is_gone() {
    let fleet = fleet(3);
    let files = Files::new();
    let args = ["--resource", "long", "--ttl", "2s"];
    let mut command = run_sh(&fleet, &args, &script("sleep 3; exit 0"));
    files.env(&mut command);
    let running = Running::start(&mut command);
    let mut member = join_the_group(&files);
    // The command ends at about 3 s; its member goes 1.5 s later, after the first TTL's
    // release deadline and before the second extension's keys expire.
    std::thread::sleep(Duration::from_millis(4_500));
    let mut node = fleet.connect(0).unwrap();
    let held_meanwhile = key_exists(&mut node, "redlock:long");
    let _ = member.wait();
    let gone = Instant::now();
    let released = key_gone_at(&fleet, "redlock:long", Duration::from_secs(5));
    let done = running.finish();
    let text = done.text();
    assert!(
        held_meanwhile,
        "the lease ended while the group was not gone: {text}"
    );
    let released = released.unwrap_or_else(|| panic!("never released: {text}"));
    let after = released.duration_since(gone);
    assert!(
        after < Duration::from_millis(500),
        "released {after:?} after the group was gone (the keys' expiry?): {text}"
    );
    assert_eq!(done.code, Some(0), "{text}");
    assert!(!done.stderr.contains("did not die"), "{text}");
}
