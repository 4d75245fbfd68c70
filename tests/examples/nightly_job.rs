//! A nightly job that three servers schedule but only one runs: the `redlock` command in a
//! cron line. Every server has the same crontab entry:
//!
//! ```text
//! 0 3 * * * redlock run --quiet --config /etc/redlock.toml --resource nightly-report --ttl 5m -- /usr/local/bin/report
//! ```
//!
//! and the same `/etc/redlock.toml` listing the lock nodes. At 03:00 the three `redlock run`
//! start together; one takes the lease and runs the report, the other two find the
//! resource held and exit 75 without running it (silently, with `--quiet`, so cron mails
//! nothing). This example does exactly that on one machine: it writes the config file,
//! starts the three invocations at once (without `--quiet`, to show what the other two
//! say), and shows that the report ran once.
//!
//! ```text
//! cargo run --example nightly_job
//! ```
//!
//! It needs the `redlock` binary: it builds it first with `cargo build -p redlock-cli` (the
//! cargo running the example, the same profile and target directory) and runs it from
//! there. Set `REDLOCK_BIN` to use another binary. The lock nodes are five local
//! `redis-server` processes it starts on free loopback ports, or the URLs in
//! `REDLOCK_NODES`.

use std::error::Error;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use redlock_tests::RedisFleet;

const SERVERS: [&str; 3] = ["app-1", "app-2", "app-3"];

/// The report: notes which server ran it, then takes a moment, as real work does.
const REPORT: &str = "echo \"report written by $SERVER\" >> \"$REPORTS\"; sleep 1";

fn main() -> Result<(), Box<dyn Error>> {
    let redlock = redlock_binary()?;
    let (urls, _fleet) = match std::env::var("REDLOCK_NODES") {
        Ok(list) => (list.split(',').map(str::to_owned).collect::<Vec<_>>(), None),
        Err(_) => {
            let fleet = RedisFleet::start(5)?;
            println!("started {} local redis-server nodes", fleet.len());
            (fleet.urls(), Some(fleet))
        }
    };

    let dir = tempfile::Builder::new().prefix("nightly-job-").tempdir()?;
    let config = dir.path().join("redlock.toml");
    let nodes: Vec<String> = urls.iter().map(|url| format!("    \"{url}\",")).collect();
    std::fs::write(
        &config,
        format!("# /etc/redlock.toml\nnodes = [\n{}\n]\n", nodes.join("\n")),
    )?;
    let reports = dir.path().join("reports.log");

    // 03:00 on three servers: three invocations at once.
    let config_arg = config.display().to_string();
    let args = [
        "run",
        "--config",
        &config_arg,
        "--resource",
        "nightly-report",
        "--ttl",
        "5m",
        "--",
        "sh",
        "-c",
        REPORT,
    ];
    println!("each server runs: redlock {}", args.join(" "));
    let children = SERVERS
        .iter()
        .map(|server| {
            Command::new(&redlock)
                .args(args)
                .env("SERVER", server)
                .env("REPORTS", &reports)
                .stdin(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map(|child| (server, child))
        })
        .collect::<Result<Vec<_>, _>>()?;

    let mut ran = 0;
    for (server, child) in children {
        let output = child.wait_with_output()?;
        let code = output.status.code();
        let said = String::from_utf8_lossy(&output.stderr);
        match code {
            Some(0) => {
                ran += 1;
                println!("{server}: ran the report (exit 0)");
            }
            Some(75) => println!(
                "{server}: skipped, held elsewhere (exit 75): {}",
                said.trim()
            ),
            _ => return Err(format!("{server}: unexpected exit {code:?}: {said}").into()),
        }
    }
    let written = std::fs::read_to_string(&reports)?;
    print!("reports.log:\n{written}");
    if ran != 1 || written.lines().count() != 1 {
        return Err("the report should run exactly once".into());
    }
    Ok(())
}

/// The `redlock` binary: `REDLOCK_BIN`, or the one this workspace builds, built now.
fn redlock_binary() -> Result<PathBuf, Box<dyn Error>> {
    if let Some(path) = std::env::var_os("REDLOCK_BIN") {
        return Ok(path.into());
    }
    // `cargo run` tells the program which cargo runs it; the manifest pins the workspace,
    // wherever the example is started from.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let mut build = Command::new(cargo);
    build.args([
        "build",
        "--quiet",
        "-p",
        "redlock-cli",
        "--manifest-path",
        manifest,
    ]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    println!("building the redlock binary (cargo build -p redlock-cli)");
    if !build.status()?.success() {
        return Err("`cargo build -p redlock-cli` failed".into());
    }
    // This example runs from <target>/<profile>/examples/; the binary is in <profile>/.
    let exe = std::env::current_exe()?;
    let binary = exe
        .parent()
        .and_then(|examples| examples.parent())
        .map(|profile| profile.join("redlock"))
        .filter(|binary| binary.is_file())
        .ok_or("the redlock binary is not next to this example; set REDLOCK_BIN")?;
    Ok(binary)
}
