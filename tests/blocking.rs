//! The blocking facade (`redlock::blocking`) from plain `#[test]` functions on real nodes,
//! and its refusal inside an async runtime.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::core::KeyValue;
use redlock::{AcquireOptions, Error, Fencing, KeepAlive, Verdict};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Polls `condition` every 10 ms for up to `within`, from a plain thread.
fn eventually_sync(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while !condition() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(ms(10));
    }
    true
}

fn no_lock_keys(fleet: &redlock_tests::RedisFleet) {
    assert!(
        eventually_sync(Duration::from_secs(2), || lock_keys(fleet) == 0),
        "lock keys left behind: {}",
        describe_keys(fleet)
    );
}

#[test]
fn acquire_extend_and_release_from_synchronous_code() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).ttl(ms(2_000)).build_blocking().unwrap();
    assert_eq!(redlock.connect().unwrap().connected(), 3);
    let mut lease = redlock.acquire("stock-sync:warehouse-42").unwrap();
    assert!(lease.is_valid());
    assert_eq!(lease.resource(), "stock-sync:warehouse-42");
    // `acquire` returns at a quorum; the last node's `SET` may still be on its way.
    redlock.settle().unwrap();
    assert_eq!(lock_keys(&fleet), 3);
    let validity = lease.extend().unwrap();
    assert!(validity > ms(1_500), "{validity:?}");
    assert_eq!(lease.as_async().extensions(), 1);
    let report = lease.release().unwrap();
    assert_eq!(report.to_string(), "released on 3 of 3 nodes");
    assert_eq!(lock_keys(&fleet), 0);

    let report = redlock.acquire("r").unwrap().release().unwrap();
    assert!(report.is_quorum_free(), "{report}");
    redlock.settle().unwrap();
    assert_eq!(lock_keys(&fleet), 0, "settled: every node answered");
}

#[test]
fn contention_try_acquire_and_waiting_for_the_holder() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).retry_count(0).build_blocking().unwrap();
    let holder = redlock.acquire("stock").unwrap();

    let err = redlock.try_acquire("stock").unwrap_err();
    assert!(matches!(err, Error::Taken { attempts: 1, .. }), "{err}");
    let started = Instant::now();
    let err = redlock.acquire_timeout("stock", ms(300)).unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err}");
    assert!(started.elapsed() >= ms(300), "{:?}", started.elapsed());

    // Another thread releases; this one waits for it with a per-call budget.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(ms(200));
        holder.release().unwrap()
    });
    let lease = redlock
        .acquire_with("stock", AcquireOptions::new().wait(Duration::from_secs(5)))
        .unwrap();
    assert!(releaser.join().unwrap().is_quorum_free());
    lease.release().unwrap();
    no_lock_keys(&fleet);
}

#[test]
fn a_per_call_ttl_through_the_blocking_facade() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).ttl(ms(2_000)).build_blocking().unwrap();
    let lease = redlock
        .acquire_with("report", AcquireOptions::new().ttl(ms(20_000)).once())
        .unwrap();
    assert!(lease.remaining() > ms(15_000), "{:?}", lease.remaining());
    let mut c = fleet.connect(0).unwrap();
    redlock.settle().unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(lease.key()).query(&mut c).unwrap();
    assert!((15_000..=20_000).contains(&pttl), "{pttl} ms");
    lease.release().unwrap();

    let many = redlock
        .acquire_many_with(["a", "b"], AcquireOptions::new().ttl(ms(20_000)))
        .unwrap();
    assert_eq!(many.as_async().resources().collect::<Vec<_>>(), ["a", "b"]);
    assert!(many.remaining() > ms(15_000), "{:?}", many.remaining());
    assert!(many.release().unwrap().is_complete());
    no_lock_keys(&fleet);
}

#[test]
fn with_lock_keeps_the_lease_alive_while_the_closure_runs() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).ttl(ms(600)).build_blocking().unwrap();
    let other = redlock.clone();
    let value = redlock
        .with_lock("import", |signal| {
            // Three TTLs of synchronous work: the worker thread extends meanwhile.
            let until = Instant::now() + ms(1_800);
            while Instant::now() < until {
                assert!(signal.is_valid());
                assert!(matches!(
                    other.try_acquire("import"),
                    Err(Error::Taken { .. })
                ));
                std::thread::sleep(ms(200));
            }
            signal.extensions()
        })
        .unwrap();
    assert!(value >= 2, "extended {value} times");
    no_lock_keys(&fleet);
}

#[test]
fn with_lock_reports_a_lease_lost_while_the_closure_ran() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(ms(600))
        .node_timeout(ms(50))
        .build_blocking()
        .unwrap();
    let mut paused = false;
    let err = redlock
        .with_lock("import", |signal| {
            fleet.pause(1).unwrap();
            fleet.pause(2).unwrap();
            paused = true;
            let gone = eventually_sync(Duration::from_secs(5), || !signal.is_valid());
            assert!(gone, "the lease outlived a quorum of paused nodes");
            "rows written without the lease"
        })
        .unwrap_err();
    assert!(paused);
    fleet.resume(1).unwrap();
    fleet.resume(2).unwrap();
    assert!(
        matches!(&err, Error::LeaseLost { resource, .. } if resource == "import"),
        "{err}"
    );
    // The keys expire with their TTL on the nodes that were paused.
    assert!(eventually_sync(Duration::from_secs(3), || lock_keys(
        &fleet
    ) == 0));
}

