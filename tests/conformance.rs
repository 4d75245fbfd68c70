//! One script, two drivers: the simulator (simulated nodes and clocks) and the tokio client
//! (real redis-server processes) run the same core and must report the same outcomes.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use redlock::{Error, Redlock};
use redlock_sim::Scenario;

/// The simulator's `conformance.toml`, in the catalogue beside this crate.
fn conformance_toml() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../simulator/scenarios/conformance.toml")
}

/// The outcome kinds the simulator's clients reported, per client.
fn simulated() -> Vec<Vec<&'static str>> {
    let path = conformance_toml();
    let scenario = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let run = redlock_sim::run(&scenario, scenario.seed, false).unwrap();
    assert!(run.report.matches, "{:?}", run.report.mismatch());
    run.history
        .outcomes
        .iter()
        .map(|outcomes| outcomes.iter().map(|o| o.kind()).collect())
        .collect()
}

fn kind(result: &Result<redlock::Lease, Error>) -> &'static str {
    match result {
        Ok(_) => "acquired",
        Err(Error::Taken { .. }) => "taken",
        Err(Error::NoQuorum { .. }) => "no-quorum",
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_and_real_redis_agree_on_the_outcomes() {
    let fleet = fleet(5);
    let redlock = builder(&fleet).retry_count(0).build().unwrap();
    redlock
        .try_acquire("warm-up")
        .await
        .unwrap()
        .release()
        .await;
    let start = tokio::time::Instant::now();

    // The same script as simulator/scenarios/conformance.toml.
    let c1 = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let acquired = redlock.acquire("resource").await;
            outcomes.push(kind(&acquired));
            let mut lease = acquired.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            lease.extend().await.unwrap();
            outcomes.push("extended");
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(lease.release().await.is_quorum_free());
            outcomes.push("released");
            outcomes
        })
    };
    let c2 = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(start + Duration::from_millis(100)).await;
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let result = redlock.acquire("resource").await;
                outcomes.push(kind(&result));
                if let Ok(lease) = result {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    lease.release().await;
                    outcomes.push("released");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            outcomes
        })
    };
    let real = vec![c1.await.unwrap(), c2.await.unwrap()];
    assert_eq!(real, simulated());
    assert_eq!(real[1], ["taken", "acquired", "released"]);
    assert_no_lock_keys(&fleet).await;
}

#[test]
fn the_simulated_client_config_matches_the_real_defaults() {
    // Both sides run the default lock parameters, so the comparison is like for like.
    let path = conformance_toml();
    let scenario = Scenario::load(&path).unwrap();
    let real = Redlock::builder()
        .nodes((1..=5).map(|p| format!("redis://127.0.0.1:{p}")))
        .retry_count(0)
        .build()
        .unwrap();
    let simulated = &scenario.clients[0].config;
    assert_eq!(simulated.ttl(), real.config().ttl());
    assert_eq!(simulated.drift(), real.config().drift());
    assert_eq!(simulated.node_timeout(), real.config().node_timeout());
    assert_eq!(simulated.quorum(), real.config().quorum());
}
