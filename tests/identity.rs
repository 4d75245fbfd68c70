//! Nodes are told apart by their `run_id`, read on every new connection, not by the address
//! strings they were configured with: one server under two names is one vote, and a known
//! name that starts answering from another server is left out for a whole quarantine.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Error;
use redlock::core::{NodeFailure, NodeId};
use redlock_tests::RedisFleet;
use redlock_tests::proxy::FaultProxy;

/// A client of three names: node 0 by IP and by `localhost`, then node 1. The address
/// strings differ, so the builder's own duplicate check lets them through.
fn node_0_under_two_names(fleet: &RedisFleet) -> redlock::Redlock {
    let urls = [
        fleet.url(0),
        format!("redis://localhost:{}", fleet.port(0)),
        fleet.url(1),
    ];
    fresh(redlock::Redlock::builder())
        .nodes(urls)
        .retry_count(0)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_server_under_two_names_votes_once() {
    let mut fleet = fleet(2);
    let redlock = node_0_under_two_names(&fleet);
    let report = redlock.connect().await;
    // The two names are identified in parallel; the one identified second is refused.
    let twin = match (&report.nodes[0].1, &report.nodes[1].1) {
        (Ok(()), Err(NodeFailure::Duplicate { of })) if *of == NodeId::new(0) => 1,
        (Err(NodeFailure::Duplicate { of }), Ok(())) if *of == NodeId::new(1) => 0,
        _ => panic!("one name of node 0 must be refused: {report}"),
    };
    assert!(report.to_string().contains("same server"), "{report}");
    assert!(report.has_quorum(), "{report}");

    // Nodes 0 and 2 grant; with the real second server stopped, only one server is left,
    // and an extension must not count it twice.
    let mut lease = redlock.acquire("twice").await.unwrap();
    fleet.pause(1).unwrap();
    let err = lease.extend().await.unwrap_err();
    fleet.resume(1).unwrap();
    assert!(matches!(err, Error::ExtendFailed { .. }), "{err}");
    let report = lease.release().await;
    assert_eq!(report.released(), 2, "{report:?}");
    assert!(matches!(
        report.nodes[twin],
        redlock::core::NodeStatus::Failed(NodeFailure::Duplicate { .. })
    ));
    assert_no_lock_keys(&fleet).await;
}

/// A promoted replica, or a DNS name or virtual IP moved to another master: the name the
/// client knows now reaches a server that has been running for long, and never held the keys
/// the old one held. Its uptime says nothing about that, so it is left out for the whole
/// quarantine, not for the quarantine less its uptime (which would be nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_name_that_reaches_another_long_running_server_waits_a_whole_quarantine() {
    let started = Instant::now();
    // Nodes 0-2 are configured, node 0 behind a proxy; node 3 is the other server.
    let fleet = fleet(4);
    let quarantine = Duration::from_secs(3);
    let proxy = FaultProxy::start(fleet.addr(0)).await.unwrap();
    let urls = [proxy.url(), fleet.url(1), fleet.url(2)];
    let client = |urls: &[String]| {
        redlock::Redlock::builder()
            .nodes(urls.to_vec())
            .restart_quarantine(Some(quarantine))
            .ttl(Duration::from_secs(30))
            .retry_count(0)
            .build()
            .unwrap()
    };
    // Every server older than the quarantine: none is left out for being young, and node 3's
    // uptime alone would let it vote at once.
    wait_until_older_than(started, quarantine);
    let redlock = client(&urls);
    let report = redlock.connect().await;
    assert_eq!(report.connected(), 3, "{report}");
    redlock.acquire("moved").await.unwrap().release().await;

    // Another owner holds the key on node 1: a lease now needs both node 0 and node 2.
    let key = format!("{PREFIX}moved");
    fleet.occupy(&[1], &key, Duration::from_secs(60)).unwrap();
    let faults = proxy.handle();
    faults.redirect(fleet.addr(3));
    faults.reset_connections();
    let moved = Instant::now();
    // The next request sees the reset and reconnects, to node 3.
    let report = redlock.connect().await;
    assert_eq!(report.connected(), 3, "{report}");

    match redlock.acquire("moved").await {
        Ok(lease) => {
            lease.release().await;
            panic!("node 0 counted at once although it now reaches another server");
        }
        Err(err) => assert!(quarantined(&err, 0), "node 0 not left out: {err}"),
    }

    // A client that never saw the old server has only the uptime to go by: it counts the
    // other server at once (what the operations guide says an operator must keep out).
    let newcomer = client(&urls);
    let lease = newcomer.acquire("moved").await.unwrap();
    lease.release().await;
    newcomer.settle().await;

    // The first client counts node 0 again once the quarantine has passed.
    let counted = loop {
        match redlock.acquire("moved").await {
            Ok(lease) => {
                lease.release().await;
                break moved.elapsed();
            }
            Err(err) => assert!(quarantined(&err, 0), "{err}"),
        }
        assert!(moved.elapsed() < quarantine * 3, "never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(counted >= quarantine, "counted after {counted:?}");
    redlock.settle().await;
    fleet.vacate(&[1], &key).unwrap();
    assert_no_lock_keys(&fleet).await;
}

/// A server that refuses `INFO` cannot say who it is, so its `run_id` cannot tell two of
/// its names apart. Its addresses can: `localhost` and `127.0.0.1` resolve to the same
/// socket address, and one server must not vote twice (here it would make a quorum of
/// three on its own).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_unidentifiable_server_under_two_names_votes_once() {
    let mut fleet = fleet(2);
    acl_on_every_node(&fleet, &["SETUSER", "default", "-info"]);
    let redlock = node_0_under_two_names(&fleet);
    let report = redlock.connect().await;
    assert!(
        report
            .nodes
            .iter()
            .any(|(_, status)| matches!(status, Err(NodeFailure::Duplicate { .. }))),
        "one name of node 0 must be refused: {report}"
    );
    // With the second server down, node 0 alone is one vote of three: no lease.
    fleet.kill(1).unwrap();
    let err = redlock.acquire("twice").await.unwrap_err();
    assert!(matches!(err, Error::NoQuorum { .. }), "{err}");
    assert_no_lock_keys(&fleet).await;
}
