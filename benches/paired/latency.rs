//! Uncontended acquire + release for N = 1, 3, 5 and 7, both runtime flavours: ours against
//! the quorum floor, and rslock against ours (multi-thread).

use std::collections::BTreeMap;

use crate::harness::{ROUNDS, interleave, latency_block, print_per_op, ratio, settle_and_check};
use crate::support::{self, floor::Decide, floor::Floor};

pub(crate) fn run(out: &mut BTreeMap<String, serde_json::Value>) {
    for n in [1, 3, 5, 7] {
        let fleet = support::fleet(n);
        let urls = fleet.urls();
        println!("N = {n}");

        let mt = support::multi_thread();
        let ours = mt.block_on(async { support::ours(&urls) });
        let floor = mt.block_on(Floor::connect(&urls, Decide::Quorum));
        let rslock = rslock::LockManager::new(urls.clone());
        mt.block_on(ours.connect());
        let times = interleave(
            ROUNDS,
            &mut [
                (
                    "ours_mt",
                    latency_block(&mt, || support::ours_once(&ours, "paired")),
                ),
                (
                    "floor_quorum_mt",
                    latency_block(&mt, || floor.acquire_release("bench-floor:paired")),
                ),
                (
                    "rslock_mt",
                    latency_block(&mt, || support::rslock_once(&rslock, "bench-rslock:paired")),
                ),
            ],
            &mut || settle_and_check(&mt, &fleet),
        );
        print_per_op(&times);
        out.insert(
            format!("ours_floor_mt_n{n}"),
            ratio(&times, "ours_mt", "floor_quorum_mt"),
        );
        out.insert(
            format!("rslock_ours_mt_n{n}"),
            ratio(&times, "rslock_mt", "ours_mt"),
        );

        let ct = support::current_thread();
        let ours = ct.block_on(async { support::ours(&urls) });
        let floor = ct.block_on(Floor::connect(&urls, Decide::Quorum));
        ct.block_on(ours.connect());
        let times = interleave(
            ROUNDS,
            &mut [
                (
                    "ours_ct",
                    latency_block(&ct, || support::ours_once(&ours, "paired")),
                ),
                (
                    "floor_quorum_ct",
                    latency_block(&ct, || floor.acquire_release("bench-floor:paired")),
                ),
            ],
            &mut || settle_and_check(&ct, &fleet),
        );
        print_per_op(&times);
        out.insert(
            format!("ours_floor_ct_n{n}"),
            ratio(&times, "ours_ct", "floor_quorum_ct"),
        );
        support::assert_clean(&fleet, "bench-ours:", &format!("ours (latency, N = {n})"));
    }
}
