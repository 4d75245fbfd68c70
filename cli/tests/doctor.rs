//! `redlock doctor` against real redis-server fleets set up each way: with and without
//! persistence, an evicting node, a replica, an ACL user without `EVAL` (or `PEXPIRE`), one
//! server listed twice, a node behind a proxy adding 40 ms, and a fake node whose clock runs
//! 2 % fast. Each run is checked through `--json`: the exit code, and which findings, with
//! which condition and scenario.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use redlock_tests::fake::FakeNode;
use redlock_tests::proxy::{Direction, FaultProxy};
use redlock_tests::{FleetOptions, Persistence, RedisFleet};
use serde_json::Value;

/// The clock window of the runs that do not test the clock: none (the offset is still
/// measured). A rate measured over a short window on a busy machine has a bound wide enough
/// to earn a warning, which is right but not what these tests are about.
const SHORT_WINDOW: &str = "0s";

/// A busy two-core machine sees loopback round trips of tens of milliseconds now and then,
/// above half the default 50 ms per-node timeout: the runs that do not test latency give
/// the nodes 500 ms (the TTL is 10 s).
const ROOMY_TIMEOUT: [&str; 2] = ["--node-timeout", "500ms"];

/// `redlock doctor --json --node <url>… <args>` (with [`SHORT_WINDOW`] and
/// [`ROOMY_TIMEOUT`] unless `args` set them).
fn doctor_command(urls: &[String], args: &[&str]) -> Command {
    let mut command = redlock();
    command.arg("doctor").arg("--json");
    for url in urls {
        command.args(["--node", url]);
    }
    if !args.contains(&"--clock-window") {
        command.args(["--clock-window", SHORT_WINDOW]);
    }
    if !args.contains(&"--node-timeout") {
        command.args(ROOMY_TIMEOUT);
    }
    command.args(args);
    command
}

/// Runs the doctor; returns its exit code and its report.
fn doctor(urls: &[String], args: &[&str]) -> (i32, Value) {
    let done = finish(&mut doctor_command(urls, args));
    let report: Value = serde_json::from_str(&done.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", done.text()));
    (done.code.unwrap(), report)
}

/// The same from inside a tokio runtime whose tasks (proxies, fake nodes) must keep running.
async fn doctor_async(urls: Vec<String>, args: Vec<&'static str>) -> (i32, Value) {
    tokio::task::spawn_blocking(move || doctor(&urls, &args))
        .await
        .unwrap()
}

/// A fleet whose nodes persist every write, so that `--restart-quarantine off` is right
/// for them and nothing but the fault under test is found.
fn persistent_fleet(n: usize) -> RedisFleet {
    fleet_with(
        n,
        FleetOptions {
            persistence: Persistence::AppendFsyncAlways,
            ..FleetOptions::default()
        },
    )
}

/// Freshly started nodes are younger than any restart quarantine; these fleets persist every
/// write, so the quarantine is off.
const PERSISTENT: [&str; 2] = ["--restart-quarantine", "off"];

/// `(level, node, check)` of every warning and error.
fn problems(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "warning" || f["level"] == "error")
        .map(|f| {
            (
                f["level"].as_str().unwrap().to_owned(),
                f["node"].as_str().unwrap_or("fleet").to_owned(),
                f["check"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn problem(level: &str, node: &str, check: &str) -> (String, String, String) {
    (level.to_owned(), node.to_owned(), check.to_owned())
}

/// The finding of `check` on `node`, worse than `ok`.
fn finding<'a>(report: &'a Value, node: &str, check: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["node"].as_str().unwrap_or("fleet") == node
                && f["check"] == check
                && f["level"] != "ok"
        })
        .unwrap_or_else(|| panic!("no {check} finding on {node}: {report:#}"))
}

fn node<'a>(report: &'a Value, address: &str) -> &'a Value {
    report["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == address)
        .unwrap()
}

fn address(url: &str) -> String {
    url.rsplit('@')
        .next()
        .unwrap()
        .trim_start_matches("redis://")
        .to_owned()
}

/// Runs `command` on node `index` as its default user.
fn on_node(fleet: &RedisFleet, index: usize, command: &mut redis::Cmd) {
    let mut connection = fleet.connect(index).unwrap();
    command.query::<redis::Value>(&mut connection).unwrap();
}

#[test]
fn a_healthy_fleet_passes_and_the_table_says_so() {
    let fleet = persistent_fleet(3);
    let (code, report) = doctor(&fleet.urls(), &PERSISTENT);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(problems(&report), []);
    assert_eq!(report["verdict"], "healthy");
    for url in fleet.urls() {
        let node = node(&report, &address(&url));
        assert_eq!(node["role"], "master");
        assert_eq!(node["appendfsync"], "always");
        assert_eq!(node["grants"], serde_json::json!([]));
        assert!(node["round_trips"]["samples"].as_u64().unwrap() >= 5);
    }
    // Nothing is left behind: the scratch leases were released and their keys deleted.
    assert_eq!(fleet.count_keys(PREFIX).unwrap(), 0);

    let mut table = redlock();
    table
        .arg("doctor")
        .args(["--clock-window", SHORT_WINDOW])
        .args(ROOMY_TIMEOUT)
        .args(PERSISTENT);
    for url in fleet.urls() {
        table.args(["--node", &url]);
    }
    let done = finish(&mut table);
    assert_eq!(done.code, Some(0), "{}", done.text());
    assert!(
        done.stdout
            .starts_with("3 nodes, quorum 2, ttl 10s, per-node timeout 500ms"),
        "{}",
        done.text()
    );
    for header in ["NODE", "RTT p50/p99", "PERSISTENCE", "CLOCK RATE", "ACL"] {
        assert!(done.stdout.contains(header), "{}", done.text());
    }
    assert!(
        done.stdout
            .trim_end()
            .ends_with("every condition holds (exit 0)"),
        "{}",
        done.text()
    );
}

/// The nodes run on this host: the doctor compares each one's `INFO` uptime with its
/// process's age from `/proc`. This host's clock is not stepped during the test, so the two
/// agree and nothing is reported but the passed check.
#[test]
fn a_local_nodes_uptime_agrees_with_its_process_age() {
    let fleet = persistent_fleet(3);
    // Old enough that a whole-second uptime has moved past zero.
    std::thread::sleep(Duration::from_millis(1_100));
    let (code, report) = doctor(&fleet.urls(), &PERSISTENT);
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(problems(&report), []);
    for url in fleet.urls() {
        let address = address(&url);
        let checked = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["node"] == address.as_str() && f["check"] == "uptime-clock")
            .unwrap_or_else(|| panic!("no uptime-clock check on {address}: {report:#}"));
        assert_eq!(checked["level"], "ok", "{checked:#}");
        let summary = checked["summary"].as_str().unwrap();
        assert!(summary.contains("INFO's uptime"), "{summary}");
        assert!(summary.contains("the process's age"), "{summary}");
        assert!(summary.contains("not stepped"), "{summary}");
    }
}

