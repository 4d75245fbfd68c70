//! One server under two names is one vote: nodes are told apart by their `run_id`, read on
//! every new connection, not by the address strings they were configured with.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use common::*;
use redlock::Error;
use redlock::core::{NodeFailure, NodeId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_server_under_two_names_votes_once() {
    let mut fleet = fleet(2);
    // Node 0 twice: by IP and by name. The address strings differ, so the builder's own
    // duplicate check lets them through.
    let urls = [
        fleet.url(0),
        format!("redis://localhost:{}", fleet.port(0)),
        fleet.url(1),
    ];
    let redlock = fresh(redlock::Redlock::builder())
        .nodes(urls)
        .retry_count(0)
        .build()
        .unwrap();
    let report = redlock.connect().await;
    // The two names are identified in parallel; the one identified second is refused.
    let twin = match (&report.nodes[0].1, &report.nodes[1].1) {
        (Ok(()), Err(NodeFailure::Duplicate { of })) if *of == NodeId::new(0) => 1,
        (Err(NodeFailure::Duplicate { of }), Ok(())) if *of == NodeId::new(1) => 0,
        _ => panic!("one name of node 0 must be refused: {report}"),
    };
    assert!(report.to_string().contains("same server"), "{report}");
    assert!(report.has_quorum(), "{report}");

    // Nodes 0 and 2 grant; with the real second server stopped, only one server is left,
    // and an extension must not count it twice.
    let mut lease = redlock.acquire("twice").await.unwrap();
    fleet.pause(1).unwrap();
    let err = lease.extend().await.unwrap_err();
    fleet.resume(1).unwrap();
    assert!(matches!(err, Error::ExtendFailed { .. }), "{err}");
    let report = lease.release().await;
    assert_eq!(report.released(), 2, "{report:?}");
    assert!(matches!(
        report.nodes[twin],
        redlock::core::NodeStatus::Failed(NodeFailure::Duplicate { .. })
    ));
    assert_no_lock_keys(&fleet).await;
}
