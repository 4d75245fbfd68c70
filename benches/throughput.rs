//! Throughput on five local redis-server nodes: acquire + release loops by 1, 16 and 64
//! concurrent tasks on distinct resources, and contended acquisitions per second by 16
//! workers on one resource. This crate's client, the wait-all floor and `rslock`.
//!
//! ```text
//! cargo bench --bench throughput
//! ```

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use support::floor::{Decide, Floor};

/// Operations each task runs per measured iteration.
const PER_TASK: u64 = 20;

fn parallel(c: &mut Criterion) {
    let fleet = support::fleet(5);
    let runtime = support::multi_thread();
    let urls = fleet.urls();
    let ours = support::ours(&urls);
    let floor = Arc::new(runtime.block_on(Floor::connect(&urls, Decide::All)));
    let rslock = Arc::new(rslock::LockManager::new(urls));
    runtime.block_on(support::ours_once(&ours, "warm"));

    let mut group = c.benchmark_group("throughput");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for tasks in [1u64, 16, 64] {
        group.throughput(Throughput::Elements(tasks * PER_TASK));
        group.bench_function(BenchmarkId::new("ours", tasks), |b| {
            b.iter_custom(|iters| {
                in_tasks(&runtime, iters, tasks, |t| {
                    let ours = ours.clone();
                    async move {
                        let resource = format!("t{t}");
                        for _ in 0..PER_TASK {
                            support::ours_once(&ours, &resource).await;
                        }
                    }
                })
            });
        });
        group.bench_function(BenchmarkId::new("floor_all", tasks), |b| {
            b.iter_custom(|iters| {
                in_tasks(&runtime, iters, tasks, |t| {
                    let floor = floor.clone();
                    async move {
                        let key = format!("bench-floor:t{t}");
                        for _ in 0..PER_TASK {
                            floor.acquire_release(&key).await;
                        }
                    }
                })
            });
        });
        group.bench_function(BenchmarkId::new("rslock", tasks), |b| {
            b.iter_custom(|iters| {
                in_tasks(&runtime, iters, tasks, |t| {
                    let rslock = rslock.clone();
                    async move {
                        let key = format!("bench-rslock:t{t}");
                        for _ in 0..PER_TASK {
                            support::rslock_once(&rslock, &key).await;
                        }
                    }
                })
            });
        });
    }
    group.finish();
    support::assert_clean(&fleet, "bench-ours:", "ours");
    support::report_clean(&fleet, "bench-floor:", "floor");
    support::report_clean(&fleet, "bench-rslock:", "rslock");
}

/// Wall time of `iters` iterations, each spawning `tasks` tasks (`task(t)` is task `t`'s
/// work) and waiting for them all.
fn in_tasks<F, Task>(runtime: &tokio::runtime::Runtime, iters: u64, tasks: u64, task: F) -> Duration
where
    F: Fn(u64) -> Task,
    Task: Future<Output = ()> + Send + 'static,
{
    runtime.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            let handles: Vec<_> = (0..tasks).map(|t| tokio::spawn(task(t))).collect();
            for h in handles {
                h.await.expect("a task");
            }
        }
        started.elapsed()
    })
}

/// Contended: 16 workers take turns on one resource for a fixed time; acquisitions/s.
fn contended(c: &mut Criterion) {
    const WORKERS: usize = 16;
    const WINDOW: Duration = Duration::from_millis(500);
    let fleet = support::fleet(5);
    let runtime = support::multi_thread();
    let urls = fleet.urls();
    // Both with their defaults: ours waits for the holder's release (notifications, and this
    // client's waiters in line) with at most 100-200 ms between rounds; rslock retries 3
    // times, 200 ms apart. A worker whose acquisition gives up simply asks again.
    let ours = support::ours(&urls);
    let rslock = Arc::new(rslock::LockManager::new(urls));
    runtime.block_on(support::ours_once(&ours, "warm"));

    let mut group = c.benchmark_group("contended_16_workers");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(6));
    group.bench_function("ours", |b| {
        b.iter_custom(|iters| {
            in_windows(&runtime, iters, WORKERS, WINDOW, |deadline| {
                let ours = ours.clone();
                async move {
                    let mut done = 0u64;
                    while Instant::now() < deadline {
                        if let Ok(lease) = ours.acquire("contended").await {
                            lease.release_at_quorum().await;
                            done += 1;
                        }
                    }
                    done
                }
            })
        });
    });
    group.bench_function("rslock", |b| {
        b.iter_custom(|iters| {
            in_windows(&runtime, iters, WORKERS, WINDOW, |deadline| {
                let rslock = rslock.clone();
                async move {
                    let mut done = 0u64;
                    while Instant::now() < deadline {
                        let key = "bench-rslock:contended";
                        if let Ok(lock) = rslock.lock(key, support::TTL).await {
                            rslock.unlock(&lock).await;
                            done += 1;
                        }
                    }
                    done
                }
            })
        });
    });
    group.finish();
    support::assert_clean(&fleet, "bench-ours:", "ours (contended)");
    support::report_clean(&fleet, "bench-rslock:", "rslock (contended)");
}

/// `iters` windows of `window`, each spawning `workers` tasks (`worker(deadline)` is one
/// worker's loop, returning its acquisitions) and timing from after the spawns until they
/// all end; the sum over the windows of each window's time per acquisition, so that
/// criterion's throughput reads as acquisitions/s.
fn in_windows<F, Worker>(
    runtime: &tokio::runtime::Runtime,
    iters: u64,
    workers: usize,
    window: Duration,
    worker: F,
) -> Duration
where
    F: Fn(Instant) -> Worker,
    Worker: Future<Output = u64> + Send + 'static,
{
    runtime.block_on(async {
        let mut busy = Duration::ZERO;
        for _ in 0..iters {
            let deadline = Instant::now() + window;
            let handles: Vec<_> = (0..workers)
                .map(|_| tokio::spawn(worker(deadline)))
                .collect();
            let started = Instant::now();
            let mut total = 0;
            for h in handles {
                total += h.await.expect("a task");
            }
            busy += started.elapsed() / u32::try_from(total.max(1)).unwrap_or(u32::MAX);
        }
        busy
    })
}

criterion_group!(benches, parallel, contended);
criterion_main!(benches);
