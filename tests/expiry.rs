//! Leases that outlive their validity: release and extend must not harm the next holder.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::Error;
use redlock::core::FailureReason;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_an_expired_lease_leaves_the_new_holders_key() {
    let fleet = fleet(5);
    let short = builder(&fleet)
        .ttl(Duration::from_millis(200))
        .build()
        .unwrap();
    let late = short.acquire("expiring").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!late.is_valid());

    let current = short.acquire("expiring").await.unwrap();
    let token = current.token().to_string();
    let report = late.release().await;
    assert_eq!(report.released(), 0, "{report:?}");
    assert!(
        report.is_quorum_free(),
        "an expired lease releases cleanly: {report:?}"
    );

    let still_held = (0..5)
        .filter(|&i| {
            fleet.keys_with_prefix(i, PREFIX).unwrap()
                == [(current.key().to_owned(), Some(token.clone()))]
        })
        .count();
    assert!(still_held >= 3, "the new holder lost its keys");
    current.release().await;
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_an_expired_lease_fails_and_sends_nothing() {
    let fleet = fleet(3);
    let short = builder(&fleet)
        .ttl(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut lease = short.acquire("late-extend").await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = lease.extend().await.unwrap_err();
    assert!(matches!(err, Error::LeaseExpired { .. }), "{err:?}");
    assert_eq!(
        lock_keys(&fleet),
        0,
        "extension re-created a key: {}",
        describe_keys(&fleet)
    );
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_never_recreates_a_key_and_a_failed_one_deletes_nothing() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let mut lease = redlock.acquire("forgetful").await.unwrap();
    // Wait for the straggler SET so that all three nodes hold the key.
    assert!(eventually(Duration::from_secs(1), || async { lock_keys(&fleet) == 3 }).await);

    // Two nodes forget the key (as after a restart without persistence).
    for i in [0, 1] {
        let mut c = fleet.connect(i).unwrap();
        let _: () = redis::cmd("DEL").arg(lease.key()).query(&mut c).unwrap();
    }
    let err = lease.extend().await.unwrap_err();
    let Error::ExtendFailed { reason, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*reason, FailureReason::NotHeld);
    assert!(
        lease.is_valid(),
        "a failed extension leaves the lease as it was"
    );
    // Not re-created on the forgetful nodes, not deleted on the third.
    assert_eq!(fleet.keys_with_prefix(0, PREFIX).unwrap(), []);
    assert_eq!(fleet.keys_with_prefix(1, PREFIX).unwrap(), []);
    assert_eq!(fleet.keys_with_prefix(2, PREFIX).unwrap().len(), 1);
    lease.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_renews_validity_up_to_the_longest_hold() {
    let fleet = fleet(3);
    let redlock = builder(&fleet)
        .ttl(Duration::from_millis(500))
        .max_hold(Duration::from_millis(600))
        .build()
        .unwrap();
    let mut lease = redlock.acquire("renewed").await.unwrap();
    let first_deadline = lease.valid_until();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let validity = lease.extend().await.unwrap();
    assert!(
        validity > Duration::from_millis(400),
        "validity {validity:?}"
    );
    assert!(lease.valid_until() > first_deadline);
    // The keys' TTL was reset on the nodes too.
    let mut c = fleet.connect(0).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg(lease.key()).query(&mut c).unwrap();
    assert!(pttl > 400, "PTTL {pttl}");

    // Past the longest hold (600 ms after the grant) nothing more is sent.
    tokio::time::sleep(Duration::from_millis(320)).await;
    let err = lease.extend().await.unwrap_err();
    assert!(
        matches!(err, Error::HoldLimit { max_hold, .. } if max_hold == Duration::from_millis(600)),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(lease.extensions(), 1);
    lease.release().await;
    assert_no_lock_keys(&fleet).await;
}
