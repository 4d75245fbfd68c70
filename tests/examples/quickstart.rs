//! Takes a lease on one resource across independent Redis nodes, shows a second client
//! being refused, extends the lease, releases it and checks that no key is left.
//!
//! `scripts/demo` runs it. It is a binary of the `redlock-tests` package rather than an
//! example, so that building it leaves out the tests' dev-dependencies. With no
//! configuration it starts five local `redis-server` processes on free loopback ports and
//! stops them at the end:
//!
//! ```text
//! cargo run -p redlock-tests --bin quickstart
//! ```
//!
//! To use your own nodes instead, list them in `REDLOCK_NODES`:
//!
//! ```text
//! REDLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run -p redlock-tests --bin quickstart
//! ```

use std::time::{Duration, Instant};

use redlock::Redlock;
use redlock_tests::RedisFleet;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();

    // Our own nodes unless some are configured; the fleet stops them when dropped.
    let (urls, fleet) = match std::env::var("REDLOCK_NODES") {
        Ok(list) => (list.split(',').map(str::to_owned).collect::<Vec<_>>(), None),
        Err(_) => {
            let fleet = RedisFleet::start(5)?;
            println!("started {} local redis-server nodes", fleet.len());
            (fleet.urls(), Some(fleet))
        }
    };

    let mut builder = Redlock::builder().nodes(urls).ttl(Duration::from_secs(10));
    if fleet.is_some() {
        // These nodes were started a moment ago by this program and never held a lease: no
        // restart to guard against. Against a real fleet the restart quarantine stays on (a
        // node is left out of quorums until it has run for a TTL).
        builder = builder.restart_quarantine(None);
    }
    let redlock = builder.build()?;
    println!(
        "nodes: {}  (quorum {} of {}, node timeout {:?}, drift allowance {:?})",
        redlock.node_addresses().collect::<Vec<_>>().join(", "),
        redlock.config().quorum(),
        redlock.config().nodes(),
        redlock.config().node_timeout(),
        redlock.config().drift(),
    );

    let resource = "stock-sync:warehouse-42";
    let started = Instant::now();
    let mut lease = redlock.acquire(resource).await?;
    println!(
        "acquired `{resource}` in {:?} (round {}), token {}, valid for {:?}",
        started.elapsed(),
        lease.attempts(),
        lease.token().short(),
        lease.remaining(),
    );

    // A second client (another server, another process) is refused while we hold it.
    let rival = redlock.with_retry(redlock::core::RetryPolicy::no_retry())?;
    match rival.acquire(resource).await {
        Ok(_) => println!("unexpected: the rival got the lease too"),
        Err(e) => println!("rival refused: {e}"),
    }

    // Long work extends its lease before validity runs out.
    let validity = lease.extend().await?;
    println!("extended: valid for {validity:?} more");

    // Every node's answer, not only the quorum's (each bounded by the per-node timeout).
    let report = lease.release().await;
    println!("{report}");

    // What the client counted (the same figures go to `metrics` with that feature).
    let stats = redlock.stats();
    println!(
        "stats: {} round(s), {} lease(s), {} contended round(s), {} failed acquisition(s), \
         {} extension(s), {} release(s), {} expired, acquire mean {:?} max {:?}, hold mean {:?}",
        stats.rounds,
        stats.acquisitions,
        stats.contention,
        stats.acquire_failures,
        stats.extensions,
        stats.releases,
        stats.expirations,
        stats.acquire_latency_mean(),
        stats.acquire_latency_max,
        stats.hold_time_mean(),
    );

    if let Some(fleet) = &fleet {
        // The slower nodes' requests finish in the background; then no lock key may remain.
        redlock.settle().await;
        let left = fleet.count_keys(redlock.key_prefix())?;
        println!("lock keys left on the nodes: {left}");
        if left != 0 {
            return Err("keys were left behind".into());
        }
    }
    Ok(())
}
