//! `redlock status`: each node's holder, TTL and fence counter, and whether a quorum holds
//! the resource, as a table or as JSON, within the per-node timeout and the restart
//! quarantine it is given; `--fence-env` hands the lease's fencing and owner tokens to the
//! command.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock_tests::RedisFleet;

/// `redlock status` on nodes started by the test (no restart quarantine) with `args`.
fn status_with(fleet: &RedisFleet, resource: &str, args: &[&str]) -> Finished {
    let mut command = redlock();
    command.arg("status").arg(resource);
    for url in fleet.urls() {
        command.args(["--node", &url]);
    }
    if !args.contains(&"--restart-quarantine") {
        command.args(FRESH_NODES);
    }
    command.args(args);
    finish(&mut command)
}

fn status(fleet: &RedisFleet, resource: &str) -> Finished {
    status_with(fleet, resource, &[])
}

/// Every key on every node: what a read-only command must leave as it found it.
fn all_keys(fleet: &RedisFleet) -> Vec<(String, Option<String>)> {
    (0..fleet.len())
        .flat_map(|node| fleet.keys_with_prefix(node, "").unwrap())
        .collect()
}

/// The row of `address` in a status table.
fn row<'a>(out: &'a str, address: &str) -> Vec<&'a str> {
    let line = out
        .lines()
        .find(|line| line.starts_with(address))
        .unwrap_or_else(|| panic!("no row for {address}:\n{out}"));
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// Milliseconds in a TTL cell such as `9s 870ms`.
fn millis(cell: &str) -> u64 {
    humantime_ms(cell).unwrap_or_else(|| panic!("not a TTL: {cell:?}"))
}

fn humantime_ms(cell: &str) -> Option<u64> {
    let mut total = 0;
    for part in cell.split_whitespace() {
        let (digits, unit) = part.split_at(part.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = digits.parse().ok()?;
        total += match unit {
            "ms" => n,
            "s" => n * 1_000,
            "m" => n * 60_000,
            _ => return None,
        };
    }
    Some(total)
}

#[test]
fn status_shows_holder_ttl_and_fence_while_held_and_free_after() {
    let fleet = fleet(5);
    let files = Files::new();
    let script = format!("echo \"$FENCE\" >> \"$LINES\"; {WAIT_FOR_GO}");
    let mut command = run_sh(
        &fleet,
        &[
            "--resource",
            "nightly-report",
            "--ttl",
            "10s",
            "--fence-env",
            "FENCE",
        ],
        &script,
    );
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines).len() == 1));
    // The first lease on fresh nodes carries token 1.
    assert_eq!(lines(&files.lines), ["1"]);

    let held = status(&fleet, "nightly-report");
    assert_eq!(held.code, Some(0), "{}", held.text());
    let out = &held.stdout;
    assert!(out.contains("key redlock:nightly-report"), "{out}");
    // The lease's token, as the nodes store it.
    let token = (0..5)
        .find_map(|node| {
            let keys = fleet
                .keys_with_prefix(node, "redlock:nightly-report")
                .unwrap();
            keys.into_iter()
                .find(|(key, _)| key == "redlock:nightly-report")
                .and_then(|(_, value)| value)
        })
        .expect("the lease's key on some node");
    let short = &token[..8];
    let rows: Vec<Vec<&str>> = (0..5)
        .map(|node| row(out, &format!("127.0.0.1:{}", fleet.port(node))))
        .collect();
    assert!(rows.iter().all(|c| c[1] == short || c[1] == "-"), "{out}");
    let holding = rows.iter().filter(|c| c[1] == short).count();
    assert!(holding >= 3, "{out}");
    for cells in rows.iter().filter(|c| c[1] == short) {
        let ttl = millis(cells[2]);
        assert!(ttl > 5_000 && ttl <= 10_000, "{out}");
    }
    assert!(
        out.contains(&format!(
            "held by {short} on {holding} of 5 nodes (quorum 3)"
        )),
        "{out}"
    );
    // The grant needs a quorum at the new counter; a straggling raise may still be on its
    // way to the others (or have timed out on a loaded machine).
    assert!(rows.iter().all(|c| c[3] == "1" || c[3] == "-"), "{out}");
    assert!(rows.iter().filter(|c| c[3] == "1").count() >= 3, "{out}");

    files.go();
    assert_eq!(running.finish().code, Some(0));
    let free = status(&fleet, "nightly-report");
    assert_eq!(free.code, Some(1), "{}", free.text());
    assert!(
        free.stdout.contains("free: no node holds `nightly-report`"),
        "{}",
        free.text()
    );
    // Fence counters outlive leases by design.
    let kept = (0..5)
        .map(|node| row(&free.stdout, &format!("127.0.0.1:{}", fleet.port(node))))
        .filter(|cells| cells[1..] == ["-", "-", "1"])
        .count();
    assert!(kept >= 3, "{}", free.text());
}

