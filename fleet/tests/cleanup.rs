//! Nothing is lost: failed and cancelled acquisitions leave no key of theirs on any node.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::Error;

/// Sets a foreign owner's value on `nodes`, as another client holding them would.
fn occupy(fleet: &redlock_fleet::RedisFleet, nodes: &[usize], key: &str) {
    for &i in nodes {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("someone-else")
            .arg("PX")
            .arg(60_000)
            .query(&mut c)
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_acquire_leaves_none_of_its_tokens() {
    let fleet = fleet(5);
    occupy(&fleet, &[0, 1, 2], "redlock:busy");
    let redlock = builder(&fleet)
        .retry_count(3)
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap();
    // Every round wins nodes 3 and 4 and must give them back.
    let err = redlock.acquire("busy").await.unwrap_err();
    assert!(matches!(err, Error::Taken { attempts: 4, .. }), "{err:?}");
    // The acquisition returns only after its cleanup: check at once, no waiting.
    for i in 0..5 {
        let keys = fleet.keys_with_prefix(i, PREFIX).unwrap();
        let expected: Vec<(String, Option<String>)> = if i < 3 {
            vec![("redlock:busy".into(), Some("someone-else".into()))]
        } else {
            vec![]
        };
        assert_eq!(keys, expected, "node {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_cleans_up_in_the_background() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet)
        .node_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    redlock.acquire("warm").await.unwrap().release().await;

    // Three paused nodes keep the round undecided for the whole node timeout, while the two
    // live nodes accept our SET. Cancel the acquisition in the middle.
    for i in [0, 1, 2] {
        fleet.pause(i).unwrap();
    }
    let cancelled =
        tokio::time::timeout(Duration::from_millis(50), redlock.acquire("cancelled")).await;
    assert!(
        cancelled.is_err(),
        "the acquisition should still be in flight"
    );
    // The two live nodes held our key; the detached cleanup removes it.
    for i in [0, 1, 2] {
        fleet.resume(i).unwrap();
    }
    assert_no_lock_keys(&fleet).await;
    // And the resource is free for the next client at once.
    redlock
        .try_acquire("cancelled")
        .await
        .unwrap()
        .release()
        .await;
}
