//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

pub mod key_events;

use std::future::Future;
use std::time::{Duration, Instant};

use redlock::core::{NodeFailure, NodeStatus};
use redlock::{Error, Redlock, RedlockBuilder};
use redlock_tests::{FleetOptions, RedisFleet};

/// The key prefix of every lock taken by the tests.
pub const PREFIX: &str = "redlock:";

/// A fleet of `n` nodes; panics with the fixture's explanation when redis-server is missing.
pub fn fleet(n: usize) -> RedisFleet {
    init_tracing();
    RedisFleet::start(n).unwrap_or_else(|e| panic!("{e}"))
}

/// A fleet of `n` nodes with `options`.
pub fn fleet_with(n: usize, options: FleetOptions) -> RedisFleet {
    init_tracing();
    RedisFleet::start_with(n, options).unwrap_or_else(|e| panic!("{e}"))
}

/// A builder over every node of `fleet`.
///
/// The fleet was started by the test a moment ago and its nodes never held a lease: there is
/// no restart to guard against, so the restart quarantine (which leaves a node out for a TTL
/// after it starts) is off. `restarts.rs` tests the quarantine itself.
pub fn builder(fleet: &RedisFleet) -> RedlockBuilder {
    fresh(Redlock::builder().nodes(fleet.urls()))
}

/// `builder` with the restart quarantine off, for nodes started by the test itself.
pub fn fresh(builder: RedlockBuilder) -> RedlockBuilder {
    builder.restart_quarantine(None)
}

/// Logs go to the test output with `RUST_LOG=redlock=debug`.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Lock keys left on all running nodes (fence counters, which live forever by design, are
/// not lock keys).
pub fn lock_keys(fleet: &RedisFleet) -> usize {
    (0..fleet.len())
        .filter(|&i| fleet.pid(i).is_some())
        .map(|i| {
            let keys = fleet
                .keys_with_prefix(i, PREFIX)
                .expect("inspect the nodes");
            keys.iter().filter(|(key, _)| !key.contains('\0')).count()
        })
        .sum()
}

/// Polls `condition` every 10 ms until it holds or `within` elapses; returns whether it held.
pub async fn eventually<F, Fut>(within: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until no lock key remains on any running node (background cleanup is bounded by
/// a few per-node timeouts).
pub async fn assert_no_lock_keys(fleet: &RedisFleet) {
    let clean = eventually(Duration::from_secs(2), || async { lock_keys(fleet) == 0 }).await;
    assert!(clean, "lock keys left behind: {}", describe_keys(fleet));
}

/// Runs `release` while node `node` is stopped for `pause`, then `redlock.settle()`, and
/// asserts that `settle()` returned only once the node could answer again and that the
/// node keeps no lock key: releases cut short by a stalled node still finish inside
/// `settle()`. Returns what `release` gave.
pub async fn release_while_paused<T>(
    fleet: &mut RedisFleet,
    redlock: &Redlock,
    node: usize,
    pause: Duration,
    release: impl Future<Output = T>,
) -> T {
    let paused = Instant::now();
    let resume = fleet
        .pause_for(node, pause)
        .expect("the node runs and takes SIGSTOP");
    let released = release.await;
    redlock.settle().await;
    let settled = paused.elapsed();
    resume.join().expect("the resuming thread does not panic");
    assert!(
        settled >= pause,
        "settle() returned {settled:?} after the pause, before node {node} could answer"
    );
    assert_eq!(
        fleet
            .keys_with_prefix(node, PREFIX)
            .expect("the node answers once resumed"),
        vec![],
        "the releases did not reach node {node}"
    );
    released
}

/// Every lock key on every running node, for failure messages.
pub fn describe_keys(fleet: &RedisFleet) -> String {
    (0..fleet.len())
        .filter(|&i| fleet.pid(i).is_some())
        .map(|i| {
            format!(
                "node {i}: {:?}",
                fleet.keys_with_prefix(i, PREFIX).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Waiting marks on the lock key `key` (fields of its marks' hash), on every node.
pub fn wait_marks(fleet: &RedisFleet, key: &str) -> Vec<u64> {
    let key = redlock::core::LockKey::new("", key).expect("a lock key");
    (0..fleet.len())
        .map(|i| {
            let mut connection = fleet.connect(i).expect("connect to the node");
            redis::cmd("HLEN")
                .arg(key.wait_key())
                .query(&mut connection)
                .expect("HLEN of the marks")
        })
        .collect()
}

/// How many times `node` ran any of `commands` (lower case, e.g. `["eval", "evalsha"]`), from
/// one read of its `INFO commandstats`.
pub fn calls(fleet: &RedisFleet, node: usize, commands: &[&str]) -> u64 {
    let mut c = fleet.connect(node).expect("connect to the node");
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut c)
        .expect("INFO commandstats");
    commands
        .iter()
        .map(|command| {
            let prefix = format!("cmdstat_{command}:calls=");
            stats
                .lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// Runs `ACL <args>` on every node of `fleet`, e.g. `["SETUSER", "default", "-info"]`.
pub fn acl_on_every_node(fleet: &RedisFleet, args: &[&str]) {
    for i in 0..fleet.len() {
        let mut c = fleet.connect(i).expect("connect to the node");
        let _: () = redis::cmd("ACL")
            .arg(args)
            .query(&mut c)
            .unwrap_or_else(|e| panic!("ACL {args:?} on node {i}: {e}"));
    }
}

/// Whether node `index` was left out by the quarantine in `err`'s last round.
pub fn quarantined(err: &Error, index: usize) -> bool {
    err.nodes().is_some_and(|report| {
        matches!(
            report.nodes()[index].status,
            NodeStatus::Failed(NodeFailure::Quarantined { .. })
        )
    })
}

/// Waits until nodes started after `started` count as older than `age` for the quarantine: uptime
/// is counted in whole seconds by the nodes, and the client takes a second off it
/// (`UPTIME_SLACK`), so this waits for the second whole second past `age`.
pub fn wait_until_older_than(started: Instant, age: Duration) {
    let slack = redlock_core::UPTIME_SLACK;
    let old_enough = Duration::from_secs(age.as_secs() + 1) + slack + Duration::from_millis(100);
    if let Some(left) = old_enough.checked_sub(started.elapsed()) {
        std::thread::sleep(left);
    }
}