#[test]
fn without_persistence_the_restart_quarantine_is_what_keeps_leases_safe() {
    let fleet = fleet(3);
    let urls = fleet.urls();

    // The default quarantine (the TTL) mitigates it: notes, and warnings for the nodes that
    // started less than a quarantine ago.
    let (code, report) = doctor(&urls, &[]);
    assert_eq!(code, 0, "{report:#}");
    for url in &urls {
        let note = finding(&report, &address(url), "persistence");
        assert_eq!(note["level"], "note");
        assert_eq!(note["condition"]["id"], "memory");
        assert_eq!(
            note["scenario"]["file"],
            "simulator/scenarios/rl-05-crash-no-persistence.toml"
        );
        let young = finding(&report, &address(url), "uptime");
        assert_eq!(young["level"], "warning");
        assert_eq!(
            young["scenario"]["file"],
            "simulator/scenarios/rl-06-delayed-restart-5000ms.toml"
        );
    }
    assert_eq!(finding(&report, "fleet", "quorum")["level"], "warning");

    // Declared persistent when they are not: an error on every node.
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    for url in &urls {
        let error = finding(&report, &address(url), "persistence");
        assert_eq!(error["level"], "error");
        assert_eq!(error["scenario"]["id"], "RL-05");
    }
}

#[test]
fn appendfsync_everysec_is_named_with_its_scenario() {
    let fleet = fleet_with(
        3,
        FleetOptions {
            extra_args: ["--appendonly", "yes", "--appendfsync", "everysec"]
                .map(String::from)
                .to_vec(),
            ..FleetOptions::default()
        },
    );
    let (code, report) = doctor(&fleet.urls(), &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let error = finding(&report, &address(&fleet.url(0)), "persistence");
    assert_eq!(
        error["scenario"]["file"],
        "simulator/scenarios/rl-05-crash-everysec-before-fsync.toml"
    );
    assert_eq!(error["scenario"]["unfenced"], "VIOLATED");
    assert!(
        error["remedy"]
            .as_str()
            .unwrap()
            .contains("restart quarantine"),
        "{error:#}"
    );
}

#[test]
fn an_evicting_node_is_an_error() {
    let fleet = persistent_fleet(3);
    on_node(
        &fleet,
        1,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory-policy")
            .arg("allkeys-lru"),
    );
    let (code, report) = doctor(&fleet.urls(), &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let evicting = address(&fleet.url(1));
    assert_eq!(problems(&report), [problem("error", &evicting, "eviction")]);
    let error = finding(&report, &evicting, "eviction");
    assert!(error["summary"].as_str().unwrap().contains("allkeys-lru"));
    assert_eq!(error["condition"]["id"], "memory");
}

#[test]
fn a_replica_and_its_master_are_errors() {
    let fleet = persistent_fleet(3);
    on_node(
        &fleet,
        2,
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(fleet.port(0)),
    );
    // The master counts the replica once it has connected.
    assert!(eventually(Duration::from_secs(10), || {
        let mut connection = fleet.connect(0).unwrap();
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut connection)
            .unwrap();
        info.contains("connected_slaves:1")
    }));
    let (code, report) = doctor(&fleet.urls(), &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let (master, replica) = (address(&fleet.url(0)), address(&fleet.url(2)));
    let error = finding(&report, &replica, "role");
    assert_eq!(error["level"], "error");
    assert_eq!(
        error["scenario"]["file"],
        "simulator/scenarios/rl-07-failover-lagging-replica.toml"
    );
    assert_eq!(node(&report, &replica)["role"], "replica");
    assert_eq!(finding(&report, &master, "role")["level"], "error");
    assert_eq!(node(&report, &master)["role"], "master+1");
    // The replica refuses writes: its permissions cannot be told.
    assert_eq!(
        finding(&report, &replica, "permissions")["level"],
        "warning"
    );
}

#[test]
fn acl_users_without_eval_or_pexpire_are_told_the_rule_to_add() {
    let fleet = persistent_fleet(3);
    let user = |index: usize, rules: &[&str]| {
        let mut command = redis::cmd("ACL");
        command
            .arg("SETUSER")
            .arg("locker")
            .arg("on")
            .arg(">secret");
        command.arg(rules);
        on_node(&fleet, index, &mut command);
        fleet
            .url(index)
            .replace("redis://", "redis://locker:secret@")
    };
    // The documented rules, less +eval on node 1 and less +pexpire on node 2; the doctor's own
    // commands (PING, TIME, CONFIG GET) are granted too.
    let base = [
        "~redlock:*",
        "+set",
        "+get",
        "+del",
        "+exists",
        "+info",
        "+ping",
        "+time",
        "+config|get",
        "&redlock:*",
        "+publish",
        "+subscribe",
        "+unsubscribe",
        "+pttl",
        "+hset",
        "+hdel",
        "+hkeys",
    ];
    let urls = vec![
        fleet.url(0),
        user(1, &[&base[..], &["+pexpire"]].concat()),
        user(2, &[&base[..], &["+eval"]].concat()),
    ];
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let (no_eval, no_pexpire) = (address(&fleet.url(1)), address(&fleet.url(2)));
    assert_eq!(
        problems(&report),
        [
            problem("error", &no_eval, "permissions"),
            problem("error", &no_pexpire, "permissions"),
        ]
    );

    let refused = finding(&report, &no_eval, "permissions");
    assert_eq!(refused["remedy"], "ACL SETUSER <user> +eval");
    assert_eq!(refused["scenario"]["id"], "RL-14");
    let summary = refused["summary"].as_str().unwrap();
    assert!(summary.starts_with("refuses extend, release,"), "{summary}");
    assert_eq!(
        node(&report, &no_eval)["grants"],
        serde_json::json!(["+eval"])
    );

    // Redis 7.0 refuses a command inside a script without naming it; the direct probe does.
    let refused = finding(&report, &no_pexpire, "permissions");
    assert_eq!(refused["remedy"], "ACL SETUSER <user> +pexpire");
    assert!(
        refused["summary"]
            .as_str()
            .unwrap()
            .starts_with("refuses extend"),
        "{refused:#}"
    );
    // Even a user that can take but not release leases leaves nothing behind.
    assert_eq!(fleet.count_keys(PREFIX).unwrap(), 0);
}

#[test]
fn users_without_the_waiting_commands_are_told_that_waiters_fall_back_on_timers() {
    let fleet = persistent_fleet(3);
    let user = |index: usize, rules: &[&str]| {
        let mut command = redis::cmd("ACL");
        command
            .arg("SETUSER")
            .arg("waiter")
            .arg("on")
            .arg(">secret")
            .arg("resetchannels");
        command.arg(rules);
        on_node(&fleet, index, &mut command);
        fleet
            .url(index)
            .replace("redis://", "redis://waiter:secret@")
    };
    // Everything leases need (docs/operations.md) and the doctor's own commands, but on node 1
    // none of what waiting adds, and on node 2 the commands without the channels.
    let leases = [
        "~redlock:*",
        "+set",
        "+get",
        "+del",
        "+exists",
        "+pexpire",
        "+eval",
        "+info",
        "+ping",
        "+time",
        "+config|get",
    ];
    let urls = vec![
        fleet.url(0),
        user(1, &leases),
        user(
            2,
            &[
                &leases[..],
                &[
                    "+publish",
                    "+subscribe",
                    "+unsubscribe",
                    "+pttl",
                    "+hset",
                    "+hdel",
                    "+hkeys",
                ],
            ]
            .concat(),
        ),
    ];
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 0, "a slower wait is no broken condition: {report:#}");
    let (bare, no_channels) = (address(&fleet.url(1)), address(&fleet.url(2)));
    assert_eq!(
        problems(&report),
        [
            problem("warning", &bare, "permissions"),
            problem("warning", &no_channels, "permissions"),
        ]
    );
    let warned = finding(&report, &bare, "permissions");
    assert_eq!(
        warned["remedy"],
        "ACL SETUSER <user> +hdel +hkeys +hset +pttl +publish +subscribe"
    );
    let summary = warned["summary"].as_str().unwrap();
    assert!(summary.contains("retry timers"), "{summary}");
    let warned = finding(&report, &no_channels, "permissions");
    assert_eq!(warned["remedy"], "ACL SETUSER <user> &redlock:*");
}

#[test]
fn one_server_under_two_names_is_found() {
    let fleet = persistent_fleet(3);
    let mut urls = fleet.urls();
    let alias = format!("redis://localhost:{}", fleet.port(0));
    urls.push(alias);
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let twice = format!("localhost:{}", fleet.port(0));
    // Four names: the library warns that an even number buys nothing.
    assert_eq!(
        problems(&report),
        [
            problem("warning", "fleet", "configuration"),
            problem("error", &twice, "same-server"),
        ]
    );
    let error = finding(&report, &twice, "same-server");
    assert_eq!(error["condition"]["id"], "independence");
    assert!(
        error["summary"]
            .as_str()
            .unwrap()
            .contains(&format!("the same server as {}", address(&fleet.url(0)))),
        "{error:#}"
    );
}

#[test]
fn one_server_under_two_names_is_found_without_info() {
    // INFO refused: no run_id tells the two names apart, their address does (as the client
    // refuses the second name, `tests/identity.rs`).
    let fleet = persistent_fleet(3);
    for index in 0..fleet.len() {
        on_node(
            &fleet,
            index,
            redis::cmd("ACL").arg(&["SETUSER", "default", "-info"]),
        );
    }
    let mut urls = fleet.urls();
    urls.push(format!("redis://localhost:{}", fleet.port(0)));
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 1, "{report:#}");
    let twice = format!("localhost:{}", fleet.port(0));
    let error = finding(&report, &twice, "same-server");
    assert_eq!(error["level"], "error", "{error:#}");
    assert!(
        error["summary"].as_str().unwrap().contains(&format!(
            "the same server as {} (both names reach 127.0.0.1:{})",
            address(&fleet.url(0)),
            fleet.port(0)
        )),
        "{error:#}"
    );
    // Three servers behind four names: three voters, not four.
    let quorum = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["check"] == "quorum")
        .unwrap();
    assert!(
        quorum["summary"]
            .as_str()
            .unwrap()
            .contains("3 independent masters"),
        "{quorum:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_40ms_away_is_warned_about() {
    let fleet = persistent_fleet(3);
    let proxy = FaultProxy::start(fleet.addr(0)).await.unwrap();
    proxy
        .handle()
        .set_latency(Direction::ToClient, Duration::from_millis(40));
    let urls = vec![proxy.url(), fleet.url(1), fleet.url(2)];
    let args = vec![
        "--restart-quarantine",
        "off",
        "--node-timeout",
        "50ms",
        "--clock-window",
        "300ms",
    ];
    let (code, report) = doctor_async(urls, args).await;
    let slow = proxy.local_addr().to_string();

    let trips = &node(&report, &slow)["round_trips"];
    assert!(trips["p50_ms"].as_f64().unwrap() >= 40.0, "{trips}");
    // Above half the 50 ms per-node timeout (the default): a warning; an error if the median
    // reached the timeout (a very busy machine).
    let latency = finding(&report, &slow, "latency");
    assert!(["warning", "error"].contains(&latency["level"].as_str().unwrap()));
    assert_eq!(latency["condition"]["id"], "availability");
    assert_eq!(latency["scenario"]["id"], "RL-12");
    // The nodes without the proxy have nothing else to report (their round trips are far
    // shorter, though a busy machine may push their p99 past 25 ms, and their clock rate's
    // bound over 300 ms past the drift factor, too), and the slow one's clock rate is too
    // uncertain over 300 ms.
    for url in &fleet.urls()[1..] {
        let fast = address(url);
        let trips = &node(&report, &fast)["round_trips"];
        assert!(trips["p50_ms"].as_f64().unwrap() < 20.0, "{trips}");
        let other = problems(&report)
            .into_iter()
            .filter(|(_, node, check)| *node == fast && check != "latency" && check != "clock-rate")
            .collect::<Vec<_>>();
        assert_eq!(other, [], "{report:#}");
    }
    assert_eq!(finding(&report, &slow, "clock-rate")["level"], "warning");
    let only_latency = problems(&report)
        .iter()
        .all(|(level, _, check)| level != "error" || check == "latency");
    assert!(only_latency, "{report:#}");
    let latency_errors = problems(&report)
        .iter()
        .any(|(level, _, check)| level == "error" && check == "latency");
    assert_eq!(code, i32::from(latency_errors), "{report:#}");
}

