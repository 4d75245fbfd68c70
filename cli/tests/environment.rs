//! The environment variables of every setting (`REDLOCK_TTL`, `REDLOCK_KEY_PREFIX`, …) and
//! the default config file locations, on the built binary: one precedence (flag over
//! environment over config file over default), and every refusal naming where the value
//! came from.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// URLs where no node listens (loopback ports below the ephemeral range).
fn dead_nodes() -> Vec<String> {
    (1..=3)
        .map(|port| format!("redis://127.0.0.1:{port}"))
        .collect()
}

fn toml_list(urls: &[String]) -> String {
    let quoted: Vec<String> = urls.iter().map(|u| format!("\"{u}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_owned()
}

/// `redlock run <args> --resource report -- true`.
fn run_true(args: &[&str]) -> Command {
    let mut command = redlock();
    command
        .arg("run")
        .args(FRESH_NODES)
        .args(args)
        .args(["--resource", "report", "--", "true"]);
    command
}

#[test]
fn the_environment_sits_between_the_flags_and_the_file() {
    let dir = scratch();
    // A grace period is refused when it is more than a quarter of the TTL, and the refusal
    // names where the grace period was written: which source won shows in the message.
    let config = write(
        &dir.path().join("redlock.toml"),
        &format!(
            "nodes = {}\nttl = \"8s\"\nkill_after = \"3s\"\n",
            toml_list(&dead_nodes())
        ),
    );
    let config = config.to_str().unwrap();

    let done = finish(&mut run_true(&["--config", config]));
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains(&format!(
            "{config}:3:14: `kill_after`: the grace period (3s)"
        )),
        "the file alone: {}",
        done.text()
    );

    let mut command = run_true(&["--config", config]);
    command.env("REDLOCK_KILL_AFTER", "4s");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr
            .contains("redlock: REDLOCK_KILL_AFTER: the grace period (4s) is more than a quarter of the ttl (2s)"),
        "the environment over the file: {}",
        done.text()
    );

    let mut command = run_true(&["--config", config, "--kill-after", "5s"]);
    command.env("REDLOCK_KILL_AFTER", "4s");
    let done = finish(&mut command);
    assert!(
        done.stderr
            .contains("redlock: --kill-after: the grace period (5s)"),
        "the flag over the environment: {}",
        done.text()
    );

    // REDLOCK_TTL over the file's ttl makes the file's grace period acceptable: the run gets
    // as far as the (dead) nodes.
    let mut command = run_true(&["--config", config]);
    command.env("REDLOCK_TTL", "40s");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(69), "{}", done.text());

    // And --ttl over REDLOCK_TTL brings the refusal back, naming the file's grace period.
    let mut command = run_true(&["--config", config, "--ttl", "8s"]);
    command.env("REDLOCK_TTL", "40s");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(done.stderr.contains("`kill_after`"), "{}", done.text());
}

#[test]
fn a_malformed_variable_is_refused_by_name() {
    for (name, value, expected) in [
        (
            "REDLOCK_TTL",
            "5 parsecs",
            "redlock: REDLOCK_TTL: `5 parsecs` is not a duration",
        ),
        (
            "REDLOCK_WAIT",
            "30",
            "redlock: REDLOCK_WAIT: `30` has no unit; write `30s` or `30ms`",
        ),
        (
            "REDLOCK_NODE_TIMEOUT",
            "",
            "redlock: REDLOCK_NODE_TIMEOUT is set but empty",
        ),
        (
            "REDLOCK_RESTART_QUARANTINE",
            "never",
            "redlock: REDLOCK_RESTART_QUARANTINE: `never`",
        ),
        (
            "REDLOCK_CONFIG",
            "",
            "redlock: REDLOCK_CONFIG is set but empty",
        ),
    ] {
        let mut command = run_true(&["--node", "redis://127.0.0.1:1"]);
        command.env(name, value);
        let done = finish(&mut command);
        assert_eq!(done.code, Some(64), "{name}={value}: {}", done.text());
        assert!(
            done.stderr.contains(expected),
            "{name}={value}: {}",
            done.text()
        );
    }
    // A value the library refuses names its variable too.
    let mut command = run_true(&["--node", "redis://127.0.0.1:1"]);
    command.env("REDLOCK_TTL", "1ms");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.starts_with("redlock: REDLOCK_TTL: "),
        "{}",
        done.text()
    );
}

