//! What the benchmarks share: runtimes, the fleet, the round-trip floors written directly with
//! the `redis` crate, and the peers' clients, so that every contender does the same work on
//! the same nodes in the same run.
#![allow(dead_code, unreachable_pub)]

pub mod floor;
pub mod pipelined;

use std::time::Duration;

use redlock::Redlock;
use redlock_tests::RedisFleet;
use redlock_tests::proxy::FaultProxy;

/// The TTL every contender uses.
pub const TTL: Duration = Duration::from_secs(10);

/// A multi-thread runtime with two workers (the machine's cores).
pub fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A current-thread runtime.
pub fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A fleet of `n` nodes; panics with the fixture's explanation when redis-server is missing.
pub fn fleet(n: usize) -> RedisFleet {
    RedisFleet::start(n).unwrap_or_else(|e| panic!("{e}"))
}

/// This crate's client over `urls`, as every benchmark configures it: the common TTL and
/// its own key prefix.
pub fn ours(urls: &[String]) -> Redlock {
    // Nodes the benchmark started a moment ago: no restart to guard against, so no restart
    // quarantine (it would leave every node out for a TTL after it starts).
    Redlock::builder()
        .nodes(urls.iter().cloned())
        .restart_quarantine(None)
        .ttl(TTL)
        .key_prefix("bench-ours:")
        .build()
        .expect("a client")
}

/// One acquire + release of `resource` with this crate's client, the release returning at
/// its quorum (`release_at_quorum`, what the published figures measured; `release` waits for
/// every node, the `cpu` bench's `ours_every_node`).
pub async fn ours_once(redlock: &Redlock, resource: &str) {
    redlock
        .acquire(resource)
        .await
        .expect("acquire")
        .release_at_quorum()
        .await;
}

/// One lock + unlock of `key` with `rslock`.
pub async fn rslock_once(rslock: &rslock::LockManager, key: &str) {
    let lock = rslock.lock(key, TTL).await.expect("rslock");
    rslock.unlock(&lock).await;
}

/// A fault proxy in front of every node of `fleet`, started on `runtime`.
pub fn proxies(runtime: &tokio::runtime::Runtime, fleet: &RedisFleet) -> Vec<FaultProxy> {
    runtime.block_on(async {
        let mut proxies = Vec::new();
        for node in 0..fleet.len() {
            proxies.push(FaultProxy::start(fleet.addr(node)).await.expect("a proxy"));
        }
        proxies
    })
}

/// Keys with `prefix` left on all running nodes (fence counters excluded).
pub fn leftover_keys(fleet: &RedisFleet, prefix: &str) -> usize {
    (0..fleet.len())
        .filter(|&i| fleet.pid(i).is_some())
        .map(|i| {
            let keys = fleet.keys_with_prefix(i, prefix).expect("inspect a node");
            keys.iter().filter(|(k, _)| !k.contains('\0')).count()
        })
        .sum()
}

/// Waits for background requests to land, then reports how many keys of another
/// contender's `prefix` are left. Not a failure: the floor and the peers are references,
/// and the floor (no per-node ordering of a lease's commands) has been seen to leave keys
/// behind an unhealthy node (`docs/benchmarks.md`).
pub fn report_clean(fleet: &RedisFleet, prefix: &str, what: &str) {
    std::thread::sleep(Duration::from_millis(300));
    match leftover_keys(fleet, prefix) {
        0 => println!("{what}: 0 keys left behind"),
        left => println!("{what}: {left} key(s) left behind"),
    }
}

/// Waits for background requests to land, then asserts that no key of `prefix` (this
/// crate's client) is left.
pub fn assert_clean(fleet: &RedisFleet, prefix: &str, what: &str) {
    std::thread::sleep(Duration::from_millis(300));
    let left = leftover_keys(fleet, prefix);
    assert_eq!(
        left, 0,
        "{what}: {left} key(s) with prefix {prefix:?} left behind"
    );
    println!("{what}: 0 keys left behind");
}

/// A 128-bit random token as 32 hex characters, as every contender stores.
pub fn token() -> String {
    use rand::RngExt;
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
