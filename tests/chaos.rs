//! Chaos on real processes: clients contend over five nodes behind fault proxies while a
//! seeded schedule pauses, kills, restarts, partitions and slows the nodes; and the targeted
//! schedule that shows the detector catching two holders in the unsafe configuration.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::{Error, Redlock};
use redlock_tests::chaos::{self, ChaosConfig, Detector, SEED_ENV};
use redlock_tests::proxy::FaultProxy;
use redlock_tests::{FleetOptions, Persistence, RedisFleet};

/// Within the documented assumptions (`appendfsync always`, restarts without data delayed
/// past the TTL), random faults never let two clients into a critical section, every call
/// returns within its bound, service resumes after every heal and nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_faults_never_make_two_holders() {
    init_tracing();
    let seed = ChaosConfig::seed_from_env().unwrap();
    println!("chaos seed {seed} (rerun with {SEED_ENV}={seed})");
    let config = ChaosConfig::new(seed);
    let report = chaos::run(&config).await.unwrap();
    println!("{report}");

    assert!(
        report.acquisitions >= config.target_acquisitions,
        "only {} acquisitions within {:?} (seed {seed})",
        report.acquisitions,
        config.max_duration
    );
    assert!(
        report.faults_injected() >= 20,
        "too few faults to mean anything: {report}"
    );
    assert_eq!(report.overlaps, 0, "two holders at once (seed {seed})");
    let problems = report.problems();
    assert!(problems.is_empty(), "seed {seed}: {problems:#?}\n{report}");
}

/// Which way the targeted schedule restarts the node under the first holder.
#[derive(Clone, Copy, Debug)]
enum Restart {
    /// At once, after `kill -9`.
    Immediate,
    /// After the first lease's TTL has passed.
    AfterTtl,
}

const TTL: Duration = Duration::from_secs(2);

/// The targeted schedule: the first client holds a bare majority (nodes 0, 1, 2) because
/// nodes 3 and 4 are partitioned from it; node 0 is killed and restarted; a second client
/// then tries to acquire from every node. Returns the overlaps the detector saw and how the
/// second acquisition ended.
async fn restart_under_a_bare_majority(
    persistence: Persistence,
    restart: Restart,
) -> (u64, Result<(), Error>) {
    let mut fleet: RedisFleet = fleet_with(
        5,
        FleetOptions {
            persistence,
            ..FleetOptions::default()
        },
    );
    let partitioned = [
        FaultProxy::start(fleet.addr(3)).await.unwrap(),
        FaultProxy::start(fleet.addr(4)).await.unwrap(),
    ];
    let first = fresh(Redlock::builder())
        .nodes([fleet.url(0), fleet.url(1), fleet.url(2)])
        .nodes(partitioned.iter().map(FaultProxy::url))
        .ttl(TTL)
        .build()
        .unwrap();
    let second = builder(&fleet).ttl(TTL).retry_count(0).build().unwrap();
    for proxy in &partitioned {
        proxy.handle().set_blackhole(true);
    }
    let detector = Detector::new(1);

    let lease = first.try_acquire("stock").await.unwrap();
    assert!(lease.is_valid());
    let (first_inside, alone) = detector.enter(0, 1);
    assert!(alone);

    tokio::task::block_in_place(|| match restart {
        Restart::Immediate => fleet.restart(0).unwrap(),
        Restart::AfterTtl => {
            fleet.kill(0).unwrap();
            std::thread::sleep(TTL + Duration::from_millis(100));
            fleet.restart(0).unwrap();
        }
    });
    // A holder stops using the resource once its lease is no longer valid.
    let first_inside = if lease.is_valid() {
        Some(first_inside)
    } else {
        detector.leave(first_inside);
        None
    };

    let outcome = match second.try_acquire("stock").await {
        Ok(second_lease) => {
            assert!(second_lease.is_valid());
            let (second_inside, _) = detector.enter(0, 2);
            tokio::time::sleep(Duration::from_millis(5)).await;
            detector.leave(second_inside);
            second_lease.release().await;
            Ok(())
        }
        Err(e) => Err(e),
    };
    if let Some(inside) = first_inside {
        detector.leave(inside);
        assert!(
            lease.is_valid(),
            "the first holder stayed inside its validity"
        );
    }
    lease.release().await;
    // Healing delivers the first client's held SETs and, after them, its releases.
    for proxy in &partitioned {
        proxy.handle().heal();
    }
    assert_no_lock_keys(&fleet).await;
    (detector.overlaps(), outcome)
}

/// The unsafe configuration: a node restarted at once without persistence has forgotten the
/// first holder's key, so the second client wins a quorum (nodes 0, 3, 4) while the first
/// lease is still valid, and the detector sees both inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_immediate_restart_without_persistence_lets_a_second_holder_in() {
    let (overlaps, second) =
        restart_under_a_bare_majority(Persistence::None, Restart::Immediate).await;
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(overlaps, 1, "the detector missed the second holder");
}

/// The same schedule with `appendfsync always`: the restarted node still has the key, the
/// second client is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_restart_with_fsync_always_keeps_a_single_holder() {
    let (overlaps, second) =
        restart_under_a_bare_majority(Persistence::AppendFsyncAlways, Restart::Immediate).await;
    assert!(matches!(second, Err(Error::Taken { .. })), "{second:?}");
    assert_eq!(overlaps, 0);
}

/// The same schedule without persistence but with the restart delayed past the TTL: by then
/// the first lease is invalid and its holder has left, so the second holder is alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_delayed_past_the_ttl_keeps_a_single_holder() {
    let (overlaps, second) =
        restart_under_a_bare_majority(Persistence::None, Restart::AfterTtl).await;
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(overlaps, 0);
}