#[test]
fn fence_env_also_exports_the_lease_owner_token() {
    let fleet = fleet(3);
    let files = Files::new();
    // The command prints the variables it was given, then holds the lease until told.
    let script =
        format!("{{ env | grep '^FENCE' | sort; echo printed; }} >> \"$LINES\"; {WAIT_FOR_GO}");
    let mut command = run_sh(
        &fleet,
        &[
            "--resource",
            "ledger",
            "--ttl",
            "10s",
            "--fence-env",
            "FENCE",
        ],
        &script,
    );
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines)
        .last()
        .is_some_and(|l| l == "printed")));
    let printed = lines(&files.lines);
    assert_eq!(printed.len(), 3, "{printed:?}");
    assert_eq!(printed[0], "FENCE=1", "{printed:?}");
    let owner = printed[1]
        .strip_prefix("FENCE_OWNER=")
        .unwrap_or_else(|| panic!("no FENCE_OWNER: {printed:?}"));
    // The owner token is the value the lease stored under its key, as the nodes hold it.
    let stored: Vec<String> = lock_keys(&fleet, "redlock:ledger")
        .into_iter()
        .filter(|(key, _)| key == "redlock:ledger")
        .filter_map(|(_, value)| value)
        .collect();
    assert!(stored.len() >= 2, "{stored:?}");
    assert!(
        stored.iter().all(|value| value == owner),
        "{owner} vs {stored:?}"
    );
    assert_eq!(owner.len(), 32, "{owner}");
    assert!(
        owner
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{owner}"
    );

    files.go();
    assert_eq!(running.finish().code, Some(0));
}

#[test]
fn status_says_unknown_when_too_few_nodes_answer() {
    let mut fleet = fleet(5);
    for node in [0, 1, 2] {
        fleet.kill(node).unwrap();
    }
    let unknown = status(&fleet, "report");
    assert_eq!(unknown.code, Some(69), "{}", unknown.text());
    let down = format!("127.0.0.1:{}", fleet.port(0));
    assert!(
        row(&unknown.stdout, &down)[1].starts_with("unreachable"),
        "{}",
        unknown.text()
    );
    assert!(
        unknown
            .stdout
            .contains("unknown: only 2 of 5 nodes answered"),
        "{}",
        unknown.text()
    );
}

#[test]
fn status_does_not_call_a_minority_of_keys_held() {
    let fleet = fleet(3);
    // A leftover key on one node, as a crashed holder or a failed round can leave.
    let mut node = fleet.connect(0).unwrap();
    let token = "0123456789abcdef0123456789abcdef";
    let _: () = redis::cmd("SET")
        .arg("redlock:report")
        .arg(token)
        .arg("PX")
        .arg(60_000)
        .query(&mut node)
        .unwrap();
    let partial = status(&fleet, "report");
    assert_eq!(partial.code, Some(1), "{}", partial.text());
    assert!(
        partial
            .stdout
            .contains("not held: 01234567 is on 1 of 3 nodes"),
        "{}",
        partial.text()
    );
}

