//! Waiting for a lease held elsewhere: woken by the holder's release (the nodes'
//! notifications over RESP2 and RESP3, or this client's own release), by the expiry of the
//! holder's keys, and otherwise by the retry timer; this client's waiters take turns.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redlock::Redlock;
use redlock_tests::RedisFleet;

/// A retry timer far longer than any of these tests: a waiter granted within it was woken
/// by something else.
const LONG: Duration = Duration::from_secs(60);

fn waiter(urls: Vec<String>) -> Redlock {
    fresh(Redlock::builder().nodes(urls))
        .retry_delay(LONG)
        .retry_jitter(Duration::ZERO)
        // A round that a loaded machine answers late is lost, and the next one waits for the
        // long timer: these tests are about waking, not about the per-node timeout.
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Subscribers on `channel`, on every node.
fn subscribers(fleet: &RedisFleet, channel: &str) -> Vec<u64> {
    (0..fleet.len())
        .map(|i| {
            let (_, count): (String, u64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query(&mut fleet.connect(i).unwrap())
                .unwrap();
            count
        })
        .collect()
}

/// Waits until `channel` has a subscriber on every node.
async fn until_subscribed(fleet: &RedisFleet, channel: &str) {
    let subscribed = eventually(Duration::from_secs(10), || async {
        subscribers(fleet, channel).iter().all(|&n| n >= 1)
    })
    .await;
    assert!(subscribed, "subscribers: {:?}", subscribers(fleet, channel));
}

async fn another_clients_release_wakes_the_waiter(protocol: &str) {
    let fleet = fleet(5);
    let urls: Vec<String> = fleet
        .urls()
        .into_iter()
        .map(|url| format!("{url}{protocol}"))
        .collect();
    let holder = fresh(Redlock::builder().nodes(urls.clone()))
        .build()
        .unwrap();
    let waiting = waiter(urls);
    let lease = holder.acquire("report").await.unwrap();

    let task = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("report", LONG * 2).await.unwrap();
        let attempts = lease.attempts();
        lease.release().await;
        attempts
    });
    // The waiter lost its first round and listens for the release.
    until_subscribed(&fleet, "redlock:report").await;
    let released = Instant::now();
    lease.release().await;
    let attempts = tokio::time::timeout(LONG / 2, task)
        .await
        .expect("woken by the release, not by its retry timer")
        .unwrap();
    // The notification carries the token the waiter's round found in the key: it wakes the
    // waiter at once, long before its 60 s timer or the holder's 10 s expiry.
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "granted {took:?} after the release"
    );
    // Woken once a quorum of nodes announced the release, the waiter runs one early round.
    assert!(
        attempts >= 2,
        "one lost round at least, then the granted one"
    );
    // The waiter no longer listens once it has the lease.
    let gone = eventually(Duration::from_secs(5), || async {
        subscribers(&fleet, "redlock:report")
            .iter()
            .all(|&n| n == 0)
    })
    .await;
    assert!(gone, "{:?}", subscribers(&fleet, "redlock:report"));
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_another_clients_release_over_resp2() {
    another_clients_release_wakes_the_waiter("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_another_clients_release_over_resp3() {
    another_clients_release_wakes_the_waiter("?protocol=resp3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_on_a_release_by_its_own_client() {
    let fleet = fleet(5);
    let redlock = waiter(fleet.urls());
    let lease = redlock.acquire("report").await.unwrap();
    let waiting = redlock.clone();
    let task = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("report", LONG * 2).await.unwrap();
        lease.release().await;
    });
    until_subscribed(&fleet, "redlock:report").await;
    lease.release().await;
    tokio::time::timeout(LONG / 2, task)
        .await
        .expect("woken by the release, not by its retry timer")
        .unwrap();
    assert_no_lock_keys(&fleet).await;
}

