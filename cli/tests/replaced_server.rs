//! First sight of a replaced server: every `redlock run` is a new process, so without a
//! memory it meets every server for the first time and dates it by its uptime alone. A
//! node name moved to another long-running server (a promoted replica, a DNS name or
//! virtual IP moved) would vote at once, although it never held the old server's keys.
//! `redlock run` remembers the servers it met (`REDLOCK_SERVERS_FILE`), and the next run
//! leaves such a name out for the whole restart quarantine.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock_tests::RedisFleet;
use redlock_tests::proxy::FaultProxy;

const QUARANTINE: &str = "3s";

/// `redlock run` on `urls` with the servers file `memory` (`off` to forget), for `true`.
fn run(urls: &[String], memory: &str) -> Finished {
    let mut command = redlock();
    command.arg("run");
    for url in urls {
        command.args(["--node", url]);
    }
    command
        .args(["--resource", "moved", "--ttl", "3s"])
        .args(["--restart-quarantine", QUARANTINE])
        .env("REDLOCK_SERVERS_FILE", memory)
        .args(["--", "true"]);
    finish(&mut command)
}

async fn run_async(urls: &[String], memory: &str) -> Finished {
    let urls = urls.to_vec();
    let memory = memory.to_owned();
    tokio::task::spawn_blocking(move || run(&urls, &memory))
        .await
        .unwrap()
}

/// Waits until every server of `fleet`, started at `started`, is older than the quarantine
/// (and its uptime's whole-second slack): none is left out for being young.
async fn wait_until_old(started: Instant) {
    let old = Duration::from_millis(4_100);
    tokio::time::sleep(old.saturating_sub(started.elapsed())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_moved_to_another_long_running_server_is_quarantined_on_the_next_run() {
    let started = Instant::now();
    // Nodes 0-2 are configured, node 0 behind a proxy; node 3 is the other server.
    let fleet: RedisFleet = fleet(4);
    let proxy = FaultProxy::start(fleet.addr(0)).await.unwrap();
    let urls = vec![proxy.url(), fleet.url(1), fleet.url(2)];
    let dir = scratch();
    let memory = dir.path().join("state").join("servers");
    let memory = memory.to_str().unwrap();
    wait_until_old(started).await;

    let first = run_async(&urls, memory).await;
    assert_eq!(first.code, Some(0), "{}", first.text());
    let remembered = std::fs::read_to_string(memory).unwrap_or_default();
    assert!(
        remembered.contains(&proxy.local_addr().to_string()),
        "the first run remembered nothing of the proxied node: {remembered:?}"
    );

    // Another owner holds the key on node 1: a lease now needs node 0's vote.
    let key = format!("{PREFIX}moved");
    fleet.occupy(&[1], &key, Duration::from_secs(60)).unwrap();
    let faults = proxy.handle();
    faults.redirect(fleet.addr(3));
    faults.reset_connections();

    // A fresh process that remembers: node 0's name now reaches another server, left out.
    let next = run_async(&urls, memory).await;
    let text = next.text();
    assert_ne!(
        next.code,
        Some(0),
        "the next run counted a replaced server at once: {text}"
    );
    assert!(next.stderr.contains("quarantine"), "{text}");
    // And the one after it, too: the change's quarantine outlives the run that saw it.
    let after = run_async(&urls, memory).await;
    assert_ne!(
        after.code,
        Some(0),
        "a later run forgot the change: {}",
        after.text()
    );

    // The control: a process without memory has only the uptime and counts it at once (what
    // docs/operations.md says remains for such a process).
    let forgetful = run_async(&urls, "off").await;
    assert_eq!(forgetful.code, Some(0), "{}", forgetful.text());

    // Once the quarantine has passed since the change was seen, it counts again.
    tokio::time::sleep(Duration::from_millis(3_100)).await;
    let later = run_async(&urls, memory).await;
    assert_eq!(later.code, Some(0), "{}", later.text());
    fleet.vacate(&[1], &key).unwrap();
}
