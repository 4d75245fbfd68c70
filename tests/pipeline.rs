//! The connection's queue (`redlock/src/client/pipe.rs`): the one-call requests of many
//! operations share a pipeline per node, each answer reaches its own request, and a
//! connection's driver ends with the connection.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::Error;
use redlock_tests::RedisFleet;

/// Resources acquired at once, every other one held by someone else beforehand.
const RESOURCES: usize = 64;

fn resource(i: usize) -> String {
    format!("batched-{i}")
}

/// A client whose acquisitions try once, with a node timeout long enough for a paused node.
async fn batching_client(fleet: &RedisFleet) -> redlock::Redlock {
    let redlock = builder(fleet)
        .ttl(Duration::from_secs(60))
        .node_timeout(Duration::from_secs(2))
        .retry_count(0)
        .build()
        .unwrap();
    assert!(redlock.connect().await.has_quorum());
    redlock
}

/// A plain connection to each node, to set keys and pause the node beside the client.
fn direct_connections(fleet: &RedisFleet) -> Vec<redis::Connection> {
    (0..fleet.len())
        .map(|i| fleet.connect(i).unwrap())
        .collect()
}

/// Resource `i` held by `value` on `node` for a minute.
fn hold(node: &mut redis::Connection, i: usize, value: &str) {
    redis::cmd("SET")
        .arg(format!("{PREFIX}{}", resource(i)))
        .arg(value)
        .arg("PX")
        .arg(60_000)
        .exec(node)
        .unwrap();
}

/// Every resource tried at once, each by a task of its own: its index and outcome.
fn acquire_every_resource(
    redlock: &redlock::Redlock,
) -> Vec<tokio::task::JoinHandle<(usize, Result<redlock::Lease, Error>)>> {
    (0..RESOURCES)
        .map(|i| {
            let redlock = redlock.clone();
            tokio::spawn(async move { (i, redlock.try_acquire(&resource(i)).await) })
        })
        .collect()
}

/// Holds the node's writes for 300 ms: the first `SET` on each connection waits on it and
/// the others queue behind it.
fn pause_writes(node: &mut redis::Connection) {
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(300)
        .arg("WRITE")
        .exec(node)
        .unwrap();
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
    let redlock = batching_client(&fleet).await;
    let mut nodes = direct_connections(&fleet);
    for node in &mut nodes {
        for i in (0..RESOURCES).filter(|&i| foreign(i)) {
            hold(node, i, "someone else");
        }
        pause_writes(node);
    }

    let tasks = acquire_every_resource(&redlock);
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

// Each operation's answers from a shared batch come back by the request's number to the
// operation, one per node (the direct requests of `redlock/src/client/direct.rs`). Here every
// resource is held on the first two nodes and free on the third, so each round's three
// answers differ by node: an answer handed to the operation's request for another node shows
// as a free node reported taken, or a held one reported acquired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_node_answer_of_a_shared_batch_reaches_the_request_for_that_node() {
    use redlock::core::NodeStatus;

    let fleet = fleet(3);
    let redlock = batching_client(&fleet).await;
    let mut nodes = direct_connections(&fleet);
    for (index, node) in nodes.iter_mut().enumerate().take(2) {
        for i in 0..RESOURCES {
            hold(node, i, &format!("holder on node {index}"));
        }
    }
    // As above: the first `SET` on each connection waits on the paused node, and the others
    // queue behind it, many operations in one batch.
    for node in &mut nodes {
        pause_writes(node);
    }
    let tasks = acquire_every_resource(&redlock);
    for task in tasks {
        let (i, outcome) = task.await.unwrap();
        let Err(error @ Error::Taken { .. }) = outcome else {
            panic!("{}: {outcome:?}", resource(i));
        };
        let report = error.nodes().unwrap().nodes();
        for (index, node) in report.iter().enumerate() {
            let taken = node.status.reply().is_some_and(|reply| reply.is_taken());
            let free = matches!(node.status, NodeStatus::Pending)
                || node.status.reply() == Some(redlock::core::Reply::Acquired);
            assert!(
                if index < 2 { taken } else { free },
                "{}: node {index} reported {:?}",
                resource(i),
                node.status
            );
        }
    }
    // The third node's keys are the rounds' own: their cleanup releases remove them.
    redlock.settle().await;
    for node in nodes.iter_mut().take(2) {
        for i in 0..RESOURCES {
            redis::cmd("DEL")
                .arg(format!("{PREFIX}{}", resource(i)))
                .exec(node)
                .unwrap();
        }
    }
    assert_no_lock_keys(&fleet).await;
}
