//! The lock scripts go by hash (`EVALSHA`): each new connection loads them with its
//! identification, and a node that lost them still runs every release.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock_tests::{FleetOptions, Persistence};

/// `SCRIPT FLUSH` under connections that loaded the scripts: each node answers the
/// release's `EVALSHA` with `NOSCRIPT`, the same call follows with `EVAL`, and the key is
/// gone from every node. The `EVAL` cached the script again, so the next release goes by
/// hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_after_script_flush_removes_the_key_on_every_node() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    let lease = redlock.acquire("flushed").await.unwrap();
    let set_everywhere =
        eventually(Duration::from_secs(2), || async { lock_keys(&fleet) == 3 }).await;
    assert!(set_everywhere, "{}", describe_keys(&fleet));
    for i in 0..3 {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    }
    let evals = |fleet: &redlock_tests::RedisFleet| -> Vec<u64> {
        (0..3).map(|i| calls(fleet, i, &["eval"])).collect()
    };
    let before = evals(&fleet);

    let report = lease.release().await;
    assert_eq!(report.released(), 3, "{report:?}");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
    let after: Vec<u64> = evals(&fleet);
    for i in 0..3 {
        assert_eq!(
            after[i],
            before[i] + 1,
            "node {i}: one EVAL after the NOSCRIPT"
        );
    }

    // Cached again by that EVAL: the next release goes by hash only.
    let evalshas: Vec<u64> = (0..3).map(|i| calls(&fleet, i, &["evalsha"])).collect();
    let report = redlock.acquire("flushed").await.unwrap().release().await;
    assert_eq!(report.released(), 3, "{report:?}");
    assert_eq!(evals(&fleet), after);
    for (i, before) in evalshas.iter().enumerate() {
        assert_eq!(calls(&fleet, i, &["evalsha"]), before + 1, "node {i}");
    }
    assert_no_lock_keys(&fleet).await;
}

/// A node restarts with its keys (an append-only file) and without its scripts. The
/// connection that replaces the broken one loads the scripts with its identification,
/// before it carries anything: the lease's release then goes by hash there and removes the
/// key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_has_the_scripts_before_its_first_evalsha() {
    let mut fleet = fleet_with(
        3,
        FleetOptions {
            persistence: Persistence::AppendFsyncAlways,
            ..FleetOptions::default()
        },
    );
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    let lease = redlock.acquire("restarted").await.unwrap();
    let set_everywhere =
        eventually(Duration::from_secs(2), || async { lock_keys(&fleet) == 3 }).await;
    assert!(set_everywhere, "{}", describe_keys(&fleet));

    fleet.restart(0).unwrap();
    assert_eq!(lock_keys(&fleet), 3, "the key outlives the restart");
    // Redis 7 counts `SCRIPT LOAD` as `script|load`; 6.2 counts every `SCRIPT` subcommand
    // as `script` (the client sends no other).
    const SCRIPT_LOAD: &[&str] = &["script|load", "script"];
    assert_eq!(calls(&fleet, 0, SCRIPT_LOAD), 0, "a fresh server");
    // The old connection is found broken and replaced; the new one is identified, and
    // loads the eight lock scripts (the waiting mark's included) in the same round trip.
    let connected = redlock.connect().await;
    assert_eq!(connected.connected(), 3, "{connected}");
    assert_eq!(calls(&fleet, 0, SCRIPT_LOAD), 8);

    let report = lease.release().await;
    assert_eq!(report.released(), 3, "{report:?}");
    assert_eq!(calls(&fleet, 0, &["evalsha", "eval"]), 1);
    assert_eq!(calls(&fleet, 0, &["eval"]), 0, "by hash, not whole");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
}

/// Leases released at once, so that on each connection the releases after the first are
/// queued behind it, each in the batch of its connection (the direct requests of
/// `redlock/src/client/direct.rs`), and returns the reports.
async fn release_all_at_once(leases: Vec<redlock::Lease>) -> Vec<redlock::ReleaseReport> {
    let tasks: Vec<_> = leases
        .into_iter()
        .map(|lease| tokio::spawn(lease.release()))
        .collect();
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.unwrap());
    }
    reports
}

/// `count` leases of this client, acquired one after another.
async fn leases(redlock: &redlock::Redlock, name: &str, count: usize) -> Vec<redlock::Lease> {
    let mut leases = Vec::new();
    for i in 0..count {
        leases.push(redlock.acquire(&format!("{name}-{i}")).await.unwrap());
    }
    leases
}

fn flush_scripts(fleet: &redlock_tests::RedisFleet) {
    for i in 0..fleet.len() {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    }
}

/// After `SCRIPT FLUSH`, releases queued behind another on their connection (each node's
/// writes are held for 300 ms, so the first release on each connection waits there and the
/// others queue behind it, as direct requests) each get `NOSCRIPT`, follow it with the script
/// sent whole, and report the node released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_queued_behind_others_after_script_flush_each_follow_with_the_whole_script() {
    const LEASES: usize = 16;
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(60))
        .node_timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    redlock.connect().await;
    let leases = leases(&redlock, "queued-flush", LEASES).await;
    flush_scripts(&fleet);
    for i in 0..fleet.len() {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(300)
            .arg("WRITE")
            .query(&mut c)
            .unwrap();
    }
    let reports = release_all_at_once(leases).await;
    for report in &reports {
        assert_eq!(report.released(), 3, "{report:?}");
    }
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
    for i in 0..fleet.len() {
        assert!(calls(&fleet, i, &["eval"]) >= 1, "node {i}: no EVAL");
    }
}

/// The late `NOSCRIPT` of a release queued behind another: after `SCRIPT FLUSH`, node 0 is
/// stopped while many leases are released at once (the first release on its connection goes
/// out on its own, the others queue behind it as direct requests); every release there is cut
/// by the per-node timeout, and node 0 answers their `EVALSHA`s with `NOSCRIPT` only when it
/// resumes, half a second later. Each must still be followed by its `EVAL`, inside
/// `settle()`: right after it, node 0 holds no key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_queued_on_a_stalled_node_with_an_empty_script_cache_finish_inside_settle() {
    const LEASES: usize = 16;
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(60))
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    redlock.connect().await;
    let leases = leases(&redlock, "stalled-flush", LEASES).await;
    let set_everywhere = eventually(Duration::from_secs(2), || async {
        lock_keys(&fleet) == 3 * LEASES
    })
    .await;
    assert!(set_everywhere, "{}", describe_keys(&fleet));
    flush_scripts(&fleet);
    let evals_before = calls(&fleet, 0, &["eval"]);

    let reports = release_while_paused(
        &mut fleet,
        &redlock,
        0,
        Duration::from_millis(500),
        release_all_at_once(leases),
    )
    .await;
    for report in &reports {
        assert!(report.is_quorum_free(), "{report:?}");
    }
    // One `EVAL` after each `NOSCRIPT`: every release there went by hash first.
    assert_eq!(calls(&fleet, 0, &["eval"]), evals_before + LEASES as u64);
    assert_no_lock_keys(&fleet).await;
}
