//! CPU time per acquire + release, on the client and on the nodes.
//!
//! Wall-clock rates on two shared cores swing by a third between runs; the CPU a process
//! spends per operation barely moves. So each contender runs blocks of the same number of
//! acquire + release (each task on its own resource, N = 5 real redis-server nodes, or
//! `CPU_NODES`), and each block is priced twice: the client process's user + system time
//! (`getrusage`, every thread of the runtime), and the nodes' (the sum of their `INFO cpu`
//! deltas),
//! with each command's calls and microseconds from `INFO commandstats`. The client's heap
//! allocations per operation are counted too (a counting global allocator): unlike CPU
//! time, they do not move with the machine's load. The contenders take turns block by
//! block, repetition after repetition, and each repetition gives a ratio to each floor;
//! medians and quartiles over the repetitions are reported.
//!
//! Contenders: this crate's client releasing at its quorum (`release_at_quorum()`), the same
//! with `release()` (`ours_every_node`, which waits for every node: the difference is what
//! ending a release at its quorum costs), the round-trip floor waiting for every reply
//! (`floor_all`) and returning at a quorum (`floor_quorum`), the pipelined floor
//! (`floor_pipelined`: the wait-all rounds of every task of a pass coalesced into one
//! pipeline per node, `support/pipelined.rs`), and rslock; at 64 tasks also the wait-all
//! floor with one of this crate's wire choices added at a time (the release
//! script sent whole, its `PUBLISH`, `SET NX GET`), which prices each on the nodes. After
//! every block the nodes must hold no key at all (`DBSIZE`).
//!
//! Writes `target/criterion/cpu/cpu.json`.
//!
//! ```text
//! cargo bench -p redlock-benches --bench cpu
//! CPU_REPS=3 CPU_TASKS=64 CPU_ONLY=ours,floor_all cargo bench -p redlock-benches --bench cpu
//! CPU_NODES=3 CPU_REPS=1 CPU_TASKS=1 CPU_ONLY=ours cargo bench -p redlock-benches --bench cpu
//! ```

mod support;

#[path = "cpu/allocations.rs"]
mod allocations;
#[path = "cpu/report.rs"]
mod report;
#[path = "cpu/sample.rs"]
mod sample;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redlock_tests::RedisFleet;
use sample::Servers;
use support::floor::{Decide, Floor, Wire};
use support::pipelined::PipelinedFloor;

#[global_allocator]
static ALLOCATOR: allocations::Counting = allocations::Counting;

/// Acquire + release per block, whatever the number of tasks (divisible by each).
const OPS: usize = 1536;
/// Task counts measured.
const TASKS: [usize; 3] = [1, 16, 64];

/// One contender: runs one block of `OPS` operations over the given number of tasks.
type Contender<'a> = Box<dyn FnMut(usize) + 'a>;

