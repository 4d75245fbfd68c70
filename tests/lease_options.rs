//! Per-call options (`acquire_with`: a TTL and a wait budget of the call's own) and the
//! release report (`release` at every node, `release_at_quorum` at a quorum), on real nodes.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::{AcquireOptions, Error};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The key's remaining time to live on node `i`, in milliseconds.
fn pttl(fleet: &redlock_tests::RedisFleet, i: usize, key: &str) -> i64 {
    let mut c = fleet.connect(i).expect("connect to the node");
    redis::cmd("PTTL").arg(key).query(&mut c).expect("PTTL")
}

/// A per-call TTL sets the keys' expiry, and the lease's extensions keep it; the handle's
/// own TTL is untouched for the next call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_call_ttl_sets_the_keys_expiry_and_its_extensions() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).ttl(ms(2_000)).build().unwrap();
    let mut lease = redlock
        .acquire_with("report", AcquireOptions::new().ttl(ms(20_000)))
        .await
        .unwrap();
    assert!(lease.remaining() > ms(15_000), "{:?}", lease.remaining());
    // `acquire` returns at a quorum; the last node's `SET` may still be on its way.
    redlock.settle().await;
    for i in 0..3 {
        let left = pttl(&fleet, i, lease.key());
        assert!((15_000..=20_000).contains(&left), "node {i}: {left} ms");
    }
    let validity = lease.extend().await.unwrap();
    assert!(
        validity > ms(15_000),
        "extended by the call's TTL: {validity:?}"
    );
    assert!(lease.release().await.is_complete());

    let lease = redlock.acquire("report").await.unwrap();
    assert!(lease.remaining() <= ms(2_000), "{:?}", lease.remaining());
    assert!(pttl(&fleet, 0, lease.key()) <= 2_000);
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A wait budget waits for a held resource and gets it when the holder lets go; a budget
/// that runs out returns `Taken` within the budget plus a round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_budget_waits_for_the_holder_and_no_longer() {
    let fleet = fleet(3);
    // No retries on the handle: only the call's budget can make this wait.
    let redlock = builder(&fleet).retry_count(0).build().unwrap();
    let holder = redlock.acquire("stock").await.unwrap();

    let started = Instant::now();
    let err = redlock
        .acquire_with("stock", AcquireOptions::new().wait(ms(400)))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(matches!(err, Error::Taken { .. }), "{err}");
    assert!(waited >= ms(400), "gave up after {waited:?}");
    assert!(waited < ms(1_500), "waited {waited:?}");

    let releaser = tokio::spawn(async move {
        tokio::time::sleep(ms(200)).await;
        holder.release().await;
    });
    let lease = redlock
        .acquire_with("stock", AcquireOptions::new().wait(ms(5_000)))
        .await
        .expect("granted once the holder released");
    releaser.await.unwrap();
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// `once` makes a single round even on a handle that retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_makes_a_single_round() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).retry_count(10).build().unwrap();
    let holder = redlock.acquire("stock").await.unwrap();
    let rounds = redlock.stats().rounds;
    let err = redlock
        .acquire_with("stock", AcquireOptions::new().once().ttl(ms(5_000)))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Taken { attempts: 1, .. }), "{err}");
    assert_eq!(redlock.stats().rounds, rounds + 1);
    // A zero wait budget is one round too.
    let err = redlock
        .acquire_with("stock", AcquireOptions::new().wait(Duration::ZERO))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Taken { attempts: 1, .. }), "{err}");
    assert_eq!(redlock.stats().rounds, rounds + 2);
    holder.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// Per-call options on a multi-resource lease: every key gets the call's TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_resource_lease_takes_the_calls_ttl() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).ttl(ms(2_000)).build().unwrap();
    let lease = redlock
        .acquire_many_with(
            ["account:1", "account:2"],
            AcquireOptions::new().ttl(ms(20_000)).once(),
        )
        .await
        .unwrap();
    redlock.settle().await;
    for key in ["redlock:account:1", "redlock:account:2"] {
        for i in 0..3 {
            let left = pttl(&fleet, i, key);
            assert!(
                (15_000..=20_000).contains(&left),
                "{key} on node {i}: {left} ms"
            );
        }
    }
    let err = redlock
        .acquire_many_with(["account:2", "account:3"], AcquireOptions::new().once())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err}");
    assert!(lease.release().await.is_complete());
    assert_no_lock_keys(&fleet).await;
}

/// A refused per-call TTL is a configuration error naming the field; no node is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_per_call_ttl_is_a_clear_error() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    for ttl in [Duration::ZERO, Duration::from_secs(400 * 24 * 3600)] {
        let err = redlock
            .acquire_with("r", AcquireOptions::new().ttl(ttl))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config(e) if e.field() == "ttl"),
            "{ttl:?}: {err}"
        );
    }
    assert_eq!(redlock.stats().rounds, 0);
    assert_eq!(lock_keys(&fleet), 0);
}

