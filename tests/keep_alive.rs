//! Leases kept alive for long work: bounded auto-extension, loss detection, `with_lock`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use redlock::Error;
use redlock::client::{KeepAlive, LeaseLost};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_lease_outlives_its_ttl_and_releases_cleanly() {
    let fleet = fleet(5);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(500))
        .build()
        .unwrap();
    let kept = redlock
        .acquire("import")
        .await
        .unwrap()
        .keep_alive(KeepAlive::default());
    let signal = kept.signal();
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(
        signal.is_valid(),
        "the lease should still be held after 4 TTLs"
    );
    assert!(
        signal.extensions() >= 4,
        "only {} extensions",
        signal.extensions()
    );
    // Nobody else can take it meanwhile.
    assert!(redlock.try_acquire("import").await.is_err());
    let report = kept.release().await;
    assert!(report.is_quorum_free(), "{report:?}");
    assert_no_lock_keys(&fleet).await;
    let stats = redlock.stats();
    assert!(stats.extensions >= 4 && stats.releases == 1, "{stats:?}");
    assert_eq!(stats.expirations, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_nodes_vanish_is_reported_lost_and_work_is_cancelled() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(600))
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    struct Flag(Arc<AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let flag = Flag(dropped.clone());
    let handle = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            redlock
                .with_lock("report", |_lease| async move {
                    let _flag = flag;
                    std::future::pending::<()>().await
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Three of five nodes stop answering: extensions cannot reach a quorum.
    for node in [0, 1, 2] {
        fleet.pause(node).unwrap();
    }
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(3), handle)
        .await
        .unwrap()
        .unwrap();
    let elapsed = started.elapsed();
    for node in [0, 1, 2] {
        fleet.resume(node).unwrap();
    }
    match result {
        Err(Error::LeaseLost {
            reason: LeaseLost::Expired { .. },
            ..
        }) => {}
        other => panic!("expected a lost lease, got {other:?}"),
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "the work future was not dropped"
    );
    assert!(
        elapsed < Duration::from_millis(700),
        "loss noticed after {elapsed:?}"
    );
    assert_eq!(redlock.stats().expirations, 1);
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_lock_returns_the_work_and_releases() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(400))
        .build()
        .unwrap();
    let value = redlock
        .with_lock("nightly", |lease| async move {
            tokio::time::sleep(Duration::from_millis(900)).await;
            assert!(lease.is_valid());
            lease.extensions()
        })
        .await
        .unwrap();
    assert!(
        value >= 2,
        "{value} extensions during 900 ms on a 400 ms TTL"
    );
    // Released: the next caller gets it at once.
    redlock
        .try_acquire("nightly")
        .await
        .unwrap()
        .release()
        .await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hold_limit_ends_the_lease_and_signalled_work_sees_it() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(300))
        .build()
        .unwrap()
        .with_max_hold(Duration::from_millis(500))
        .unwrap();
    let started = Instant::now();
    let (reason, elapsed) = redlock
        .with_lock_signalled("bounded", |lease| async move {
            // Cooperative work: it watches the signal instead of being cancelled.
            let reason = lease.lost().await;
            (reason, started.elapsed())
        })
        .await
        .unwrap();
    assert_eq!(reason, LeaseLost::HoldLimit);
    // Extensions stop after 500 ms; the last one is valid for under 300 ms more.
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_millis(1_200),
        "{elapsed:?}"
    );
    redlock
        .try_acquire("bounded")
        .await
        .unwrap()
        .release()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_extension_in_flight_outlives_a_release() {
    let mut fleet = fleet(5);
    // Extend as often as allowed (every half validity), so releases land mid-extension.
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(200))
        .build()
        .unwrap();
    let policy = KeepAlive::default().extend_before(Duration::from_secs(10));
    // A paused node makes every extension wait for its per-node timeout.
    fleet.pause(4).unwrap();
    for i in 0..30u64 {
        let kept = redlock
            .acquire("racy")
            .await
            .unwrap()
            .keep_alive(policy.clone());
        tokio::time::sleep(Duration::from_millis(80 + (i * 7) % 40)).await;
        kept.release().await;
    }
    fleet.resume(4).unwrap();
    // Once the paused node has replayed its queue, nothing of ours is left anywhere.
    assert_no_lock_keys(&fleet).await;
}

/// With every node hanging (blackholed, not refusing) from just after the grant, work run by
/// `with_lock` stops before the lease's validity ends, not at or after it: the keep-alive
/// reports the loss one per-node timeout early and never starts an extension that could end
/// past the deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_under_with_lock_stops_before_the_validity_ends_when_nodes_hang() {
    use redlock_tests::proxy::FaultProxy;

    let fleet = fleet(3);
    let mut proxies = Vec::new();
    for i in 0..3 {
        proxies.push(FaultProxy::start(fleet.addr(i)).await.unwrap());
    }
    let handles: Vec<_> = proxies.iter().map(FaultProxy::handle).collect();
    let redlock = fresh(redlock::Redlock::builder())
        .nodes(proxies.iter().map(FaultProxy::url))
        .ttl(Duration::from_secs(1))
        .retry_count(0)
        .build()
        .unwrap();
    redlock.connect().await;
    let ticks = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = Arc::clone(&ticks);
    let result = redlock
        .with_lock("import", |lease| async move {
            recorded
                .lock()
                .unwrap()
                .push((Instant::now(), lease.valid_until()));
            for handle in &handles {
                handle.set_blackhole(true);
            }
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                recorded
                    .lock()
                    .unwrap()
                    .push((Instant::now(), lease.valid_until()));
            }
        })
        .await;
    assert!(matches!(result, Err(Error::LeaseLost { .. })), "{result:?}");
    let ticks = ticks.lock().unwrap();
    let &(last, valid_until) = ticks.last().unwrap();
    assert!(
        last < valid_until,
        "work ran {:?} past the end of validity",
        last - valid_until
    );
    for proxy in &proxies {
        proxy.handle().heal();
    }
}

/// A cancelled `extend()` leaves its commands in the lease's lanes, so the lease's next
/// command waits for them and no background task is left waiting forever: `settle` returns.
/// (One thread: no reply can arrive while the extension is polled the one time.)
#[tokio::test(flavor = "current_thread")]
async fn a_cancelled_extension_leaves_nothing_waiting_forever() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    // Node 2 is stopped: the SET to it is still in flight when the lease is granted.
    fleet.pause(2).unwrap();
    let mut lease = redlock.acquire("job").await.unwrap();
    {
        // One poll sends the extension (its command to node 2 waits behind the SET); then
        // the caller gives up on it, as a `select!` with a shutdown branch would.
        let mut extension = Box::pin(lease.extend());
        let first = futures::poll!(&mut extension);
        assert!(first.is_pending(), "{first:?}");
    }
    lease.release().await;
    let settled = tokio::time::timeout(Duration::from_secs(2), redlock.settle()).await;
    fleet.resume(2).unwrap();
    assert!(settled.is_ok(), "settle() still waits after 2 s");
    assert_no_lock_keys(&fleet).await;
}
