//! What `redlock` writes depends on where it goes: a person at a terminal gets colour and a
//! line that counts a long wait; a pipe (a script, a log file, cron's mail) gets plain lines
//! only, without colour codes or carriage returns. `script(1)` (util-linux) gives a command
//! a terminal.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use common::{
    Files, HANG, Running, WAIT_FOR_GO, connected_clients, eventually, finish, fleet, lines, run_sh,
};
use redlock_tests::RedisFleet;

/// `redlock <args>` run on a terminal; returns what the terminal showed (stdout and stderr
/// together, as a person sees them) and the exit status.
fn on_a_terminal(args: &[String], env: &[(&str, &str)]) -> Output {
    let mut line = env!("CARGO_BIN_EXE_redlock").to_owned();
    for arg in args {
        // The arguments here are URLs, flags and plain words: single quotes are enough.
        assert!(!arg.contains('\''), "{arg}");
        line.push_str(&format!(" '{arg}'"));
    }
    let mut command = Command::new("script");
    command
        .args(["-qec", &line, "/dev/null"])
        .env_remove("REDLOCK_NODES")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR");
    for (name, value) in env {
        command.env(name, value);
    }
    command
        .output()
        .expect("script(1), from util-linux, gives the command a terminal")
}

fn run_args(fleet: &RedisFleet, args: &[&str], command: &[&str]) -> Vec<String> {
    let mut all = vec!["run".to_owned()];
    for url in fleet.urls() {
        all.extend(["--node".to_owned(), url]);
    }
    all.extend(
        ["--restart-quarantine", "off"]
            .iter()
            .chain(args)
            .chain(&["--"])
            .chain(command)
            .map(|s| (*s).to_owned()),
    );
    all
}

const ESCAPE: &str = "\x1b[";

#[test]
fn rust_log_in_a_pipe_has_no_colour_codes() {
    let fleet = fleet(3);
    let mut command = run_sh(&fleet, &["--resource", "logged"], "true");
    command.env("RUST_LOG", "debug");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());
    // The library did log (the lease's grant and release), in plain text.
    assert!(done.stderr.contains("DEBUG"), "{}", done.text());
    assert!(!done.stderr.contains(ESCAPE), "{:?}", done.stderr);
}

/// The same logs on a terminal are coloured, unless `NO_COLOR` says otherwise.
#[test]
fn rust_log_on_a_terminal_is_coloured_unless_no_color() {
    let fleet = fleet(3);
    let args = run_args(&fleet, &["--resource", "logged"], &["true"]);
    let coloured = on_a_terminal(&args, &[("RUST_LOG", "debug")]);
    assert!(coloured.status.success(), "{coloured:?}");
    let shown = String::from_utf8_lossy(&coloured.stdout);
    assert!(
        shown.contains("DEBUG") && shown.contains(ESCAPE),
        "{shown:?}"
    );

    let plain = on_a_terminal(&args, &[("RUST_LOG", "debug"), ("NO_COLOR", "1")]);
    assert!(plain.status.success(), "{plain:?}");
    let shown = String::from_utf8_lossy(&plain.stdout);
    assert!(
        shown.contains("DEBUG") && !shown.contains(ESCAPE),
        "{shown:?}"
    );
}

/// Holds `job` on `fleet` until `files.go()`.
fn hold(fleet: &RedisFleet, files: &Files) -> Running {
    let mut holder = run_sh(
        fleet,
        &["--resource", "job"],
        &format!("echo held >> \"$LINES\"; {WAIT_FOR_GO}"),
    );
    files.env(&mut holder);
    let holder = Running::start(&mut holder);
    assert!(eventually(HANG, || lines(&files.lines) == ["held"]));
    holder
}

/// In a pipe, a wait for a held resource is announced in one line, and nothing else is
/// added: no carriage return, no escape sequence. `--quiet` keeps even that line back.
#[test]
fn a_wait_in_a_pipe_is_announced_in_one_plain_line() {
    let fleet = fleet(3);
    let files = Files::new();
    let holder = hold(&fleet, &files);

    let mut waiter = run_sh(
        &fleet,
        &["--resource", "job", "--wait", "20s"],
        "echo ran >> \"$LINES\"",
    );
    files.env(&mut waiter);
    let mut quiet = run_sh(
        &fleet,
        &["--resource", "job", "--wait", "20s", "--quiet"],
        "echo quiet >> \"$LINES\"",
    );
    files.env(&mut quiet);
    let mut inspector = fleet.connect(0).unwrap();
    let before = connected_clients(&mut inspector);
    let waiter = Running::start(&mut waiter);
    let quiet = Running::start(&mut quiet);
    assert!(
        eventually(HANG, || connected_clients(&mut inspector) >= before + 2),
        "the waiters never connected"
    );
    // Long enough for several of the terminal's once-a-second lines, were they drawn.
    std::thread::sleep(Duration::from_millis(1500));
    files.go();
    assert_eq!(holder.finish().code, Some(0));

    let waited = waiter.finish();
    assert_eq!(waited.code, Some(0), "{}", waited.text());
    assert_eq!(
        waited.stderr,
        "redlock: `job` is held by another owner; waiting up to 20s for it\n"
    );
    assert!(waited.stdout.is_empty(), "{}", waited.text());
    let quieted = quiet.finish();
    assert_eq!(quieted.code, Some(0), "{}", quieted.text());
    assert_eq!(quieted.stderr, "", "{}", quieted.text());
    let mut ran = lines(&files.lines);
    ran.sort();
    assert_eq!(ran, ["held", "quiet", "ran"]);
}

