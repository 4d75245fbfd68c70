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
use redlock_tests::RedisFleet;
use redlock_tests::proxy::{Direction, FaultProxy};
use support::floor::{Decide, Floor};

/// Stops node 4 for one contender's measurement. Each contender gets its own pause: over
/// thousands of iterations a stopped node is sent megabytes that wait in socket buffers, and
/// once those are full a request's timeout can cut it before redis-rs writes it (then it is
/// never sent). Resuming between contenders drains the buffers, so no contender runs against
/// buffers another one filled.
fn stop_if(fleet: &mut RedisFleet, paused: bool) {
    if paused {
        fleet.pause(4).expect("pause a node");
    }
}

/// Ends a contender's measurement: resumes node 4 if it was stopped, lets the queued
/// commands run and counts the contender's keys on every node (while a leaked key would
/// still be there: the TTL is shorter than the whole benchmark).
fn end_phase(fleet: &mut RedisFleet, paused: bool, prefix: &str, what: &str) {
    if paused {
        fleet.resume(4).expect("resume the node");
    }
    if prefix == "bench-ours:" {
        support::assert_clean(fleet, prefix, what);
    } else {
        support::report_clean(fleet, prefix, what);
    }
}

fn tail(c: &mut Criterion) {
    let mut fleet = support::fleet(5);
    let runtime = support::multi_thread();
    let proxies = support::proxies(&runtime, &fleet);
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let ours = support::ours(&urls);
    let floor = runtime.block_on(Floor::connect(&urls, Decide::Quorum));
    let rslock = rslock::LockManager::new(urls);
    runtime.block_on(async {
        support::ours_once(&ours, "warm").await;
        support::rslock_once(&rslock, "bench-rslock:warm").await;
    });

    let mut group = c.benchmark_group("unhealthy_node");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for condition in ["healthy", "slow_20ms", "paused"] {
        match condition {
            "slow_20ms" => proxies[4]
                .handle()
                .set_latency(Direction::ToClient, Duration::from_millis(20)),
            "paused" => proxies[4]
                .handle()
                .set_latency(Direction::ToClient, Duration::ZERO),
            _ => {}
        }
        let paused = condition == "paused";
        stop_if(&mut fleet, paused);
        group.bench_function(BenchmarkId::new("ours", condition), |b| {
            b.iter(|| runtime.block_on(support::ours_once(&ours, "tail")));
        });
        end_phase(&mut fleet, paused, "bench-ours:", "ours");
        stop_if(&mut fleet, paused);
        group.bench_function(BenchmarkId::new("floor_quorum", condition), |b| {
            b.iter(|| runtime.block_on(floor.acquire_release("bench-floor:tail")));
        });
        end_phase(&mut fleet, paused, "bench-floor:", "floor");
        stop_if(&mut fleet, paused);
        // rslock waits for every node: a paused node costs it the driver's response timeout.
        group.sample_size(if condition == "healthy" { 100 } else { 10 });
        group.bench_function(BenchmarkId::new("rslock", condition), |b| {
            b.iter(|| runtime.block_on(support::rslock_once(&rslock, "bench-rslock:tail")));
        });
        group.sample_size(100);
        end_phase(&mut fleet, paused, "bench-rslock:", "rslock");
        stop_if(&mut fleet, paused);
        // Percentiles of ours, which criterion does not report.
        let mut samples: Vec<Duration> = (0..500)
            .map(|_| {
                let started = Instant::now();
                runtime.block_on(support::ours_once(&ours, "tail"));
                started.elapsed()
            })
            .collect();
        samples.sort();
        println!(
            "ours, {condition}: p50 {:?}, p99 {:?}, max {:?} over 500 acquire+release",
            samples[250], samples[495], samples[499]
        );
        end_phase(&mut fleet, paused, "bench-ours:", "ours");
    }
    group.finish();
    drop(proxies);
}

criterion_group!(benches, tail);
criterion_main!(benches);
