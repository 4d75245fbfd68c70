//! Acquire, contend and release against real redis-server nodes.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use redlock::core::Reply;
use redlock::{Error, Redlock};
use redlock_tests::FleetOptions;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_holds_a_quorum_and_release_clears_every_node() {
    let fleet = fleet(5);
    let redlock = builder(&fleet).build().unwrap();

    let lease = redlock.acquire("stock-sync:warehouse-42").await.unwrap();
    assert!(lease.is_valid());
    assert!(lease.remaining() <= Duration::from_millis(10_000 - 102));
    assert_eq!(lease.key(), "redlock:stock-sync:warehouse-42");
    assert_eq!(lease.resource(), "stock-sync:warehouse-42");

    let token = lease.token().to_string();
    let holders = (0..5)
        .filter(|&i| {
            fleet.keys_with_prefix(i, PREFIX).unwrap()
                == [(
                    "redlock:stock-sync:warehouse-42".to_owned(),
                    Some(token.clone()),
                )]
        })
        .count();
    assert!(holders >= 3, "only {holders} nodes hold our token");

    let report = lease.release().await;
    assert!(report.is_quorum_free());
    assert_eq!(report.failed(), 0);
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_resource_is_refused_with_per_node_outcomes() {
    let fleet = fleet(5);
    let first = builder(&fleet).build().unwrap();
    let second = builder(&fleet)
        .retry_count(1)
        .retry_delay(Duration::ZERO)
        .build()
        .unwrap();

    let lease = first.acquire("report").await.unwrap();
    let err = second.acquire("report").await.unwrap_err();
    let Error::Taken {
        attempts, nodes, ..
    } = &err
    else {
        panic!("expected Taken, got {err:?}")
    };
    assert_eq!(*attempts, 2);
    // The second round asks for the holder's remaining time too: *taken for 9.9 s*.
    let taken = nodes.count(|s| s.reply().is_some_and(Reply::is_taken));
    assert!(taken >= 3, "{err}");
    assert!(err.is_retryable());
    assert!(
        err.to_string().contains("127.0.0.1:"),
        "names the nodes: {err}"
    );

    // Other resources are independent.
    second.try_acquire("other").await.unwrap().release().await;

    lease.release().await;
    second.try_acquire("report").await.unwrap().release().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_tasks_never_share_the_critical_section() {
    const TASKS: usize = 16;
    const TOTAL: usize = 2_000;
    let fleet = fleet(5);
    let redlock = builder(&fleet)
        .retry_count(10_000)
        .retry_delay(Duration::ZERO)
        .retry_jitter(Duration::from_millis(5))
        .build()
        .unwrap();

    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (redlock, inside, done, overlaps) = (
            redlock.clone(),
            inside.clone(),
            done.clone(),
            overlaps.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut mine = 0;
            while done.load(Ordering::SeqCst) < TOTAL {
                let lease = redlock.acquire("contended").await.expect("acquire");
                // The detector: nobody else may be inside while we are.
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                tokio::task::yield_now().await;
                assert!(lease.is_valid(), "critical section outlived the lease");
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                mine += 1;
                lease.release().await;
            }
            mine
        }));
    }
    let mut per_task = Vec::new();
    for task in tasks {
        per_task.push(task.await.unwrap());
    }
    let total: usize = per_task.iter().sum();
    assert!(total >= TOTAL, "only {total} acquisitions");
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_no_lock_keys(&fleet).await;
}

