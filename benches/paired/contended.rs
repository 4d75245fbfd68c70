//! Sixteen workers looping acquire → release on one resource, N = 5: ours with its default
//! waiting, rslock with its default retries, and a floor that spins on one-round attempts
//! (no delay, no notification). Each block runs the workers for one window and returns the
//! time per acquisition, so a ratio of times is the inverse ratio of acquisition rates. Ours
//! also gives the hand-off (a release's start to the next grant) and how evenly the workers
//! were served over all its blocks.
//!
//! Ours runs twice: the 16 workers on one client, and spread over 4 clients (separate
//! `Redlock` values, as 4 processes would be), where nothing can be handed off inside one
//! client: every hand-off goes through the nodes (the release, its notification, the
//! waiter's round). Its hand-off gap is also given in round trips: the median time of one
//! parallel `PING` to every node, measured in the same run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{self, Block, interleave, median, quantile, ratio, settle_and_check};
use crate::support::{self, floor::Decide, floor::Floor};

const WORKERS: usize = 16;
/// How long each block runs its workers.
const WINDOW: Duration = Duration::from_secs(1);
/// Rounds: ten windows of ours make the ten seconds of the fairness target.
const ROUNDS: usize = 10;
const RESOURCE: &str = "contended";

/// One lease of ours: which worker, when it was granted, when its release started.
#[derive(Clone, Copy)]
struct Grant {
    worker: usize,
    granted: Instant,
    released: Instant,
}

pub(crate) fn run(out: &mut BTreeMap<String, serde_json::Value>) {
    let fleet = support::fleet(5);
    let urls = fleet.urls();
    let runtime = support::multi_thread();
    let ours = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours.connect());
    let rslock = Arc::new(rslock::LockManager::new(urls.clone()));
    let floor = Arc::new(runtime.block_on(Floor::connect(&urls, Decide::Quorum)));
    let grants: Arc<Mutex<Vec<Vec<Grant>>>> = Arc::default();

    // The 16 workers on one client, and spread over 4.
    let spread: Vec<redlock::Redlock> = (0..CLIENTS)
        .map(|_| {
            let client = runtime.block_on(async { support::ours(&urls) });
            runtime.block_on(client.connect());
            client
        })
        .collect();
    let spread_grants: Arc<Mutex<Vec<Vec<Grant>>>> = Arc::default();
    let ours_block = ours_block_over(&runtime, vec![ours], Arc::clone(&grants));
    let spread_block = ours_block_over(&runtime, spread, Arc::clone(&spread_grants));
    // rslock's acquisitions per worker over all its windows, for the record of how evenly it
    // serves them.
    let rslock_per_worker: Arc<Mutex<[u64; WORKERS]>> = Arc::default();
    let rslock_block: Block<'_> = Box::new(|| {
        harness::window(&runtime, WORKERS, WINDOW, |worker, until| {
            let (rslock, per_worker) = (Arc::clone(&rslock), Arc::clone(&rslock_per_worker));
            async move {
                let mut acquired = 0;
                while Instant::now() < until {
                    if let Ok(lock) = rslock.lock("bench-rslock:contended", support::TTL).await {
                        acquired += 1;
                        rslock.unlock(&lock).await;
                    }
                }
                per_worker.lock().expect("the counts")[worker] += acquired;
                acquired
            }
        })
    });
    let floor_block: Block<'_> = Box::new(|| {
        harness::window(&runtime, WORKERS, WINDOW, |_, until| {
            let floor = Arc::clone(&floor);
            async move {
                let mut acquired = 0;
                while Instant::now() < until {
                    if let Some(token) = floor.try_lock("bench-floor:contended").await {
                        acquired += 1;
                        floor.unlock("bench-floor:contended", &token).await;
                    }
                }
                acquired
            }
        })
    });
    let times = interleave(
        ROUNDS,
        &mut [
            ("ours", ours_block),
            ("ours_4_clients", spread_block),
            ("rslock", rslock_block),
            ("floor_spin", floor_block),
        ],
        &mut || settle_and_check(&runtime, &fleet),
    );
    for (name, t) in &times {
        println!(
            "{name}: {:.0} acquisitions/s (median window)",
            1.0 / median(t).as_secs_f64()
        );
    }
    out.insert(
        "contended_ours_rslock".into(),
        ratio(&times, "rslock", "ours"),
    );
    out.insert(
        "contended_ours_floor_spin".into(),
        ratio(&times, "floor_spin", "ours"),
    );
    out.insert(
        "contended_ours_4_clients_rslock".into(),
        ratio(&times, "rslock", "ours_4_clients"),
    );
    let round_trip = runtime.block_on(floor.round_trip());
    println!(
        "round trip (a parallel PING to every node): median {:.3} ms",
        round_trip.as_secs_f64() * 1e3
    );
    let spread_windows = spread_grants.lock().expect("the grants").split_off(1);
    let (spread_handoffs, _) = handoffs(spread_windows);
    let in_round_trips: Vec<f64> = spread_handoffs
        .iter()
        .map(|ms| ms / (round_trip.as_secs_f64() * 1e3))
        .collect();
    let (p50, p90) = (
        quantile(&in_round_trips, 0.5),
        quantile(&in_round_trips, 0.9),
    );
    println!(
        "hand-off over 4 clients: p50 {p50:.2} round trips, p90 {p90:.2} ({:.3} / {:.3} ms) over {} hand-offs",
        quantile(&spread_handoffs, 0.5),
        quantile(&spread_handoffs, 0.9),
        spread_handoffs.len()
    );
    out.insert(
        "contended_4_clients_handoff_round_trips".into(),
        json!({
            "median": p50,
            "q1": quantile(&in_round_trips, 0.25),
            "q3": quantile(&in_round_trips, 0.75),
            "p90": p90,
            "rounds": in_round_trips.len(),
        }),
    );

    // The warm-up window is the first: leave it out.
    let windows: Vec<Vec<Grant>> = grants.lock().expect("the grants").split_off(1);
    let (handoffs, per_worker) = handoffs(windows);
    let (p50, q1, q3) = (
        quantile(&handoffs, 0.5),
        quantile(&handoffs, 0.25),
        quantile(&handoffs, 0.75),
    );
    println!(
        "hand-off: p50 {p50:.3} ms (quartiles {q1:.3}–{q3:.3}) over {} hand-offs",
        handoffs.len()
    );
    out.insert(
        "contended_handoff_ms".into(),
        json!({ "median": p50, "q1": q1, "q3": q3, "rounds": handoffs.len() }),
    );
    let total: u64 = per_worker.iter().sum();
    let fair = total as f64 / WORKERS as f64;
    let least = per_worker.iter().copied().min().unwrap_or(0) as f64 / fair;
    println!(
        "fairness: {per_worker:?} over {ROUNDS} windows; the least served got {least:.2} of a fair share"
    );
    let rslock_counts = *rslock_per_worker.lock().expect("the counts");
    let rslock_total: u64 = rslock_counts.iter().sum();
    let rslock_least = rslock_counts.iter().copied().min().unwrap_or(0) as f64
        / (rslock_total as f64 / WORKERS as f64);
    println!(
        "rslock fairness: {rslock_counts:?}; the least served got {rslock_least:.2} of a fair share"
    );
    out.insert(
        "contended_rslock_least_share".into(),
        json!({ "median": rslock_least, "q1": rslock_least, "q3": rslock_least, "rounds": 1 }),
    );
    out.insert(
        "contended_least_share".into(),
        json!({ "median": least, "q1": least, "q3": least, "rounds": 1 }),
    );
    support::assert_clean(&fleet, "bench-ours:", "ours (contended)");
}