#[test]
fn the_key_prefix_and_the_nodes_come_from_the_environment() {
    let fleet = fleet(3);
    // The fence counter outlives the lease: it shows which prefix the lease used.
    let mut command = redlock();
    command
        .args([
            "run",
            "--resource",
            "report",
            "--fence-env",
            "FENCE",
            "--",
            "true",
        ])
        .env("REDLOCK_NODES", fleet.urls().join(","))
        .env("REDLOCK_KEY_PREFIX", "from-env:")
        .env("REDLOCK_RESTART_QUARANTINE", "off");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "{}", done.text());
    for node in 0..fleet.len() {
        let keys: Vec<String> = fleet
            .keys_with_prefix(node, "from-env:")
            .unwrap()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(keys, ["from-env:report\0fence"], "node {node}");
    }
}

#[test]
fn the_default_config_file_is_the_users_then_the_systems() {
    let fleet = fleet(3);
    let good = format!(
        "nodes = {}\nrestart_quarantine = \"off\"\n",
        toml_list(&fleet.urls())
    );
    let dead = format!("nodes = {}\n", toml_list(&dead_nodes()));
    let dir = scratch();
    let xdg = dir.path().join("xdg");
    let home = dir.path().join("home");
    let system = dir.path().join("etc/redlock.toml");
    let with = |args: &[&str]| {
        let mut command = redlock();
        command
            .arg("run")
            .args(args)
            .args(["--resource", "report", "--", "true"])
            .env("XDG_CONFIG_HOME", &xdg)
            .env("HOME", &home)
            .env("REDLOCK_SYSTEM_CONFIG", &system);
        command
    };
    let bare = || with(&[]);

    // None exists: the message says where redlock looked.
    let done = finish(&mut bare());
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains(&format!(
            "none found at {}, {}",
            xdg.join("redlock/redlock.toml").display(),
            system.display()
        )),
        "{}",
        done.text()
    );

    // The system's file alone.
    write(&system, &good);
    let done = finish(&mut bare());
    assert_eq!(done.code, Some(0), "system: {}", done.text());

    // ~/.config/redlock/redlock.toml, when XDG_CONFIG_HOME is unset, comes before it.
    write(&home.join(".config/redlock/redlock.toml"), &dead);
    let mut command = bare();
    command.env_remove("XDG_CONFIG_HOME");
    let done = finish(&mut command);
    assert_eq!(done.code, Some(69), "home: {}", done.text());

    // $XDG_CONFIG_HOME/redlock/redlock.toml replaces ~/.config when set.
    let user = write(&xdg.join("redlock/redlock.toml"), &good);
    let done = finish(&mut bare());
    assert_eq!(done.code, Some(0), "xdg: {}", done.text());

    // REDLOCK_CONFIG and --config name another file: the default ones are not read.
    let named = write(&dir.path().join("named.toml"), &dead);
    let mut command = bare();
    command.env("REDLOCK_CONFIG", &named);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(69), "REDLOCK_CONFIG: {}", done.text());
    let mut command = with(&["--config", user.to_str().unwrap()]);
    command.env("REDLOCK_CONFIG", &named);
    let done = finish(&mut command);
    assert_eq!(done.code, Some(0), "--config: {}", done.text());

    // An error in a default file names that file.
    write(&user, "nodes = []\ntll = \"5s\"\n");
    let done = finish(&mut bare());
    assert_eq!(done.code, Some(64), "{}", done.text());
    assert!(
        done.stderr.contains(&format!(
            "redlock: {}:2:1: `tll`: unknown field",
            user.display()
        )),
        "{}",
        done.text()
    );
}
