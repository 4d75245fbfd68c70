//! Opening the connections ahead of the first lease (`Redlock::connect`), and waiting for the
//! background requests before a process exits (`Redlock::settle`).

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::{Duration, Instant};

use common::*;
use redlock::Redlock;
use redlock::core::NodeFailure;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_reports_every_node_and_whether_a_quorum_is_open() {
    let mut fleet = fleet(5);
    let redlock = builder(&fleet).build().unwrap();
    fleet.kill(3).unwrap();
    fleet.kill(4).unwrap();

    let report = redlock.connect().await;
    assert_eq!(report.connected(), 3, "{report}");
    assert!(report.has_quorum());
    for (index, (address, status)) in report.nodes.iter().enumerate() {
        assert_eq!(**address, fleet.addr(index).to_string());
        let expected = if index < 3 {
            Ok(())
        } else {
            Err(NodeFailure::Refused)
        };
        assert_eq!(*status, expected, "node {index}");
    }
    let text = report.to_string();
    assert!(text.starts_with("3 of 5 nodes connected ("), "{text}");
    assert!(text.contains(&fleet.addr(4).to_string()), "{text}");

    // The connections are open: one round is enough.
    let lease = redlock.try_acquire("warm").await.unwrap();
    lease.release().await;

    fleet.kill(2).unwrap();
    let report = redlock.connect().await;
    assert_eq!(report.connected(), 2, "{report}");
    assert!(!report.has_quorum());
    assert_no_lock_keys(&fleet).await;
}

/// A process that exits right after `release` cuts off what still runs in the background.
/// Here node 4 is paused, so the lease's `SET` on it waits in the node's socket when the
/// acquisition and then the release return at a quorum, and the release to node 4 waits
/// behind that `SET` until it times out. `settle` lets the release go out before the runtime
/// goes; without it the `SET` lands alone when node 4 resumes and the key stays until its
/// TTL (checked by hand: without the `settle` call this test fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_lets_a_short_lived_process_leave_no_key_behind() {
    let mut fleet = fleet(5);
    let urls = fleet.urls();
    let (connected, on_connected) = std::sync::mpsc::channel();
    let (paused, on_paused) = std::sync::mpsc::channel::<()>();

    // The "process": its own runtime, dropped when the job is done.
    let process = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let redlock = fresh(Redlock::builder()).nodes(urls).build().unwrap();
            connected.send(redlock.connect().await.connected()).unwrap();
            on_paused.recv().unwrap();
            // Measured from before the request to node 4 was sent: its timeout cannot have
            // passed sooner, however late this thread runs.
            let started = Instant::now();
            let lease = redlock.acquire("short-lived").await.unwrap();
            let report = lease.release().await;
            assert!(report.is_quorum_free(), "{report:?}");
            redlock.settle().await;
            (started.elapsed(), redlock.config().node_timeout())
        })
    });
    assert_eq!(on_connected.recv().unwrap(), 5);
    fleet.pause(4).unwrap();
    paused.send(()).unwrap();
    let (settled_in, node_timeout) = process.join().unwrap();
    fleet.resume(4).unwrap();
    assert!(
        settled_in >= node_timeout,
        "settle returned after {settled_in:?}, before node 4's requests timed out"
    );
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settle_returns_at_once_when_nothing_runs_in_the_background() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let started = Instant::now();
    redlock.settle().await;
    let lease = redlock.acquire("idle").await.unwrap();
    lease.release().await;
    redlock.settle().await;
    // Settled means every node answered: the release left nothing behind.
    assert_eq!(lock_keys(&fleet), 0, "{}", describe_keys(&fleet));
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// Durations too long to add to a clock reading are as good as forever, never a panic: a
/// connect timeout of `Duration::MAX`, and a restart quarantine of `Duration::MAX` meeting a
/// young node and a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durations_too_long_to_add_do_not_overflow() {
    let mut fleet = fleet(3);
    let redlock = Redlock::builder()
        .nodes(fleet.urls())
        .connect_timeout(Duration::MAX)
        .restart_quarantine(Some(Duration::MAX))
        .retry_count(0)
        .build()
        .unwrap();
    let report = redlock.connect().await;
    assert_eq!(report.connected(), 3, "{report}");
    // Every node is younger than the quarantine: left out, and the error says so.
    let err = redlock.acquire("forever").await.unwrap_err();
    assert!(err.to_string().contains("restart quarantine"), "{err}");
    fleet.restart(0).unwrap();
    for _ in 0..3 {
        let _ = redlock.acquire("forever").await;
    }
    assert_no_lock_keys(&fleet).await;
}

/// A kept lease whose work stopped, released in the background (`with_lock` cut by a
/// timeout, `release_in_background`): `settle` waits for that release, as its docs say, so
/// a process that exits right after it leaves no key. The keeper's release runs in its own
/// task, which has not run yet when `settle` is called; uncounted, `settle` returned at once
/// and the runtime's end took the release with it (the keys stayed until their TTL).
#[test]
fn settle_waits_for_the_release_of_a_kept_lease_whose_work_stopped() {
    let fleet = fleet(3);
    for (case, stop) in ["cut", "in-background"].into_iter().enumerate() {
        let urls = fleet.urls();
        // The "process": its own runtime, dropped when the job is done.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let redlock = fresh(Redlock::builder())
                .nodes(urls)
                .ttl(Duration::from_secs(10))
                .build()
                .unwrap();
            let resource = format!("kept-{stop}");
            if case == 0 {
                let work = |_| std::future::pending::<()>();
                let cut = tokio::time::timeout(
                    Duration::from_millis(100),
                    redlock.with_lock(&resource, work),
                )
                .await;
                assert!(cut.is_err(), "the work never ends");
            } else {
                let lease = redlock.acquire(&resource).await.unwrap();
                // Nothing else in the background: `settle` has only the release to wait for.
                redlock.settle().await;
                lease
                    .keep_alive(redlock::KeepAlive::default())
                    .release_in_background();
            }
            redlock.settle().await;
        });
        drop(runtime);
        assert_eq!(lock_keys(&fleet), 0, "{stop}: {}", describe_keys(&fleet));
    }
}
