//! The cost of fencing: acquire + release on five local redis-server nodes, plain and with
//! quorum-minted fencing tokens (one more round trip to a quorum), in the same run.
//!
//! ```text
//! cargo bench --bench fencing
//! ```

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use redlock::Redlock;
use redlock::client::Fencing;
use redlock_tests::RedisFleet;

fn fencing(c: &mut Criterion) {
    let fleet = RedisFleet::start(5).unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let plain = runtime.block_on(async {
        // Nodes this benchmark started: no restart to guard against.
        Redlock::builder()
            .nodes(fleet.urls())
            .restart_quarantine(None)
            .build()
            .expect("a client")
    });
    let fenced = plain
        .with_fencing(Fencing::Quorum)
        .expect("a fenced handle");

    let mut group = c.benchmark_group("acquire_release_n5");
    group.measurement_time(Duration::from_secs(5));
    for (name, redlock) in [("plain", &plain), ("fenced", &fenced)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let lease = redlock.acquire("bench").await.expect("acquire");
                    lease.release_at_quorum().await
                })
            });
        });
    }
    group.finish();

    // Nothing may be left behind (the fence counter lives forever by design).
    runtime.block_on(plain.settle());
    for node in 0..fleet.len() {
        let keys = fleet
            .keys_with_prefix(node, "redlock:")
            .expect("inspect a node");
        assert!(
            keys.iter().all(|(k, _)| k.contains('\0')),
            "lock keys left on node {node}: {keys:?}"
        );
    }
}

criterion_group!(benches, fencing);
criterion_main!(benches);
