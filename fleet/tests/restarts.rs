//! Delayed-restart awareness: a node that restarted (new `run_id`) is left out of quorums.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Error;
use redlock::core::NodeFailure;

/// Acquires until the restarted node 0 is seen quarantined (at most a few tries: the first
/// command after the restart finds the old connection broken).
async fn quarantined(redlock: &redlock::Redlock) -> bool {
    for _ in 0..10 {
        match redlock.acquire("job").await {
            Err(Error::NoQuorum { nodes, .. }) => {
                if matches!(
                    nodes.nodes()[0].status,
                    redlock::core::NodeStatus::Failed(NodeFailure::Quarantined { .. })
                ) {
                    return true;
                }
            }
            Ok(lease) => {
                lease.release().await;
            }
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_is_left_out_for_the_quarantine() {
    let mut fleet = fleet(3);
    let quarantine = Duration::from_millis(1_500);
    let redlock = builder(&fleet)
        .restart_quarantine(Some(quarantine))
        .retry_count(0)
        .build()
        .unwrap();
    redlock.acquire("job").await.unwrap().release().await;

    fleet.restart(0).unwrap();
    let restarted = Instant::now();
    fleet.kill(1).unwrap();
    // With node 1 down, only node 2 counts: no quorum until node 0's quarantine ends.
    assert!(quarantined(&redlock).await, "the restart was not noticed");
    let err = redlock.acquire("job").await.unwrap_err();
    assert!(matches!(err, Error::NoQuorum { .. }), "{err:?}");
    assert!(err.to_string().contains("restarted recently"), "{err}");

    let back = loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break restarted.elapsed();
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(5),
            "node 0 never counted again"
        );
    };
    assert!(
        back >= quarantine - Duration::from_millis(100),
        "counted again after only {back:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quarantine_can_be_turned_off() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .restart_quarantine(None)
        .retry_count(0)
        .build()
        .unwrap();
    redlock.acquire("job").await.unwrap().release().await;
    fleet.restart(0).unwrap();
    fleet.kill(1).unwrap();
    // The first command on node 0 may hit the broken connection; the next ones count.
    let started = Instant::now();
    loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break;
            }
            Err(e) => {
                assert!(!e.to_string().contains("restarted recently"), "{e}");
                assert!(started.elapsed() < Duration::from_secs(2), "{e}");
            }
        }
    }
}