/// Clients the workers are spread over in the second run of ours.
const CLIENTS: usize = 4;

/// One window of ours, worker `w` on client `w % clients.len()`; each window's grants go to
/// `grants`.
fn ours_block_over<'a>(
    runtime: &'a tokio::runtime::Runtime,
    clients: Vec<redlock::Redlock>,
    grants: Arc<Mutex<Vec<Vec<Grant>>>>,
) -> Block<'a> {
    Box::new(move || {
        let this_window: Arc<Mutex<Vec<Grant>>> = Arc::default();
        let per = harness::window(runtime, WORKERS, WINDOW, |worker, until| {
            let ours = clients[worker % clients.len()].clone();
            let this_window = Arc::clone(&this_window);
            async move {
                let mut acquired = 0;
                while Instant::now() < until {
                    // The default policy: a worker still in line after its longest wait gets
                    // an error and joins the line again.
                    let Ok(lease) = ours.acquire(RESOURCE).await else {
                        continue;
                    };
                    let granted = Instant::now();
                    acquired += 1;
                    let released = Instant::now();
                    lease.release_at_quorum().await;
                    this_window.lock().expect("the grants").push(Grant {
                        worker,
                        granted,
                        released,
                    });
                }
                acquired
            }
        });
        let this_window = std::mem::take(&mut *this_window.lock().expect("the grants"));
        grants.lock().expect("the grants").push(this_window);
        per
    })
}

/// The hand-off gaps of `windows` (a release's start to the next grant, in ms, sorted) and
/// each worker's grants.
fn handoffs(windows: Vec<Vec<Grant>>) -> (Vec<f64>, [u64; WORKERS]) {
    let mut handoffs = Vec::new();
    let mut per_worker = [0u64; WORKERS];
    for mut window in windows {
        window.sort_by_key(|g| g.granted);
        for pair in window.windows(2) {
            handoffs.push(
                pair[1]
                    .granted
                    .saturating_duration_since(pair[0].released)
                    .as_secs_f64()
                    * 1e3,
            );
        }
        for grant in &window {
            per_worker[grant.worker] += 1;
        }
    }
    handoffs.sort_by(f64::total_cmp);
    (handoffs, per_worker)
}
