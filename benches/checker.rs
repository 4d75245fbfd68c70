//! The model checker's speed: states per second on a standard check (the shipped client with
//! client clocks slow within the drift factor: three nodes, two clients, a 6-tick TTL), with
//! and without client symmetry, on one thread and on two, breadth first and depth first,
//! with node symmetry on one thread, and the state counts of each.
//!
//! ```text
//! cargo bench --bench checker
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use redlock_sim::check::{self, CheckSpec, Options};

fn checks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../simulator/checks")
}

fn standard(c: &mut Criterion) {
    let spec =
        CheckSpec::load(&checks_dir().join("shipped-drift.toml")).unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group("checker");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    // (name, client symmetry, threads, depth first from the start, node symmetry)
    for (name, symmetry, threads, depth_first, node_symmetry) in [
        ("symmetry_1_thread", true, 1, false, false),
        ("symmetry_2_threads", true, 2, false, false),
        ("symmetry_1_thread_depth_first", true, 1, true, false),
        ("symmetry_2_threads_depth_first", true, 2, true, false),
        ("no_symmetry_1_thread", false, 1, false, false),
        ("node_symmetry_1_thread", true, 1, false, true),
    ] {
        let options = Options {
            threads,
            symmetry,
            node_symmetry,
            breadth_first_memory: if depth_first {
                0
            } else {
                check::DEFAULT_BREADTH_FIRST_MEMORY
            },
            ..Options::default()
        };
        let probe = check::check(spec.clone(), options);
        assert!(
            probe.matches() && probe.exploration.complete,
            "{}",
            probe.text()
        );
        println!(
            "{name}: {} states, {} distinct, depth {}, peak memory {} bytes",
            probe.exploration.states,
            probe.exploration.distinct,
            probe.exploration.depth,
            probe.exploration.peak_memory
        );
        // Throughput in states generated: criterion's elements per second are states/s.
        group.throughput(Throughput::Elements(probe.exploration.states));
        group.bench_function(name, |b| {
            b.iter(|| check::check(spec.clone(), options).exploration.distinct);
        });
    }
    group.finish();
}

criterion_group!(benches, standard);
criterion_main!(benches);
