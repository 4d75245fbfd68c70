//! Nothing is lost: failed and cancelled acquisitions leave no key of theirs on any node.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::key_events::KeyEvents;
use common::*;
use redlock::Error;

/// How long the foreign owner's key lasts: longer than any of these tests.
const FOREIGN_TTL: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_answered_taken_get_no_cleanup_release() {
    let fleet = fleet(5);
    fleet
        .occupy(&[0, 1, 2], "redlock:busy", FOREIGN_TTL)
        .unwrap();
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    let err = redlock.try_acquire("busy").await.unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    redlock.settle().await;
    // Nodes 0-2 answered *taken*: their SET NX wrote nothing, there is nothing to release.
    // Nodes 3 and 4 took the key (or could have, had they been too slow to answer) and get
    // the round's release: the scripts (`EVAL` or `EVALSHA`) each node ran.
    let releases: Vec<u64> = (0..5)
        .map(|i| calls(&fleet, i, &["eval", "evalsha"]))
        .collect();
    assert_eq!(releases, [0, 0, 0, 1, 1]);
    assert_eq!(lock_keys(&fleet), 3, "{}", describe_keys(&fleet));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_try_acquire_returns_at_its_decision_and_the_next_round_queues_behind_its_cleanup()
{
    // Node 4 behind a proxy that holds its replies back: it executes our SET at once, and the
    // round's cleanup release written behind it on the same connection, but answers late,
    // so the next round's SET to it waits for the release's answer in its lane.
    let (fleet, proxy, redlock) =
        fleet_with_node_4_behind_a_proxy(Some(Duration::from_secs(2))).await;
    fleet
        .occupy(&[0, 1, 2], "redlock:busy", FOREIGN_TTL)
        .unwrap();
    proxy.handle().set_latency(
        redlock_tests::proxy::Direction::ToClient,
        Duration::from_millis(400),
    );

    let started = Instant::now();
    let err = redlock.try_acquire("busy").await.unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    // Decided by the three *taken*: it returned while node 4's answer is still on its way.
    assert!(started.elapsed() < Duration::from_millis(300), "{err:?}");

    // The resource frees up; the next round runs while the cleanup to node 4 is unanswered.
    fleet.vacate(&[0, 1, 2], "redlock:busy").unwrap();
    let lease = redlock.try_acquire("busy").await.unwrap();
    redlock.settle().await;
    // On node 4 the new round's SET came after the old round's release: it holds the new
    // token. Had it overtaken the release, it would have found the old key (taken), and
    // the release would then have left node 4 empty. (Here all three share one connection,
    // which keeps their order too; across a new connection, the lane alone keeps it:
    // `a_release_written_behind_its_set_goes_again_when_their_connection_is_lost`.)
    let node4 = fleet.keys_with_prefix(4, PREFIX).unwrap();
    let holders: Vec<Option<String>> = node4.into_iter().map(|(_, v)| v).collect();
    assert_eq!(holders.len(), 1, "node 4: {holders:?}");
    assert_eq!(holders[0], fleet.keys_with_prefix(3, PREFIX).unwrap()[0].1);
    lease.release().await;
    redlock.settle().await;
    proxy
        .handle()
        .set_latency(redlock_tests::proxy::Direction::ToClient, Duration::ZERO);
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_acquire_leaves_none_of_its_tokens() {
    let fleet = fleet(5);
    fleet
        .occupy(&[0, 1, 2], "redlock:busy", FOREIGN_TTL)
        .unwrap();
    let redlock = builder(&fleet)
        .retry_count(3)
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap();
    // Every round wins nodes 3 and 4 and must give them back.
    let err = redlock.acquire("busy").await.unwrap_err();
    assert!(matches!(err, Error::Taken { attempts: 4, .. }), "{err:?}");
    // The acquisition returns at its decision; its cleanup finishes in the background.
    redlock.settle().await;
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

/// A release whose connection must be reopened gets the connect timeout for the connect and
/// then the per-node timeout for the release itself: a connect slower than the per-node
/// timeout (but within the connect timeout) must not leave the key to its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_must_reconnect_gets_the_connect_its_own_budget() {
    use redlock_tests::proxy::FaultProxy;

    let fleet = fleet(3);
    let proxy = FaultProxy::start(fleet.addr(0)).await.unwrap();
    let faults = proxy.handle();
    let mut urls = fleet.urls();
    urls[0] = proxy.url();
    let node_timeout = Duration::from_millis(200);
    let connect_timeout = Duration::from_secs(2);
    let redlock = fresh(redlock::Redlock::builder().nodes(urls))
        .node_timeout(node_timeout)
        .connect_timeout(connect_timeout)
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();
    redlock.connect().await;
    let mut lease = redlock.try_acquire("ledger").await.unwrap();
    // The acquisition returns at a quorum: node 0's `SET`, through the proxy, may land a
    // moment later.
    let landed = Instant::now() + Duration::from_secs(2);
    while fleet.keys_with_prefix(0, PREFIX).unwrap().is_empty() && Instant::now() < landed {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(fleet.keys_with_prefix(0, PREFIX).unwrap().len(), 1);

    // Node 0's connection breaks; the extension finds out (the other two keep the lease),
    // so node 0 has no connection when the release comes.
    faults.reset_connections();
    tokio::time::sleep(Duration::from_millis(50)).await;
    lease.extend().await.unwrap();

    // Opening a connection now takes twice the per-node timeout, well within the connect
    // timeout. Only the connect is slow: the release's own round trip is quick.
    faults.set_connect_delay(node_timeout * 2);
    let opened = faults.accepted_connections();
    lease.release().await;
    redlock.settle().await;
    assert_eq!(faults.accepted_connections(), opened + 1);
    let left = fleet.keys_with_prefix(0, PREFIX).unwrap();
    assert_eq!(left, vec![], "the release did not reach node 0");
    faults.heal();
    assert_no_lock_keys(&fleet).await;
}

/// `release().await` and then the end of the program leave no key: the release asks every
/// node and returns once each has answered (or its per-node timeout has passed), so that a
/// runtime shut down right after it cuts no request off. Twenty rounds on five nodes, each
/// in its own runtime, dropped as soon as the release returns.
#[test]
fn a_release_followed_by_the_end_of_the_runtime_leaves_no_key() {
    let fleet = fleet(5);
    let rounds = 20;
    for round in 0..rounds {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let redlock = builder(&fleet)
                .ttl(Duration::from_secs(60))
                .build()
                .unwrap();
            let lease = redlock.acquire(&format!("exit-{round}")).await.unwrap();
            lease.release().await;
        });
        // `main` returns: the client and the runtime go at once.
        drop(runtime);
    }
    // Requests written before the end still run on the nodes: give them a moment.
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<String> = (0..fleet.len())
        .flat_map(|i| fleet.keys_with_prefix(i, PREFIX).unwrap())
        .map(|(key, _)| key)
        .collect();
    let mut rounds_left: Vec<&String> = left.iter().collect();
    rounds_left.sort();
    rounds_left.dedup();
    assert!(
        left.is_empty(),
        "{} of {rounds} rounds left a key: {}",
        rounds_left.len(),
        describe_keys(&fleet)
    );
}

/// A release by hash cut by its deadline (its `EVALSHA` may still be answered `NOSCRIPT`,
/// and the `EVAL` must follow) finishes inside `settle()`: a process that settles before it
/// exits does not cut it off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_by_hash_cut_by_its_deadline_finishes_inside_settle() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .node_timeout(Duration::from_millis(100))
        .ttl(Duration::from_secs(60))
        .build()
        .unwrap();
    redlock.connect().await;
    let lease = redlock.acquire("cut").await.unwrap();
    release_while_paused(
        &mut fleet,
        &redlock,
        0,
        Duration::from_millis(500),
        lease.release(),
    )
    .await;
}

