//! `Redlock::holder`: who holds a resource, read-only on every node, judged on a quorum.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Error;
use redlock::client::Fencing;
use redlock::core::{KeyValue, NodeFailure, Verdict};
use redlock_tests::RedisFleet;

/// Every key of every running node with its value and `PTTL`: what a read-only query must
/// leave exactly as it found it.
fn keyspace(fleet: &RedisFleet) -> Vec<Vec<(String, Option<String>, i64)>> {
    (0..fleet.len())
        .map(|index| {
            let mut connection = fleet.connect(index).unwrap();
            let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut connection).unwrap();
            keys.sort();
            keys.into_iter()
                .map(|key| {
                    let value: Option<String> =
                        redis::cmd("GET").arg(&key).query(&mut connection).unwrap();
                    // Whole seconds: the TTL counts down between two readings.
                    let ttl: i64 = redis::cmd("TTL").arg(&key).query(&mut connection).unwrap();
                    (key, value, ttl)
                })
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lease_is_held_on_a_quorum_with_its_ttl_and_fence_and_free_after_release() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let free = redlock.holder("report").await.unwrap();
    assert_eq!(free.verdict(), Verdict::Free { leftover: None }, "{free:?}");
    assert!(free.is_free() && !free.is_held());
    assert_eq!(free.answered(), 3);

    let lease = redlock.acquire("report").await.unwrap();
    let asked = Instant::now();
    let holder = redlock.holder("report").await.unwrap();
    assert_eq!(holder.token(), Some(lease.token()), "{holder:?}");
    let Verdict::Held {
        value,
        nodes,
        expires_in,
        fence,
    } = holder.verdict()
    else {
        panic!("{holder:?}")
    };
    assert_eq!(value, KeyValue::Token(lease.token()));
    // A release or a SET that lands late may leave a node out; a quorum is certain.
    assert!((2..=3).contains(&nodes), "{holder:?}");
    let expires_in = expires_in.unwrap();
    assert!(expires_in <= Duration::from_secs(10), "{expires_in:?}");
    assert!(
        expires_in + asked.elapsed() + Duration::from_secs(1) >= Duration::from_secs(10),
        "{expires_in:?}"
    );
    // Its fencing token, as the lease has it.
    assert_eq!(fence, lease.fence());
    assert_eq!(fence, Some(1));
    for reading in holder.nodes().iter().flatten() {
        if reading.value.is_some() {
            assert_eq!(reading.fence, Some(1), "{holder:?}");
        }
    }

    assert!(lease.release().await.is_quorum_free());
    redlock.settle().await;
    let after = redlock.holder("report").await.unwrap();
    assert_eq!(
        after.verdict(),
        Verdict::Free { leftover: None },
        "{after:?}"
    );
    // The fence counter outlives the lease by design, and the query shows it.
    assert!(
        after
            .nodes()
            .iter()
            .flatten()
            .filter(|r| r.fence == Some(1))
            .count()
            >= 2,
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_writes_nothing_and_needs_no_write_permission() {
    let fleet = fleet(3);
    // A user that may read and may not write anything: the node itself refuses any write
    // the query might try.
    acl_on_every_node(
        &fleet,
        &[
            "SETUSER",
            "reader",
            "on",
            ">reader-secret",
            "~redlock:*",
            "+get",
            "+pttl",
            "+multi",
            "+exec",
            "+info",
        ],
    );
    let reader_urls: Vec<String> = (0..3)
        .map(|i| format!("redis://reader:reader-secret@127.0.0.1:{}", fleet.port(i)))
        .collect();
    let reader = fresh(redlock::Redlock::builder())
        .nodes(reader_urls)
        .retry_count(0)
        .build()
        .unwrap();
    // The ACL bites: this user cannot take a lease.
    let refused = reader.try_acquire("report").await.unwrap_err();
    assert!(matches!(refused, Error::Denied { .. }), "{refused:?}");
    reader.settle().await;

    // On free nodes, the query creates neither the lock key nor the fence counter.
    let free = reader.holder("report").await.unwrap();
    assert_eq!(free.verdict(), Verdict::Free { leftover: None }, "{free:?}");
    assert!(keyspace(&fleet).iter().all(Vec::is_empty));

    // While a lease (fenced) holds it, the query changes no value and no TTL.
    let writer = builder(&fleet)
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let lease = writer.acquire("report").await.unwrap();
    writer.settle().await;
    let before = keyspace(&fleet);
    assert!(before.iter().all(|keys| keys.len() == 2), "{before:?}");
    for _ in 0..5 {
        let held = reader.holder("report").await.unwrap();
        assert_eq!(held.token(), Some(lease.token()), "{held:?}");
        assert!(held.nodes().iter().all(Result::is_ok), "{held:?}");
    }
    assert_eq!(keyspace(&fleet), before);
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_costs_one_node_timeout_and_too_few_answers_are_unknown() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .node_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let lease = redlock.acquire("report").await.unwrap();
    redlock.settle().await;
    fleet.pause(2).unwrap();

    let started = Instant::now();
    let holder = redlock.holder("report").await.unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(600), "took {took:?}");
    assert_eq!(holder.nodes()[2], Err(NodeFailure::TimedOut), "{holder:?}");
    assert_eq!(holder.token(), Some(lease.token()), "{holder:?}");
    assert!(matches!(holder.verdict(), Verdict::Held { nodes: 2, .. }));

    fleet.pause(1).unwrap();
    let started = Instant::now();
    let unknown = redlock.holder("report").await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(600));
    assert_eq!(
        unknown.verdict(),
        Verdict::Unknown {
            answered: 1,
            strongest: Some((KeyValue::Token(lease.token()), 1)),
        },
        "{unknown:?}"
    );
    assert!(!unknown.is_held() && !unknown.is_free());
    fleet.resume(1).unwrap();
    fleet.resume(2).unwrap();
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftovers_and_foreign_values_are_judged_on_a_quorum() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    fleet
        .occupy(&[0], "redlock:report", Duration::from_secs(30))
        .unwrap();
    let leftover = redlock.holder("report").await.unwrap();
    assert_eq!(
        leftover.verdict(),
        Verdict::Free {
            leftover: Some((KeyValue::Foreign, 1))
        },
        "{leftover:?}"
    );
    fleet
        .occupy(&[1, 2], "redlock:report", Duration::from_secs(30))
        .unwrap();
    let blocked = redlock.holder("report").await.unwrap();
    let Verdict::Held {
        value: KeyValue::Foreign,
        nodes: 3,
        expires_in: Some(expires_in),
        fence: None,
    } = blocked.verdict()
    else {
        panic!("{blocked:?}")
    };
    assert!(expires_in <= Duration::from_secs(30) && expires_in > Duration::from_secs(20));
    assert_eq!(blocked.token(), None);
    // A foreign value blocks acquisitions just as the verdict says.
    let one_round = redlock
        .with_retry(redlock::core::RetryPolicy::no_retry())
        .unwrap();
    assert!(matches!(
        one_round.try_acquire("report").await,
        Err(Error::Taken { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_in_their_restart_quarantine_are_not_asked() {
    let fleet = fleet(3);
    // Nodes started a moment ago, met by a client with a quarantine of a minute.
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .restart_quarantine(Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    let holder = redlock.holder("report").await.unwrap();
    assert!(
        holder
            .nodes()
            .iter()
            .all(|n| matches!(n, Err(NodeFailure::Quarantined { .. }))),
        "{holder:?}"
    );
    assert!(matches!(
        holder.verdict(),
        Verdict::Unknown { answered: 0, .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_resource_name_is_an_error() {
    let fleet = fleet(1);
    let redlock = builder(&fleet).build().unwrap();
    let err = redlock.holder("").await.unwrap_err();
    assert!(matches!(err, Error::Resource(_)), "{err:?}");
    let err = redlock.holder(&"r".repeat(100_000)).await.unwrap_err();
    assert!(matches!(err, Error::Resource(_)), "{err:?}");
}
