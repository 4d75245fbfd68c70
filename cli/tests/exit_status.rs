//! `redlock run` exits as the command did, as `flock(1)` does; signals sent to `redlock`
//! reach the command; every lease is released before `redlock` exits.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::*;
use nix::sys::signal::Signal;

#[test]
fn the_commands_status_is_propagated_and_the_lease_freed_before_exit() {
    let fleet = fleet(3);
    let dir = scratch();
    let not_executable = dir.path().join("data.txt");
    std::fs::write(&not_executable, "not a program").unwrap();
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644)).unwrap();

    let cases: [(&[&str], i32); 6] = [
        (&["true"], 0),
        (&["sh", "-c", "exit 7"], 7),
        (&["sh", "-c", "exit 255"], 255),
        // Killed by a signal: 128 + its number, as a shell reports it.
        (&["sh", "-c", "kill -TERM $$"], 143),
        (&["/nonexistent/redlock-test-command"], 127),
        (&[not_executable.to_str().unwrap()], 126),
    ];
    for (command, expected) in cases {
        let mut redlock = redlock();
        redlock.arg("run").args(FRESH_NODES);
        for url in fleet.urls() {
            redlock.args(["--node", &url]);
        }
        redlock.args(["--resource", "job", "--"]).args(command);
        let done = finish(&mut redlock);
        assert_eq!(done.code, Some(expected), "{command:?}: {}", done.text());
        // Checked at once, not eventually: a cron job's next run must find it free (and
        // the next case is that run).
        assert_free(&fleet, "redlock:job");
    }
}

#[test]
fn a_signal_to_redlock_reaches_the_command_which_decides_the_status() {
    let fleet = fleet(3);
    let files = Files::new();
    let script = format!(
        "trap 'echo TERM >> \"$LINES\"; exit 5' TERM; echo started >> \"$LINES\"; {WAIT_FOR_GO}"
    );
    let mut command = run_sh(&fleet, &["--resource", "job"], &script);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["started"]));

    running.signal(Signal::SIGTERM);
    let done = running.finish();
    assert_eq!(done.code, Some(5), "{}", done.text());
    assert_eq!(lines(&files.lines), ["started", "TERM"]);
    assert_free(&fleet, "redlock:job");
}

/// `SIGUSR1` (a log rotation, say) ends a process by default: `redlock` ended by it left
/// the command running unguarded. It goes on to the command like the others, and the
/// lease is kept until the command exits.
#[test]
fn a_user_signal_reaches_the_command_and_redlock_stays() {
    let fleet = fleet(3);
    let files = Files::new();
    let script = format!(
        "trap 'echo USR1 >> \"$LINES\"' USR1; echo started >> \"$LINES\"; {WAIT_FOR_GO}; \
         exit 6"
    );
    let mut command = run_sh(&fleet, &["--resource", "job"], &script);
    files.env(&mut command);
    let mut running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["started"]));

    running.signal(Signal::SIGUSR1);
    assert!(eventually(HANG, || lines(&files.lines) == ["started", "USR1"]));
    assert!(!running.exited(), "redlock ended on SIGUSR1");
    assert!(
        lock_keys(&fleet, "redlock:job").len() >= 2,
        "the lease is held"
    );
    files.go();
    let done = running.finish();
    assert_eq!(done.code, Some(6), "{}", done.text());
    assert_free(&fleet, "redlock:job");
}

#[test]
fn a_signal_while_waiting_stops_without_running_the_command() {
    let fleet = fleet(3);
    let files = Files::new();
    let mut holder = run_sh(
        &fleet,
        &["--resource", "job"],
        &format!("echo held >> \"$LINES\"; {WAIT_FOR_GO}"),
    );
    files.env(&mut holder);
    let holder = Running::start(&mut holder);
    assert!(eventually(HANG, || lines(&files.lines) == ["held"]));

    let mut waiter = run_sh(
        &fleet,
        &["--resource", "job", "--wait", "20s"],
        "echo ran >> \"$LINES\"",
    );
    let mut inspector = fleet.connect(0).unwrap();
    let before = connected_clients(&mut inspector);
    files.env(&mut waiter);
    let waiter = Running::start(&mut waiter);
    // `redlock run` connects to the nodes only after it catches signals: once its connection
    // shows, a SIGINT is its to handle (before that, it would simply kill the process).
    assert!(
        eventually(HANG, || connected_clients(&mut inspector) > before),
        "the waiter never connected"
    );
    waiter.signal(Signal::SIGINT);
    let interrupted = waiter.finish();
    assert_eq!(interrupted.code, Some(130), "{}", interrupted.text());
    assert!(
        interrupted.stderr.contains("interrupted by SIGINT"),
        "{}",
        interrupted.text()
    );

    files.go();
    assert_eq!(holder.finish().code, Some(0));
    assert_eq!(lines(&files.lines), ["held"]);
}

/// A `--wait` too long to add to a clock reading means "as long as it takes", not a panic.
#[test]
fn a_wait_too_long_to_represent_is_as_good_as_forever() {
    let fleet = fleet(3);
    let args = ["--resource", "job", "--wait", "18446744073709551615s"];
    let done = finish(&mut run_sh(&fleet, &args, "exit 3"));
    assert_eq!(done.code, Some(3), "{}", done.text());
}
