//! Leases kept alive for long work: bounded auto-extension, loss detection, `with_lock`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::key_events::{KeyEvent, KeyEvents};
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

/// The release deadline (`V + 3d`: the last start plus the TTL, and twice the drift
/// allowance for slow node clocks) follows every extension: a lease extended twice has a
/// release deadline after its current validity, not the first grant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_deadline_follows_every_extension() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(400))
        .build()
        .unwrap();
    let kept = redlock
        .acquire("deadline")
        .await
        .unwrap()
        .keep_alive(KeepAlive::default());
    let signal = kept.signal();
    let first = signal.release_deadline();
    let extended = eventually(Duration::from_secs(3), || {
        let signal = signal.clone();
        async move { signal.extensions() >= 2 }
    })
    .await;
    assert!(extended, "only {} extensions", signal.extensions());
    let drift = signal
        .release_deadline()
        .saturating_duration_since(signal.deadline());
    assert!(
        signal.release_deadline() > first && signal.release_deadline() > signal.deadline(),
        "release deadline {:?} (first {first:?}) against the validity's end {:?}",
        signal.release_deadline(),
        signal.deadline()
    );
    assert!(drift < Duration::from_millis(50), "{drift:?}");
    assert!(
        signal.release_deadline() > redlock.now(),
        "the release deadline is already in the past"
    );
    kept.release().await;
}

