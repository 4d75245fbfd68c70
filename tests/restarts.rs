//! The restart quarantine: a node that may have restarted without its keys is left out of
//! quorums until the quarantine has passed since it started, whether this client knew it
//! before or meets it for the first time, over RESP2 and RESP3, and even when it refuses
//! `INFO`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Error;

/// Two clients: A holds `q` on nodes 0–2 only; node 2 restarts
/// empty; a client built after the restart has no earlier `run_id` to compare, and still
/// must not count node 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_first_meets_a_node_after_its_restart_leaves_it_out() {
    let mut fleet = fleet(5);
    let started = Instant::now();
    let quarantine = Duration::from_secs(2);
    // A foreign key on nodes 3 and 4 for half a second, so that A gets nodes 0-2 only: a bare
    // majority that one forgetful node can break.
    fleet
        .occupy(&[3, 4], &format!("{PREFIX}q"), Duration::from_millis(500))
        .unwrap();
    let a = builder(&fleet)
        .ttl(Duration::from_secs(30))
        .retry_count(0)
        .build()
        .unwrap();
    let held = a.acquire("q").await.unwrap();
    // Every node older than B's quarantine, except node 2, which restarts empty.
    wait_until_older_than(started, quarantine);
    fleet.restart(2).unwrap();

    let b = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .restart_quarantine(Some(quarantine))
        .ttl(Duration::from_secs(30))
        .retry_count(0)
        .build()
        .unwrap();
    let err = b.acquire("q").await.unwrap_err();
    assert!(matches!(err, Error::Taken { .. }), "{err:?}");
    assert!(quarantined(&err, 2), "node 2 counted: {err}");
    for i in [0, 1, 3, 4] {
        assert!(!quarantined(&err, i), "node {i} left out: {err}");
    }
    // The same client without the quarantine (the bare algorithm) is granted the resource
    // A still holds: node 2 forgot A's key. That double grant is what the quarantine stops.
    let bare = builder(&fleet)
        .ttl(Duration::from_secs(30))
        .retry_count(0)
        .build()
        .unwrap();
    let second = bare.acquire("q").await.unwrap();
    assert!(held.is_valid() && second.is_valid(), "both hold `q`");
    second.release().await;
    held.release().await;
}

/// A fresh node is left out for the quarantine minus its uptime, then counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_younger_than_the_quarantine_counts_once_it_is_old_enough() {
    // Timed from before the nodes start: on a busy machine starting them takes a while, and
    // their uptime (which the quarantine is counted from) includes that.
    let started = Instant::now();
    let fleet = fleet(3);
    let quarantine = Duration::from_millis(1_500);
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .restart_quarantine(Some(quarantine))
        .retry_count(0)
        .build()
        .unwrap();
    let err = redlock.acquire("job").await.unwrap_err();
    // The round is lost as soon as two of three are left out; the third may be pending.
    let left_out = (0..3).filter(|&i| quarantined(&err, i)).count();
    assert!(left_out >= 2, "{err}");
    assert!(err.to_string().contains("restart quarantine"), "{err}");
    let counted = loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break started.elapsed();
            }
            // The nodes started a few milliseconds apart: their quarantines end as far
            // apart, and a round in between finds some counted and the rest left out.
            Err(e) => assert!((0..3).any(|i| quarantined(&e, i)), "{e}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5), "never counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        counted >= quarantine - Duration::from_millis(50),
        "counted after {counted:?}"
    );
}

/// A long-lived client that knew the node before: a new `run_id` starts the quarantine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_is_left_out_for_the_quarantine() {
    let mut fleet = fleet(3);
    let started = Instant::now();
    let quarantine = Duration::from_millis(1_500);
    wait_until_older_than(started, quarantine);
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .restart_quarantine(Some(quarantine))
        .retry_count(0)
        .build()
        .unwrap();
    redlock.acquire("job").await.unwrap().release().await;

    // Timed from before the restart: the new server starts after this instant however long
    // the fixture takes to see it ready.
    let restarted = Instant::now();
    fleet.restart(0).unwrap();
    fleet.kill(1).unwrap();
    // With node 1 down, only node 2 counts until node 0's quarantine ends. The first command
    // after the restart may find the old connection broken; the next one reconnects.
    let mut seen = false;
    let back = loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break restarted.elapsed();
            }
            Err(e) => seen |= quarantined(&e, 0),
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(5),
            "never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(seen, "the restart was not noticed");
    assert!(
        back >= quarantine - Duration::from_millis(100),
        "counted again after only {back:?}"
    );
}

/// With RESP3, redis-rs' reconnecting connection manager reconnects on its own when the
/// server goes away: if the client does not run while the node restarts (a stopped process,
/// a starved runtime), it reconnects to the new server without any command failing. Every
/// new connection must be identified anyway. One runtime thread, blocked through the
/// restart, stands for the client that does not run.
#[tokio::test]
async fn a_restart_behind_an_idle_resp3_connection_is_noticed() {
    let mut fleet = fleet(3);
    let started = Instant::now();
    let quarantine = Duration::from_secs(2);
    wait_until_older_than(started, quarantine);
    let urls = fleet
        .urls()
        .into_iter()
        .map(|url| format!("{url}?protocol=resp3"));
    let redlock = redlock::Redlock::builder()
        .nodes(urls)
        .restart_quarantine(Some(quarantine))
        .retry_count(0)
        .build()
        .unwrap();
    redlock.acquire("job").await.unwrap().release().await;
    // Blocks the only runtime thread: the client sees nothing until the node is back.
    fleet.restart(0).unwrap();
    // Now the client runs again, idle: a reconnecting connection reconnects here.
    tokio::time::sleep(Duration::from_millis(300)).await;
    fleet.kill(1).unwrap();
    let mut seen = false;
    for _ in 0..5 {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                panic!("node 0 was counted right after its restart");
            }
            Err(e) => seen |= quarantined(&e, 0),
        }
        if seen {
            break;
        }
    }
    assert!(
        seen,
        "the restart behind the RESP3 connection was not noticed"
    );
}