/// The default restart quarantine covers a per-call TTL longer than the handle's: a node
/// restarted empty stays out of quorums for that TTL, since it may have forgotten such a
/// lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_quarantine_covers_a_longer_per_call_ttl() {
    let mut fleet = fleet(3);
    let started = Instant::now();
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .ttl(ms(1_000))
        .retry_count(0)
        .build()
        .unwrap();
    wait_until_older_than(started, ms(2_500));
    redlock
        .acquire_with("job", AcquireOptions::new().ttl(ms(2_500)))
        .await
        .unwrap()
        .release()
        .await;
    fleet.restart(0).unwrap();
    let restarted = Instant::now();
    fleet.kill(1).unwrap();
    let back = loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break restarted.elapsed();
            }
            Err(_) => tokio::time::sleep(ms(50)).await,
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(6),
            "never counted"
        );
    };
    assert!(
        back >= ms(2_400),
        "counted after {back:?}, within the per-call TTL"
    );
}

/// `release_at_quorum` returns at a quorum and says which nodes are still in flight;
/// `release` waits for every node and reports the key deleted on all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_report_tells_released_from_in_flight() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    for _ in 0..5 {
        let report = redlock
            .acquire("r")
            .await
            .unwrap()
            .release_at_quorum()
            .await;
        assert!(report.is_quorum_free(), "{report}");
        assert_eq!(report.released() + report.in_flight(), 3, "{report}");
        assert_eq!(report.is_complete(), report.in_flight() == 0);
        if report.in_flight() > 0 {
            assert!(report.to_string().ends_with("still in flight"), "{report}");
        }

        let report = redlock.acquire("r").await.unwrap().release().await;
        assert!(report.is_complete(), "{report}");
        assert_eq!(report.released(), 3, "{report}");
        assert_eq!(report.to_string(), "released on 3 of 3 nodes");
    }
    assert_no_lock_keys(&fleet).await;
}

/// A kept-alive lease releases at every node too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_lease_releases_on_every_node() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let kept = redlock
        .acquire("r")
        .await
        .unwrap()
        .keep_alive(redlock::client::KeepAlive::default());
    assert!(kept.is_valid());
    let report = kept.release().await;
    assert_eq!(report.to_string(), "released on 3 of 3 nodes");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
}

/// `release` is bounded by the per-node timeout: a paused node is reported failed, not
/// waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_gives_up_on_a_paused_node_at_the_per_node_timeout() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet).node_timeout(ms(200)).build().unwrap();
    let lease = redlock.acquire("r").await.unwrap();
    fleet.pause(2).unwrap();
    let started = Instant::now();
    let report = lease.release().await;
    let took = started.elapsed();
    fleet.resume(2).unwrap();
    assert!(report.is_complete(), "{report}");
    assert_eq!((report.released(), report.failed()), (2, 1), "{report}");
    assert_eq!(report.to_string(), "released on 2 of 3 nodes, failed on 1");
    assert!(took >= ms(150) && took < ms(1_500), "took {took:?}");
}

/// The README's example, on three local nodes: what it prints is the truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_example_prints_the_truth() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(30))
        .build()
        .unwrap();
    let mut lease = redlock.acquire("stock-sync:warehouse-42").await.unwrap();
    lease.extend().await.unwrap();
    let report = lease.release().await;
    let printed = format!("released on {} node(s)", report.released());
    assert_eq!(printed, "released on 3 node(s)");
    assert_eq!(report.to_string(), "released on 3 of 3 nodes");
    assert_no_lock_keys(&fleet).await;
}

/// How long after `since` node 0 of `fleet` is counted again by `redlock` with node 1 gone,
/// trying every 50 ms for at most `within`.
async fn counted_again_after(
    redlock: &redlock::Redlock,
    since: Instant,
    within: Duration,
) -> Duration {
    loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                return since.elapsed();
            }
            Err(_) => tokio::time::sleep(ms(50)).await,
        }
        assert!(since.elapsed() < within, "never counted");
    }
}

/// A longer TTL lengthens the quarantine of a node whose quarantine was decided before it:
/// node 0 restarts empty and is identified under the handle's 1 s quarantine, then a handle
/// with a 3 s TTL joins. A lease of 3 s that node 0 forgot may still be valid until 3 s after
/// its restart, so it must stay out that long, as it does when the longer handle came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_longer_ttl_lengthens_quarantines_decided_before_it() {
    for cover_first in [true, false] {
        let mut fleet = fleet(3);
        let started = Instant::now();
        let redlock = redlock::Redlock::builder()
            .nodes(fleet.urls())
            .ttl(ms(1_000))
            .retry_count(0)
            .build()
            .unwrap();
        // Older than the longer TTL and the uptime's slack: no first-sight quarantine left.
        wait_until_older_than(started, ms(3_000));
        redlock.connect().await;
        let longer = cover_first.then(|| redlock.with_ttl(ms(3_000)).unwrap());
        fleet.restart(0).unwrap();
        let restarted = Instant::now();
        // Node 0's new connection is identified: quarantined for the quarantine then.
        redlock.connect().await;
        let longer = longer.unwrap_or_else(|| redlock.with_ttl(ms(3_000)).unwrap());
        fleet.kill(1).unwrap();
        let back = counted_again_after(&longer, restarted, Duration::from_secs(8)).await;
        assert!(
            back >= ms(2_900),
            "cover {}: node 0 counted {back:?} after its restart, within the 3 s TTL",
            if cover_first { "first" } else { "after" }
        );
    }
}
