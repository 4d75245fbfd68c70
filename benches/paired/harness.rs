//! Taking turns: the contenders run in short blocks, round after round, and each round gives
//! one ratio per pair; the median over the rounds is reported with its quartiles.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use redlock_tests::RedisFleet;
use serde_json::json;

use crate::support;

/// Rounds per comparison.
pub(crate) const ROUNDS: usize = 40;
/// Acquire + release per latency block.
pub(crate) const BLOCK: u32 = 100;

/// One contender's block: runs it and returns what it measured (a time, or a time per
/// operation).
pub(crate) type Block<'a> = Box<dyn FnMut() -> Duration + 'a>;

/// Runs `contenders` in turn, `rounds` times after one warm-up round, starting each round
/// with the next contender so that none always follows the same one; `after_round` runs
/// between rounds (untimed). Returns each one's block times.
pub(crate) fn interleave(
    rounds: usize,
    contenders: &mut [(&str, Block<'_>)],
    after_round: &mut dyn FnMut(),
) -> BTreeMap<String, Vec<Duration>> {
    for (_, block) in contenders.iter_mut() {
        block();
    }
    after_round();
    let mut times: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    let count = contenders.len();
    for round in 0..rounds {
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
pub(crate) fn settle_and_check(runtime: &tokio::runtime::Runtime, fleet: &RedisFleet) {
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
pub(crate) fn quantile(values: &[f64], q: f64) -> f64 {
    let at = (values.len() - 1) as f64 * q;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    values[low] + (values[high] - values[low]) * (at - low as f64)
}

/// Median and quartiles of the per-round ratios `a / b`.
pub(crate) fn ratio(
    times: &BTreeMap<String, Vec<Duration>>,
    a: &str,
    b: &str,
) -> serde_json::Value {
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

/// The median of `times` (the upper one of an even count).
pub(crate) fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// Median time of one operation, in µs, for the log.
pub(crate) fn per_op_micros(times: &[Duration], ops: u32) -> f64 {
    median(times).as_secs_f64() * 1e6 / f64::from(ops)
}

/// Logs each contender's median time per acquire + release over blocks of `BLOCK`.
pub(crate) fn print_per_op(times: &BTreeMap<String, Vec<Duration>>) {
    for (name, t) in times {
        println!(
            "{name}: {:.0} µs per acquire + release",
            per_op_micros(t, BLOCK)
        );
    }
}

/// Times `BLOCK` runs of `op` on `runtime`.
pub(crate) fn latency_block<'a, F, Fut>(runtime: &'a tokio::runtime::Runtime, op: F) -> Block<'a>
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

/// Runs `workers` copies of `worker` (given its number and the window's end) for one window
/// of `length` on `runtime`; returns the window's time divided by the operations the workers
/// report (by 1 when they report none).
pub(crate) fn window<F, Fut>(
    runtime: &tokio::runtime::Runtime,
    workers: usize,
    length: Duration,
    worker: F,
) -> Duration
where
    F: Fn(usize, Instant) -> Fut,
    Fut: Future<Output = u64> + Send + 'static,
{
    runtime.block_on(async {
        let started = Instant::now();
        let until = started + length;
        let tasks: Vec<_> = (0..workers)
            .map(|w| tokio::spawn(worker(w, until)))
            .collect();
        let mut done = 0;
        for task in tasks {
            done += task.await.expect("a worker");
        }
        started.elapsed() / u32::try_from(done.max(1)).unwrap_or(u32::MAX)
    })
}
