//! Bad nodes, table-driven: something that is not Redis (garbage, silence, an immediate
//! close), a wrong password, a node out of memory, a read-only replica, scripts forbidden by
//! ACL. Each gives a typed error naming every bad node's address, within the time budget,
//! without a panic, and a password never shows.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::*;
use redlock::core::{NodeFailure, NodeStatus, RetryPolicy};
use redlock::{Error, Redlock};
use redlock_core::quorum;
use redlock_tests::{FleetOptions, RedisFleet};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Scheduling slack on top of a documented bound (timer rounding and a busy 2-core machine).
const SLACK: Duration = Duration::from_millis(150);

/// A TCP server that is not Redis.
#[derive(Clone, Copy, Debug)]
enum Impostor {
    /// Answers every connection, and every chunk it reads, with these bytes.
    Garbage(&'static [u8]),
    /// Accepts, reads, never answers.
    Silent,
    /// Accepts and closes at once.
    Hangup,
}

/// Starts `impostor` on a free loopback port; it runs until the test's runtime ends.
async fn start(impostor: Impostor) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let answer: &[u8] = match impostor {
                    Impostor::Hangup => return,
                    Impostor::Garbage(bytes) => bytes,
                    Impostor::Silent => b"",
                };
                if stream.write_all(answer).await.is_err() {
                    return;
                }
                let mut sink = [0; 4096];
                while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

/// Checks that `err` is the error for bad nodes at `addresses`: a `NoQuorum` (or, for nodes
/// that refuse this client, a `Denied`) on one line naming each of them, none with a reply,
/// and enough of them failed to explain it (the round stops as soon as a quorum is out of
/// reach, so the last may still be pending).
fn assert_names_bad_nodes(case: &str, err: &Error, addresses: &[String]) {
    assert!(
        matches!(err, Error::NoQuorum { .. } | Error::Denied { .. }),
        "{case}: expected NoQuorum or Denied, got {err:?}"
    );
    let text = err.to_string();
    assert!(!text.contains('\n'), "{case}: not one line: {text:?}");
    let report = err.nodes().unwrap();
    let mut failed = 0;
    for address in addresses {
        assert!(
            text.contains(address),
            "{case}: {address} not named: {text}"
        );
        let node = report
            .nodes()
            .iter()
            .find(|n| &*n.address == address)
            .unwrap_or_else(|| panic!("{case}: {address} missing from {report:?}"));
        match node.status {
            NodeStatus::Failed(_) => failed += 1,
            NodeStatus::Pending => {}
            _ => panic!("{case}: {address} answered: {text}"),
        }
    }
    let nodes = report.nodes().len();
    let out_of_reach = nodes - quorum(nodes) + 1;
    let needed = out_of_reach.saturating_sub(nodes - addresses.len());
    assert!(failed >= needed, "{case}: only {failed} failed: {text}");
}

/// Acquires `resource`, timing it against the client's budget.
async fn acquire_timed(
    redlock: &Redlock,
    resource: &str,
) -> (Result<redlock::Lease, Error>, Duration) {
    let started = Instant::now();
    let result = redlock.acquire(resource).await;
    let took = started.elapsed();
    let budget = redlock.config().acquire_budget();
    assert!(
        took <= budget + SLACK,
        "{resource}: took {took:?}, budget {budget:?}"
    );
    (result, took)
}

fn quick(urls: impl IntoIterator<Item = String>) -> Redlock {
    fresh(Redlock::builder())
        .nodes(urls)
        .retry_count(1)
        .retry_delay(Duration::from_millis(5))
        .build()
        .unwrap()
}

/// `-ERR`, 100 kB of text with terminal escapes, CRLF: what a hostile peer may send.
fn huge_error_line() -> &'static [u8] {
    let mut line = b"-ERR ".to_vec();
    for _ in 0..10_000 {
        line.extend_from_slice(b"\x1b[2J\x07spam ");
    }
    line.extend_from_slice(b"\r\n");
    Box::leak(line.into_boxed_slice())
}

