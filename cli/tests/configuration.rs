//! Where `redlock` finds its nodes and settings (flags over `REDLOCK_NODES` over the config
//! file), how it refuses bad input (exit 64, naming the line and field), and that node
//! passwords never appear in its output.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::PathBuf;

use common::*;
use redlock_tests::FleetOptions;

/// Writes a config file into `dir`.
fn config_file(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let path = dir.path().join("redlock.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn toml_list(urls: &[String]) -> String {
    let quoted: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

/// URLs where no node listens: loopback ports below the ephemeral range, which no fleet
/// (and no `bind` to port 0) is ever given. A stopped fleet's ports would not do: a fleet
/// of a test running in parallel may get them.
fn dead_urls() -> Vec<String> {
    (1..=3)
        .map(|port| format!("redis://127.0.0.1:{port}"))
        .collect()
}

/// `redlock run <options> --resource report -- true`, without `--node` unless in `options`.
fn run_true(options: &[&str]) -> std::process::Command {
    let mut command = redlock();
    command
        .arg("run")
        .args(FRESH_NODES)
        .args(options)
        .args(["--resource", "report", "--", "true"]);
    command
}

#[test]
fn a_config_file_gives_nodes_prefix_and_ttl() {
    let fleet = fleet(3);
    let dir = scratch();
    let path = config_file(
        &dir,
        &format!(
            "# the nodes of the job servers\nnodes = {}\nkey_prefix = \"jobs:\"\nttl = \"7s\"\n\
             # nodes this test started: no restart to guard against\n\
             restart_quarantine = \"off\"\n",
            toml_list(&fleet.urls())
        ),
    );
    let files = Files::new();
    // The command reports the key's TTL as the nodes see it, while the lease is held.
    let mut command = redlock();
    command
        .args([
            "run",
            "--config",
            path.to_str().unwrap(),
            "--resource",
            "report",
            "--",
        ])
        .args([
            "sh",
            "-c",
            &format!("echo held >> \"$LINES\"; {WAIT_FOR_GO}"),
        ]);
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines) == ["held"]));
    let keys = lock_keys(&fleet, "jobs:");
    assert!(
        keys.len() >= 2 && keys.iter().all(|(k, _)| k == "jobs:report"),
        "{keys:?}"
    );
    let mut node = fleet.connect(0).unwrap();
    let pttl: i64 = redis::cmd("PTTL")
        .arg("jobs:report")
        .query(&mut node)
        .unwrap();
    assert!(pttl > 3_000 && pttl <= 7_000, "PTTL {pttl}");
    files.go();
    assert_eq!(running.finish().code, Some(0));
    assert_free(&fleet, "jobs:report");
}

#[test]
fn flags_override_the_environment_which_overrides_the_file() {
    let fleet = fleet(3);
    let dead = dead_urls();
    let dir = scratch();
    let dead_file = config_file(&dir, &format!("nodes = {}\n", toml_list(&dead)));
    let config = ["--config", dead_file.to_str().unwrap()];

    // File alone, with dead nodes: no quorum.
    let mut command = run_true(&config);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(69), "{}", done.text());

    // REDLOCK_NODES beats the file.
    let mut command = run_true(&config);
    command.env("REDLOCK_NODES", fleet.urls().join(","));
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());

    // --node beats REDLOCK_NODES.
    let mut command = run_true(&[]);
    command.env("REDLOCK_NODES", dead.join(","));
    let done = finish(&mut command);
    assert_eq!(
        done.code,
        Some(69),
        "the environment alone: {}",
        done.text()
    );
    let nodes: Vec<String> = fleet.urls().iter().map(|u| format!("--node={u}")).collect();
    let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let mut command = run_true(&nodes);
    command.env("REDLOCK_NODES", dead.join(","));
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());

    // `status` reads the same sources.
    let mut command = redlock();
    command
        .args(["status", "report"])
        .args(FRESH_NODES)
        .env("REDLOCK_NODES", fleet.urls().join(","));
    let done = finish(&mut command);
    assert_eq!(done.code, Some(1), "{}", done.text());
    assert!(done.stdout.contains("free"), "{}", done.text());
}

#[test]
fn a_bad_config_file_is_refused_with_its_line_and_field() {
    let dir = scratch();
    let cases = [
        (
            "nodes = [\"redis://127.0.0.1:1\"]\n\ntll = \"5s\"\n",
            "redlock.toml:3:1: ",
            "unknown field `tll`",
        ),
        (
            "nodes = [\"redis://127.0.0.1:1\"]\nttl = \"5 parsecs\"\n",
            "redlock.toml:2:7: `ttl`: ",
            "`5 parsecs` is not a duration",
        ),
        (
            "nodes = [\"redis://127.0.0.1:1\"]\nttl = \"30s\"\nkill_after = \"10s\"\n",
            "redlock.toml:3:14: `kill_after`: ",
            "more than a quarter of the ttl",
        ),
        (
            "nodes = [\"redis://127.0.0.1:1\", \"http://127.0.0.1:2\"]\n",
            "redlock.toml:1:33: ",
            "`nodes[1]`",
        ),
        ("nodes = [\n", "redlock.toml:", ""),
        (
            "nodes = [\"redis://127.0.0.1:1\"]\nrestart_quarantine = \"never\"\n",
            "redlock.toml:2:22: `restart_quarantine`: ",
            "or `off` when every node persists each write",
        ),
        (
            "nodes = [\"redis://127.0.0.1:1\"]\nmax_hold = \"0s\"\n",
            "redlock.toml:2:12: ",
            "`max_hold` must be greater than zero",
        ),
    ];
    for (text, place, problem) in cases {
        let path = config_file(&dir, text);
        let mut command = run_true(&["--config", path.to_str().unwrap()]);
        let done = finish(&mut command);
        assert_eq!(done.code, Some(64), "{text}: {}", done.text());
        let expected = format!("redlock: {}/{place}", dir.path().display());
        assert!(done.stderr.contains(&expected), "{text}: {}", done.text());
        assert!(done.stderr.contains(problem), "{text}: {}", done.text());
    }

    let mut command = run_true(&["--config", "/nonexistent/redlock.toml"]);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr
            .contains("cannot read the config file /nonexistent/redlock.toml")
    );
}