/// What one block cost.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub(crate) client: Duration,
    /// Wall-clock time of the block's operations (stragglers' wait excluded): the rate.
    pub(crate) wall: Duration,
    /// Heap allocations the client process made.
    pub(crate) allocations: u64,
    pub(crate) servers: Servers,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"cpu".contains(filter.as_str())
    {
        return;
    }
    let reps: usize = env_or("CPU_REPS", 5);
    let tasks: Vec<usize> = std::env::var("CPU_TASKS").map_or_else(
        |_| TASKS.to_vec(),
        |list| {
            list.split(',')
                .map(|t| {
                    t.trim()
                        .parse()
                        .expect("CPU_TASKS: task counts, comma-separated")
                })
                .collect()
        },
    );

    // `CPU_NODES=3` beside the default: what changes with the number of nodes is what each
    // request costs (allocations per request, say), the rest is the operation's.
    let fleet = support::fleet(env_or("CPU_NODES", 5));
    let urls = fleet.urls();
    let runtime = support::multi_thread();
    let ours = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours.connect());
    let floor = |decide, wire| Arc::new(runtime.block_on(Floor::connect_with(&urls, decide, wire)));
    let floor_all = floor(Decide::All, Wire::default());
    let floor_quorum = floor(Decide::Quorum, Wire::default());
    let eval_whole = Wire {
        eval_whole: true,
        ..Wire::default()
    };
    let floor_eval = floor(Decide::All, eval_whole);
    let floor_eval_publish = floor(
        Decide::All,
        Wire {
            publish: true,
            ..eval_whole
        },
    );
    let floor_set_get = floor(
        Decide::All,
        Wire {
            set_get: true,
            ..Wire::default()
        },
    );
    let floor_pipelined = Arc::new(runtime.block_on(PipelinedFloor::connect(&urls)));
    let rslock = Arc::new(rslock::LockManager::new(urls.clone()));
    let mut info: Vec<redis::Connection> = (0..fleet.len())
        .map(|i| fleet.connect(i).expect("a node"))
        .collect();

    let floor_contender = |floor: &Arc<Floor>, label: &'static str| -> Contender<'_> {
        let floor = Arc::clone(floor);
        let runtime = &runtime;
        Box::new(move |tasks| {
            burst(runtime, tasks, |task| {
                let floor = Arc::clone(&floor);
                async move {
                    let key = format!("bench-floor:{label}-{task}");
                    for _ in 0..OPS / tasks {
                        floor.acquire_release(&key).await;
                    }
                }
            });
        })
    };

    let mut results: BTreeMap<usize, BTreeMap<String, Vec<Block>>> = BTreeMap::new();
    for &n in &tasks {
        let mut contenders: Vec<(&str, Contender<'_>)> = vec![
            (
                "ours",
                Box::new(|tasks| {
                    burst(&runtime, tasks, |task| {
                        let ours = ours.clone();
                        async move {
                            let resource = format!("cpu-{task}");
                            for _ in 0..OPS / tasks {
                                support::ours_once(&ours, &resource).await;
                            }
                        }
                    });
                }),
            ),
            (
                "ours_every_node",
                Box::new(|tasks| {
                    burst(&runtime, tasks, |task| {
                        let ours = ours.clone();
                        async move {
                            let resource = format!("cpu-all-{task}");
                            for _ in 0..OPS / tasks {
                                ours.acquire(&resource)
                                    .await
                                    .expect("acquire")
                                    .release()
                                    .await;
                            }
                        }
                    });
                }),
            ),
            ("floor_all", floor_contender(&floor_all, "all")),
            ("floor_quorum", floor_contender(&floor_quorum, "quorum")),
            (
                "floor_pipelined",
                Box::new(|tasks| {
                    // One task drives every key's passes, on a worker thread of the runtime as
                    // the other contenders' tasks run (not on the thread that blocks on it).
                    burst(&runtime, 1, |_| {
                        let floor = Arc::clone(&floor_pipelined);
                        let keys: Vec<String> = (0..tasks)
                            .map(|task| format!("bench-floor:pipelined-{task}"))
                            .collect();
                        async move {
                            for _ in 0..OPS / tasks {
                                let tokens: Vec<String> =
                                    keys.iter().map(|_| support::token()).collect();
                                floor.pass(&keys, &tokens).await;
                            }
                        }
                    });
                }),
            ),
            (
                "rslock",
                Box::new(|tasks| {
                    burst(&runtime, tasks, |task| {
                        let rslock = Arc::clone(&rslock);
                        async move {
                            let key = format!("bench-rslock:cpu-{task}");
                            for _ in 0..OPS / tasks {
                                support::rslock_once(&rslock, &key).await;
                            }
                        }
                    });
                }),
            ),
        ];
        if n == 64 {
            contenders.push(("floor_all+eval", floor_contender(&floor_eval, "eval")));
            contenders.push((
                "floor_all+eval+publish",
                floor_contender(&floor_eval_publish, "publish"),
            ));
            contenders.push(("floor_all+set_get", floor_contender(&floor_set_get, "get")));
        }
        // `CPU_ONLY=ours,floor_all` keeps those contenders (for profiling one of them).
        if let Ok(only) = std::env::var("CPU_ONLY") {
            contenders.retain(|(name, _)| only.split(',').any(|o| o == *name));
        }
        let blocks = results.entry(n).or_default();
        // One warm-up repetition, not recorded.
        for rep in 0..=reps {
            let count = contenders.len();
            for turn in 0..count {
                let (name, run) = &mut contenders[(rep + turn) % count];
                let block = measure(&runtime, &mut info, || run(n));
                assert_empty(&runtime, &fleet, name, &mut info);
                if rep > 0 {
                    blocks.entry((*name).to_owned()).or_default().push(block);
                }
            }
        }
    }
    report::write(&results, OPS, fleet.len());
}

/// Runs `block` between two readings of the client's and the nodes' CPU. The block's
/// stragglers (requests a quorum-deciding contender left running) finish before the second.
fn measure(
    runtime: &tokio::runtime::Runtime,
    info: &mut [redis::Connection],
    block: impl FnOnce(),
) -> Block {
    let servers = Servers::read(info);
    let client = sample::client_cpu();
    let allocations = allocations::count();
    let started = std::time::Instant::now();
    block();
    let wall = started.elapsed();
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
    let allocations = allocations::count() - allocations;
    let client = sample::client_cpu() - client;
    Block {
        client,
        wall,
        allocations,
        servers: Servers::read(info).since(&servers),
    }
}

/// Checks that no key at all is left on any node after `name`'s block (`DBSIZE`): fails
/// the benchmark for this crate's client. The floors and rslock are references: what they
/// leave is reported, then removed so that their next blocks start from empty nodes.
fn assert_empty(
    runtime: &tokio::runtime::Runtime,
    fleet: &RedisFleet,
    name: &str,
    info: &mut [redis::Connection],
) {
    let dbsize = |info: &mut [redis::Connection]| -> u64 {
        info.iter_mut()
            .map(|c| redis::cmd("DBSIZE").query::<u64>(c).expect("DBSIZE"))
            .sum()
    };
    for wait in [0, 100, 500] {
        runtime.block_on(async { tokio::time::sleep(Duration::from_millis(wait)).await });
        if dbsize(info) == 0 {
            return;
        }
    }
    let left = dbsize(info);
    let mut sample = Vec::new();
    for node in 0..fleet.len() {
        let keys = fleet.keys_with_prefix(node, "").expect("inspect a node");
        sample.extend(
            keys.into_iter()
                .take(2)
                .map(|(k, _)| format!("#{node} {k}")),
        );
    }
    assert_ne!(
        name, "ours",
        "{left} key(s) left on the nodes after a block, e.g. {sample:?}"
    );
    println!("note: {name} left {left} key(s) after a block, e.g. {sample:?}; removed");
    for connection in info.iter_mut() {
        let () = redis::cmd("FLUSHALL").query(connection).expect("FLUSHALL");
    }
}

/// Runs `tasks` copies of `op` (given the task's number) to completion on `runtime`.
fn burst<F, Fut>(runtime: &tokio::runtime::Runtime, tasks: usize, op: F)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    runtime.block_on(async {
        let running: Vec<_> = (0..tasks).map(|task| tokio::spawn(op(task))).collect();
        for task in running {
            task.await.expect("a task");
        }
    });
}

/// The environment variable `name` as a number, or `default`.
fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}: a whole number, not {v:?}"))
    })
}
