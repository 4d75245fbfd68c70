//! The simulator's speed: events per second and simulated seconds per wall second on a
//! standard scenario (three clients taking turns through duplicated messages), and the wall
//! time of the whole catalogue × 100 seeds.
//!
//! ```text
//! cargo bench --bench simulator
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use redlock_sim::Scenario;

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../simulator/scenarios")
}

fn standard(c: &mut Criterion) {
    let scenario = Scenario::load(&scenarios_dir().join("rl-18-duplicated-messages.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let probe = redlock_sim::run(&scenario, 1, false).expect("a run");
    println!(
        "standard scenario: {} events, {:.1} simulated seconds per run",
        probe.report.events,
        probe.report.simulated_ns as f64 / 1e9
    );
    let mut group = c.benchmark_group("simulator");
    group.throughput(Throughput::Elements(probe.report.events));
    group.bench_function("events_rl18", |b| {
        let mut seed = 0;
        b.iter(|| {
            seed += 1;
            // Same scenario, varying seed: the event count varies a little around the probe's.
            redlock_sim::run(&scenario, seed % 16 + 1, false)
                .expect("a run")
                .report
                .events
        });
    });
    group.finish();
}

fn catalogue(c: &mut Criterion) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(scenarios_dir())
        .expect("the scenarios")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let scenarios: Vec<Scenario> = files
        .iter()
        .map(|f| Scenario::load(f).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut group = c.benchmark_group("simulator");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(40));
    group.bench_function("catalogue_x100_seeds", |b| {
        b.iter(|| {
            let mut events = 0;
            for scenario in &scenarios {
                for seed in 1..=100 {
                    let run = redlock_sim::run(scenario, seed, false).expect("a run");
                    assert!(
                        run.report.matches,
                        "{}: {:?}",
                        scenario.name,
                        run.report.mismatch()
                    );
                    events += run.report.events;
                }
            }
            events
        });
    });
    group.finish();
}

criterion_group!(benches, standard, catalogue);
criterion_main!(benches);