/// A dropped lease's release joins the resource's lanes when the lease is dropped, not when
/// its background task first runs: the next round of the same task waits behind it on every
/// node, as after any release. Queued only once its task ran (on a current-thread runtime,
/// after the caller's next await), the release was overtaken by the next `SET`s, which found
/// the dropped lease's key on every node.
#[tokio::test(flavor = "current_thread")]
async fn a_round_right_after_a_dropped_lease_waits_for_its_release() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let lease = redlock.acquire("dropped-then-again").await.unwrap();
    drop(lease);
    let again = redlock.try_acquire("dropped-then-again").await;
    assert!(again.is_ok(), "{again:?}");
    again.unwrap().release().await;
    redlock.settle().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_lease_is_released_in_the_background() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let lease = redlock.acquire("forgotten").await.unwrap();
    assert!(lock_keys(&fleet) >= 2);
    drop(lease);
    assert_no_lock_keys(&fleet).await;
    redlock
        .try_acquire("forgotten")
        .await
        .unwrap()
        .release()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_nodes_and_custom_prefix() {
    let fleet = fleet_with(
        3,
        FleetOptions {
            unix_socket: true,
            ..FleetOptions::default()
        },
    );
    let redlock = fresh(Redlock::builder())
        .nodes((0..3).map(|i| fleet.unix_url(i)))
        .key_prefix("jobs/")
        .build()
        .unwrap();
    let lease = redlock.acquire("nightly").await.unwrap();
    assert_eq!(lease.key(), "jobs/nightly");
    assert!(fleet.count_keys("jobs/").unwrap() >= 2);
    let report = lease.release().await;
    assert!(report.released() >= 2, "{report:?}");
    let clean = eventually(Duration::from_secs(2), || async {
        fleet.count_keys("jobs/").unwrap() == 0
    })
    .await;
    assert!(clean);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_protected_nodes() {
    let options = FleetOptions {
        extra_args: vec!["--requirepass".into(), "hunter2-secret".into()],
        ..FleetOptions::default()
    };
    let fleet = fleet_with(3, options);
    let url = |i: usize, password: &str| format!("redis://:{password}@127.0.0.1:{}", fleet.port(i));

    let good = fresh(Redlock::builder())
        .nodes((0..3).map(|i| url(i, "hunter2-secret")))
        .build()
        .unwrap();
    good.acquire("guarded").await.unwrap().release().await;

    // A wrong password is not a passing condition: no retry is spent on it (the default
    // policy would allow three), and the error says so.
    let bad = fresh(Redlock::builder())
        .nodes((0..3).map(|i| url(i, "wrong-password")))
        .build()
        .unwrap();
    let err = bad.acquire("guarded").await.unwrap_err();
    assert!(matches!(err, Error::Denied { attempts: 1, .. }), "{err:?}");
    assert!(!err.is_retryable(), "{err}");
    assert_eq!(bad.stats().rounds, 1);
    // Without a password at all, the same.
    let anonymous = fresh(Redlock::builder())
        .nodes((0..3).map(|i| format!("redis://127.0.0.1:{}", fleet.port(i))))
        .build()
        .unwrap();
    let err = anonymous.acquire("guarded").await.unwrap_err();
    assert!(matches!(err, Error::Denied { .. }), "{err:?}");
    // One refusing node among answering ones is not a denial: the others decide.
    let mixed = fresh(Redlock::builder())
        .nodes((0..3).map(|i| {
            url(
                i,
                if i == 0 {
                    "wrong-password"
                } else {
                    "hunter2-secret"
                },
            )
        }))
        .build()
        .unwrap();
    mixed.acquire("guarded").await.unwrap().release().await;
    let text = format!("{err} {err:?} {bad:?}");
    assert!(!text.contains("wrong-password"), "password leaked: {text}");
    assert!(!text.contains("hunter2-secret"), "password leaked: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_resource_names_are_refused() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    assert!(matches!(redlock.acquire("").await, Err(Error::Resource(_))));
    let huge = "x".repeat(10_000);
    assert!(matches!(
        redlock.acquire(&huge).await,
        Err(Error::Resource(_))
    ));
    // Separators, spaces, non-ASCII: all fine, and each is its own key.
    for name in ["a:b", "a b", "café", "a\nb"] {
        redlock.acquire(name).await.unwrap().release().await;
    }
    assert_no_lock_keys(&fleet).await;
}

/// Every command `node` has run so far, by name, from one read of `INFO commandstats`.
fn commands(fleet: &redlock_tests::RedisFleet, node: usize) -> Vec<(String, u64)> {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut fleet.connect(node).unwrap())
        .unwrap();
    stats
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let calls = rest.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// An uncontended lease costs each node one `SET` (its `GET` option names a holder only
/// when there is one) and one `EVALSHA` (the release, by the hash of the script the
/// connection loaded with its identification), and no other request: what tells a
/// waiter's wake-up from a flood of messages adds no request to the path nobody contends,
/// the release publishes nothing when no waiter marked the key, and the script is not sent
/// whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lease_costs_each_node_one_set_and_one_evalsha() {
    const LEASES: u64 = 20;
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    let before: Vec<_> = (0..fleet.len()).map(|i| commands(&fleet, i)).collect();
    for _ in 0..LEASES {
        redlock.acquire("quiet").await.unwrap().release().await;
    }
    redlock.settle().await;
    for (node, before) in before.iter().enumerate() {
        let after = commands(&fleet, node);
        let ran: Vec<(String, u64)> = after
            .into_iter()
            .map(|(name, calls)| {
                let was = before
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(0, |(_, c)| *c);
                (name, calls - was)
            })
            // The INFO of the `before` reading itself, and the two `CLIENT SETINFO`s that
            // open the `after` reading's connection (counted as `client` by Redis 6.2, as
            // `client|setinfo` by Redis 7.2 and Valkey, not at all by Redis 7.0, which
            // refuses them).
            .filter(|(name, calls)| {
                let setinfo = name == "client" || name == "client|setinfo";
                *calls > 0 && !(name == "info" && *calls == 1) && !(setinfo && *calls == 2)
            })
            .collect();
        let mut ran = ran;
        ran.sort();
        // Two requests per lease: the SET and the EVALSHA of the release script, whose own
        // GET, HKEYS (whose marks, if any: none here) and DEL the node counts too; no
        // PUBLISH, since no waiter marked the key (one per release before the waiting
        // marks).
        let expected: Vec<(String, u64)> = ["del", "evalsha", "get", "hkeys", "set"]
            .iter()
            .map(|name| ((*name).to_owned(), LEASES))
            .collect();
        assert_eq!(ran, expected, "node {node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_acquisition_by_the_same_client_is_told_leases_are_not_re_entrant() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let other = builder(&fleet).build().unwrap();

    let lease = redlock.acquire("report").await.unwrap();
    let again = redlock.try_acquire("report").await.unwrap_err();
    assert!(matches!(again, Error::Taken { .. }), "{again:?}");
    let message = again.to_string();
    // Before Redis 7.0 a refusal does not say who holds the key, and a round after which
    // the acquisition gives up reads no holder: the message cannot tell (documented).
    let unread = again
        .nodes()
        .unwrap()
        .count(|s| s.reply() == Some(Reply::TakenUnread));
    if unread == 0 {
        assert!(message.contains("this same client"), "{message}");
        assert!(message.contains("not re-entrant"), "{message}");
    } else {
        assert!(message.contains("another owner"), "{message}");
    }

    // Another client's refusal names another owner, as before.
    let refused = other.try_acquire("report").await.unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("another owner"), "{message}");
    assert!(!message.contains("re-entrant"), "{message}");

    // Once released, the client's own tokens are forgotten: a later owner elsewhere is
    // another owner again.
    lease.release().await;
    let elsewhere = other.acquire("report").await.unwrap();
    let message = redlock.try_acquire("report").await.unwrap_err().to_string();
    assert!(message.contains("another owner"), "{message}");
    elsewhere.release().await;
    assert_no_lock_keys(&fleet).await;
}

/// A node URL with a user, a password and a database: the client's own connections
/// authenticate as that user (`AUTH user password`), select the database, and give the node
/// the library's name, as redis-rs' connections do; the lease's keys are in that database
/// alone. A wrong password for the user is a denial.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_url_with_a_user_and_a_database() {
    let fleet = fleet(3);
    for i in 0..3 {
        let mut admin = fleet.connect(i).unwrap();
        redis::cmd("ACL")
            .arg(&["SETUSER", "locker", "on", ">s3cret", "~*", "&*", "+@all"])
            .query::<()>(&mut admin)
            .unwrap();
    }
    let url = |i: usize, password: &str| {
        format!("redis://locker:{password}@127.0.0.1:{}/3", fleet.port(i))
    };
    let redlock = fresh(Redlock::builder())
        .nodes((0..3).map(|i| url(i, "s3cret")))
        .build()
        .unwrap();
    let lease = redlock.acquire("in-database-3").await.unwrap();
    // Granted at a quorum: the third node's `SET` may still be on its way.
    let everywhere = eventually(Duration::from_secs(5), || async {
        (0..3).all(|i| {
            let mut admin = fleet.connect(i).unwrap();
            redis::cmd("SELECT").arg(3).query::<()>(&mut admin).unwrap();
            redis::cmd("DBSIZE").query::<u64>(&mut admin).unwrap() == 1
        })
    })
    .await;
    assert!(
        everywhere,
        "the lease's key is not in database 3 of every node"
    );
    for i in 0..3 {
        let mut admin = fleet.connect(i).unwrap();
        let in_db0: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        assert_eq!(
            in_db0,
            Vec::<String>::new(),
            "node {i}: nothing in database 0"
        );
        redis::cmd("SELECT").arg(3).query::<()>(&mut admin).unwrap();
        let in_db3: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        assert_eq!(in_db3.len(), 1, "node {i}: the lease's key in database 3");
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
        let ours = clients
            .lines()
            .find(|line| line.contains(" user=locker "))
            .unwrap_or_else(|| panic!("node {i}: no connection as locker in {clients}"));
        assert!(ours.contains(" db=3 "), "{ours}");
        // Servers before 7.2 keep no library name (and refuse `CLIENT SETINFO`).
        if ours.contains(" lib-name=") {
            assert!(ours.contains(" lib-name=redlock-quorum "), "{ours}");
        }
    }
    lease.release().await;
    for i in 0..3 {
        let mut admin = fleet.connect(i).unwrap();
        redis::cmd("SELECT").arg(3).query::<()>(&mut admin).unwrap();
        let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
        assert_eq!(left, Vec::<String>::new(), "node {i}: released");
    }
    let wrong = fresh(Redlock::builder())
        .nodes((0..3).map(|i| url(i, "wrong")))
        .build()
        .unwrap();
    let err = wrong.acquire("in-database-3").await.unwrap_err();
    assert!(matches!(err, Error::Denied { attempts: 1, .. }), "{err:?}");
}

/// Nodes in Redis Cluster mode, each owning every hash slot (a one-shard cluster, which
/// docs/operations.md allows as one Redlock node). The release and mark scripts name the
/// lock key and its waiting marks' key, and a cluster member refuses a script whose keys
/// lie in two slots (`CROSSSLOT`) even when it owns both: with the marks' key made of the
/// lock key and a suffix, every release failed and left its keys until their TTL, and the
/// marks failed too. The marks' key now has the lock key as its hash tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_and_marks_run_on_cluster_members() {
    let options = FleetOptions {
        extra_args: [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
        ]
        .map(String::from)
        .to_vec(),
        ..FleetOptions::default()
    };
    let fleet = fleet_with(3, options);
    for i in 0..3 {
        let mut connection = fleet.connect(i).unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg("ADDSLOTS")
            .arg((0..16_384).collect::<Vec<u16>>())
            .query(&mut connection)
            .unwrap();
    }
    let ready = eventually(Duration::from_secs(10), || async {
        (0..3).all(|i| {
            let info: String = redis::cmd("CLUSTER")
                .arg("INFO")
                .query(&mut fleet.connect(i).unwrap())
                .unwrap();
            info.contains("cluster_state:ok")
        })
    })
    .await;
    assert!(ready, "the nodes did not take their slots");
    // The node's own hashing agrees: one slot for the lock key and its marks' key.
    let key = redlock::core::LockKey::new(PREFIX, "report").unwrap();
    let slot = |name: &str| -> u16 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(name)
            .query(&mut fleet.connect(0).unwrap())
            .unwrap()
    };
    assert_eq!(slot(&key.wait_key()), slot(key.as_str()));

    let holder = builder(&fleet).build().unwrap();
    let lease = holder.try_acquire("report").await.unwrap();
    let report = lease.release().await;
    assert_eq!(report.released(), 3, "{report:?}");
    assert_eq!(fleet.count_keys(PREFIX).unwrap(), 0);

    // A waiter marks the nodes and is woken by the release's notification, long before its
    // retry timer.
    let waiter = builder(&fleet)
        .retry_delay(Duration::from_secs(60))
        .retry_jitter(Duration::ZERO)
        .node_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let lease = holder.acquire("report").await.unwrap();
    let task = tokio::spawn(async move {
        let lease = waiter
            .acquire_timeout("report", Duration::from_secs(120))
            .await
            .unwrap();
        lease.release().await.released()
    });
    // Marked where its lost round found the holder: a quorum at least.
    let marked = eventually(Duration::from_secs(10), || async {
        wait_marks(&fleet, key.as_str()).iter().sum::<u64>() >= 2
    })
    .await;
    assert!(marked, "marks: {:?}", wait_marks(&fleet, key.as_str()));
    assert_eq!(lease.release().await.released(), 3);
    let released = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("woken by the release, not by its retry timer")
        .unwrap();
    // Granted on a quorum at least (a node may still have held the first lease's key when
    // the waiter's round reached it), and released wherever it was taken.
    assert!(released >= 2, "released on {released} nodes");
    holder.settle().await;
    assert_eq!(fleet.count_keys(PREFIX).unwrap(), 0);
}
