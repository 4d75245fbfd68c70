//! Uncontended acquire + release latency for N = 1, 3, 5, 7 nodes: this crate's client, the
//! round-trip floor (deciding at a quorum, and waiting for every reply) on both tokio runtime
//! flavours, and the Rust peers `rslock` 0.10 and `redlock` (redlock-rs) 2.0 — all on the same
//! local redis-server nodes, in the same run. Every contender must leave no key behind.
//!
//! ```text
//! cargo bench --bench latency
//! ```

mod support;

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use support::floor::{Decide, Floor};

const SIZES: [usize; 4] = [1, 3, 5, 7];

fn latency(c: &mut Criterion) {
    let fleet = support::fleet(7);
    let urls = fleet.urls();
    let mut group = c.benchmark_group("acquire_release");
    group.warm_up_time(Duration::from_secs(2));
    group.measurement_time(Duration::from_secs(4));

    for (flavour, runtime) in [
        ("mt", support::multi_thread()),
        ("ct", support::current_thread()),
    ] {
        for n in SIZES {
            let nodes = &urls[..n];
            let ours = runtime.block_on(async { support::ours(nodes) });
            // Connect (and learn each node's run_id) before measuring.
            runtime.block_on(async {
                ours.connect().await;
                support::ours_once(&ours, "warm").await;
            });
            group.bench_with_input(
                BenchmarkId::new(format!("ours_{flavour}"), n),
                &n,
                |b, _| {
                    b.iter(|| runtime.block_on(support::ours_once(&ours, "latency")));
                },
            );
            for (name, decide) in [("floor_quorum", Decide::Quorum), ("floor_all", Decide::All)] {
                let floor = runtime.block_on(Floor::connect(nodes, decide));
                group.bench_with_input(
                    BenchmarkId::new(format!("{name}_{flavour}"), n),
                    &n,
                    |b, _| {
                        b.iter(|| {
                            runtime.block_on(async {
                                floor.acquire_release("bench-floor:latency").await
                            })
                        });
                    },
                );
            }
        }
        support::assert_clean(&fleet, "bench-ours:", &format!("ours ({flavour})"));
        support::report_clean(&fleet, "bench-floor:", &format!("floor ({flavour})"));
    }

    // The peers after this crate and the floor, each in a phase of its own: a run's leftover
    // disturbance (background requests, the nodes' lazy frees) then falls on the same
    // contender, never systematically on the next one in the table.
    let runtime = support::multi_thread();
    for n in SIZES {
        let rslock = rslock::LockManager::new(urls[..n].to_vec());
        runtime.block_on(support::rslock_once(&rslock, "bench-rslock:warm"));
        group.bench_with_input(BenchmarkId::new("rslock_mt", n), &n, |b, _| {
            b.iter(|| runtime.block_on(support::rslock_once(&rslock, "bench-rslock:latency")));
        });
    }
    support::report_clean(&fleet, "bench-rslock:", "rslock");

    // redlock-rs is synchronous: a new TCP connection per command, nodes asked in turn.
    for n in SIZES {
        let redlock_rs = redlock_rs::RedLock::new(urls[..n].to_vec());
        group.bench_with_input(BenchmarkId::new("redlock_rs", n), &n, |b, _| {
            b.iter(|| {
                let lock = redlock_rs
                    .lock(
                        b"bench-redlock-rs:latency",
                        support::TTL.as_millis() as usize,
                    )
                    .expect("redlock-rs")
                    .expect("uncontended");
                redlock_rs.unlock(&lock);
            });
        });
    }
    support::report_clean(&fleet, "bench-redlock-rs:", "redlock-rs");
    group.finish();
}

criterion_group!(benches, latency);
criterion_main!(benches);
