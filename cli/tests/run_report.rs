//! `redlock run --json PATH`: the final report, on real fleets, for a command that finished,
//! a refused run, and leases lost while the command ran.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn report(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_finished_run_reports_the_commands_status_fence_and_release() {
    let fleet = fleet(3);
    let dir = scratch();
    let path = dir.path().join("report.json");
    // A stale report from an earlier run is replaced, never kept.
    std::fs::write(&path, "stale").unwrap();
    let done = finish(&mut run_sh(
        &fleet,
        &[
            "--resource",
            "report",
            "--fence-env",
            "FENCE",
            "--json",
            path.to_str().unwrap(),
        ],
        "echo \"ran with $FENCE\"; exit 3",
    ));
    assert_eq!(done.code, Some(3), "{}", done.text());
    // The command's own output is untouched.
    assert_eq!(done.stdout, "ran with 1\n", "{}", done.text());
    let json = report(&path);
    assert_eq!(json["exit_code"], 3, "{json}");
    assert_eq!(json["outcome"], "finished", "{json}");
    assert_eq!(json["resource"], "report", "{json}");
    assert_eq!(json["command"]["exit_code"], 3, "{json}");
    assert_eq!(json["command"]["signal"], Value::Null, "{json}");
    assert_eq!(json["fence"], 1, "{json}");
    assert_eq!(json["rounds"], 1, "{json}");
    assert!(json["waited_ms"].as_f64().unwrap() >= 0.0, "{json}");
    assert!(json["held_ms"].as_f64().unwrap() > 0.0, "{json}");
    // The release waits for every node's answer (docs/cli.md): none is left pending.
    let release = &json["release"];
    assert_eq!(release["released"], 3, "{json}");
    assert_eq!(release["pending"], 0, "{json}");
    assert_eq!(json["release"]["quorum_free"], true, "{json}");
    assert_eq!(json["stop"], Value::Null, "{json}");
    assert_eq!(json["message"], Value::Null, "{json}");
    assert_eq!(json["warnings"], serde_json::json!([]), "{json}");
}

#[test]
fn a_refused_run_reports_the_refusal_and_no_command() {
    let fleet = fleet(3);
    let files = Files::new();
    let mut holder = run_sh(&fleet, &["--resource", "report"], WAIT_FOR_GO);
    files.env(&mut holder);
    let holder = Running::start(&mut holder);
    assert!(eventually(HANG, || lock_keys(&fleet, PREFIX).len() == 3));

    let dir = scratch();
    let path = dir.path().join("report.json");
    let done = finish(&mut run_sh(
        &fleet,
        &[
            "--resource",
            "report",
            "--quiet",
            "--json",
            path.to_str().unwrap(),
        ],
        "echo ran",
    ));
    assert_eq!(done.code, Some(75), "{}", done.text());
    assert_eq!(done.stderr, "", "--quiet: {}", done.text());
    let json = report(&path);
    assert_eq!(json["exit_code"], 75, "{json}");
    assert_eq!(json["outcome"], "refused", "{json}");
    assert!(json["rounds"].as_u64().unwrap() >= 1, "{json}");
    assert!(json["waited_ms"].as_f64().unwrap() > 0.0, "{json}");
    for absent in ["command", "fence", "held_ms", "release", "stop", "message"] {
        assert_eq!(json[absent], Value::Null, "{absent}: {json}");
    }

    // Without --quiet the report carries what stderr said.
    let loud = dir.path().join("loud.json");
    let done = finish(&mut run_sh(
        &fleet,
        &["--resource", "report", "--json", loud.to_str().unwrap()],
        "echo ran",
    ));
    files.go();
    assert_eq!(holder.finish().code, Some(0));
    assert_eq!(done.code, Some(75), "{}", done.text());
    let json = report(&loud);
    let message = json["message"].as_str().unwrap();
    assert!(
        message.starts_with("`report` is held by another owner") && done.stderr.contains(message),
        "{json}\n{}",
        done.text()
    );
}