/// A release whose caller stops waiting for its report (a `release()` future dropped after
/// its first poll: a timeout, a `select!`) still tells this client's next waiter in line,
/// which waits for its own client's release rather than for the nodes' notifications (its
/// round is queued behind the release in the lanes). Before, the word was given only once
/// the report was in, and the waiter slept its retry delay (60 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_dropped_unfinished_still_lets_this_clients_next_waiter_go() {
    use futures::FutureExt;
    let fleet = fleet(3);
    let redlock = waiter(fleet.urls());
    let first = redlock.acquire("report").await.unwrap();
    // The second loses its round to the first and stands in line; the third, finding the
    // line, stands behind it.
    let (handed, second) = tokio::sync::oneshot::channel();
    let waiting = redlock.clone();
    tokio::spawn(async move {
        let lease = waiting.acquire_timeout("report", LONG * 2).await.unwrap();
        let _ = handed.send(lease);
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = redlock.clone();
    let third = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("report", LONG * 2).await.unwrap();
        lease.release().await;
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    first.release().await;
    let second = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second is told of the first's release")
        .unwrap();
    assert!(
        second.release().now_or_never().is_none(),
        "answered at once"
    );
    tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("told of the release, not woken by its retry timer")
        .unwrap();
    redlock.settle().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_notification_still_ends_in_a_grant_by_the_retry_timer() {
    let fleet = fleet(5);
    // The holder's user may not publish: its releases delete the keys but notify nobody.
    acl_on_every_node(
        &fleet,
        &[
            "SETUSER",
            "mute",
            "on",
            ">secret",
            "~*",
            "+@all",
            "resetchannels",
        ],
    );
    let mute: Vec<String> = (0..5)
        .map(|i| format!("redis://mute:secret@127.0.0.1:{}", fleet.port(i)))
        .collect();
    let holder = fresh(Redlock::builder().nodes(mute)).build().unwrap();
    let waiting = builder(&fleet)
        .retry_delay(Duration::from_millis(300))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let lease = holder.acquire("report").await.unwrap();
    let task = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("report", LONG).await.unwrap();
        let attempts = lease.attempts();
        lease.release().await;
        attempts
    });
    until_subscribed(&fleet, "redlock:report").await;
    let report = lease.release().await;
    assert!(report.is_quorum_free(), "{report:?}");
    assert_eq!(
        report.failed(),
        0,
        "the release works without the channel: {report:?}"
    );
    let attempts = tokio::time::timeout(LONG / 2, task).await.unwrap().unwrap();
    assert!(attempts >= 2, "granted by a later round");
    assert_no_lock_keys(&fleet).await;
}

