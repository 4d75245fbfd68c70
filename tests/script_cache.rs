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
