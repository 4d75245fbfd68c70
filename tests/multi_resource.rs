//! Leases on several resources at once, all-or-nothing on every node.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use common::*;
use redlock::Error;
use redlock::client::Fencing;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sets_that_would_concatenate_alike_do_not_collide() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let first = redlock.acquire_many(["ab", "c"]).await.unwrap();
    let second = redlock.acquire_many(["a", "bc"]).await.unwrap();
    assert_eq!(first.resources().collect::<Vec<_>>(), ["ab", "c"]);
    assert_eq!(second.resources().collect::<Vec<_>>(), ["a", "bc"]);
    first.release().await;
    second.release().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_or_nothing_on_every_node() {
    let fleet = fleet(5);
    let a = builder(&fleet).build().unwrap();
    let b = builder(&fleet).retry_count(0).build().unwrap();
    let held = a.acquire("warehouse-2").await.unwrap();

    let err = b
        .acquire_many(["warehouse-1", "warehouse-2", "warehouse-3"])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    // Nothing of the set was taken, on any node: only A's key exists.
    wait_for_stragglers().await;
    for node in 0..5 {
        for (key, _) in fleet.keys_with_prefix(node, PREFIX).unwrap() {
            assert_eq!(key, "redlock:warehouse-2", "node {node} holds {key}");
        }
    }

    held.release().await;
    let mut set = b
        .acquire_many(["warehouse-3", "warehouse-1", "warehouse-2", "warehouse-1"])
        .await
        .unwrap();
    assert_eq!(
        set.resources().collect::<Vec<_>>(),
        ["warehouse-1", "warehouse-2", "warehouse-3"]
    );
    // Each member is held: single-resource acquisitions are refused.
    for member in ["warehouse-1", "warehouse-3"] {
        assert!(matches!(b.acquire(member).await, Err(Error::Taken { .. })));
    }
    set.extend().await.unwrap();
    let report = set.release().await;
    assert!(report.is_quorum_free(), "{report:?}");
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_resource_lease_has_no_quorum_fence() {
    let fleet = fleet(3);
    let fenced = builder(&fleet)
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let err = fenced.acquire_many(["x", "y"]).await.unwrap_err();
    assert!(
        matches!(&err, Error::Config(e) if e.field() == "fencing"),
        "{err:?}"
    );
    // A single resource through acquire_many is an ordinary fenced lease.
    let one = fenced.acquire_many(["x", "x"]).await.unwrap();
    assert!(one.fence().is_some());
    one.release().await;
    assert!(matches!(
        fenced.acquire_many(Vec::<&str>::new()).await,
        Err(Error::Resource(_))
    ));
}

/// Watches `SET`s on one node through keyspace notifications: an all-or-nothing acquisition
/// that fails must not write any key, even one its cleanup would delete again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_multi_acquisition_writes_nothing_at_all() {
    use futures::StreamExt;
    let fleet = fleet(3);
    let a = builder(&fleet).build().unwrap();
    let b = builder(&fleet).retry_count(0).build().unwrap();
    let held = a.acquire("w2").await.unwrap();
    wait_for_stragglers().await;

    let client = redis::Client::open(fleet.url(0)).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("E$")
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub.subscribe("__keyevent@0__:set").await.unwrap();
    let mut events = pubsub.into_on_message();

    let err = b.acquire_many(["w1", "w2", "w3"]).await.unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    // A marker SET tells us every earlier notification has been delivered.
    let _: () = redis::cmd("SET")
        .arg("marker")
        .arg(1)
        .query_async(&mut admin)
        .await
        .unwrap();
    let mut written = Vec::new();
    while let Some(message) = events.next().await {
        let key: String = message.get_payload().unwrap();
        if key == "marker" {
            break;
        }
        written.push(key);
    }
    assert!(
        written.is_empty(),
        "the failed acquisition wrote {written:?}"
    );
    held.release().await;
}

async fn wait_for_stragglers() {
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}
