//! A long import under one lease: the lease is kept alive in the background while batches
//! run, the import checks the lease between batches, and it stops cleanly, with a
//! checkpoint to resume from, when the lease can no longer be extended.
//!
//! 1. Fifteen batches of 200 ms (3 s) on a 2 s TTL: keep-alive extends the lease whenever a
//!    third of it is left, so the import finishes under one lease.
//! 2. The same import again, on a handle whose leases may be held for at most 700 ms
//!    (`with_max_hold`): once that is reached the lease is no longer extended, the validity
//!    left shrinks, and the import refuses to start a batch it may not finish under the
//!    lease. It reports the batch to resume from; the lease is then reported lost and
//!    released. (Nodes that stop answering end a lease the same way, as the import sees it.)
//!
//! It runs against your own nodes (three or more independent Redis masters):
//!
//! ```text
//! REDLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379 \
//!     cargo run --example long_import
//! ```
//!
//! (In this crate's repository, `cargo test -p redlock-tests --test examples` runs it
//! against local `redis-server` processes that the test starts.)

use std::time::{Duration, Instant};

use redlock::{LeaseSignal, Redlock};

const RESOURCE: &str = "import:catalogue";
const BATCHES: usize = 15;
const BATCH_TIME: Duration = Duration::from_millis(200);

/// How the import ended.
#[derive(Debug)]
enum Import {
    Done,
    /// Stopped before `next_batch`, which a later run resumes from.
    Stopped {
        next_batch: usize,
    },
}

/// Runs the batches while the lease allows. Before each batch it checks that the lease is
/// valid and that enough of it is left to finish the batch: keep-alive extends with a
/// third of the TTL (667 ms) left, long before that margin (400 ms) is reached, so falling
/// below it means extensions are failing.
async fn import(lease: LeaseSignal, started: Instant) -> Import {
    for batch in 0..BATCHES {
        let left = lease.remaining();
        if !lease.is_valid() || left < 2 * BATCH_TIME {
            println!(
                "  [{:>5} ms] stopping before batch {batch}: {} ms of lease left, not enough for a batch",
                started.elapsed().as_millis(),
                left.as_millis()
            );
            return Import::Stopped { next_batch: batch };
        }
        // The batch itself: writes to the catalogue would carry lease.fence() if the handle
        // had fencing (see the warehouse_stock_sync example).
        tokio::time::sleep(BATCH_TIME).await;
        println!(
            "  [{:>5} ms] batch {batch} imported; lease extended {} time(s), {} ms left",
            started.elapsed().as_millis(),
            lease.extensions(),
            lease.remaining().as_millis()
        );
    }
    Import::Done
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls: Vec<String> = std::env::var("REDLOCK_NODES")
        .map_err(|_| "set REDLOCK_NODES to the lock nodes' URLs, separated by commas")?
        .split(',')
        .map(str::to_owned)
        .collect();
    // The restart quarantine stays on: a node is left out of quorums until it has run for a
    // TTL.
    let builder = Redlock::builder().nodes(urls).ttl(Duration::from_secs(2));
    let redlock = builder.build()?;

    println!(
        "1. {BATCHES} batches of {} ms on a 2 s lease, kept alive:",
        BATCH_TIME.as_millis()
    );
    let started = Instant::now();
    let outcome = redlock
        .with_lock_signalled(RESOURCE, |lease| import(lease, started))
        .await?;
    println!("   -> {outcome:?}, lease released");
    if !matches!(outcome, Import::Done) {
        return Err("the first import should finish".into());
    }

    println!("2. the same import, losing the lease midway:");
    let started = Instant::now();
    let handle = redlock.with_max_hold(Duration::from_millis(700))?;
    let lost = {
        let handle = handle.clone();
        tokio::spawn(async move {
            handle
                .with_lock_signalled(RESOURCE, |lease| async move {
                    let outcome = import(lease.clone(), started).await;
                    // Nothing more is done under this lease; see how the keeper reports it.
                    let reason = lease.lost().await;
                    println!(
                        "  [{:>5} ms] lease lost: {reason}",
                        started.elapsed().as_millis()
                    );
                    outcome
                })
                .await
        })
    };
    let outcome = lost.await??;
    match outcome {
        Import::Stopped { next_batch } => {
            println!("   -> stopped cleanly; the next run resumes from batch {next_batch}")
        }
        Import::Done => return Err("the second import should have been stopped".into()),
    }

    // The lease is gone: the next run can take the resource at once.
    let next = redlock.try_acquire(RESOURCE).await?;
    println!("3. the next run takes `{RESOURCE}` at once");
    next.release().await;
    Ok(())
}