/// A dropped handle is not a stopped work (the review's recipe): the work, moved to a task,
/// keeps acting while its signal says valid. The signal must say invalid from the drop on, and
/// the dropped lease is released only once its keys have expired: its keeper deletes none
/// before its release deadline, and nobody else is granted the resource while it holds a
/// quorum.
///
/// The release is watched on the nodes themselves, not read from B's grant. B is granted once
/// A's key is gone on a quorum, and a node also forgets the key by itself when its own clock
/// says the TTL is over, counted from its own reading of when the `SET` arrived: a clock the
/// client does not control, which Redlock's drift allowance covers for the holder's validity
/// but not for this instant. B's grant measures that clock as much as A's keeper, and may
/// come before the release deadline without A releasing early. So the test reads A's `del`s
/// against the deadline, and that the key had ended before B took it from each node's events,
/// which one connection receives in the order the node ran the commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_handle_stops_the_extensions_and_releases_once_the_keys_have_expired() {
    let fleet = fleet(3);
    let ttl = Duration::from_millis(1_500);
    let a = builder(&fleet).ttl(ttl).build().unwrap();
    let b = builder(&fleet).ttl(ttl).build().unwrap();
    b.connect().await;
    // From before A acquires, so that a `SET` of A's still on its way when A is granted is
    // told from B's. `$`: the `SET`s; `g`: the release script's `del`; `x`: a node's expiry.
    let events = KeyEvents::watch(&fleet, &format!("{PREFIX}dropped"), "Kgx$").await;
    let kept = a
        .acquire("dropped")
        .await
        .unwrap()
        .keep_alive(KeepAlive::default());
    let signal = kept.signal();
    let worker = {
        let signal = signal.clone();
        tokio::spawn(async move {
            // The last moment the work saw the lease valid.
            let mut last_valid = None;
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(2_500) {
                if signal.is_valid() {
                    last_valid = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            last_valid
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // The owner returns early (a `?`, a panic): the work still runs in its task.
    let keys_expire = signal.valid_until() + a.config().drift();
    drop(kept);
    let lease_b = b.acquire_timeout("dropped", Duration::from_secs(4)).await;
    let granted = Instant::now();
    let lease_b = lease_b.unwrap();
    let quorum = a.config().quorum();
    // Every node's end of A's key, and B's `SET` on a quorum, arrive within moments of the
    // grant; the bound only keeps a missing event from hanging the test.
    let nodes = events
        .until(Duration::from_secs(2), |nodes| {
            nodes
                .iter()
                .all(|events| a_key(events).is_none_or(|(_, end)| end.is_some()))
                && nodes.iter().filter(|events| taken(events)).count() >= quorum
        })
        .await;
    assert_released_at_the_deadline(&nodes, keys_expire, granted, quorum);
    let last_valid = worker.await.unwrap().unwrap();
    assert!(
        last_valid < granted,
        "A's signal said valid {:?} after B was granted",
        last_valid - granted
    );
    assert!(signal.lost_reason().is_some(), "the signal names no end");
    lease_b.release().await;
}

/// Where A's key lived on a node: the index of its `SET` (the key's first: the watch starts
/// before A acquires) and of its end after it (a `del` or the node's own expiry), if any.
fn a_key(events: &[KeyEvent]) -> Option<(usize, Option<usize>)> {
    let set = events.iter().position(|(_, event)| event == "set")?;
    let end = events[set..]
        .iter()
        .position(|(_, event)| event == "del" || event == "expired");
    Some((set, end.map(|end| set + end)))
}

/// Whether B's `SET` came on a node after A's key ended there.
fn taken(events: &[KeyEvent]) -> bool {
    match a_key(events) {
        Some((_, Some(end))) => events[end..].iter().any(|(_, event)| event == "set"),
        _ => false,
    }
}

/// A's key was never deleted before `keys_expire` (an event is received after the node
/// raised it, so one received before was raised before), it ended on every node it was set
/// on, and B's `SET` followed its end on a quorum.
fn assert_released_at_the_deadline(
    nodes: &[Vec<KeyEvent>],
    keys_expire: Instant,
    granted: Instant,
    quorum: usize,
) {
    // Each event in milliseconds from `keys_expire` (negative: before it).
    let log = || {
        let millis = |at: Instant| match at.checked_duration_since(keys_expire) {
            Some(after) => after.as_secs_f64() * 1e3,
            None => -keys_expire.duration_since(at).as_secs_f64() * 1e3,
        };
        let nodes: Vec<Vec<(String, &str)>> = nodes
            .iter()
            .map(|events| {
                let events = events.iter();
                events.map(|(at, event)| (format!("{:+.3} ms", millis(*at)), event.as_str()))
            })
            .map(Iterator::collect)
            .collect();
        format!("{nodes:?}; B granted at {:+.3} ms", millis(granted))
    };
    let mut set = 0;
    for (node, events) in nodes.iter().enumerate() {
        let Some((start, end)) = a_key(events) else {
            continue;
        };
        set += 1;
        let a = &events[start..end.map_or(events.len(), |end| end + 1)];
        for (at, _) in a.iter().filter(|(_, event)| event == "del") {
            assert!(
                *at >= keys_expire,
                "node {node}: A's key was deleted {:?} before its release deadline: {}",
                keys_expire - *at,
                log()
            );
        }
        assert!(end.is_some(), "node {node}: A's key did not end: {}", log());
    }
    assert!(set >= quorum, "A's key was set on {set} nodes: {}", log());
    let taken = nodes.iter().filter(|events| taken(events)).count();
    assert!(
        taken >= quorum,
        "B's SET came after the end of A's key on {taken} nodes, fewer than {quorum}: {}",
        log()
    );
}

/// An explicit release ends the signal's validity at once, and `lost()` resolves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_signal_is_invalid_and_lost_resolves() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(2_000))
        .build()
        .unwrap();
    let kept = redlock
        .acquire("released")
        .await
        .unwrap()
        .keep_alive(KeepAlive::default());
    let signal = kept.signal();
    assert!(signal.is_valid());
    kept.release().await;
    assert!(!signal.is_valid(), "valid after its release");
    let reason = tokio::time::timeout(Duration::from_millis(200), signal.lost()).await;
    assert!(reason.is_ok(), "lost() did not resolve after the release");
}

/// `changed` resolves for the last state the keep-alive published, then pends: a loop over it
/// does not spin once the keep-alive has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_pends_once_the_keep_alive_has_ended() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(2_000))
        .build()
        .unwrap();
    let kept = redlock
        .acquire("changed")
        .await
        .unwrap()
        .keep_alive(KeepAlive::default());
    let mut signal = kept.signal();
    kept.release().await;
    // What the keep-alive published last, if it was not seen yet.
    let _ = tokio::time::timeout(Duration::from_millis(200), signal.changed()).await;
    let again = tokio::time::timeout(Duration::from_millis(300), signal.changed()).await;
    assert!(
        again.is_err(),
        "changed() resolved after the keep-alive ended"
    );
}

/// A `with_lock` call cancelled half-way has dropped its work with it: the work has stopped,
/// and the lease is released at once, not held until its keys expire as a dropped
/// `KeptLease` is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_with_lock_releases_at_once() {
    let fleet = fleet(3);
    let ttl = Duration::from_secs(5);
    let a = builder(&fleet).ttl(ttl).build().unwrap();
    let b = builder(&fleet).ttl(ttl).build().unwrap();
    b.connect().await;
    let call = {
        let a = a.clone();
        tokio::spawn(async move {
            a.with_lock("cancelled", |_signal| std::future::pending::<()>())
                .await
        })
    };
    assert!(
        eventually(Duration::from_secs(2), || async { lock_keys(&fleet) > 0 }).await,
        "never held"
    );
    call.abort();
    let started = Instant::now();
    let lease = b
        .acquire_timeout("cancelled", Duration::from_secs(8))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "granted {:?} after the cancellation",
        started.elapsed()
    );
    lease.release().await;
}