/// Connections node `node` has accepted so far, read over `inspector`.
fn connections_received(inspector: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(inspector).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

/// A node that drops the subscription connection as soon as it is made (here `CLIENT KILL
/// TYPE pubsub` every 20 ms; a proxy that takes no `SUBSCRIBE` or an output buffer limit
/// does the same): the client reconnects with a back-off, not as fast as the node drops
/// it. It reconnected at once after every break that followed a handshake, about once per
/// kill, for as long as anyone waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_dropped_as_soon_as_made_is_reopened_with_a_back_off() {
    let fleet = fleet(3);
    let holder = builder(&fleet).build().unwrap();
    let waiting = waiter(fleet.urls());
    let lease = holder.acquire("import").await.unwrap();
    let task = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("import", LONG).await.unwrap();
        lease.release().await;
    });
    until_subscribed(&fleet, "redlock:import").await;

    let mut inspector = fleet.connect(0).unwrap();
    let before = connections_received(&mut inspector);
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let _: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut inspector)
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reconnections = connections_received(&mut inspector) - before;
    // The back-off's waits (100, 200, 400 and 800 ms) allow about five in two seconds.
    assert!(
        reconnections <= 8,
        "{reconnections} reconnections in 2 s, about one per kill"
    );

    // Once the node lets it be, the subscription is back and the waiter is woken.
    until_subscribed(&fleet, "redlock:import").await;
    lease.release().await;
    tokio::time::timeout(LONG / 2, task).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_sleeps_until_the_holders_keys_expire_not_longer() {
    let fleet = fleet(5);
    // A holder that vanished: its keys expire in 2.5 s, and nobody releases them.
    let holder = builder(&fleet)
        .ttl(Duration::from_millis(2_500))
        .build()
        .unwrap();
    std::mem::forget(holder.acquire("report").await.unwrap());
    let waiting = builder(&fleet)
        .retry_delay(Duration::from_secs(2))
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let started = Instant::now();
    // Round 1 at 0 s finds the key; round 2 at 2 s learns that it expires at 2.5 s, half
    // way to the next timer at 4 s; round 3 runs when it does.
    let lease = waiting.acquire_timeout("report", LONG).await.unwrap();
    let took = started.elapsed();
    assert_eq!(lease.attempts(), 3);
    assert!(
        took < Duration::from_millis(3_500),
        "granted after {took:?}: it waited for its timer, not for the expiry"
    );
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_waiters_take_turns() {
    const TASKS: usize = 4;
    const EACH: usize = 15;
    let fleet = fleet(5);
    let redlock = builder(&fleet).retry_count(1_000).build().unwrap();
    let grants = Arc::new(Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let (redlock, grants) = (redlock.clone(), grants.clone());
            tokio::spawn(async move {
                for _ in 0..EACH {
                    let lease = redlock.acquire("turns").await.unwrap();
                    grants.lock().unwrap().push(task);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    lease.release().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let grants = grants.lock().unwrap().clone();
    // While every task still has leases to take, the others are in line whenever one
    // releases, so nobody gets the lease twice in a row.
    let all_busy = &grants[..TASKS * (EACH - 1)];
    let repeats = all_busy.windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(repeats, 0, "grant order: {all_busy:?}");
    assert_no_lock_keys(&fleet).await;
}

/// Waiters of one client that lose their first rounds together line up, and each must keep
/// its lost round's cleanup moving while it stands in line: a key it won on a node where an
/// earlier waiter's SET came second stands in the way of everyone ahead of it until its TTL
/// (30 s here) ends. Nodes 0-2 are taken by another owner, so every first round loses; then
/// node 0 frees up and every grant needs nodes 0, 3 and 4. Whether two first rounds
/// interleave on the nodes is up to the scheduler, so the scene is played three times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_in_line_let_their_cleanup_through_to_those_ahead() {
    let fleet = fleet(5);
    for scene in 0..3 {
        waiters_line_up_behind_a_quorum_of_three(&fleet, &format!("report-{scene}")).await;
    }
}

async fn waiters_line_up_behind_a_quorum_of_three(fleet: &RedisFleet, resource: &str) {
    const WAITERS: usize = 16;
    let key = format!("redlock:{resource}");
    fleet
        .occupy(&[0, 1, 2], &key, Duration::from_secs(60))
        .unwrap();
    let redlock = builder(fleet)
        .ttl(Duration::from_secs(30))
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
        .build()
        .unwrap();
    redlock.connect().await;
    let start = Arc::new(tokio::sync::Barrier::new(WAITERS));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|n| {
            let redlock = redlock.clone();
            let start = Arc::clone(&start);
            let resource = resource.to_owned();
            tokio::spawn(async move {
                start.wait().await;
                let lease = redlock
                    .acquire_timeout(&resource, Duration::from_secs(8))
                    .await
                    .map_err(|e| format!("waiter {n}: {e}"))?;
                lease.release().await;
                Ok::<_, String>(())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    fleet.vacate(&[0], &key).unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(20), waiter)
            .await
            .expect("every waiter ends")
            .unwrap()
            .expect("every waiter gets the lease in turn");
    }
    redlock.settle().await;
    fleet.vacate(&[1, 2], &key).unwrap();
    assert_no_lock_keys(fleet).await;
}

/// Sends `PUBLISH channel payload` on each of `connections` (one per node), `per_second` times a second
/// per node, for `lasting`: what another application, a lease of the same name in another
/// database (the Pub/Sub channels are shared by all databases of a server) or a hostile user
/// can do to a lock key's channel.
fn flood(
    mut connections: Vec<redis::Connection>,
    channel: &str,
    payloads: &[String],
    per_second: u32,
    lasting: Duration,
) -> u64 {
    const BATCH: u32 = 10;
    let pause = Duration::from_secs(1) * BATCH / per_second;
    let started = Instant::now();
    let mut sent = 0u64;
    while started.elapsed() < lasting {
        for connection in &mut connections {
            let mut pipe = redis::pipe();
            for n in 0..BATCH {
                let payload = &payloads[(sent as usize + n as usize) % payloads.len()];
                pipe.cmd("PUBLISH").arg(channel).arg(payload).ignore();
            }
            let () = pipe.query(connection).unwrap();
        }
        sent += u64::from(BATCH);
        std::thread::sleep(pause);
    }
    sent
}

fn connections(fleet: &RedisFleet) -> Vec<redis::Connection> {
    (0..fleet.len())
        .map(|i| fleet.connect(i).unwrap())
        .collect()
}

/// The lock requests (`SET`) every node of `fleet` has run so far: one per node per round.
fn sets(fleet: &RedisFleet) -> u64 {
    (0..fleet.len()).map(|i| calls(fleet, i, &["set"])).sum()
}

/// A flood of messages on a key's channel that do not report the release of the holder the
/// waiter saw (junk, tokens nobody holds) wakes nobody: the waiter keeps to its retry timer.
/// A replay of the holder's own token (as a `PUBLISH` by anyone who can read the key can be)
/// wakes it at most once per retry delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_messages_on_the_keys_channel_does_not_multiply_the_rounds() {
    const DELAY: Duration = Duration::from_millis(200);
    const FLOOD: Duration = Duration::from_secs(1);
    let fleet = fleet(3);
    let key = "redlock:flood";
    let holder = "0123456789abcdef0123456789abcdef";
    // Another owner holds the key on every node for 4 s.
    for i in 0..fleet.len() {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(holder)
            .arg("PX")
            .arg(4_000)
            .query(&mut fleet.connect(i).unwrap())
            .unwrap();
    }
    let waiting = builder(&fleet)
        .retry_delay(DELAY)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let started = Instant::now();
    let task = tokio::spawn(async move {
        let lease = waiting
            .acquire_timeout("flood", Duration::from_secs(8))
            .await
            .unwrap();
        let attempts = lease.attempts();
        lease.release().await;
        attempts
    });
    until_subscribed(&fleet, key).await;
    // The timer alone gives one round per delay; a round may straddle each boundary.
    let by_timer = (FLOOD.as_millis() / DELAY.as_millis()) as u64;
    let allowance = 2;
    let nodes = fleet.len() as u64;

    let junk: Vec<String> = vec![
        "junk".into(),
        "ffffffffffffffffffffffffffffffff".into(),
        "00000000000000000000000000000001".into(),
        String::new(),
    ];
    let before = sets(&fleet);
    let (flood_fleet, payloads) = (connections(&fleet), junk);
    let sent = tokio::task::spawn_blocking(move || flood(flood_fleet, key, &payloads, 500, FLOOD))
        .await
        .unwrap();
    let junk_rounds = (sets(&fleet) - before) / nodes;
    eprintln!("junk flood: {sent} messages per node, {junk_rounds} rounds in {FLOOD:?}");

    let before = sets(&fleet);
    let (flood_fleet, payloads) = (connections(&fleet), vec![holder.to_owned()]);
    let sent = tokio::task::spawn_blocking(move || flood(flood_fleet, key, &payloads, 500, FLOOD))
        .await
        .unwrap();
    let replay_rounds = (sets(&fleet) - before) / nodes;
    eprintln!(
        "replayed holder token: {sent} messages per node, {replay_rounds} rounds in {FLOOD:?}"
    );

    assert!(
        junk_rounds <= by_timer + allowance,
        "{junk_rounds} rounds during a flood of junk; the retry timer alone gives {by_timer}"
    );
    // Early rounds at most one per delay, on top of the timer's: a forged release of the
    // right token (which takes reading the key) at most doubles the rounds.
    assert!(
        replay_rounds <= 2 * by_timer + allowance,
        "{replay_rounds} rounds during a replay of the holder's token; the retry timer alone gives {by_timer}"
    );
    // The holder's keys expire at 4 s: the waiter gets the lease then, not much later.
    let attempts = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(4_800),
        "granted after {took:?} ({attempts} rounds)"
    );
    assert_no_lock_keys(&fleet).await;
}

/// A lease of the same name in another database of the nodes publishes on the same channel
/// (Pub/Sub channels are shared by every database of a server), with genuine tokens: they
/// are not the holder's the waiter saw, so they wake nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_in_another_database_do_not_wake_the_waiter() {
    const DELAY: Duration = Duration::from_millis(300);
    const CYCLES: u64 = 20;
    let fleet = fleet(3);
    let nodes = fleet.len() as u64;
    // Database 0: another owner holds the key for 3 s.
    fleet
        .occupy(&[0, 1, 2], "redlock:shared", Duration::from_secs(3))
        .unwrap();
    let waiting = builder(&fleet)
        .retry_delay(DELAY)
        .retry_jitter(Duration::ZERO)
        .build()
        .unwrap();
    let task = tokio::spawn(async move {
        let lease = waiting
            .acquire_timeout("shared", Duration::from_secs(8))
            .await
            .unwrap();
        lease.release().await;
    });
    until_subscribed(&fleet, "redlock:shared").await;
    // Database 1: leases of the same name come and go, each release announced on the
    // channel the waiter listens to.
    let elsewhere =
        fresh(Redlock::builder().nodes(fleet.urls().into_iter().map(|url| format!("{url}/1"))))
            .build()
            .unwrap();
    let before = sets(&fleet);
    let started = Instant::now();
    for _ in 0..CYCLES {
        elsewhere.acquire("shared").await.unwrap().release().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let elapsed = started.elapsed();
    // One SET per node for each uncontended lease of database 1; the rest are the waiter's.
    let rounds = (sets(&fleet) - before - CYCLES * nodes) / nodes;
    let by_timer = (elapsed.as_millis() / DELAY.as_millis()) as u64 + 1;
    eprintln!("{CYCLES} leases of database 1 in {elapsed:?}: {rounds} rounds of the waiter");
    assert!(
        rounds <= by_timer + 1,
        "{rounds} rounds in {elapsed:?} while {CYCLES} leases of database 1 came and went; the timer alone gives {by_timer}"
    );
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    elsewhere.settle().await;
    assert_no_lock_keys(&fleet).await;
}

/// The holder's genuine release still wakes a waiter at once in the middle of a flood of
/// other messages on the key's channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holders_release_wakes_the_waiter_through_a_flood() {
    let fleet = fleet(3);
    let holder = builder(&fleet).build().unwrap();
    let waiting = waiter(fleet.urls());
    let lease = holder.acquire("noisy").await.unwrap();
    let task = tokio::spawn(async move {
        let lease = waiting.acquire_timeout("noisy", LONG * 2).await.unwrap();
        lease.release().await;
    });
    until_subscribed(&fleet, "redlock:noisy").await;
    let payloads: Vec<String> = (0..50u8)
        .map(|n| redlock::core::Token::from_bytes([n; 16]).to_string())
        .chain(["junk".to_owned()])
        .collect();
    let connections = connections(&fleet);
    let flooding = tokio::task::spawn_blocking(move || {
        flood(
            connections,
            "redlock:noisy",
            &payloads,
            500,
            Duration::from_millis(1_500),
        )
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    lease.release().await;
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("woken by the release, not by its 60 s timer")
        .unwrap();
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "granted {took:?} after the release"
    );
    flooding.await.unwrap();
    assert_no_lock_keys(&fleet).await;
}

/// `PUBLISH` calls (the release scripts' notifications) each node has run so far.
fn publishes(fleet: &RedisFleet) -> Vec<u64> {
    (0..fleet.len())
        .map(|i| calls(fleet, i, &["publish"]))
        .collect()
}

/// The release scripts publish only where a waiter marked the key: an uncontended
/// acquire and release costs the nodes no `PUBLISH` (before the marks: one per node per
/// release, whoever listened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_nobody_waits_for_publishes_nothing() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    for _ in 0..3 {
        let lease = redlock.acquire("report").await.unwrap();
        let report = lease.release().await;
        assert!(report.is_quorum_free(), "{report:?}");
    }
    assert_eq!(publishes(&fleet), [0, 0, 0]);
    assert_no_lock_keys(&fleet).await;
}

/// A waiter marks the nodes where its lost round found the holder (a quorum at least: the
/// round is decided at a quorum of answers); the holder's release publishes once on each
/// of those nodes, and nowhere else, and wakes the waiter long before its timer; once
/// granted, the waiter's marks are gone (the release took them), and its own release
/// publishes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_someone_waits_for_publishes_once_per_node_and_wakes_the_waiter() {
    let fleet = fleet(3);
    let holder = builder(&fleet).build().unwrap();
    let waiting = waiter(fleet.urls());
    let lease = holder.acquire("report").await.unwrap();
    let task = tokio::spawn(async move { waiting.acquire_timeout("report", LONG * 2).await });
    until_subscribed(&fleet, "redlock:report").await;
    let marked = eventually(Duration::from_secs(5), || async {
        wait_marks(&fleet, "redlock:report").iter().sum::<u64>() >= 2
    })
    .await;
    assert!(marked, "marks: {:?}", wait_marks(&fleet, "redlock:report"));
    let marked = wait_marks(&fleet, "redlock:report");
    let released = Instant::now();
    lease.release().await;
    let granted = tokio::time::timeout(LONG / 2, task)
        .await
        .expect("woken by the release, not by its retry timer")
        .unwrap()
        .unwrap();
    let took = released.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "granted {took:?} after the release"
    );
    assert_eq!(publishes(&fleet), marked, "one PUBLISH on each marked node");
    // Granted, the waiter removes its marks; its own release then tells nobody.
    let unmarked = eventually(Duration::from_secs(5), || async {
        wait_marks(&fleet, "redlock:report") == [0, 0, 0]
    })
    .await;
    assert!(
        unmarked,
        "marks left: {:?}",
        wait_marks(&fleet, "redlock:report")
    );
    granted.release().await;
    assert_eq!(publishes(&fleet), marked);
    assert_no_lock_keys(&fleet).await;
}

