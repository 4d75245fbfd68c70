//! One of five nodes slow (20 ms on its replies) or stopped (`SIGSTOP`), every node behind a
//! proxy: ours and the floor against the healthy floor.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use redlock_tests::RedisFleet;
use redlock_tests::proxy::{Direction, FaultProxy, ProxyHandle};

use crate::harness::{
    Block, ROUNDS, interleave, latency_block, print_per_op, ratio, settle_and_check,
};
use crate::support::{self, floor::Decide, floor::Floor};

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
pub(crate) fn run(out: &mut BTreeMap<String, serde_json::Value>) {
    let fleet = RefCell::new(support::fleet(5));
    let runtime = support::multi_thread();
    let proxies = support::proxies(&runtime, &fleet.borrow());
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let ours_client = runtime.block_on(async { support::ours(&urls) });
    runtime.block_on(ours_client.connect());
    let floor = runtime.block_on(Floor::connect(&urls, Decide::Quorum));
    let slow = proxies[4].handle();
    let times = interleave(
        ROUNDS,
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