#[test]
fn a_dropped_lease_is_released_in_the_background() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(30))
        .build_blocking()
        .unwrap();
    let lease = redlock.acquire("r").unwrap();
    redlock.settle().unwrap();
    assert_eq!(lock_keys(&fleet), 3);
    drop(lease);
    // Long before the 30 s TTL: the release ran on the client's own runtime.
    no_lock_keys(&fleet);
}

#[test]
fn dropping_the_last_handle_finishes_the_background_releases() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_secs(30))
        .build_blocking()
        .unwrap();
    let lease = redlock.acquire("r").unwrap();
    drop(redlock);
    // The lease keeps the runtime; its release at a quorum leaves one node in flight,
    // which the runtime's shutdown waits for.
    let report = lease.release().unwrap();
    assert!(report.is_quorum_free(), "{report}");
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
}

/// Inside an async runtime every blocking call refuses with a clear error, and nothing is
/// sent; from a thread of its own the same handle works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inside_an_async_runtime_it_refuses_and_from_a_plain_thread_it_works() {
    let fleet = fleet(3);
    let err = builder(&fleet).build_blocking().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InsideAsyncRuntime {
                call: "RedlockBuilder::build_blocking"
            }
        ),
        "{err}"
    );

    let redlock = std::thread::scope(|s| {
        s.spawn(|| builder(&fleet).build_blocking().unwrap())
            .join()
            .unwrap()
    });
    let err = redlock.acquire("r").unwrap_err();
    assert_eq!(
        err.to_string(),
        "redlock::blocking::Redlock::acquire was called from inside an async runtime, where \
         blocking would stall it; use the async redlock::Redlock there"
    );
    assert!(!err.is_retryable());
    let worker = redlock.clone();
    let err = tokio::task::spawn_blocking(move || worker.try_acquire("r").unwrap_err())
        .await
        .unwrap();
    assert!(
        matches!(
            err,
            Error::InsideAsyncRuntime {
                call: "Redlock::try_acquire"
            }
        ),
        "{err}"
    );
    assert_eq!(redlock.stats().rounds, 0);
    assert_eq!(lock_keys(&fleet), 0);

    let lease = std::thread::scope(|s| s.spawn(|| redlock.acquire("r").unwrap()).join().unwrap());
    // The last node's `SET` may still be on its way after the quorum.
    assert!(eventually(Duration::from_secs(2), || async { lock_keys(&fleet) == 3 }).await);
    let err = lease.release().unwrap_err();
    assert!(
        matches!(
            err,
            Error::InsideAsyncRuntime {
                call: "Lease::release"
            }
        ),
        "{err}"
    );
    // The refused release left the lease to its drop: released in the background.
    assert_no_lock_keys(&fleet).await;
    // Dropped here, the last handle does not wait (nor panic).
    drop(redlock);
}

#[test]
fn fencing_and_the_holder_through_the_blocking_facade() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build_blocking().unwrap();
    let fenced = redlock.with_fencing(Fencing::Quorum).unwrap();
    let first = fenced.acquire("ledger").unwrap();
    let holder = redlock.holder("ledger").unwrap();
    assert!(holder.is_held_by(&first), "{holder}");
    assert!(
        matches!(
            holder.verdict(),
            Verdict::Held { value: KeyValue::Token(t), nodes: 3, fence, .. }
                if t == first.token() && fence == first.fence()
        ),
        "{holder}"
    );
    let token = first
        .fence()
        .expect("a fenced handle's lease carries a token");
    first.release().unwrap();
    let second = fenced.acquire("ledger").unwrap();
    assert!(
        second.fence().unwrap() > token,
        "tokens increase across leases"
    );
    second.release().unwrap();
    assert!(redlock.holder("ledger").unwrap().is_free());
    // The handle it was derived from has no fencing.
    let plain = redlock.acquire("ledger").unwrap();
    assert_eq!(plain.fence(), None);
    plain.release().unwrap();
    no_lock_keys(&fleet);
}

#[test]
fn with_lock_signalled_returns_the_work_even_after_a_loss_under_its_keep_alive_policy() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(ms(600))
        .node_timeout(ms(50))
        .build_blocking()
        .unwrap()
        // The handle's policy is what `with_lock_signalled` keeps the lease alive under.
        .with_keep_alive(KeepAlive::at_half_life(ms(600)));
    let value = redlock
        .with_lock_signalled("import", |signal| {
            assert!(signal.is_valid());
            fleet.pause(1).unwrap();
            fleet.pause(2).unwrap();
            let gone = eventually_sync(Duration::from_secs(5), || !signal.is_valid());
            assert!(gone, "the lease outlived a quorum of paused nodes");
            "stopped at the signal"
        })
        .unwrap();
    assert_eq!(value, "stopped at the signal");
    fleet.resume(1).unwrap();
    fleet.resume(2).unwrap();
    assert!(eventually_sync(Duration::from_secs(3), || lock_keys(
        &fleet
    ) == 0));
    // Without a loss it returns the work's output too, and releases the lease.
    let extensions = redlock
        .with_lock_signalled("import", |signal| {
            std::thread::sleep(ms(1_200));
            assert!(signal.is_valid());
            signal.extensions()
        })
        .unwrap();
    assert!(extensions >= 1, "extended {extensions} times");
    no_lock_keys(&fleet);
}
