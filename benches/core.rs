//! The algorithm alone, without I/O: one acquisition round (N SETs out, a quorum of replies
//! in, the grant out) and one release round, for N = 3, 5, 7. This is the CPU cost the core
//! adds to every lock operation, stable even on a noisy machine.
//!
//! ```text
//! cargo bench --bench core
//! ```

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use redlock_core::{
    Acquire, AcquireEvent, LockConfig, LockKey, Machine, Release, Reply, Timestamp, Token,
};

fn acquire_round(c: &mut Criterion) {
    let mut group = c.benchmark_group("core/acquire_round");
    for nodes in [3, 5, 7] {
        let config = LockConfig::new(nodes);
        let key = LockKey::new("redlock:", "stock-sync:warehouse-42").expect("valid key");
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| {
                let now = Timestamp::from_nanos(1_000_000);
                let mut acquire =
                    Acquire::new(&config, key.clone(), Token::from_bytes([7; 16]), now);
                let mut sent = 0;
                while let Some(transmit) = acquire.poll_transmit() {
                    acquire.handle_reply(transmit.request, Ok(Reply::Acquired), now);
                    sent += 1;
                }
                match acquire.poll_outcome() {
                    Some(AcquireEvent::Acquired(grant)) => black_box((grant.valid_until, sent)),
                    other => panic!("unexpected outcome {other:?}"),
                }
            });
        });
    }
    group.finish();
}

fn release_round(c: &mut Criterion) {
    let mut group = c.benchmark_group("core/release_round");
    for nodes in [3, 5, 7] {
        let config = LockConfig::new(nodes);
        let key = LockKey::new("redlock:", "stock-sync:warehouse-42").expect("valid key");
        group.bench_with_input(BenchmarkId::from_parameter(nodes), &nodes, |b, _| {
            b.iter(|| {
                let now = Timestamp::from_nanos(1_000_000);
                let mut release =
                    Release::new(&config, key.clone(), Token::from_bytes([7; 16]), now);
                while let Some(transmit) = release.poll_transmit() {
                    release.handle_reply(transmit.request, Ok(Reply::Released), now);
                }
                black_box(release.poll_outcome())
            });
        });
    }
    group.finish();
}

criterion_group!(benches, acquire_round, release_round);
criterion_main!(benches);