/// Two clients (each a fresh process's, its connections just made) start `acquire_timeout`
/// together and the winner releases after `hold`. Returns how long after the winner's
/// release (its start) the loser was granted, for each of `trials` trials.
async fn start_together(
    fleet: &RedisFleet,
    delay: Duration,
    hold: Duration,
    trials: usize,
) -> Vec<Duration> {
    let client = || {
        builder(fleet)
            .retry_delay(delay)
            .retry_jitter(Duration::ZERO)
            .node_timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let mut gaps = Vec::new();
    for trial in 0..trials {
        let (a, b) = (client(), client());
        let (_, _) = tokio::join!(a.connect(), b.connect());
        let resource = format!("together-{trial}");
        let take = |redlock: Redlock| {
            let resource = resource.clone();
            async move {
                let lease = redlock
                    .acquire_timeout(&resource, Duration::from_secs(10))
                    .await
                    .unwrap();
                let granted = Instant::now();
                tokio::time::sleep(hold).await;
                let released = Instant::now();
                lease.release().await;
                (granted, released)
            }
        };
        let (a, b) = tokio::join!(take(a), take(b));
        let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
        gaps.push(second.0.saturating_duration_since(first.1));
    }
    gaps.sort();
    gaps
}

/// Two clients start together, as jobs started by one cron line do, and the winner releases
/// at once or within half a millisecond. The loser mostly won a node (its refusals name the
/// winner on a quorum) and lost just before the winner's release, which can land after its
/// waiting marks but before its subscription is in place: it must still be granted on that
/// release, not after its retry delay (2 s here, without jitter, so that the two are far
/// apart). Against Redis 6.2 the refusals name no one: the loser reads the holders, and a
/// release that lands before the read is seen there as a free key. A loaded machine may
/// lose a trial for other reasons (a first round answered after its node timeout; on 6.2,
/// a loser that won a node and whose reads cannot show one owner on a quorum keeps its
/// timer by the split-vote rule), so one is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_that_start_together_hand_over_at_the_release() {
    let fleet = fleet(3);
    let delay = Duration::from_secs(2);
    let mut gaps = Vec::new();
    for hold in [0, 250, 500] {
        gaps.extend(start_together(&fleet, delay, Duration::from_micros(hold), 8).await);
    }
    gaps.sort();
    let slept = gaps.iter().filter(|gap| **gap >= delay / 2).count();
    let median = gaps[gaps.len() / 2];
    assert!(
        slept <= 1 && median < delay / 20,
        "{slept} of {} second grants slept the retry delay ({delay:?}); the median came {median:?} after the release; all: {gaps:?}",
        gaps.len()
    );
    assert_no_lock_keys(&fleet).await;
}

