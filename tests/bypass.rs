//! One client's waiters pass a lease among themselves without the nodes (the next in line
//! starts its round when the release returns); another process's waiter hears the release a
//! trip later. The bound on that bypass: after a few hand-offs past another process's
//! waiter, the next one yields, and the other process gets the lease.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// The busy client's tasks, each taking the lease in a loop.
const TASKS: usize = 4;
/// How long each of them holds it.
const HOLD: Duration = Duration::from_millis(20);
/// How long the other process's waiter may wait: a handful of holds, where without the bound
/// it waited for seconds.
const BOUND: Duration = Duration::from_millis(250);
const TRIALS: usize = 20;

/// Four tasks of one client loop acquire → hold 20 ms → release on one resource; once they
/// are going, a waiter of another client (its own process, as far as the nodes can tell)
/// asks for the same resource. It must be granted within [`BOUND`] in every trial, while
/// the busy client keeps handing the lease over among its tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_processs_waiter_is_not_passed_over_by_a_busy_clients_hand_offs() {
    let fleet = fleet(5);
    let busy = builder(&fleet).retry_count(100_000).build().unwrap();
    let other = builder(&fleet).build().unwrap();
    let (_, _) = tokio::join!(busy.connect(), other.connect());
    let mut waits = Vec::new();
    // The busy client's grants while the other waited.
    let mut passes = Vec::new();
    for trial in 0..TRIALS {
        let resource = format!("busy-{trial}");
        let stop = Arc::new(AtomicBool::new(false));
        let grants = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (busy, stop, grants, resource) =
                    (busy.clone(), stop.clone(), grants.clone(), resource.clone());
                tokio::spawn(async move {
                    while !stop.load(Ordering::Relaxed) {
                        let lease = busy
                            .acquire_timeout(&resource, Duration::from_secs(20))
                            .await
                            .unwrap();
                        grants.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(HOLD).await;
                        lease.release().await;
                    }
                })
            })
            .collect();
        // The busy client's tasks stand in line and hand the lease over.
        let going = eventually(Duration::from_secs(10), || async {
            grants.load(Ordering::Relaxed) >= TASKS
        })
        .await;
        assert!(going, "the busy client's loop never got going");
        let asked = Instant::now();
        let before = grants.load(Ordering::Relaxed);
        let lease = other
            .acquire_timeout(&resource, Duration::from_secs(10))
            .await
            .unwrap();
        waits.push(asked.elapsed());
        passes.push(grants.load(Ordering::Relaxed) - before);
        lease.release().await;
        stop.store(true, Ordering::Relaxed);
        for task in tasks {
            task.await.unwrap();
        }
    }
    eprintln!(
        "the other process's waits: {waits:?}; the busy client's grants meanwhile: {passes:?}"
    );
    let longest = waits.iter().max().copied().unwrap_or_default();
    assert!(
        longest < BOUND,
        "another process's waiter waited {longest:?} (bound {BOUND:?}); every trial: {waits:?}"
    );
    assert_no_lock_keys(&fleet).await;
}