/// A node that refuses `INFO` cannot be identified: it is counted (with one warning) rather
/// than refused for good, which used to fail every command.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_refuse_info_still_grant_leases() {
    let fleet = fleet(3);
    acl_on_every_node(&fleet, &["SETUSER", "default", "-info"]);
    // The default quarantine (the TTL): a node that could be identified would be left out,
    // since the fleet is seconds old.
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .retry_count(0)
        .build()
        .unwrap();
    for _ in 0..3 {
        let mut lease = redlock.acquire("job").await.unwrap();
        lease.extend().await.unwrap();
        assert!(lease.release().await.is_quorum_free());
    }
    assert_no_lock_keys(&fleet).await;
}

/// `with_ttl` raises the default quarantine to the longest TTL of the client's handles: a
/// node restarted under a longer lease stays out for that lease's TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_quarantine_covers_the_longest_ttl_of_the_handles() {
    let mut fleet = fleet(3);
    let started = Instant::now();
    let short = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .ttl(Duration::from_millis(1_000))
        .retry_count(0)
        .build()
        .unwrap();
    let long = short.with_ttl(Duration::from_millis(2_500)).unwrap();
    wait_until_older_than(started, Duration::from_millis(2_500));
    short.acquire("job").await.unwrap().release().await;
    fleet.restart(0).unwrap();
    let restarted = Instant::now();
    fleet.kill(1).unwrap();
    let back = loop {
        match short.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break restarted.elapsed();
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(6),
            "never counted"
        );
    };
    assert!(
        back >= Duration::from_millis(2_400),
        "counted after {back:?}, within the longer handle's TTL"
    );
    drop(long);
}

/// Declaring the nodes persistent turns the quarantine off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quarantine_can_be_turned_off() {
    let mut fleet = fleet(3);
    let redlock = builder(&fleet).retry_count(0).build().unwrap();
    redlock.acquire("job").await.unwrap().release().await;
    fleet.restart(0).unwrap();
    fleet.kill(1).unwrap();
    // The first command on node 0 may hit the broken connection; the next ones count.
    let started = Instant::now();
    loop {
        match redlock.acquire("job").await {
            Ok(lease) => {
                lease.release().await;
                break;
            }
            Err(e) => {
                assert!(!e.to_string().contains("restart quarantine"), "{e}");
                assert!(started.elapsed() < Duration::from_secs(2), "{e}");
            }
        }
    }
}

/// The README's first lease on a fleet started a moment ago, with the default quarantine:
/// every node answers, and the error says that the quarantine left them out, which nodes,
/// how long is left and how to decide; declaring the nodes persistent gives the lease at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_lease_on_fresh_nodes_names_the_quarantine_and_the_time_left() {
    let fleet = fleet(3);
    let ttl = Duration::from_secs(30);
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .ttl(ttl)
        .retry_count(0)
        .build()
        .unwrap();
    let err = redlock
        .acquire("stock-sync:warehouse-42")
        .await
        .unwrap_err();
    let text = err.to_string();
    let Error::NoQuorum {
        quarantine_wait: Some(wait),
        nodes,
        ..
    } = &err
    else {
        panic!("expected NoQuorum held back by the quarantine, got {err:?}")
    };
    // Nodes up for at most a few seconds: almost a whole TTL is left.
    assert!(
        *wait > ttl - Duration::from_secs(10) && *wait <= ttl,
        "{wait:?}: {text}"
    );
    assert!(text.contains("the restart quarantine leaves out"), "{text}");
    let left_out: Vec<&str> = nodes.quarantined().map(|(address, _)| address).collect();
    assert!(left_out.len() >= 2, "{text}");
    for address in left_out {
        assert!(text.contains(&format!("{address} for another ")), "{text}");
    }
    assert!(text.contains("a quorum can form in "), "{text}");
    assert!(
        text.contains("nodes_persist_every_write")
            && text.contains("\"Persistence and restarts\" in docs/operations.md"),
        "{text}"
    );
    assert_at_most_three_decimals(&text);
    assert!(err.is_retryable());
    assert_eq!(lock_keys(&fleet), 0, "nothing written on quarantined nodes");

    let persistent = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .ttl(ttl)
        .retry_count(0)
        .nodes_persist_every_write()
        .build()
        .unwrap();
    persistent
        .acquire("stock-sync:warehouse-42")
        .await
        .unwrap()
        .release()
        .await;
}

/// Every decimal number in `text` followed by a unit has at most three decimals.
fn assert_at_most_three_decimals(text: &str) {
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == 'µ')) {
        if let Some((whole, fraction)) = word.split_once('.') {
            let digits = fraction.trim_end_matches(|c: char| c.is_alphabetic());
            if !whole.is_empty()
                && whole.chars().all(|c| c.is_ascii_digit())
                && digits.chars().all(|c| c.is_ascii_digit())
                && digits.len() < fraction.len()
            {
                assert!(digits.len() <= 3, "`{word}` in: {text}");
            }
        }
    }
}