/// Whether an impostor's answers are ones no Redis would give (so that trying again cannot
/// help), rather than silence, a hang-up or a Redis-shaped error, which a real node in
/// trouble gives too.
const NOT_REDIS: bool = true;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_are_not_redis() {
    let cases: &[(&str, Impostor, bool)] = &[
        (
            "an HTTP server",
            Impostor::Garbage(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"),
            NOT_REDIS,
        ),
        (
            "binary garbage",
            Impostor::Garbage(b"\x00\xff\xfe\x13garbage"),
            NOT_REDIS,
        ),
        (
            "a RESP array that never ends",
            Impostor::Garbage(b"*99999\r\n$5\r\nhello\r\n"),
            !NOT_REDIS,
        ),
        (
            "a negative bulk length, then a bad integer",
            Impostor::Garbage(b"$-7\r\n:notanumber\r\n"),
            NOT_REDIS,
        ),
        (
            "an SSH banner",
            Impostor::Garbage(b"SSH-2.0-OpenSSH_9.6\r\n"),
            NOT_REDIS,
        ),
        (
            "an error line of 100 kB with escape sequences",
            Impostor::Garbage(huge_error_line()),
            !NOT_REDIS,
        ),
        ("a silent server", Impostor::Silent, !NOT_REDIS),
        ("a server that hangs up", Impostor::Hangup, !NOT_REDIS),
    ];
    let fleet = fleet(1);
    for (case, impostor, not_redis) in cases {
        let impostors = [start(*impostor).await, start(*impostor).await];
        let addresses: Vec<String> = impostors.iter().map(ToString::to_string).collect();
        // Two impostors and one real node: no quorum, and each impostor is named.
        let redlock = quick(
            addresses
                .iter()
                .map(|a| format!("redis://{a}"))
                .chain([fleet.url(0)]),
        );
        let (result, _) = acquire_timed(&redlock, "impostor").await;
        let err = result.unwrap_err();
        assert_names_bad_nodes(case, &err, &addresses);
        let text = err.to_string();
        if *not_redis {
            // Said as what it is, and not retried: the address must change.
            assert!(matches!(err, Error::Denied { .. }), "{case}: {err:?}");
            assert!(!err.is_retryable(), "{case}");
            assert_eq!(err.attempts(), Some(1), "{case}: {text}");
            assert!(text.contains("not Redis servers"), "{case}: {text}");
            assert!(text.contains("not a Redis server"), "{case}: {text}");
        } else {
            assert!(err.is_retryable(), "{case}");
        }
        assert!(
            text.len() < 2_000,
            "{case}: {} bytes of message",
            text.len()
        );
        println!("{case}: {err}");

        // One impostor among two real nodes does not stop a quorum.
        let other = RedisFleet::start(2).unwrap();
        let redlock = quick([
            format!("redis://{}", addresses[0]),
            other.url(0),
            other.url(1),
        ]);
        let (result, _) = acquire_timed(&redlock, "impostor").await;
        let lease = result.unwrap_or_else(|e| panic!("{case}: {e}"));
        let report = lease.release().await;
        assert!(report.is_quorum_free(), "{case}: {report:?}");
    }
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_names_the_nodes_and_never_shows() {
    let fleet = fleet_with(
        3,
        FleetOptions {
            extra_args: vec!["--requirepass".into(), "right-horse".into()],
            ..FleetOptions::default()
        },
    );
    for (case, url) in [
        ("wrong password", "redis://:wrong-battery@127.0.0.1:{port}"),
        (
            "wrong user",
            "redis://nobody:wrong-battery@127.0.0.1:{port}",
        ),
        ("no password", "redis://127.0.0.1:{port}"),
        (
            "wrong password in the query",
            "redis://127.0.0.1:{port}/?password=wrong-battery",
        ),
    ] {
        let urls = (0..3).map(|i| url.replace("{port}", &fleet.port(i).to_string()));
        // A first round that ends before the connections' refusals arrive (their AUTH took
        // longer than the node timeout on a loaded machine) is retried, rightly: the
        // refusals were not known yet. A generous node timeout lets the first round see them.
        let redlock = fresh(Redlock::builder())
            .nodes(urls)
            .retry_count(1)
            .retry_delay(Duration::from_millis(5))
            .ttl(Duration::from_secs(30))
            .node_timeout(Duration::from_secs(1))
            .build()
            .unwrap();
        let (result, _) = acquire_timed(&redlock, "guarded").await;
        let err = result.unwrap_err();
        let addresses: Vec<String> = (0..3).map(|i| fleet.addr(i).to_string()).collect();
        assert_names_bad_nodes(case, &err, &addresses);
        // Refused credentials are final: no retry is spent on them.
        assert!(
            matches!(err, Error::Denied { attempts: 1, .. }) && !err.is_retryable(),
            "{case}: {err:?}"
        );
        let text = format!("{err} {err:?} {redlock:?}");
        assert!(
            !text.contains("wrong-battery"),
            "{case}: password leaked: {text}"
        );
        assert!(
            !text.contains("right-horse"),
            "{case}: password leaked: {text}"
        );
        // The round stops once two of three refused; the third may still be pending.
        let refused = err
            .nodes()
            .unwrap()
            .count(|s| matches!(s, NodeStatus::Failed(NodeFailure::Denied(_))));
        assert!(refused >= 2, "{case}: {err}");
        println!("{case}: {err}");
    }
}

/// Fills node `index` until a fresh connection's small `SET` is refused with OOM, with
/// ever smaller values so that memory ends up at the limit rather than just below it.
/// Returns the filling connections: closing them would free their buffers, and memory.
fn fill(fleet: &RedisFleet, index: usize) -> Vec<redis::Connection> {
    let mut keys = 0u64;
    let mut set = |c: &mut redis::Connection, size: usize| -> bool {
        keys += 1;
        let result: redis::RedisResult<()> = redis::cmd("SET")
            .arg(format!("filler:{keys}"))
            .arg("v".repeat(size))
            .query(c);
        match result {
            Ok(()) => {
                assert!(keys < 200_000, "node {index} never filled up");
                true
            }
            Err(e) if e.to_string().to_lowercase().contains("memory") => false,
            Err(e) => panic!("node {index}: {e}"),
        }
    };
    let mut filler = fleet.connect(index).unwrap();
    for size in [64 * 1024, 4 * 1024, 256, 16] {
        while set(&mut filler, size) {}
    }
    // The client will connect afresh: a fresh connection must be refused too.
    let mut probe = fleet.connect(index).unwrap();
    while set(&mut probe, 16) {}
    vec![filler, probe]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_out_of_memory_with_noeviction() {
    let fleet = fleet_with(
        3,
        FleetOptions {
            extra_args: ["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]
                .map(String::from)
                .to_vec(),
            ..FleetOptions::default()
        },
    );
    let _fillers: Vec<_> = (0..3).flat_map(|i| fill(&fleet, i)).collect();
    let redlock = quick(fleet.urls());
    let (result, _) = acquire_timed(&redlock, "full").await;
    let err = result.unwrap_err();
    let addresses: Vec<String> = (0..3).map(|i| fleet.addr(i).to_string()).collect();
    assert_names_bad_nodes("out of memory", &err, &addresses);
    assert!(err.to_string().to_lowercase().contains("memory"), "{err}");
    println!("out of memory: {err}");
    assert_eq!(lock_keys(&fleet), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_replicas() {
    let primary = fleet(1);
    let replicas = fleet_with(
        3,
        FleetOptions {
            extra_args: vec![
                "--replicaof".into(),
                "127.0.0.1".into(),
                primary.port(0).to_string(),
            ],
            ..FleetOptions::default()
        },
    );
    let redlock = quick(replicas.urls());
    let (result, _) = acquire_timed(&redlock, "replicated").await;
    let err = result.unwrap_err();
    let addresses: Vec<String> = (0..3).map(|i| replicas.addr(i).to_string()).collect();
    assert_names_bad_nodes("read-only replica", &err, &addresses);
    let text = err.to_string().to_lowercase();
    assert!(
        text.contains("read only") || text.contains("readonly"),
        "{err}"
    );
    println!("read-only replica: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_forbidden_by_acl() {
    let fleet = fleet(3);
    let redlock = quick(fleet.urls())
        .with_ttl(Duration::from_secs(2))
        .unwrap();
    // Warm the connections before the ACL change.
    redlock.acquire("warm").await.unwrap().release().await;
    // The release returns at a quorum: let the last node's release land before the ACL
    // change, or it would fail too and leave a key.
    assert_no_lock_keys(&fleet).await;
    acl_on_every_node(
        &fleet,
        &["SETUSER", "default", "-eval", "-evalsha", "-script"],
    );
    let addresses: Vec<String> = (0..3).map(|i| fleet.addr(i).to_string()).collect();

    // SET is still allowed: the lease is granted...
    let mut lease = redlock.acquire("scripted").await.unwrap();
    // ...but the ownership scripts are not: the extension fails naming every node.
    let bound = redlock.config().node_timeout() * 2 + SLACK;
    let started = Instant::now();
    let err = lease.extend().await.unwrap_err();
    assert!(
        started.elapsed() <= bound,
        "extend took {:?}",
        started.elapsed()
    );
    assert!(matches!(err, Error::ExtendFailed { .. }), "{err:?}");
    assert!(!err.is_retryable(), "refused on every node: {err}");
    let text = err.to_string();
    for address in &addresses {
        assert!(text.contains(address), "{address} not named: {text}");
    }
    assert!(text.to_lowercase().contains("noperm"), "{text}");
    println!("extend without EVAL: {err}");
    assert!(
        lease.is_valid(),
        "a failed extension leaves the lease as it was"
    );

    // The release reports a refusal (NOPERM) per node, in configuration order
    // (`Redlock::node_addresses`), and the keys stay until their TTL.
    let started = Instant::now();
    let report = lease.release().await;
    assert!(
        started.elapsed() <= bound,
        "release took {:?}",
        started.elapsed()
    );
    assert_eq!(report.failed(), 3, "{report:?}");
    for status in &report.nodes {
        let NodeStatus::Failed(NodeFailure::Denied(detail)) = status else {
            panic!("{report:?}")
        };
        assert!(detail.to_lowercase().contains("noperm"), "{detail}");
    }
    assert_eq!(redlock.node_addresses().count(), report.nodes.len());
    assert_eq!(lock_keys(&fleet), 3, "nothing could delete the keys");
    let expired = eventually(Duration::from_secs(3), || async { lock_keys(&fleet) == 0 }).await;
    assert!(expired, "the keys outlived their TTL");

    // A cancelled or failed acquisition cannot clean up either: it still returns in time.
    fleet
        .occupy(&[0, 1, 2], "redlock:contended", Duration::from_secs(60))
        .unwrap();
    let one_round = redlock.with_retry(RetryPolicy::no_retry()).unwrap();
    let (result, _) = acquire_timed(&one_round, "contended").await;
    assert!(matches!(result, Err(Error::Taken { .. })), "{result:?}");
}

/// The permissions `docs/operations.md` lists are enough for every operation: plain and
/// fenced leases, extension, release, multi-resource leases and the restart check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_least_permissions_suffice() {
    let fleet = fleet(3);
    acl_on_every_node(
        &fleet,
        &[
            "SETUSER",
            "locker",
            "on",
            ">locker-secret",
            "~redlock:*",
            "+set",
            "+get",
            "+del",
            "+pexpire",
            "+exists",
            "+eval",
            "+info",
        ],
    );
    let urls = (0..3).map(|i| {
        let port = fleet.addr(i).port();
        format!("redis://locker:locker-secret@127.0.0.1:{port}")
    });
    let redlock = quick(urls);

    let mut lease = redlock.acquire("job").await.unwrap();
    lease.extend().await.unwrap();
    assert!(lease.release().await.is_quorum_free());
    let fenced = redlock
        .with_fencing(redlock::client::Fencing::Quorum)
        .unwrap();
    let lease = fenced.acquire("job").await.unwrap();
    assert_eq!(lease.fence(), Some(1));
    assert!(lease.release().await.is_quorum_free());
    let mut lease = redlock.acquire_many(["a", "b"]).await.unwrap();
    lease.extend().await.unwrap();
    assert!(lease.release().await.is_quorum_free());
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_forbidden_by_acl() {
    let fleet = fleet(3);
    acl_on_every_node(&fleet, &["SETUSER", "default", "-set"]);
    let redlock = quick(fleet.urls());
    let (result, _) = acquire_timed(&redlock, "forbidden").await;
    let err = result.unwrap_err();
    let addresses: Vec<String> = (0..3).map(|i| fleet.addr(i).to_string()).collect();
    assert_names_bad_nodes("SET forbidden", &err, &addresses);
    assert!(
        matches!(err, Error::Denied { attempts: 1, .. }) && !err.is_retryable(),
        "{err:?}"
    );
    assert!(err.to_string().to_lowercase().contains("noperm"), "{err}");
    println!("SET forbidden: {err}");
}
