//! The target ratios, measured in interleaved blocks.
//!
//! Criterion measures one contender after another, and on a shared, virtualised machine the
//! noise changes between those phases: two runs of `benches/latency.rs` can disagree on a
//! ratio by 30 % or more. Here the contenders take turns in short blocks (100 acquire +
//! release each, or one burst of 64 tasks), round after round, on the same nodes; each round
//! gives one ratio per pair, and the median over the rounds is reported with its quartiles.
//! A burst of noise then lands on one round, not on one contender.
//!
//! Writes `target/criterion/paired/ratios.json`, which `src/bin/bench_report.rs` reads.
//!
//! ```text
//! cargo bench --bench paired
//! ```

mod support;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_fleet::RedisFleet;
use redlock_fleet::proxy::{Direction, FaultProxy, ProxyHandle};
use serde_json::json;
use support::floor::{Decide, Floor};

/// Rounds per comparison.
const ROUNDS: usize = 40;
/// Acquire + release per latency block.
const BLOCK: u32 = 100;
/// Concurrent tasks, and acquire + release per task, in a throughput block.
const TASKS: usize = 64;
const PER_TASK: usize = 20;

type Block<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs `contenders` in turn, `ROUNDS` times after one warm-up round, starting each round
/// with the next contender so that none always follows the same one; `after_round` runs
/// between rounds (untimed). Returns each one's block times.
fn interleave(
    contenders: &mut [(&str, Block<'_>)],
    after_round: &mut dyn FnMut(),
) -> BTreeMap<String, Vec<Duration>> {
    for (_, block) in contenders.iter_mut() {
        block();
    }
    after_round();
    let mut times: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let count = contenders.len();
    for round in 0..ROUNDS {
        for turn in 0..count {
            let (name, block) = &mut contenders[(round + turn) % count];
            let took = block();
            times.entry((*name).to_owned()).or_default().push(took);
        }
        after_round();
    }
    times
}

/// Lets `runtime` finish its background requests, then fails the benchmark if this crate's
/// client left a key. Run after every round, well within the TTL, so a leaked key cannot
/// expire unseen. The other contenders' keys are counted and reported, not judged here
/// (`benches/latency.rs`, `tail.rs` and `throughput.rs` judge them).
fn settle_and_check(runtime: &tokio::runtime::Runtime, fleet: &RedisFleet) {
    for wait in [100, 500] {
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(wait)).await });
        if support::leftover_keys(fleet, "bench-ours:") == 0 {
            break;
        }
    }
    let ours = support::leftover_keys(fleet, "bench-ours:");
    assert_eq!(
        ours, 0,
        "this crate's client left {ours} key(s) after a round"
    );
    for prefix in ["bench-floor:", "bench-rslock:"] {
        let left = support::leftover_keys(fleet, prefix);
        if left > 0 {
            println!("note: {left} key(s) with prefix {prefix:?} after a round");
        }
    }
}

/// The `q` quantile of sorted `values`, interpolated between neighbours.
fn quantile(values: &[f64], q: f64) -> f64 {
    let at = (values.len() - 1) as f64 * q;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    values[low] + (values[high] - values[low]) * (at - low as f64)
}

/// Median and quartiles of the per-round ratios `a / b`.
fn ratio(times: &BTreeMap<String, Vec<Duration>>, a: &str, b: &str) -> serde_json::Value {
    let mut ratios: Vec<f64> = times[a]
        .iter()
        .zip(&times[b])
        .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    let (median, q1, q3) = (
        quantile(&ratios, 0.5),
        quantile(&ratios, 0.25),
        quantile(&ratios, 0.75),
    );
    println!(
        "{a} ÷ {b}: median {median:.2} (quartiles {q1:.2}–{q3:.2}) over {} rounds",
        ratios.len()
    );
    json!({ "median": median, "q1": q1, "q3": q3, "rounds": ratios.len() })
}

/// Median time of one operation, in µs, for the log.
fn per_op_micros(times: &[Duration], ops: u32) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2].as_secs_f64() * 1e6 / f64::from(ops)
}

/// Logs each contender's median time per acquire + release over blocks of `BLOCK`.
fn print_per_op(times: &BTreeMap<String, Vec<Duration>>) {
    for (name, t) in times {
        println!(
            "{name}: {:.0} µs per acquire + release",
            per_op_micros(t, BLOCK)
        );
    }
}

/// Times `BLOCK` runs of `op` on `runtime`.
fn latency_block<'a, F, Fut>(runtime: &'a tokio::runtime::Runtime, op: F) -> Block<'a>
where
    F: Fn() -> Fut + 'a,
    Fut: Future<Output = ()>,
{
    Box::new(move || {
        let started = Instant::now();
        for _ in 0..BLOCK {
            runtime.block_on(op());
        }
        started.elapsed()
    })
}

