//! What the client counts: the `Stats` snapshot and the same figures through `metrics`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use metrics::{
    Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

/// A recorder that keeps counter totals and histogram sample counts by name.
#[derive(Default)]
struct Tally {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    samples: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

struct Count(Arc<AtomicU64>);

impl CounterFn for Count {
    fn increment(&self, value: u64) {
        self.0.fetch_add(value, Ordering::SeqCst);
    }
    fn absolute(&self, value: u64) {
        self.0.store(value, Ordering::SeqCst);
    }
}

impl HistogramFn for Count {
    fn record(&self, _value: f64) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Recorder for &'static Tally {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let cell = self
            .counters
            .lock()
            .unwrap()
            .entry(key.name().to_owned())
            .or_default()
            .clone();
        Counter::from_arc(Arc::new(Count(cell)))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let cell = self
            .samples
            .lock()
            .unwrap()
            .entry(key.name().to_owned())
            .or_default()
            .clone();
        Histogram::from_arc(Arc::new(Count(cell)))
    }
}

impl Tally {
    fn counter(&self, name: &str) -> u64 {
        self.counters
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
    fn samples(&self, name: &str) -> u64 {
        self.samples
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_and_metrics_count_the_same_events() {
    let tally: &'static Tally = Box::leak(Box::default());
    metrics::set_global_recorder(tally).unwrap();

    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(300))
        .retry_count(1)
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap();

    // Two leases, one extension, one release in time.
    let mut first = redlock.acquire("counted").await.unwrap();
    first.extend().await.unwrap();
    // Contention: two rounds against the held lease, then a failure.
    assert!(redlock.acquire("counted").await.is_err());
    first.release().await;
    // A lease released after its validity ended counts as an expiration.
    let late = redlock.acquire("counted").await.unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    late.release().await;

    let stats = redlock.stats();
    assert_eq!(stats.acquisitions, 2, "{stats:?}");
    // Four rounds at least: one per lease and two against the held one. On a loaded
    // machine a lease's round can lose replies to the node timeout and be retried (seen
    // once: 5 rounds, an acquisition of 88 ms); the metrics must count it all the same.
    assert!(stats.rounds >= 4, "{stats:?}");
    assert_eq!(stats.contention, 2, "{stats:?}");
    assert_eq!(stats.acquire_failures, 1, "{stats:?}");
    assert_eq!(stats.no_quorum, 0, "{stats:?}");
    assert_eq!(stats.extensions, 1, "{stats:?}");
    assert_eq!(stats.releases, 2, "{stats:?}");
    assert_eq!(stats.expirations, 1, "{stats:?}");
    assert!(
        stats.hold_time_mean() >= Duration::from_millis(150),
        "{stats:?}"
    );
    assert!(stats.acquire_latency_max >= stats.acquire_latency_mean());

    for (name, expected) in [
        ("redlock_rounds_total", stats.rounds),
        ("redlock_acquisitions_total", stats.acquisitions),
        ("redlock_contention_total", stats.contention),
        ("redlock_acquire_failures_total", stats.acquire_failures),
        ("redlock_extensions_total", stats.extensions),
        ("redlock_releases_total", stats.releases),
        ("redlock_expirations_total", stats.expirations),
    ] {
        assert_eq!(tally.counter(name), expected, "{name}");
    }
    assert_eq!(tally.samples("redlock_acquire_seconds"), 2);
    assert_eq!(tally.samples("redlock_hold_seconds"), 2);
}
