//! Nodes that are down, paused, restarted or forgetful of scripts.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Error;
use redlock::core::{NodeFailure, NodeStatus, Reply};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_down_still_acquires_three_down_fails_within_budget() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet).build().unwrap();
    fleet.kill(0).unwrap();
    fleet.kill(3).unwrap();

    let lease = redlock.acquire("job").await.unwrap();
    let report = lease.release().await;
    assert!(report.is_quorum_free(), "{report:?}");

    fleet.kill(4).unwrap();
    let budget = redlock.config().acquire_budget();
    let started = Instant::now();
    let err = redlock.acquire("job").await.unwrap_err();
    let elapsed = started.elapsed();
    let Error::NoQuorum {
        attempts, nodes, ..
    } = &err
    else {
        panic!("expected NoQuorum, got {err:?}")
    };
    assert_eq!(*attempts, redlock.config().retry().attempts());
    let refused = nodes.count(|s| *s == NodeStatus::Failed(NodeFailure::Refused));
    assert_eq!(refused, 3, "{err}");
    assert!(elapsed <= budget, "took {elapsed:?}, budget {budget:?}");
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_node_costs_no_more_than_the_node_timeout() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet).build().unwrap();
    let node_timeout = redlock.config().node_timeout();
    // Warm the connections so the measurement is about the pause, not about connecting.
    redlock.acquire("warm").await.unwrap().release().await;

    fleet.pause(2).unwrap();
    let mut took = Vec::new();
    for i in 0..20 {
        let started = Instant::now();
        let lease = redlock.acquire(&format!("paused-{i}")).await.unwrap();
        took.push(started.elapsed());
        let report = lease.release().await;
        assert!(report.is_quorum_free());
    }
    took.sort();
    let median = took[took.len() / 2];
    assert!(
        median < node_timeout,
        "median acquire {median:?} with a paused node"
    );

    // Three paused: no quorum, reported as timeouts, within the budget.
    fleet.pause(0).unwrap();
    fleet.pause(4).unwrap();
    let started = Instant::now();
    let err = redlock.try_acquire("stalled").await.unwrap_err();
    let elapsed = started.elapsed();
    let Error::NoQuorum { nodes, .. } = &err else {
        panic!("{err:?}")
    };
    // Node 2, unanswered for a while, may have its SET held back until a probe answers
    // (`Unresponsive`) or, between two probes, time out again: silent either way.
    assert_eq!(
        nodes.count(|s| matches!(
            s,
            NodeStatus::Failed(NodeFailure::TimedOut | NodeFailure::Unresponsive)
        )),
        3,
        "{err}"
    );
    assert!(nodes.count(|s| *s == NodeStatus::Failed(NodeFailure::TimedOut)) >= 2);
    let budget = redlock
        .with_retry(redlock::core::RetryPolicy::no_retry())
        .unwrap()
        .config()
        .acquire_budget();
    assert!(
        elapsed <= budget + Duration::from_millis(50),
        "took {elapsed:?}"
    );

    // Once the nodes resume they execute the queued SETs and then their releases, in order:
    // nothing is left behind.
    for i in [0, 2, 4] {
        fleet.resume(i).unwrap();
    }
    assert_no_lock_keys(&fleet).await;
}

