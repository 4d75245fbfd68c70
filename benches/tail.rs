//! Acquire + release with one of five nodes unhealthy: paused (`SIGSTOP`: it accepts bytes
//! and answers nothing) or 20 ms slower (a delaying proxy on its replies). This crate's
//! client, the quorum-deciding floor and `rslock`, on the same nodes in the same run, with
//! every node behind a proxy so the healthy path is the same for all.
//!
//! ```text
//! cargo bench --bench tail
//! ```

mod support;

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use redlock::Redlock;
use redlock_fleet::proxy::{Direction, FaultProxy};
use support::floor::{Decide, Floor};

fn tail(c: &mut Criterion) {
    let mut fleet = support::fleet(5);
    let runtime = support::multi_thread();
    let proxies: Vec<FaultProxy> = runtime.block_on(async {
        let mut proxies = Vec::new();
        for node in 0..5 {
            proxies.push(FaultProxy::start(fleet.addr(node)).await.expect("a proxy"));
        }
        proxies
    });
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let ours = Redlock::builder()
        .nodes(urls.clone())
        .ttl(support::TTL)
        .key_prefix("bench-ours:")
        .build()
        .expect("a client");
    let floor = runtime.block_on(Floor::connect(&urls, Decide::Quorum));
    let rslock = rslock::LockManager::new(urls);
    runtime.block_on(async {
        ours.acquire("warm").await.expect("warm-up").release().await;
        let lock = rslock
            .lock("bench-rslock:warm", support::TTL)
            .await
            .expect("rslock warm-up");
        rslock.unlock(&lock).await;
    });

    let mut group = c.benchmark_group("unhealthy_node");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for condition in ["healthy", "slow_20ms", "paused"] {
        match condition {
            "slow_20ms" => proxies[4]
                .handle()
                .set_latency(Direction::ToClient, Duration::from_millis(20)),
            "paused" => {
                proxies[4]
                    .handle()
                    .set_latency(Direction::ToClient, Duration::ZERO);
                fleet.pause(4).expect("pause a node");
            }
            _ => {}
        }
        group.bench_function(BenchmarkId::new("ours", condition), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    ours.acquire("tail").await.expect("acquire").release().await
                })
            });
        });
        group.bench_function(BenchmarkId::new("floor_quorum", condition), |b| {
            b.iter(|| {
                runtime.block_on(async { assert!(floor.acquire_release("bench-floor:tail").await) })
            });
        });
        // rslock waits for every node: a paused node costs it the driver's response timeout.
        group.sample_size(if condition == "healthy" { 100 } else { 10 });
        group.bench_function(BenchmarkId::new("rslock", condition), |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let lock = rslock
                        .lock("bench-rslock:tail", support::TTL)
                        .await
                        .expect("rslock");
                    rslock.unlock(&lock).await;
                })
            });
        });
        group.sample_size(100);
        // Percentiles of ours, which criterion does not report.
        let mut samples: Vec<Duration> = (0..500)
            .map(|_| {
                let started = Instant::now();
                runtime.block_on(async {
                    ours.acquire("tail").await.expect("acquire").release().await
                });
                started.elapsed()
            })
            .collect();
        samples.sort();
        println!(
            "ours, {condition}: p50 {:?}, p99 {:?}, max {:?} over 500 acquire+release",
            samples[250], samples[495], samples[499]
        );
    }
    group.finish();
    fleet.resume(4).expect("resume the node");
    support::assert_clean(&fleet, "bench-ours:", "ours");
    support::assert_clean(&fleet, "bench-floor:", "floor");
    support::assert_clean(&fleet, "bench-rslock:", "rslock");
    drop(proxies);
}

criterion_group!(benches, tail);
criterion_main!(benches);
