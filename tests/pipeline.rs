//! The connection's queue (`redlock/src/client/pipe.rs`): the one-call requests of many
//! operations share a pipeline per node, each answer reaches its own request, and a
//! connection's driver ends with the connection.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::Error;

/// Resources acquired at once, every other one held by someone else beforehand.
const RESOURCES: usize = 64;

fn resource(i: usize) -> String {
    format!("batched-{i}")
}

/// Whether resource `i` is held by a foreign value on every node before the acquisitions.
fn foreign(i: usize) -> bool {
    i % 2 == 1
}

// The nodes are paused for writes while the acquisitions start: the first `SET` on each
// connection waits on the node, and every other acquisition's `SET` queues behind it, so the
// next batch carries many commands, free and taken resources interleaved. An answer handed
// to the wrong request grants a taken resource or refuses a free one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_of_a_shared_batch_gets_its_own_answer() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(60))
        .node_timeout(Duration::from_secs(2))
        .retry_count(0)
        .build()
        .unwrap();
    assert!(redlock.connect().await.has_quorum());
    let mut nodes: Vec<redis::Connection> = (0..fleet.len())
        .map(|i| fleet.connect(i).unwrap())
        .collect();
    for node in &mut nodes {
        for i in (0..RESOURCES).filter(|&i| foreign(i)) {
            redis::cmd("SET")
                .arg(format!("{PREFIX}{}", resource(i)))
                .arg("someone else")
                .arg("PX")
                .arg(60_000)
                .exec(node)
                .unwrap();
        }
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(300)
            .arg("WRITE")
            .exec(node)
            .unwrap();
    }

    let tasks: Vec<_> = (0..RESOURCES)
        .map(|i| {
            let redlock = redlock.clone();
            tokio::spawn(async move { (i, redlock.try_acquire(&resource(i)).await) })
        })
        .collect();
    let mut leases = Vec::new();
    for task in tasks {
        let (i, outcome) = task.await.unwrap();
        match outcome {
            Ok(lease) => {
                assert!(
                    !foreign(i),
                    "{} was granted while someone held it",
                    resource(i)
                );
                leases.push(lease);
            }
            Err(Error::Taken { .. }) => {
                assert!(foreign(i), "{} was refused while free", resource(i));
            }
            Err(other) => panic!("{}: {other}", resource(i)),
        }
    }
    assert_eq!(leases.len(), RESOURCES / 2);
    for lease in leases {
        assert!(lease.release().await.is_quorum_free());
    }
    for node in &mut nodes {
        for i in (0..RESOURCES).filter(|&i| foreign(i)) {
            redis::cmd("DEL")
                .arg(format!("{PREFIX}{}", resource(i)))
                .exec(node)
                .unwrap();
        }
    }
    assert_no_lock_keys(&fleet).await;
}

/// Clients connected to node `index`, this test's own connection included.
fn connected_clients(node: &mut redis::Connection) -> usize {
    let info: String = redis::cmd("INFO").arg("clients").query(node).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|count| count.trim().parse().ok())
        .unwrap()
}

// Each connection's driver holds a handle on it; a driver that outlived the client would keep
// its socket open for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_client_closes_its_connections() {
    let fleet = fleet(3);
    let mut node = fleet.connect(0).unwrap();
    let before = connected_clients(&mut node);
    let redlock = builder(&fleet).build().unwrap();
    redlock.acquire("closing").await.unwrap().release().await;
    assert!(connected_clients(&mut node) > before);
    redlock.settle().await;
    drop(redlock);
    let mut left = connected_clients(&mut node);
    for _ in 0..100 {
        if left <= before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = connected_clients(&mut node);
    }
    assert_eq!(left, before, "the client's connections are still open");
}