/// On a terminal, the announcement is followed by a line that counts the time waited,
/// rewritten in place and erased once the lease is taken.
#[test]
fn a_wait_on_a_terminal_counts_the_time_waited() {
    let fleet = fleet(3);
    let files = Files::new();
    let holder = hold(&fleet, &files);

    let args = run_args(&fleet, &["--resource", "job", "--wait", "20s"], &["true"]);
    let release = std::thread::spawn({
        let go = files.go;
        move || {
            std::thread::sleep(Duration::from_millis(2500));
            std::fs::write(go, "").unwrap();
        }
    });
    let waiter = on_a_terminal(&args, &[]);
    release.join().unwrap();
    assert_eq!(holder.finish().code, Some(0));
    assert!(waiter.status.success(), "{waiter:?}");
    let shown = String::from_utf8_lossy(&waiter.stdout);
    assert!(
        shown.contains("redlock: `job` is held by another owner; waiting up to 20s for it\r\n"),
        "{shown:?}"
    );
    assert!(
        shown.contains("\r\x1b[2Kredlock: waited 1s of 20s"),
        "{shown:?}"
    );
    // Erased before the command ran: the last thing on the terminal is the erasure.
    assert!(shown.ends_with("\r\x1b[2K"), "{shown:?}");
}

/// The widest line of `text`, in characters.
fn widest(text: &str) -> usize {
    text.lines()
        .map(|line| line.chars().count())
        .max()
        .unwrap_or(0)
}

/// In a pipe, with no `COLUMNS`, help, errors and the doctor's findings fit 80 columns
/// (help lines of up to 329 columns and a doctor finding of 449 before), and no word is
/// lost to the wrapping. The doctor's table rows are the one thing left unwrapped.
#[test]
fn help_errors_and_findings_in_a_pipe_fit_80_columns() {
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["status", "--help"],
        &["doctor", "--help"],
    ] {
        let out = common::redlock()
            .env_remove("COLUMNS")
            .args(args)
            .output()
            .unwrap();
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(widest(&help) <= 80, "redlock {args:?}: {help}");
    }

    let out = common::redlock()
        .env_remove("COLUMNS")
        .args([
            "run",
            "--node",
            "redis://127.0.0.1:1",
            "--node",
            "127.0.0.1:27101",
        ])
        .args(["--resource", "job", "--", "true"])
        .output()
        .unwrap();
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(error.contains("write redis://127.0.0.1:27101"), "{error}");
    assert!(widest(&error) <= 80, "{error}");

    let fleet = fleet(3);
    let mut doctor = common::redlock();
    doctor.env_remove("COLUMNS").arg("doctor");
    for url in fleet.urls() {
        doctor.args(["--node", &url]);
    }
    let report = String::from_utf8(doctor.output().unwrap().stdout).unwrap();
    let (table, prose): (Vec<&str>, Vec<&str>) = report
        .lines()
        .partition(|line| line.starts_with("NODE ") || line.starts_with("127.0.0.1:"));
    assert_eq!(table.len(), 4, "{report}");
    // A word longer than what is left of a line (a scenario's path) is kept whole.
    assert!(
        prose
            .iter()
            .all(|line| line.chars().count() <= 80 || line.split_whitespace().count() == 1),
        "{report}"
    );
    // The fresh fleet is within its restart quarantine: a finding long enough to wrap.
    assert!(report.contains("WARNING"), "{report}");

    // A wider terminal (here `COLUMNS`) gets longer lines.
    let mut wide = common::redlock();
    wide.env("COLUMNS", "160").arg("doctor");
    for url in fleet.urls() {
        wide.args(["--node", &url]);
    }
    let report = String::from_utf8(wide.output().unwrap().stdout).unwrap();
    assert!(
        report.lines().any(|line| !line.starts_with("NODE ")
            && !line.starts_with("127.")
            && line.chars().count() > 80),
        "{report}"
    );
}

/// The command written without `--` before it gets the line to write instead.
#[test]
fn a_command_without_the_double_dash_gets_the_line_to_write() {
    let out = common::redlock()
        .args(["run", "-r", "job", "echo", "hi there"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let error = String::from_utf8(out.stderr).unwrap();
    assert!(
        error.contains("hint: put the command after `--`: redlock run -r job -- echo 'hi there'"),
        "{error}"
    );
}

/// A word that is not UTF-8 (a file name, say) in the line that needs `--`: a usage error
/// with no hint, since a hint cannot spell it; `redlock` panicked reading its arguments.
#[test]
fn a_word_that_is_not_utf8_without_the_double_dash_is_a_usage_error() {
    use std::os::unix::ffi::OsStrExt;
    let word = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let out = common::redlock()
        .args(["run", "-r", "job"])
        .arg(word)
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{error}");
    assert!(!error.contains("panicked"), "{error}");
}