/// The clock-rate estimate against a node whose `TIME` runs 2 % fast. Its error bound is the
/// one `cli/src/doctor/clock.rs` derives from the round trips alone (about half the sum of
/// the two samples' round trips over the 2 s window: well under 0.1 % on loopback); the true
/// rate, +2 %, must lie within it, and the bound must be tight enough to tell 2 % from the
/// 1 % drift factor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_two_percent_fast_is_measured_within_the_bound() {
    let fleet = persistent_fleet(2);
    let fast = FakeNode::start(1.02).await.unwrap();
    let urls = vec![fleet.url(0), fleet.url(1), fast.url()];
    let (code, report) = doctor_async(
        urls,
        vec!["--clock-window", "2s", "--restart-quarantine", "off"],
    )
    .await;
    assert_eq!(code, 1, "{report:#}");

    let fake = fast.local_addr().to_string();
    let rate = &node(&report, &fake)["clock"]["rate"];
    let (estimate, bound) = (
        rate["rate"].as_f64().unwrap(),
        rate["bound"].as_f64().unwrap(),
    );
    assert!(
        (estimate - 0.02).abs() <= bound,
        "2 % outside {estimate} ± {bound}"
    );
    assert!(bound < 0.005, "bound {bound} too wide to tell 2 % from 1 %");
    assert!(rate["span_s"].as_f64().unwrap() > 1.0, "{rate}");
    assert!(fast.time_requests() >= 21);
    let error = finding(&report, &fake, "clock-rate");
    assert_eq!(error["level"], "error");
    assert_eq!(error["condition"]["id"], "clocks");
    assert_eq!(
        error["scenario"]["file"],
        "simulator/scenarios/rl-10-node-clock-fast-2pc.toml"
    );

    // The real nodes share this host's clock: a rate of zero within the bound.
    for url in fleet.urls() {
        let rate = &node(&report, &address(&url))["clock"]["rate"];
        let (estimate, bound) = (
            rate["rate"].as_f64().unwrap(),
            rate["bound"].as_f64().unwrap(),
        );
        assert!(estimate.abs() <= bound, "{url}: {estimate} ± {bound}");
        assert!(
            !problems(&report)
                .iter()
                .any(|(_, n, c)| *n == address(&url) && c.starts_with("clock")),
            "{report:#}"
        );
    }
}

#[test]
fn a_fleet_without_a_quorum_cannot_be_checked() {
    let mut fleet = fleet(3);
    let urls = fleet.urls();
    fleet.kill(1).unwrap();
    fleet.kill(2).unwrap();
    let (code, report) = doctor(&urls, &PERSISTENT);
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["verdict"], "unchecked");
    assert!(
        !node(&report, &address(&urls[1]))["reachable"]
            .as_bool()
            .unwrap()
    );
    assert_eq!(finding(&report, "fleet", "quorum")["level"], "error");
}
