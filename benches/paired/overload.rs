//! One node stopped (`SIGSTOP`) for two seconds under 64 tasks, each looping acquire +
//! release on its own resource, N = 5: acquisitions per second during the stop against a
//! healthy window of the same length, and the keys this client leaves once the node
//! resumes (none: no `SET` goes to a node with a request unanswered until a probe answers).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::harness::{self, Block, interleave, median, ratio, settle_and_check};
use crate::support;

const TASKS: usize = 64;
const WINDOW: Duration = Duration::from_secs(2);
const ROUNDS: usize = 4;

/// Runs the tasks for one window; returns the time per acquire + release.
fn window(runtime: &tokio::runtime::Runtime, ours: &redlock::Redlock) -> Duration {
    harness::window(runtime, TASKS, WINDOW, |task, until| {
        let ours = ours.clone();
        async move {
            let resource = format!("overload-{task}");
            let mut done = 0u64;
            while Instant::now() < until {
                support::ours_once(&ours, &resource).await;
                done += 1;
            }
            done
        }
    })
}

pub(crate) fn run(out: &mut BTreeMap<String, serde_json::Value>) {
    let fleet = RefCell::new(support::fleet(5));
    let urls = fleet.borrow().urls();
    let runtime = support::multi_thread();
    let ours = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours.connect());
    let healthy: Block<'_> = Box::new(|| window(&runtime, &ours));
    let stopped: Block<'_> = Box::new(|| {
        fleet.borrow_mut().pause(4).expect("stop node 4");
        let per = window(&runtime, &ours);
        fleet.borrow_mut().resume(4).expect("resume node 4");
        per
    });
    let times = interleave(
        ROUNDS,
        &mut [("healthy", healthy), ("stopped", stopped)],
        // After each round, and so after every stop: this client's keys, none expected.
        &mut || settle_and_check(&runtime, &fleet.borrow()),
    );
    for (name, t) in &times {
        println!(
            "{name}: {:.0} acquire + release per second at {TASKS} tasks",
            1.0 / median(t).as_secs_f64()
        );
    }
    // Rate while stopped ÷ rate while healthy = time healthy ÷ time stopped.
    out.insert(
        "overload_stopped_healthy".into(),
        ratio(&times, "healthy", "stopped"),
    );
    support::assert_clean(&fleet.borrow(), "bench-ours:", "ours (one node stopped)");
}