/// An acquisition that gives up while others of its client wait ahead of it in line failed
/// like any other: it is counted (`acquire_failures` covers failures for any reason) and
/// logged; it ended without either. Two acquisitions of one client start together against
/// a held lease and both lose their first rounds; whichever joins the client's line second
/// waits behind the other. When that is the one with the short default budget, it gives up
/// in line; otherwise it gives up after rounds of its own. Either way it is one failure, so
/// five scenes count five, whichever way each falls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquisition_that_gives_up_in_its_clients_line_is_counted_as_failed() {
    const SCENES: u64 = 5;
    let fleet = fleet(3);
    let holder = builder(&fleet).build().unwrap();
    let waiting = builder(&fleet).build().unwrap();
    for scene in 0..SCENES {
        let resource = format!("lined-{scene}");
        let held = holder.acquire(&resource).await.unwrap();
        let (patient, hasty, ()) = tokio::join!(
            waiting.acquire_timeout(&resource, Duration::from_secs(10)),
            waiting.acquire(&resource),
            async {
                // The hasty one fails while the lease is held; then the patient one gets it.
                tokio::time::sleep(Duration::from_secs(2)).await;
                held.release().await;
            }
        );
        assert!(hasty.is_err(), "{hasty:?}");
        patient.unwrap().release().await;
    }
    let stats = waiting.stats();
    assert_eq!(stats.acquire_failures, SCENES, "{stats:?}");
}