/// Uncontended acquire + release at N = 5, both runtime flavours.
fn latency(fleet: &RedisFleet, out: &mut BTreeMap<String, serde_json::Value>) {
    let urls = fleet.urls();
    let mt = support::multi_thread();
    let ours_mt = mt.block_on(async { support::ours(&urls) });
    let floor_mt = mt.block_on(Floor::connect(&urls, Decide::Quorum));
    let rslock = rslock::LockManager::new(urls.clone());
    mt.block_on(ours_mt.connect());
    let times = interleave(
        &mut [
            (
                "ours_mt",
                latency_block(&mt, || support::ours_once(&ours_mt, "paired")),
            ),
            (
                "floor_quorum_mt",
                latency_block(&mt, || floor_mt.acquire_release("bench-floor:paired")),
            ),
            (
                "rslock_mt",
                latency_block(&mt, || support::rslock_once(&rslock, "bench-rslock:paired")),
            ),
        ],
        &mut || settle_and_check(&mt, fleet),
    );
    print_per_op(&times);
    out.insert(
        "ours_floor_mt".into(),
        ratio(&times, "ours_mt", "floor_quorum_mt"),
    );
    out.insert(
        "rslock_ours_mt".into(),
        ratio(&times, "rslock_mt", "ours_mt"),
    );

    let ct = support::current_thread();
    let ours_ct = ct.block_on(async { support::ours(&urls) });
    let floor_ct = ct.block_on(Floor::connect(&urls, Decide::Quorum));
    ct.block_on(ours_ct.connect());
    let times = interleave(
        &mut [
            (
                "ours_ct",
                latency_block(&ct, || support::ours_once(&ours_ct, "paired")),
            ),
            (
                "floor_quorum_ct",
                latency_block(&ct, || floor_ct.acquire_release("bench-floor:paired")),
            ),
        ],
        &mut || settle_and_check(&ct, fleet),
    );
    print_per_op(&times);
    out.insert(
        "ours_floor_ct".into(),
        ratio(&times, "ours_ct", "floor_quorum_ct"),
    );
}

/// Times one burst: `TASKS` tasks, each running `op` `PER_TASK` times on its own resource.
fn burst_block<'a, F, Fut>(runtime: &'a tokio::runtime::Runtime, op: F) -> Block<'a>
where
    F: Fn(usize) -> Fut + 'a,
    Fut: Future<Output = ()> + Send + 'static,
{
    Box::new(move || {
        let started = Instant::now();
        runtime.block_on(async {
            let tasks: Vec<_> = (0..TASKS).map(|task| tokio::spawn(op(task))).collect();
            for task in tasks {
                task.await.expect("a task");
            }
        });
        started.elapsed()
    })
}

/// 64 tasks on distinct resources, N = 5; a ratio of times is the inverse ratio of rates.
fn throughput(fleet: &RedisFleet, out: &mut BTreeMap<String, serde_json::Value>) {
    let urls = fleet.urls();
    let runtime = support::multi_thread();
    let ours_client = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours_client.connect());
    let floor = Arc::new(runtime.block_on(Floor::connect(&urls, Decide::All)));
    let rslock = Arc::new(rslock::LockManager::new(urls));
    let times = interleave(
        &mut [
            (
                "ours",
                burst_block(&runtime, |task| {
                    let ours = ours_client.clone();
                    async move {
                        for _ in 0..PER_TASK {
                            support::ours_once(&ours, &format!("paired-{task}")).await;
                        }
                    }
                }),
            ),
            (
                "floor_all",
                burst_block(&runtime, |task| {
                    let floor = Arc::clone(&floor);
                    async move {
                        for _ in 0..PER_TASK {
                            floor
                                .acquire_release(&format!("bench-floor:paired-{task}"))
                                .await;
                        }
                    }
                }),
            ),
            (
                "rslock",
                burst_block(&runtime, |task| {
                    let rslock = Arc::clone(&rslock);
                    async move {
                        for _ in 0..PER_TASK {
                            support::rslock_once(&rslock, &format!("bench-rslock:paired-{task}"))
                                .await;
                        }
                    }
                }),
            ),
        ],
        &mut || settle_and_check(&runtime, fleet),
    );
    let ops = u32::try_from(TASKS * PER_TASK).unwrap_or(u32::MAX);
    for (name, t) in &times {
        println!(
            "{name}: {:.0} acquire + release per second at {TASKS} tasks",
            1e6 / per_op_micros(t, ops)
        );
    }
    // Rate ratio ours ÷ other = time ratio other ÷ ours.
    out.insert(
        "throughput_ours_floor_all".into(),
        ratio(&times, "floor_all", "ours"),
    );
    out.insert(
        "throughput_ours_rslock".into(),
        ratio(&times, "rslock", "ours"),
    );
}

