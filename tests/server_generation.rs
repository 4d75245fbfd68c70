//! The lock request in the form each server's version takes: `SET … NX GET PX` on Redis 7.0
//! and later (and Valkey), `SET … NX PX` before, where a lost round after which the client
//! waits reads the holder with one more request on each node that refused it. Runs against
//! whichever server the fleet starts (`REDLOCK_REDIS_SERVER`; `scripts/test-server-matrix`
//! runs it against Redis 6.2 and Valkey).

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::{Error, Redlock};
use redlock_core::ServerGeneration;
use redlock_tests::RedisFleet;

/// How many times node `node` has run `command` (from `INFO commandstats`).
fn calls(fleet: &RedisFleet, node: usize, command: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut fleet.connect(node).unwrap())
        .unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&prefix)?.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

fn generation(fleet: &RedisFleet) -> ServerGeneration {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut fleet.connect(0).unwrap())
        .unwrap();
    ServerGeneration::from_info(&info)
}

/// A waiter loses its first round to a holder and waits: the holder's release must be
/// recognisable, so the waiter learns who holds the key. Redis 7 named the holder in the
/// refused `SET`; an older server did not, and each node whose refusal lost the round gets
/// one holder read (a `MULTI` of `GET`, `PTTL` and the fence counter's `GET`), and only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_round_reads_the_holder_only_where_the_set_did_not_name_it() {
    let fleet = fleet(3);
    let older = generation(&fleet) == ServerGeneration::BeforeRedis7;
    let holder = builder(&fleet).build().unwrap();
    let waiter = fresh(Redlock::builder().nodes(fleet.urls()))
        .retry_delay(Duration::from_secs(60))
        .retry_jitter(Duration::ZERO)
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let lease = holder.acquire("generation").await.unwrap();
    let connected = waiter.connect().await;
    assert_eq!(connected.connected(), 3, "{connected}");
    let multis: Vec<u64> = (0..3).map(|i| calls(&fleet, i, "multi")).collect();

    // One round, then a wait cut by the budget, then the last round at its end. Refused
    // by the holder's keys (a server that could not parse the request would be a failure
    // on every node, not a refusal).
    let error = waiter
        .acquire_timeout("generation", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Taken { .. }), "{error}");
    waiter.settle().await;
    let reads: Vec<u64> = multis
        .iter()
        .enumerate()
        .map(|(node, before)| calls(&fleet, node, "multi") - before)
        .collect();
    if older {
        // At most one per node, on every node whose refusal decided the round (a quorum,
        // two of three; a refusal that came after the decision is not read).
        assert!(reads.iter().all(|&n| n <= 1), "{reads:?}");
        assert!(reads.iter().sum::<u64>() >= 2, "{reads:?}");
    } else {
        assert_eq!(reads, [0, 0, 0]);
    }
    lease.release().await;
}