#[test]
fn a_lease_lost_while_the_command_ran_reports_why() {
    let fleet = fleet(3);
    let files = Files::new();
    let dir = scratch();
    let path = dir.path().join("report.json");
    let script = format!("echo started >> \"$LINES\"; {WAIT_FOR_GO}");
    let mut command = run_sh(
        &fleet,
        &[
            "--resource",
            "import",
            "--ttl",
            "2s",
            "--json",
            path.to_str().unwrap(),
        ],
        &script,
    );
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["started"]));
    // Someone deletes the keys: the next extension finds the lease gone.
    for node in 0..fleet.len() {
        let mut connection = fleet.connect(node).unwrap();
        let _: i64 = redis::cmd("DEL")
            .arg("redlock:import")
            .query(&mut connection)
            .unwrap();
    }
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.text());
    let json = report(&path);
    assert_eq!(json["exit_code"], 74, "{json}");
    assert_eq!(json["outcome"], "stopped", "{json}");
    assert_eq!(json["stop"], "lost", "{json}");
    // A lease known lost is past saving: SIGTERM and SIGKILL go out back to back, and which
    // one the shell dies of is a race (a shell that has its signals blocked while it waits
    // for its `sleep` takes the SIGKILL first, as the kernel delivers it regardless).
    let signal = &json["command"]["signal"];
    assert!(signal == 15 || signal == 9, "{json}");
    assert!(
        done.stderr
            .contains("sent SIGTERM to the command, SIGKILL at once"),
        "{}",
        done.text()
    );
    let message = json["message"].as_str().unwrap();
    assert!(
        message.starts_with("the command was terminated") && done.stderr.contains(message),
        "{json}\n{}",
        done.text()
    );
    assert!(json["release"].is_object(), "{json}");
}

#[test]
fn an_unwritable_report_path_is_refused_before_the_command_runs() {
    let fleet = fleet(1);
    let files = Files::new();
    let mut command = run_sh(
        &fleet,
        &[
            "--resource",
            "report",
            "--json",
            "/nonexistent/dir/report.json",
        ],
        "echo ran >> \"$LINES\"",
    );
    files.env(&mut command);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr
            .starts_with("redlock: --json: cannot create /nonexistent/dir/report.json: "),
        "{}",
        done.text()
    );
    assert!(lines(&files.lines).is_empty(), "the command ran");
}

#[test]
fn a_configuration_error_is_reported_too() {
    let dir = scratch();
    let path = dir.path().join("report.json");
    let mut command = redlock();
    command
        .args([
            "run",
            "--json",
            path.to_str().unwrap(),
            "--resource",
            "report",
        ])
        .args(["--", "true"]);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    let json = report(&path);
    assert_eq!(json["outcome"], "error", "{json}");
    assert_eq!(json["exit_code"], 64, "{json}");
    assert!(
        json["message"].as_str().unwrap().starts_with("no nodes"),
        "{json}"
    );
}

#[test]
fn a_wait_ended_by_a_signal_and_a_missing_command_are_reported() {
    let fleet = fleet(3);
    let files = Files::new();
    let dir = scratch();
    let mut holder = run_sh(&fleet, &["--resource", "report"], WAIT_FOR_GO);
    files.env(&mut holder);
    let holder = Running::start(&mut holder);
    assert!(eventually(HANG, || lock_keys(&fleet, PREFIX).len() == 3));

    // The waiting run's connections open after its signal handlers are installed: a new
    // client on a node says that the wait has begun.
    let mut inspector = fleet.connect(0).unwrap();
    let before = connected_clients(&mut inspector);
    let waiting_report = dir.path().join("waiting.json");
    let waiting = Running::start(&mut run_sh(
        &fleet,
        &[
            "--resource",
            "report",
            "--wait",
            "20s",
            "--json",
            waiting_report.to_str().unwrap(),
        ],
        "echo ran",
    ));
    assert!(eventually(HANG, || connected_clients(&mut inspector) > before));
    waiting.signal(nix::sys::signal::Signal::SIGTERM);
    let done = waiting.finish();
    files.go();
    assert_eq!(holder.finish().code, Some(0));
    assert_eq!(done.code, Some(128 + 15), "{}", done.text());
    let json = report(&waiting_report);
    assert_eq!(json["outcome"], "interrupted", "{json}");
    assert_eq!(json["exit_code"], 143, "{json}");
    assert_eq!(json["rounds"], Value::Null, "{json}");
    assert_eq!(json["command"], Value::Null, "{json}");

    // A command that does not exist: the lease was granted and released, CMD never ran.
    let missing = dir.path().join("missing.json");
    let mut command = redlock();
    command.arg("run");
    for url in fleet.urls() {
        command.args(["--node", &url]);
    }
    command
        .args(FRESH_NODES)
        .args(["--resource", "report", "--json", missing.to_str().unwrap()])
        .args(["--", "/nonexistent/command"]);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(127), "{}", done.text());
    let json = report(&missing);
    assert_eq!(json["outcome"], "not-started", "{json}");
    assert_eq!(json["command"], Value::Null, "{json}");
    assert_eq!(json["release"]["quorum_free"], true, "{json}");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/command"),
        "{json}"
    );
}