#[test]
fn status_json_is_one_document_with_the_verdict_the_holder_and_every_node() {
    let fleet = fleet(3);
    let files = Files::new();
    let script = format!("echo \"$FENCE_OWNER\" >> \"$LINES\"; {WAIT_FOR_GO}");
    let mut command = run_sh(
        &fleet,
        &[
            "--resource",
            "ledger",
            "--ttl",
            "10s",
            "--fence-env",
            "FENCE",
        ],
        &script,
    );
    files.env(&mut command);
    let running = Running::start(&mut command);
    assert!(eventually(HANG, || lines(&files.lines).len() == 1));
    let owner = lines(&files.lines).remove(0);

    let before = all_keys(&fleet);
    let held = status_with(&fleet, "ledger", &["--json"]);
    assert_eq!(held.code, Some(0), "{}", held.text());
    let doc: serde_json::Value = serde_json::from_str(&held.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}", held.stdout));
    assert_eq!(doc["resource"], "ledger");
    assert_eq!(doc["key"], "redlock:ledger");
    assert_eq!(doc["verdict"], "held", "{doc:#}");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["holder"]["token"], owner.as_str(), "{doc:#}");
    assert_eq!(doc["holder"]["foreign"], false);
    assert_eq!(doc["holder"]["fence"], 1);
    let nodes = doc["holder"]["nodes"].as_u64().unwrap();
    assert!((2..=3).contains(&nodes), "{doc:#}");
    let expires = doc["holder"]["expires_in_ms"].as_u64().unwrap();
    assert!(expires > 5_000 && expires <= 10_000, "{doc:#}");
    assert_eq!(doc["settings"]["quorum"], 2);
    assert_eq!(
        doc["settings"]["restart_quarantine_ms"],
        serde_json::Value::Null
    );
    assert_eq!(doc["answered"], 3);
    let rows = doc["nodes"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    for (index, row) in rows.iter().enumerate() {
        assert_eq!(row["node"], format!("127.0.0.1:{}", fleet.port(index)));
        assert_eq!(row["answered"], true);
        assert_eq!(row["error"], serde_json::Value::Null);
    }
    assert!(doc["summary"].as_str().unwrap().starts_with("held by "));
    // Read-only: the lease's keys and the fence counters are as they were.
    assert_eq!(all_keys(&fleet), before);

    files.go();
    assert_eq!(running.finish().code, Some(0));
    let free = status_with(&fleet, "ledger", &["--json"]);
    assert_eq!(free.code, Some(1), "{}", free.text());
    let doc: serde_json::Value = serde_json::from_str(&free.stdout).unwrap();
    assert_eq!(doc["verdict"], "free", "{doc:#}");
    assert_eq!(doc["exit_code"], 1);
    assert_eq!(doc["holder"], serde_json::Value::Null);
    assert_eq!(doc["leftover"], serde_json::Value::Null);

    // A resource nobody ever took: the query creates nothing.
    let before = all_keys(&fleet);
    let never = status_with(&fleet, "never-taken", &["--json"]);
    assert_eq!(never.code, Some(1), "{}", never.text());
    assert_eq!(all_keys(&fleet), before);
}

#[test]
fn status_with_a_paused_node_returns_within_its_node_timeout() {
    let mut fleet = fleet(3);
    fleet.pause(2).unwrap();
    let started = Instant::now();
    let paused = status_with(&fleet, "report", &["--node-timeout", "200ms"]);
    let took = paused.ended - started;
    fleet.resume(2).unwrap();
    // Two of three answered free: whatever the paused node holds cannot make a quorum.
    assert_eq!(paused.code, Some(1), "{}", paused.text());
    assert!(
        took < Duration::from_millis(800),
        "took {took:?}: {}",
        paused.text()
    );
    let down = format!("127.0.0.1:{}", fleet.port(2));
    assert!(
        row(&paused.stdout, &down)[1].starts_with("unreachable: no answer within 200ms"),
        "{}",
        paused.text()
    );
    assert!(
        paused
            .stdout
            .contains("free: none of the 2 nodes that answered holds `report`")
    );
}

