//! 64 tasks looping acquire + release, each on its own resource, N = 5: ours against the
//! floor that waits for every reply, and against rslock. A ratio of times is the inverse
//! ratio of rates.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::harness::{Block, ROUNDS, interleave, per_op_micros, ratio, settle_and_check};
use crate::support::{self, floor::Decide, floor::Floor};

/// Concurrent tasks, and acquire + release per task, in a block.
pub(crate) const TASKS: usize = 64;
const PER_TASK: usize = 20;

/// Times one burst: `TASKS` tasks, each running `op` `PER_TASK` times on its own resource.
pub(crate) fn burst_block<'a, F, Fut>(runtime: &'a tokio::runtime::Runtime, op: F) -> Block<'a>
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
pub(crate) fn run(out: &mut BTreeMap<String, serde_json::Value>) {
    let fleet = support::fleet(5);
    let fleet = &fleet;
    let urls = fleet.urls();
    let runtime = support::multi_thread();
    let ours_client = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours_client.connect());
    let floor = Arc::new(runtime.block_on(Floor::connect(&urls, Decide::All)));
    let rslock = Arc::new(rslock::LockManager::new(urls));
    let times = interleave(
        ROUNDS,
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