/// A fleet of five whose node 4 is behind a proxy, and a client over it with a long TTL
/// and `node_timeout` (`None`: each handle's derived from its TTL); the client has connected
/// to every node.
async fn fleet_with_node_4_behind_a_proxy(
    node_timeout: Option<Duration>,
) -> (
    redlock_tests::RedisFleet,
    redlock_tests::proxy::FaultProxy,
    redlock::Redlock,
) {
    let fleet = fleet(5);
    let proxy = redlock_tests::proxy::FaultProxy::start(fleet.addr(4))
        .await
        .unwrap();
    let mut urls = fleet.urls();
    urls[4] = proxy.url();
    let mut builder = fresh(redlock::Redlock::builder().nodes(urls)).ttl(Duration::from_secs(30));
    if let Some(node_timeout) = node_timeout {
        builder = builder.node_timeout(node_timeout);
    }
    let redlock = builder.build().unwrap();
    redlock.connect().await;
    (fleet, proxy, redlock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_written_behind_its_unanswered_set_without_waiting_for_the_answer() {
    let (fleet, proxy, redlock) =
        fleet_with_node_4_behind_a_proxy(Some(Duration::from_secs(2))).await;
    // Node 4 runs what it is sent, and its answers are held.
    proxy
        .handle()
        .set_cut(redlock_tests::proxy::Direction::ToClient, true);
    let lease = redlock.try_acquire("behind").await.unwrap();
    let node4 = fleet.keys_with_prefix(4, PREFIX).unwrap();
    assert_eq!(node4.len(), 1, "the SET to node 4 has landed: {node4:?}");
    let releasing = Instant::now();
    lease.release_at_quorum().await;
    // The release to node 4 follows its SET on the same connection: node 4 runs it while
    // the SET's answer is still held. Waiting in its lane for that answer, it would be sent
    // only once the SET is given up, 2 s after it was sent.
    let gone = eventually(Duration::from_secs(1), || async {
        fleet.keys_with_prefix(4, PREFIX).unwrap().is_empty()
    })
    .await;
    assert!(
        gone && releasing.elapsed() < Duration::from_millis(1500),
        "node 4 keeps {} after {:?}",
        describe_keys(&fleet),
        releasing.elapsed()
    );
    proxy.handle().heal();
    redlock.settle().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_written_behind_its_set_goes_again_when_their_connection_is_lost() {
    let (fleet, proxy, redlock) =
        fleet_with_node_4_behind_a_proxy(Some(Duration::from_secs(2))).await;
    let handle = proxy.handle();
    handle.set_cut(redlock_tests::proxy::Direction::ToClient, true);
    let lease = redlock.try_acquire("lost").await.unwrap();
    assert_eq!(fleet.keys_with_prefix(4, PREFIX).unwrap().len(), 1);
    // The release to node 4 does not reach the node; then the connection is reset while
    // the SET to node 4 is unanswered.
    handle.set_cut(redlock_tests::proxy::Direction::ToServer, true);
    lease.release_at_quorum().await;
    handle.reset_connections();
    handle.heal();
    // The SET set its key: the release goes (again) on a new connection once the SET has
    // failed, as a release waiting in its lane for that SET does. The next round's SET to
    // node 4, on that new connection too, waits in its lane until the release has ended:
    // had it overtaken the release, it would have found the old key, and the release would
    // then have left node 4 empty.
    let again = redlock.try_acquire("lost").await.unwrap();
    redlock.settle().await;
    let token = fleet.keys_with_prefix(0, PREFIX).unwrap()[0].1.clone();
    assert_eq!(
        fleet.keys_with_prefix(4, PREFIX).unwrap(),
        [("redlock:lost".to_owned(), token)],
        "{}",
        describe_keys(&fleet)
    );
    again.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A release lost with its connection before it was answered goes again on a new one (a
/// release runs again safely: it deletes only its own token's key), as one written behind
/// its `SET` does: the node may not have run it, and the key would stay until its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_lost_with_its_connection_goes_again_on_a_new_one() {
    let (fleet, proxy, redlock) =
        fleet_with_node_4_behind_a_proxy(Some(Duration::from_secs(2))).await;
    let handle = proxy.handle();
    let lease = redlock.try_acquire("reset").await.unwrap();
    // Every SET answered: the release to node 4 is a request of its own, behind nothing.
    redlock.settle().await;
    assert_eq!(fleet.keys_with_prefix(4, PREFIX).unwrap().len(), 1);
    // The release to node 4 is held on its way; then its connection is reset.
    handle.set_cut(redlock_tests::proxy::Direction::ToServer, true);
    lease.release_at_quorum().await;
    handle.reset_connections();
    handle.heal();
    redlock.settle().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_waits_in_its_lane_behind_an_unanswered_release_and_is_never_sent() {
    let (fleet, proxy, redlock) =
        fleet_with_node_4_behind_a_proxy(Some(Duration::from_millis(300))).await;
    let handle = proxy.handle();
    // Node 4 runs what it is sent; its answers are held.
    handle.set_cut(redlock_tests::proxy::Direction::ToClient, true);
    let first = redlock.try_acquire("lane").await.unwrap();
    first.release_at_quorum().await;
    // The next round's SET to node 4 waits in its lane for the release's answer, which does
    // not come: the round decides on the others, and the SET gives up at the node timeout,
    // never sent. (Sent once the answers flow, it would also be refused by the core: node
    // 4 left the first SET unanswered, so only a probe may go there first.)
    let second = redlock.try_acquire("lane").await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    handle.heal();
    redlock.settle().await;
    let token = fleet.keys_with_prefix(0, PREFIX).unwrap()[0].1.clone();
    for node in 1..4 {
        assert_eq!(fleet.keys_with_prefix(node, PREFIX).unwrap()[0].1, token);
    }
    assert_eq!(
        fleet.keys_with_prefix(4, PREFIX).unwrap(),
        [],
        "the SET that gave up in its lane was sent after all"
    );
    second.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A release must never overtake the `SET` it cleans up, even when a command of another
/// operation queued between them in their lane gives up before it is sent.
///
/// Handles of one client with different TTLs have different per-node timeouts (derived from
/// the TTL: 50 ms for 30 s, 5 ms for 100 ms), and share the resource's lanes. On node 4,
/// whose requests are held on their way: the first lease's release; the second lease's
/// `SET`, waiting behind it; the hasty handle's `SET` behind that, then its round's cleanup
/// release; then the second lease's release. The hasty `SET` gives up after 5 ms, unsent.
/// Had its lane opened at once, the hasty release and then the second lease's release would
/// be written before the second lease's `SET`, which node 4 would run last: a released
/// lease's key left on node 4 until its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_never_overtakes_its_set_when_a_command_between_them_gives_up_unsent() {
    // No per-node timeout set: each handle's is derived from its TTL.
    let (fleet, proxy, redlock) = fleet_with_node_4_behind_a_proxy(None).await;
    let hasty = redlock.with_ttl(Duration::from_millis(100)).unwrap();
    let handle = proxy.handle();
    // A run slowed past the second lease's 50 ms (its SET then gives up too, and tells
    // nothing of the order) is run again; an order that leaves a key fails at once.
    for attempt in 0..3 {
        let resource = format!("overtaken-{attempt}");
        let events = KeyEvents::watch(&fleet, &format!("{PREFIX}{resource}"), "Kg$").await;
        let first = redlock.try_acquire(&resource).await.unwrap();
        handle.set_cut(redlock_tests::proxy::Direction::ToServer, true);
        first.release_at_quorum().await;
        let started = Instant::now();
        let second = redlock.try_acquire(&resource).await.unwrap();
        let refused = hasty.try_acquire(&resource).await.unwrap_err();
        assert!(matches!(refused, Error::Taken { .. }), "{refused:?}");
        second.release_at_quorum().await;
        // By now the hasty SET has given up (5 ms) while it waited behind the second lease's
        // SET, which has not (50 ms). Had the hasty SET's gate opened then, its cleanup
        // release would have been written, and given up unanswered 5 ms later, and the
        // second lease's release written right after it.
        tokio::time::sleep_until((started + Duration::from_millis(28)).into()).await;
        handle.heal();
        redlock.settle().await;
        let node4: Vec<String> = events
            .until(Duration::from_secs(2), |nodes| {
                let sets = nodes[4].iter().filter(|(_, event)| event == "set").count();
                sets >= 2 && nodes[4].last().is_some_and(|(_, event)| event == "del")
            })
            .await
            .swap_remove(4)
            .into_iter()
            .map(|(_, event)| event)
            .collect();
        if node4.iter().filter(|event| *event == "set").count() < 2 {
            eprintln!("attempt {attempt}: the second lease's SET never reached node 4: {node4:?}");
            continue;
        }
        // The second lease's SET reached node 4, and its release came after it.
        assert_eq!(
            node4.last().map(String::as_str),
            Some("del"),
            "node 4's events: {node4:?}; keys: {}",
            describe_keys(&fleet)
        );
        assert_no_lock_keys(&fleet).await;
        return;
    }
    panic!("in three runs, the second lease's SET never reached node 4");
}