#[test]
fn bad_arguments_exit_64_with_a_message() {
    let node = ["--node", "redis://127.0.0.1:1"];
    let cases: [(&[&str], &str); 7] = [
        (&["run", "--resource", "r", "--", "true"], "no nodes"),
        (&["run", "--resource", "r"], "<CMD>"),
        (
            &["run", "--resource", "r", "--ttl", "30", "--", "true"],
            "has no unit",
        ),
        (&["run", "--ttl", "10s", "--", "true"], "--resource"),
        (
            &["run", "--resource", "", "--", "true"],
            "invalid resource name",
        ),
        (
            &["run", "--resource", "r", "--fence-env", "A=B", "--", "true"],
            "--fence-env",
        ),
        (&["frobnicate"], "unrecognized subcommand"),
    ];
    for (args, problem) in cases {
        let mut command = redlock();
        command.args(&args[..1]);
        if args[0] == "run" && !problem.starts_with("no nodes") {
            command.args(node);
        }
        command.args(&args[1..]);
        let done = finish(&mut command);
        assert_eq!(done.code, Some(64), "{args:?}: {}", done.text());
        assert!(done.stderr.contains(problem), "{args:?}: {}", done.text());
    }
    let mut command = redlock();
    command
        .args(["run", "--resource", "r", "--", "true"])
        .env("REDLOCK_NODES", "redis://127.0.0.1:1,,");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains("REDLOCK_NODES: URL number 2 is empty"),
        "{}",
        done.text()
    );

    let help = finish(redlock().args(["run", "--help"]));
    assert_eq!(help.code, Some(0), "{}", help.text());
    assert!(help.stdout.contains("75 "), "{}", help.text());
}

#[test]
fn passwords_never_appear_in_output() {
    let secret = "hunter2-cli-secret";
    let options = FleetOptions {
        extra_args: vec!["--requirepass".into(), secret.into()],
        ..FleetOptions::default()
    };
    let fleet = fleet_with(3, options);
    let urls = |password: &str| -> Vec<String> {
        (0..3)
            .map(|i| format!("redis://:{password}@127.0.0.1:{}", fleet.port(i)))
            .collect()
    };
    let wrong = "wrong-cli-password";
    let mut outputs = Vec::new();
    let mut run = |urls: Vec<String>, args: &[&str]| {
        let mut command = redlock();
        command.args(&args[..1]).args(FRESH_NODES);
        for url in urls {
            command.args(["--node", &url]);
        }
        command.args(&args[1..]);
        let done = finish(&mut command);
        outputs.push(done.text());
        done
    };
    let held = run(
        urls(secret),
        &["run", "--resource", "guarded", "--", "true"],
    );
    assert_eq!(held.code, Some(0), "{}", held.text());
    let shown = run(urls(secret), &["status", "guarded"]);
    assert_eq!(shown.code, Some(1), "{}", shown.text());
    let refused = run(urls(wrong), &["run", "--resource", "guarded", "--", "true"]);
    // Refused credentials: EX_NOPERM, at once (no retry can help).
    assert_eq!(refused.code, Some(77), "{}", refused.text());
    let unknown = run(urls(wrong), &["status", "guarded"]);
    assert_eq!(unknown.code, Some(69), "{}", unknown.text());
    let mut bad = urls(secret);
    bad.push(format!("redis://:{secret}@[bad"));
    let malformed = run(bad, &["run", "--resource", "guarded", "--", "true"]);
    assert_eq!(malformed.code, Some(64), "{}", malformed.text());
    // Through a config file too.
    let dir = scratch();
    let path = config_file(
        &dir,
        &format!("nodes = {}\nttl = \"1ms\"\n", toml_list(&urls(secret))),
    );
    let from_file = finish(redlock().args([
        "run",
        "--config",
        path.to_str().unwrap(),
        "--resource",
        "g",
        "--",
        "true",
    ]));
    assert_eq!(from_file.code, Some(64), "{}", from_file.text());
    outputs.push(from_file.text());

    for text in outputs {
        assert!(
            !text.contains(secret) && !text.contains(wrong),
            "password leaked:\n{text}"
        );
    }
}

/// A server on a free loopback port that answers every connection as an HTTP server would.
fn http_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut request = [0; 4096];
                while matches!(stream.read(&mut request), Ok(n) if n > 0) {
                    if stream
                        .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn nodes_that_are_not_redis_are_a_configuration_error_at_once() {
    let mut command = redlock();
    command.args(["run"]).args(FRESH_NODES);
    for _ in 0..3 {
        command.args(["--node", &format!("redis://127.0.0.1:{}", http_server())]);
    }
    command.args(["--resource", "web", "--wait", "5s", "--", "true"]);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(done.text().contains("not Redis servers"), "{}", done.text());
    assert!(done.text().contains("1 attempt(s)"), "{}", done.text());
}