/// The script cache never leaves a release unsent. After `SCRIPT FLUSH`, a node stalled
/// past the per-node timeout answers the release's `EVALSHA` with `NOSCRIPT` only when it
/// resumes, long after the request's deadline; the `EVAL` that must follow is still sent
/// then (a release by hash finishes in the background). This test failed when the scripts
/// went by `EVALSHA` with redis-rs' fallback, before they were sent whole with `EVAL`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_queued_on_a_stalled_node_with_an_empty_script_cache_runs_on_resume() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let node_timeout = redlock.config().node_timeout();
    let lease = redlock.acquire("stalled-release").await.unwrap();
    let set_everywhere =
        eventually(Duration::from_secs(2), || async { lock_keys(&fleet) == 3 }).await;
    assert!(set_everywhere, "{}", describe_keys(&fleet));
    for i in 0..3 {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    }

    fleet.pause(2).unwrap();
    let report = lease.release().await;
    assert!(report.is_quorum_free(), "{report:?}");
    // Long enough for node 2's request to time out in the background.
    tokio::time::sleep(node_timeout * 4).await;
    fleet.resume(2).unwrap();
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_even_split_fails_at_once_without_waiting_for_timeouts() {
    let fleet = fleet(4);
    let holder = builder(&fleet).build().unwrap();
    let lease = holder.acquire("split").await.unwrap();
    // Make the holder own exactly nodes 0 and 1: free nodes 2 and 3 by hand.
    for i in [2, 3] {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("DEL").arg(lease.key()).query(&mut c).unwrap();
    }
    let other = builder(&fleet)
        .node_timeout(Duration::from_millis(500))
        .ttl(Duration::from_secs(10))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = other.try_acquire("split").await.unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "a 2/2 split waited {:?}",
        started.elapsed()
    );
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_work_on_nodes_with_an_empty_script_cache() {
    let mut fleet = fleet(3);
    // Without the restart quarantine (`builder` turns it off), so that the restarted node
    // takes keys again at once (the quarantine has its own tests in restarts.rs).
    let redlock = builder(&fleet).build().unwrap();
    redlock.acquire("cache").await.unwrap().release().await;

    // SCRIPT FLUSH empties the cache exactly as a restart does, under connections that
    // loaded the scripts: each `EVALSHA` gets `NOSCRIPT` and the call follows with `EVAL`.
    for i in 0..3 {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut c).unwrap();
    }
    let mut lease = redlock.acquire("cache").await.unwrap();
    lease.extend().await.unwrap();
    let report = lease.release().await;
    assert_eq!(report.released() + report.pending(), 3, "{report:?}");

    // A real restart: the first command on the old connection fails, the client reconnects
    // and loads the scripts again.
    fleet.restart(1).unwrap();
    let restarted_released = eventually(Duration::from_secs(5), || async {
        let lease = redlock.acquire("cache").await.unwrap();
        let report = lease.release().await;
        report.nodes[1] == NodeStatus::Replied(Reply::Released)
    })
    .await;
    assert!(
        restarted_released,
        "the restarted node never released through the script"
    );
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_gets_no_new_set_until_it_answers_a_probe() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    let before = calls(&fleet, 4, &["set"]);

    fleet.pause(4).unwrap();
    for i in 0..10 {
        let lease = redlock.acquire(&format!("stopped-{i}")).await.unwrap();
        lease.release().await;
        // Until node 4's requests time out (every lease is granted by the other four).
        redlock.settle().await;
    }
    fleet.resume(4).unwrap();
    redlock.settle().await;
    // The first lease's SET went out before anything was known; it timed out unanswered,
    // and from then on node 4 got probes (PING), not SETs, while it was stopped.
    let sets = calls(&fleet, 4, &["set"]) - before;
    assert_eq!(sets, 1, "SETs executed by the stopped node once it resumed");
    assert!(calls(&fleet, 4, &["ping"]) >= 1, "a probe was sent");
    // Nothing was left behind: the one SET that went out had its release queued after it.
    assert_no_lock_keys(&fleet).await;

    // Once a probe answers, node 4 votes again.
    let lease = redlock.acquire("after").await.unwrap();
    redlock.settle().await;
    let node4 = fleet.keys_with_prefix(4, PREFIX).unwrap();
    assert_eq!(node4.len(), 1, "node 4 holds the new lease: {node4:?}");
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A fresh connection whose first command was a release left unanswered must be identified
/// and then probed before it carries a `SET`: both, one after the other, and then the `SET`
/// goes out and votes. (The driver used to give up after two admissions and report the
/// connection as replaced, losing the node's vote.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_identified_and_probed_before_its_first_set_still_votes() {
    let fleet = fleet(1);
    let redlock = builder(&fleet)
        .node_timeout(Duration::from_millis(100))
        .retry_count(0)
        .build()
        .unwrap();
    let mut lease = redlock.acquire("job").await.unwrap();
    let mut admin = fleet.connect(0).unwrap();
    // The node drops the client's connection; an extension finds it gone, so the next
    // command (the release) opens a new one, and releases are not identified first.
    let _: () = redis::cmd("CLIENT")
        .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
        .query(&mut admin)
        .unwrap();
    assert!(lease.extend().await.is_err());
    // Scripts that write wait out the pause: the release goes unanswered within its
    // budget, and the new connection counts as silent until a probe answers.
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "600", "WRITE"][..])
        .query(&mut admin)
        .unwrap();
    let report = lease.release().await;
    assert!(!report.is_quorum_free(), "{report:?}");
    std::thread::sleep(Duration::from_millis(700));
    // The next SET on that connection: identified (INFO), probed (PING), then sent.
    let lease = redlock
        .try_acquire("job")
        .await
        .expect("the node votes once identified and probed");
    assert!(lease.release().await.is_quorum_free());
    assert_no_lock_keys(&fleet).await;
}
