//! Two workers keep the stock of the same warehouse in sync, with fencing tokens guarding
//! the data.
//!
//! - `north` takes the lease with `try_acquire` and writes the stock, passing its fencing
//!   token to a `FencedKey` on a Redis target. Then it stalls (a GC pause, a stopped VM)
//!   for longer than its lease.
//! - `south`'s scheduled tick uses `try_acquire` too: the resource is taken
//!   (`Error::Taken`), so it skips the tick instead of queueing behind `north`.
//! - `south`'s "sync now" button must run, so it retries under a bounded policy
//!   (`with_retry` + `with_lock`): it gets the lease once `north`'s has expired, with a
//!   larger token, and writes.
//! - `north` wakes up and sends the write it had prepared. The target sees a token older
//!   than one it has already accepted and rejects it: the late write cannot clobber
//!   `south`'s data.
//!
//! It runs against your own nodes (three or more independent Redis masters); the stock is
//! written to the first one, under `stock:warehouse-42`, next to the lock keys but never
//! under their prefix:
//!
//! ```text
//! REDLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run --example warehouse_stock_sync
//! ```
//!
//! (In this crate's repository, `cargo test -p redlock-tests --test examples` runs it
//! against local `redis-server` processes that the test starts.)
//!
//! It exits with an error if the late write is applied or the skip does not happen.

use std::time::Duration;

use redlock::core::RetryPolicy;
use redlock::fencing::{FencedKey, FencedWrite};
use redlock::{Error, Fence, Fencing, Redlock};

const RESOURCE: &str = "stock-sync:warehouse-42";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lock_urls: Vec<String> = std::env::var("REDLOCK_NODES")
        .map_err(|_| "set REDLOCK_NODES to the lock nodes' URLs, separated by commas")?
        .split(',')
        .map(str::to_owned)
        .collect();
    let target_url = lock_urls[0].clone();

    // Every lease of this handle carries a fencing token minted on the lock nodes. The
    // restart quarantine stays on: a node is left out of quorums until it has run for a TTL.
    let builder = Redlock::builder()
        .nodes(lock_urls)
        .ttl(Duration::from_secs(5));
    let redlock = builder.build()?.with_fencing(Fencing::Quorum)?;
    let mut target = redis::Client::open(target_url)?
        .get_multiplexed_async_connection()
        .await?;
    let stock = FencedKey::new("stock:warehouse-42");

    // north: a short lease, since it expects a quick sync.
    let north = redlock.with_ttl(Duration::from_secs(1))?;
    let lease = north.try_acquire(RESOURCE).await?;
    let north_fence = Fence::of(&lease).ok_or("a fenced lease carries a token")?;
    let north_token = north_fence.token();
    println!("north: got the lease, fencing token {north_token}");
    // The write takes the lease itself: its fencing token and owner token go with it.
    let applied = stock
        .write(&mut target, &lease, "17 pallets (north)")
        .await?;
    println!("north: wrote 17 pallets with token {north_token}: {applied:?}");

    // south's scheduled tick: one attempt, and no queueing behind north.
    match redlock.try_acquire(RESOURCE).await {
        Err(Error::Taken { .. }) => println!("south: tick skipped, north is syncing"),
        Ok(_) => return Err("south got the lease while north held it".into()),
        Err(e) => return Err(e.into()),
    }

    // south's "sync now": retry for a few seconds at most, then give up with an error.
    let patient = redlock.with_retry(RetryPolicy::new(
        40,
        Duration::from_millis(100),
        Duration::from_millis(50),
    ))?;
    let sync_now = {
        let mut target = target.clone();
        let stock = stock.clone();
        tokio::spawn(async move {
            patient
                .with_lock(RESOURCE, |lease| async move {
                    let token = lease.fence().unwrap_or_default();
                    println!("south: got the lease after north's expired, token {token}");
                    let written = stock.write(&mut target, &lease, "15 pallets (south)").await;
                    (token, written)
                })
                .await
        })
    };

    // north stalls for longer than its lease, then sends the write it had prepared.
    println!("north: stalls for 1.5 s (its lease lasts 1 s)");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (south_token, written) = sync_now.await??;
    let written = written?;
    println!("south: wrote 15 pallets with token {south_token}: {written:?}");
    if written != FencedWrite::Applied {
        return Err("south's write was refused".into());
    }
    println!(
        "north: wakes up; is its lease still valid? {}",
        lease.is_valid()
    );
    let late = stock
        .write(&mut target, north_fence, "16 pallets (north, late)")
        .await?;
    match late {
        FencedWrite::Rejected { highest } => println!(
            "north: late write with token {north_token} rejected: token {highest} has written since"
        ),
        FencedWrite::Applied => return Err("the late write was applied".into()),
    }
    let report = lease.release().await;
    println!("north: {report} (its keys had expired)");

    let value: String = redis::cmd("GET")
        .arg(stock.key())
        .query_async(&mut target)
        .await?;
    println!("stock:warehouse-42 = {value}");
    if value != "15 pallets (south)" {
        return Err(format!("unexpected stock: {value}").into());
    }
    Ok(())
}