/// What is wrong with node 4 during a block.
#[derive(Clone, Copy)]
enum Fault {
    /// Its replies 20 ms late (through its proxy).
    Slow,
    /// Stopped (`SIGSTOP`); resumed after the block, which drains what was queued for it.
    Paused,
}

/// `block` with node 4's fault on: set before, cleared after.
fn faulted<'a>(
    fault: Fault,
    fleet: &'a RefCell<RedisFleet>,
    proxy: &'a ProxyHandle,
    mut block: Block<'a>,
) -> Block<'a> {
    Box::new(move || {
        match fault {
            Fault::Slow => proxy.set_latency(Direction::ToClient, Duration::from_millis(20)),
            Fault::Paused => fleet.borrow_mut().pause(4).expect("pause a node"),
        }
        let took = block();
        match fault {
            Fault::Slow => proxy.set_latency(Direction::ToClient, Duration::ZERO),
            Fault::Paused => {
                fleet.borrow_mut().resume(4).expect("resume the node");
                // Let node 4 work through what was queued for it before the next block.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        took
    })
}

/// One of five nodes slow or paused, against the healthy floor, every node behind a proxy.
fn tail(out: &mut BTreeMap<String, serde_json::Value>) {
    let fleet = RefCell::new(support::fleet(5));
    let runtime = support::multi_thread();
    let proxies = support::proxies(&runtime, &fleet.borrow());
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let ours_client = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours_client.connect());
    let floor = runtime.block_on(Floor::connect(&urls, Decide::Quorum));
    let slow = proxies[4].handle();
    let times = interleave(
        &mut [
            (
                "floor_healthy",
                latency_block(&runtime, || floor.acquire_release("bench-floor:tail")),
            ),
            (
                "ours_healthy",
                latency_block(&runtime, || support::ours_once(&ours_client, "tail")),
            ),
            (
                "ours_slow",
                faulted(
                    Fault::Slow,
                    &fleet,
                    &slow,
                    latency_block(&runtime, || support::ours_once(&ours_client, "tail")),
                ),
            ),
            (
                "floor_slow",
                faulted(
                    Fault::Slow,
                    &fleet,
                    &slow,
                    latency_block(&runtime, || floor.acquire_release("bench-floor:tail")),
                ),
            ),
            (
                "ours_paused",
                faulted(
                    Fault::Paused,
                    &fleet,
                    &slow,
                    latency_block(&runtime, || support::ours_once(&ours_client, "tail")),
                ),
            ),
            (
                "floor_paused",
                faulted(
                    Fault::Paused,
                    &fleet,
                    &slow,
                    latency_block(&runtime, || floor.acquire_release("bench-floor:tail")),
                ),
            ),
        ],
        &mut || settle_and_check(&runtime, &fleet.borrow()),
    );
    print_per_op(&times);
    for (key, a, b) in [
        ("slow_ours_floor_healthy", "ours_slow", "floor_healthy"),
        ("paused_ours_floor_healthy", "ours_paused", "floor_healthy"),
        ("slow_floor_floor_healthy", "floor_slow", "floor_healthy"),
        (
            "paused_floor_floor_healthy",
            "floor_paused",
            "floor_healthy",
        ),
        ("slow_ours_floor_slow", "ours_slow", "floor_slow"),
        ("paused_ours_floor_paused", "ours_paused", "floor_paused"),
    ] {
        out.insert(key.into(), ratio(&times, a, b));
    }
    let fleet = fleet.into_inner();
    support::assert_clean(&fleet, "bench-ours:", "ours (tail)");
    drop(proxies);
}

fn main() {
    // `cargo bench` passes `--bench` (and any filter); `cargo test --benches` does not run
    // benchmarks, so without `--bench` this only checks that it starts.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    // `cargo bench <filter>`: run only if the filter names this benchmark.
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"paired".contains(filter.as_str())
    {
        return;
    }
    let mut out = BTreeMap::new();
    let fleet = support::fleet(5);
    latency(&fleet, &mut out);
    throughput(&fleet, &mut out);
    support::assert_clean(&fleet, "bench-ours:", "ours");
    support::report_clean(&fleet, "bench-floor:", "floor");
    support::report_clean(&fleet, "bench-rslock:", "rslock");
    drop(fleet);
    tail(&mut out);

    let dir = redlock_fleet::target_dir().join("criterion").join("paired");
    std::fs::create_dir_all(&dir).expect("create the output directory");
    let file = dir.join("ratios.json");
    let text = serde_json::to_string_pretty(&out).expect("JSON");
    std::fs::write(&file, text).expect("write the ratios");
    println!("wrote {}", file.display());
}