#[test]
fn status_takes_a_node_timeout_longer_than_a_lease_would() {
    let fleet = fleet(3);
    // A tenth of the default TTL or more: refused for a lease, fine for a read.
    let patient = status_with(&fleet, "report", &["--node-timeout", "2s", "--json"]);
    assert_eq!(patient.code, Some(1), "{}", patient.text());
    let doc: serde_json::Value = serde_json::from_str(&patient.stdout).unwrap();
    assert_eq!(doc["settings"]["node_timeout_ms"], 2_000);
    assert_eq!(doc["verdict"], "free");
    // The default quarantine stays the default TTL's.
    let defaulted = {
        let mut command = redlock();
        command.args(["status", "report", "--node-timeout", "2s", "--json"]);
        for url in fleet.urls() {
            command.args(["--node", &url]);
        }
        finish(&mut command)
    };
    let doc: serde_json::Value = serde_json::from_str(&defaulted.stdout).unwrap();
    assert_eq!(doc["settings"]["restart_quarantine_ms"], 10_000, "{doc:#}");
    // Nodes a moment old are within it.
    assert_eq!(defaulted.code, Some(69), "{}", defaulted.text());
}

#[test]
fn status_honours_the_restart_quarantine() {
    let fleet = fleet(3);
    // The nodes started a moment ago: with a quarantine of a minute none of them counts.
    let quarantined = status_with(&fleet, "report", &["--restart-quarantine", "1m"]);
    assert_eq!(quarantined.code, Some(69), "{}", quarantined.text());
    let first = format!("127.0.0.1:{}", fleet.port(0));
    assert!(
        row(&quarantined.stdout, &first)[1]
            .starts_with("quarantined: started or restarted recently"),
        "{}",
        quarantined.text()
    );
    // They answered: the summary says why they do not count, not that they were silent.
    assert!(
        quarantined.stdout.contains(
            "unknown: none of the 3 nodes counted, a quorum is 2: 3 answered but are left \
             out by the restart quarantine"
        ),
        "{}",
        quarantined.text()
    );
    assert!(
        !quarantined.stdout.contains("nodes answered, a quorum"),
        "{}",
        quarantined.text()
    );
    let json = status_with(&fleet, "report", &["--restart-quarantine", "1m", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["verdict"], "unknown");
    assert_eq!(doc["exit_code"], 69);
    assert_eq!(doc["settings"]["restart_quarantine_ms"], 60_000);
    assert!(
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["quarantined"] == true)
    );
    // Declared persistent, the same nodes answer.
    let counted = status(&fleet, "report");
    assert_eq!(counted.code, Some(1), "{}", counted.text());
}

/// `status --ttl 30s` judges the restart quarantine by the rule `run --ttl 30s` uses: the
/// TTL, unless `--restart-quarantine` is set.
#[test]
fn status_takes_the_ttl_for_the_quarantine_as_run_does() {
    let fleet = fleet(3);
    let mut command = redlock();
    command.args(["status", "report", "--ttl", "30s", "--json"]);
    for url in fleet.urls() {
        command.args(["--node", &url]);
    }
    let done = finish(&mut command);
    assert_eq!(done.code, Some(69), "{}", done.text());
    let doc: serde_json::Value = serde_json::from_str(&done.stdout).unwrap();
    assert_eq!(doc["settings"]["restart_quarantine_ms"], 30_000, "{doc:#}");
    assert!(
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["quarantined"] == true),
        "{doc:#}"
    );
}

#[test]
fn status_refuses_a_bad_resource_name() {
    let fleet = fleet(1);
    let bad = status(&fleet, "");
    assert_eq!(bad.code, Some(64), "{}", bad.text());
    assert!(
        bad.stderr.contains("invalid resource name"),
        "{}",
        bad.text()
    );
}
