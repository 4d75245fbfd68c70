//! After a loss, the work stops before the lease is released: a waiter woken by the release
//! is never granted while an effect that the holder started under a valid signal still runs.
//!
//! The holder's work is a loop of effects that the runtime cannot interrupt (20 ms of
//! blocking each, shorter than the keep-alive's 50 ms margin), each started only while
//! [`LeaseSignal::is_valid`] says so. The longest hold ends the lease; a second client waits
//! for the resource with `acquire_timeout`, woken by the release's notification. Its grant
//! must come after the holder's work has stopped, so after the end of every effect.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use redlock::Redlock;
use redlock::client::LeaseSignal;

/// What the holder's work did, in the test's time.
#[derive(Debug, Default)]
struct Effects {
    /// Every effect, start and end.
    done: Vec<(Instant, Instant)>,
    /// When the work stopped (returned or was dropped).
    stopped: Option<Instant>,
}

/// Records when the work stops, however it stops.
struct OnStop(Arc<Mutex<Effects>>);

impl Drop for OnStop {
    fn drop(&mut self) {
        self.0.lock().unwrap().stopped = Some(Instant::now());
    }
}

/// Effects of 20 ms that cannot be interrupted, each started while the signal is valid.
async fn effects_while_valid(signal: LeaseSignal, effects: Arc<Mutex<Effects>>) {
    let _stop = OnStop(Arc::clone(&effects));
    while signal.is_valid() {
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        effects.lock().unwrap().done.push((started, Instant::now()));
        tokio::task::yield_now().await;
    }
}

/// Two clients on three nodes: the holder (2 s TTL, longest hold 500 ms) and the waiter.
fn clients(fleet: &redlock_tests::RedisFleet) -> (Redlock, Redlock) {
    let holder = builder(fleet)
        .ttl(Duration::from_secs(2))
        .max_hold(Duration::from_millis(500))
        .build()
        .unwrap();
    let waiter = builder(fleet).ttl(Duration::from_secs(2)).build().unwrap();
    (holder, waiter)
}

/// The waiter asks from 100 ms on; returns when it was granted.
fn wait_for(waiter: &Redlock, resource: &str) -> tokio::task::JoinHandle<Instant> {
    let waiter = waiter.clone();
    let resource = resource.to_owned();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let lease = waiter
            .acquire_timeout(&resource, Duration::from_secs(5))
            .await
            .unwrap();
        let granted = Instant::now();
        lease.release().await;
        granted
    })
}

fn assert_granted_after_the_work(granted: Instant, effects: &Effects, run: usize) {
    let stopped = effects.stopped.unwrap();
    let running = effects
        .done
        .iter()
        .find(|(started, ended)| *started <= granted && granted < *ended);
    assert!(
        running.is_none() && granted >= stopped,
        "run {run}: the waiter was granted while the holder's work still ran (an effect \
         started with a valid signal ended {:?} after the grant; the work stopped {:?} after \
         it)",
        running.map(|(_, ended)| ended.saturating_duration_since(granted)),
        stopped.saturating_duration_since(granted),
    );
}

/// `with_lock`: the loss drops the work at its next `.await`, and only then is the lease
/// released. Three runs, as the order used to be left to the scheduler.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_lock_releases_a_lost_lease_only_after_the_work_stopped() {
    let fleet = fleet(3);
    let (holder, waiter) = clients(&fleet);
    holder.connect().await;
    waiter.connect().await;
    for run in 0..3 {
        let resource = format!("loss-order-{run}");
        let effects = Arc::new(Mutex::new(Effects::default()));
        let waiting = wait_for(&waiter, &resource);
        let work_effects = Arc::clone(&effects);
        let result = holder
            .with_lock(&resource, |signal| {
                effects_while_valid(signal, work_effects)
            })
            .await;
        // The work ends itself (the signal turns invalid at the loss deadline) or is
        // dropped by the loss: either way the call reports what happened, never a hang.
        assert!(
            matches!(result, Ok(()) | Err(redlock::Error::LeaseLost { .. })),
            "{result:?}"
        );
        let granted = waiting.await.unwrap();
        assert_granted_after_the_work(granted, &effects.lock().unwrap(), run);
    }
    holder.settle().await;
    waiter.settle().await;
    assert_no_lock_keys(&fleet).await;
}

/// `with_lock_signalled`: the work is never cancelled; a lost lease waits for it to return.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_lock_signalled_releases_a_lost_lease_only_after_the_work_returned() {
    let fleet = fleet(3);
    let (holder, waiter) = clients(&fleet);
    holder.connect().await;
    waiter.connect().await;
    for run in 0..3 {
        let resource = format!("loss-order-signalled-{run}");
        let effects = Arc::new(Mutex::new(Effects::default()));
        let waiting = wait_for(&waiter, &resource);
        let work_effects = Arc::clone(&effects);
        holder
            .with_lock_signalled(&resource, |signal| async move {
                effects_while_valid(signal.clone(), Arc::clone(&work_effects)).await;
                // One more uninterruptible step after the loss (a flush, a rollback): still
                // inside the margin, and still before anyone else may hold the resource.
                let started = Instant::now();
                std::thread::sleep(Duration::from_millis(20));
                work_effects
                    .lock()
                    .unwrap()
                    .done
                    .push((started, Instant::now()));
                assert!(!signal.is_valid());
            })
            .await
            .unwrap();
        let granted = waiting.await.unwrap();
        assert_granted_after_the_work(granted, &effects.lock().unwrap(), run);
    }
    holder.settle().await;
    waiter.settle().await;
    assert_no_lock_keys(&fleet).await;
}
