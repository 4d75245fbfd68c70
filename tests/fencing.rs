//! Fencing tokens end to end on real Redis: minted on a quorum of lock nodes, checked by a
//! protected Redis key that rejects older tokens and refuses a token repeated by another lease.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::*;
use redlock::Error;
use redlock::client::{FenceFuture, FenceSource, Fencing};
use redlock::core::Token;
use redlock::fencing::{Fence, FenceError, FencedKey, FencedRead, FencedWrite};

async fn target(fleet: &redlock_tests::RedisFleet) -> redis::aio::MultiplexedConnection {
    redis::Client::open(fleet.url(0))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_tokens_strictly_increase_across_leases_even_with_nodes_down() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet)
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let mut last = 0;
    for i in 0..12 {
        // Vary the quorum: from the fourth lease on, two nodes are down; from the eighth, one
        // of them is back, restarted empty and therefore left out for a TTL.
        if i == 3 {
            fleet.kill(0).unwrap();
            fleet.kill(1).unwrap();
        }
        if i == 7 {
            fleet.restart(1).unwrap();
        }
        let mut lease = redlock.acquire("ledger").await.unwrap();
        let token = lease.fence().unwrap();
        assert!(token > last, "token {token} after {last}");
        lease.extend().await.unwrap();
        assert_eq!(lease.fence(), Some(token), "extension keeps the token");
        last = token;
        lease.release().await;
    }
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_write_of_an_expired_holder_is_rejected() {
    let locks = fleet(5);
    let store = fleet(1);
    let redlock = builder(&locks)
        .ttl(Duration::from_millis(300))
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let stock = FencedKey::new("stock:warehouse-42");
    let mut conn = target(&store).await;

    // Holder A writes, then stops extending and sleeps past its TTL.
    let a = redlock.acquire("warehouse-42").await.unwrap();
    let a_token = a.fence().unwrap();
    let a_fence = Fence::of(&a).unwrap();
    assert_eq!(
        stock
            .write(&mut conn, a_fence, "A: 10 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!a.is_valid());

    // B acquires with a larger token and writes.
    let b = redlock.acquire("warehouse-42").await.unwrap();
    let b_token = b.fence().unwrap();
    let b_fence = Fence::of(&b).unwrap();
    assert!(b_token > a_token);
    assert_eq!(
        stock
            .write(&mut conn, b_fence, "B: 12 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied
    );

    // A wakes up and writes: rejected, and the data stays B's.
    let late = stock
        .write(&mut conn, a_fence, "A: 7 pallets")
        .await
        .unwrap();
    assert_eq!(late, FencedWrite::Rejected { highest: b_token });
    let value: String = redis::cmd("GET")
        .arg(stock.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "B: 12 pallets");
    // B can keep writing with its own token.
    assert_eq!(
        stock
            .write(&mut conn, b_fence, "B: 11 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied
    );

    a.release().await;
    b.release().await;
}

/// Two leases with the same fencing token (what quorum-minted tokens come to after a node
/// lost its counter): the first registers the token with its owner and may write again; the
/// second is refused with its own error, on writes and on reads, and the data stays the
/// first lease's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equal_token_from_another_lease_is_refused_as_a_repeat() {
    let store = fleet(1);
    let mut conn = target(&store).await;
    let stock = FencedKey::new("stock:repeated");
    let first = Fence::new(7, Token::from_bytes([1; 16]));
    let second = Fence::new(7, Token::from_bytes([2; 16]));

    assert_eq!(
        stock
            .write(&mut conn, first, "first: 3 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied
    );
    assert_eq!(
        stock
            .write(&mut conn, first, "first: 4 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied,
        "one lease writes as often as it needs"
    );
    let repeat = stock.write(&mut conn, second, "second: 9 pallets").await;
    assert!(
        matches!(repeat, Err(FenceError::Repeated { token: 7 })),
        "{repeat:?}"
    );
    let read = stock.read(&mut conn, second).await;
    assert!(
        matches!(read, Err(FenceError::Repeated { token: 7 })),
        "{read:?}"
    );
    let value: String = redis::cmd("GET")
        .arg(stock.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "first: 4 pallets");

    // A larger token from the second lease is an ordinary newer lease: applied, and the
    // first lease is then rejected as older.
    let newer = Fence::new(8, Token::from_bytes([2; 16]));
    assert_eq!(
        stock
            .write(&mut conn, newer, "second: 9 pallets")
            .await
            .unwrap(),
        FencedWrite::Applied
    );
    assert_eq!(
        stock.write(&mut conn, first, "first: late").await.unwrap(),
        FencedWrite::Rejected { highest: 8 }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_modify_write_needs_strict_fencing() {
    let locks = fleet(3);
    let store = fleet(1);
    let redlock = builder(&locks)
        .ttl(Duration::from_millis(300))
        .build()
        .unwrap()
        .with_fencing(Fencing::Quorum)
        .unwrap();
    let mut conn = target(&store).await;

    // Write-only fencing: A reads 10 with a plain GET, pauses; B reads 10 with a plain GET;
    // A's write (the highest *write* token so far is A's own) is accepted; B writes 10+1.
    let counter = FencedKey::new("counter:write-only");
    let seed = redlock.acquire("counter").await.unwrap();
    assert_eq!(
        counter
            .write(&mut conn, Fence::of(&seed).unwrap(), 10)
            .await
            .unwrap(),
        FencedWrite::Applied
    );
    seed.release().await;
    let a = redlock.acquire("counter").await.unwrap();
    let a_read: i64 = redis::cmd("GET")
        .arg(counter.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = redlock.acquire("counter").await.unwrap();
    let b_read: i64 = redis::cmd("GET")
        .arg(counter.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    let a_write = counter
        .write(&mut conn, Fence::of(&a).unwrap(), a_read + 5)
        .await
        .unwrap();
    assert_eq!(
        a_write,
        FencedWrite::Applied,
        "write-only fencing lets A's stale write in"
    );
    let _ = counter
        .write(&mut conn, Fence::of(&b).unwrap(), b_read + 1)
        .await
        .unwrap();
    let lost: i64 = redis::cmd("GET")
        .arg(counter.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        lost, 11,
        "A's +5 is lost: B computed from a value A then replaced"
    );
    a.release().await;
    b.release().await;

    // Strict fencing: B's read registers its token, so A's late write is rejected.
    let counter = FencedKey::new("counter:strict");
    let seed = redlock.acquire("counter").await.unwrap();
    assert_eq!(
        counter
            .write(&mut conn, Fence::of(&seed).unwrap(), 10)
            .await
            .unwrap(),
        FencedWrite::Applied
    );
    seed.release().await;
    let a = redlock.acquire("counter").await.unwrap();
    let FencedRead::Value(Some(a_read)) = counter
        .read(&mut conn, Fence::of(&a).unwrap())
        .await
        .unwrap()
    else {
        panic!("A's read")
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = redlock.acquire("counter").await.unwrap();
    let b_token = b.fence().unwrap();
    let b_fence = Fence::of(&b).unwrap();
    let FencedRead::Value(Some(b_read)) = counter.read(&mut conn, b_fence).await.unwrap() else {
        panic!("B's read")
    };
    let parse = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap().parse::<i64>().unwrap();
    let (a_read, b_read) = (parse(a_read), parse(b_read));
    let a_write = counter
        .write(&mut conn, Fence::of(&a).unwrap(), a_read + 5)
        .await
        .unwrap();
    assert_eq!(a_write, FencedWrite::Rejected { highest: b_token });
    assert_eq!(
        counter.write(&mut conn, b_fence, b_read + 1).await.unwrap(),
        FencedWrite::Applied
    );
    // A's late read is rejected too.
    assert_eq!(
        counter
            .read(&mut conn, Fence::of(&a).unwrap())
            .await
            .unwrap(),
        FencedRead::Rejected { highest: b_token }
    );
    let value: i64 = redis::cmd("GET")
        .arg(counter.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, 11);
    a.release().await;
    b.release().await;
}

#[derive(Debug, Default)]
struct Sequence(AtomicU64);

impl FenceSource for Sequence {
    fn next_fence<'a>(&'a self, _resource: &'a str) -> FenceFuture<'a> {
        Box::pin(async move { Ok(self.0.fetch_add(1, Ordering::SeqCst) + 100) })
    }
}

#[derive(Debug)]
struct Broken;

impl FenceSource for Broken {
    fn next_fence<'a>(&'a self, _resource: &'a str) -> FenceFuture<'a> {
        Box::pin(async move { Err("the sequence is unreachable".into()) })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_external_source_mints_the_tokens_and_its_failure_releases_the_lease() {
    let fleet = fleet(3);
    let plain = builder(&fleet).retry_count(0).build().unwrap();
    let sourced = plain
        .with_fencing(Fencing::Source(Arc::new(Sequence::default())))
        .unwrap();
    let first = sourced.acquire("job").await.unwrap();
    assert_eq!(first.fence(), Some(100));
    first.release().await;
    let second = sourced.acquire("job").await.unwrap();
    assert_eq!(second.fence(), Some(101));
    second.release().await;
    // The counters of the quorum scheme are not involved: no key at all once the release's
    // slowest node has answered (release returns at a quorum).
    let clean = eventually(Duration::from_secs(2), || async {
        fleet.count_keys("redlock:").unwrap() == 0
    })
    .await;
    assert!(clean, "keys left: {}", describe_keys(&fleet));

    let broken = plain
        .with_fencing(Fencing::Source(Arc::new(Broken)))
        .unwrap();
    let err = broken.acquire("job").await.unwrap_err();
    assert!(
        matches!(&err, Error::Fence { reason, .. } if reason.contains("unreachable")),
        "{err}"
    );
    // The lease it could not fence was released at once: the resource is free.
    plain.try_acquire("job").await.unwrap().release().await;

    // Without fencing there is no token.
    let lease = plain.acquire("job").await.unwrap();
    assert_eq!(lease.fence(), None);
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A lease whose token the source cannot mint is released at once, even where the
/// acquisition's own `SET` to a slow node is still on its way: the release waits in its lane
/// for that `SET`'s answer, so the acquisition's requests must go on while the token is
/// minted. Unpolled, they kept the lane shut until the release's per-node timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_mint_releases_behind_a_slow_node_without_waiting_out_the_node_timeout() {
    use redlock_tests::proxy::{Direction, FaultProxy};

    let fleet = fleet(3);
    let proxy = FaultProxy::start(fleet.addr(2)).await.unwrap();
    let mut urls = fleet.urls();
    urls[2] = proxy.url();
    let node_timeout = Duration::from_secs(3);
    let redlock = fresh(redlock::Redlock::builder().nodes(urls))
        .node_timeout(node_timeout)
        .ttl(Duration::from_secs(60))
        .retry_count(0)
        .build()
        .unwrap()
        .with_fencing(Fencing::Source(Arc::new(Broken)))
        .unwrap();
    redlock.connect().await;
    // Node 2 performs each command at once and answers 300 ms later: the grant comes from
    // nodes 0 and 1, with node 2's `SET` still unanswered.
    proxy
        .handle()
        .set_latency(Direction::ToClient, Duration::from_millis(300));
    let started = std::time::Instant::now();
    let err = redlock.acquire("slow").await.unwrap_err();
    let took = started.elapsed();
    assert!(matches!(&err, Error::Fence { .. }), "{err}");
    // Node 2's `SET` answer, then its release's: about 600 ms, far from the node timeout.
    assert!(
        took < node_timeout / 2,
        "the failed mint's release took {took:?}, against a node timeout of {node_timeout:?}"
    );
    assert_no_lock_keys(&fleet).await;
}

/// A token source that answers only after the lease's validity ended (a stall that the
/// timeout around it cannot preempt, as a blocked thread would) does not get its lease
/// handed out: the acquisition fails and releases it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_arrives_after_the_validity_is_refused() {
    #[derive(Debug)]
    struct Stalled;
    impl FenceSource for Stalled {
        fn next_fence<'a>(&'a self, _resource: &'a str) -> FenceFuture<'a> {
            Box::pin(async {
                // Blocks the thread past the 200 ms lease, then answers at once.
                std::thread::sleep(Duration::from_millis(300));
                Ok(7)
            })
        }
    }
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(200))
        // A 200 ms lease has short per-node timeouts: on a loaded machine a round can miss
        // its quorum, and only a granted round reaches the token source.
        .retry_count(10)
        .build()
        .unwrap()
        .with_fencing(Fencing::Source(Arc::new(Stalled)))
        .unwrap();
    let result = redlock.acquire("late").await;
    match result {
        Err(Error::Fence { reason, .. }) => assert!(reason.contains("after"), "{reason}"),
        other => panic!("expected a refused token, got {other:?}"),
    }
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_access_takes_the_lease_itself_and_refuses_one_without_a_token() {
    let locks = fleet(3);
    let store = fleet(1);
    let plain = builder(&locks).build().unwrap();
    let fenced = plain.with_fencing(Fencing::Quorum).unwrap();
    let stock = FencedKey::new("stock:warehouse-9");
    let mut conn = target(&store).await;

    let lease = fenced.acquire("warehouse-9").await.unwrap();
    assert_eq!(
        stock.write(&mut conn, &lease, "9 pallets").await.unwrap(),
        FencedWrite::Applied
    );
    assert_eq!(
        stock.read(&mut conn, &lease).await.unwrap(),
        FencedRead::Value(Some(b"9 pallets".to_vec()))
    );
    let holder = fenced.holder("warehouse-9").await.unwrap();
    assert!(holder.is_held_by(&lease), "{holder}");
    assert!(holder.to_string().starts_with("held by "), "{holder}");
    lease.release().await;

    // Without fencing there is no token to send: nothing reaches the store.
    let unfenced = plain.acquire("warehouse-9").await.unwrap();
    let refused = stock.write(&mut conn, &unfenced, "late").await;
    assert!(matches!(refused, Err(FenceError::Unfenced)), "{refused:?}");
    let holder = plain.holder("warehouse-9").await.unwrap();
    assert!(holder.is_held_by(&unfenced));
    unfenced.release().await;
    let holder = plain.holder("warehouse-9").await.unwrap();
    assert!(holder.is_free(), "{holder}");
    let value: Option<String> = redis::cmd("GET")
        .arg("stock:warehouse-9")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value.as_deref(), Some("9 pallets"));
    assert_no_lock_keys(&locks).await;
}
