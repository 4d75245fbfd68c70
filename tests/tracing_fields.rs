//! The `tracing` spans and events keep the field names the documentation promises (the
//! Observability section of `redlock::client`): `resource`, `node`, `attempt`, `validity_ms`.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use common::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A span opened or an event emitted, with its fields as text.
#[derive(Debug, Clone)]
struct Record {
    /// The span's name, or the event's message.
    name: String,
    /// For an event: the span it was emitted in.
    within: Option<String>,
    fields: BTreeMap<String, String>,
}

/// Whether `target` is the library's (not, say, the test fleet's `redlock_tests`).
fn ours(target: &str) -> bool {
    target == "redlock" || target.starts_with("redlock::")
}

/// Keeps every span and event of the `redlock` targets.
#[derive(Clone, Default)]
struct Captured {
    spans: Arc<Mutex<Vec<Record>>>,
    events: Arc<Mutex<Vec<Record>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Captured {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        if !ours(attrs.metadata().target()) {
            return;
        }
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.spans.lock().unwrap().push(Record {
            name: attrs.metadata().name().to_owned(),
            within: None,
            fields,
        });
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if !ours(event.metadata().target()) {
            return;
        }
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let name = fields.remove("message").unwrap_or_default();
        let within = ctx.event_span(event).map(|span| span.name().to_owned());
        self.events.lock().unwrap().push(Record {
            name,
            within,
            fields,
        });
    }
}

impl Captured {
    fn event(&self, message: &str) -> Record {
        first_named(&self.events, "event", message)
    }

    fn events_where(&self, wanted: impl Fn(&Record) -> bool) -> Vec<Record> {
        let events = self.events.lock().unwrap();
        events.iter().filter(|e| wanted(e)).cloned().collect()
    }

    fn span(&self, name: &str) -> Record {
        first_named(&self.spans, "span", name)
    }
}

/// The first record called `name`; `kind` ("span" or "event") names the list when it has none.
fn first_named(records: &Mutex<Vec<Record>>, kind: &str, name: &str) -> Record {
    let records = records.lock().unwrap();
    records
        .iter()
        .find(|r| r.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} {name:?} in {records:#?}"))
}

fn has(record: &Record, names: &[&str]) {
    for name in names {
        assert!(
            record.fields.contains_key(*name),
            "{:?} lacks `{name}`: {record:?}",
            record.name
        );
    }
}

// The current-thread runtime keeps every task on the thread where the subscriber is set.
#[tokio::test]
async fn spans_and_events_carry_the_documented_fields() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));
    let mut fleet = fleet(5);
    fleet.kill(4).unwrap();
    let redlock = builder(&fleet).build().unwrap();
    redlock.connect().await;
    // Node 3 stops answering: each operation returns at a quorum of 0, 1 and 2, and node 3's
    // timeouts come after it, from requests finishing in the background.
    fleet.pause(3).unwrap();

    let mut lease = redlock.acquire("observed").await.unwrap();
    lease.extend().await.unwrap();
    lease.release().await;

    for name in ["acquire", "extend", "release"] {
        let span = captured.span(name);
        assert_eq!(span.fields["resource"], "observed", "{span:?}");
    }
    let acquired = captured.event("lease acquired");
    // `fence` is recorded only for a lease that carries a token.
    has(&acquired, &["resource", "attempt", "validity_ms"]);
    assert_eq!(acquired.fields["attempt"], "1");
    assert_eq!(acquired.within.as_deref(), Some("acquire"));
    let validity: u64 = acquired.fields["validity_ms"].parse().unwrap();
    assert!(validity > 9_000 && validity < 10_000, "{acquired:?}");

    // The dead node shows up by address (no password), inside the operation's span.
    let failed = captured.event("node request failed");
    has(&failed, &["node", "error"]);
    assert_eq!(failed.fields["node"], fleet.addr(4).to_string());
    assert_eq!(failed.within.as_deref(), Some("acquire"));

    has(
        &captured.event("lease extended"),
        &["resource", "extensions", "validity_ms"],
    );
    let released = captured.event("lease released");
    has(
        &released,
        &["resource", "released", "not_held", "in_flight"],
    );
    // The release returns once a quorum let go: nodes 0, 1 and 2.
    assert_eq!(released.fields["released"], "3", "{released:?}");
    // The paused node's timeouts, logged after each operation returned (`settle` waits for
    // them), are still attributed to their operations.
    redlock.settle().await;
    let stalled =
        captured.events_where(|e| e.fields.get("node") == Some(&fleet.addr(3).to_string()));
    let within: Vec<_> = stalled.iter().map(|e| e.within.as_deref()).collect();
    assert_eq!(
        within,
        [Some("acquire"), Some("extend"), Some("release")],
        "{stalled:#?}"
    );
    fleet.resume(3).unwrap();
    assert_no_lock_keys(&fleet).await;
}

/// The warnings about nodes come once per node, however many connections and leases follow.
fn once_per_node(captured: &Captured, starts: &str, fleet: &redlock_tests::RedisFleet) {
    let warned = captured.events_where(|e| e.name.starts_with(starts));
    let mut nodes: Vec<String> = warned.iter().map(|e| e.fields["node"].clone()).collect();
    nodes.sort();
    let mut expected: Vec<String> = (0..fleet.len())
        .map(|i| fleet.addr(i).to_string())
        .collect();
    expected.sort();
    assert_eq!(nodes, expected, "{warned:#?}");
}

#[tokio::test]
async fn a_node_that_may_evict_keys_is_reported_once() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));
    let options = redlock_tests::FleetOptions {
        extra_args: vec!["--maxmemory-policy".into(), "allkeys-lru".into()],
        ..redlock_tests::FleetOptions::default()
    };
    let fleet = fleet_with(3, options);
    let redlock = builder(&fleet).build().unwrap();
    for _ in 0..3 {
        redlock.acquire("evictable").await.unwrap().release().await;
    }
    // Each operation returns at a quorum; the slowest node's first connection, and the
    // warning its check logs, may still be on its way: `settle` waits for it.
    redlock.settle().await;
    once_per_node(&captured, "the node may evict keys", &fleet);
    let warned = captured.events_where(|e| e.name.starts_with("the node may evict keys"));
    assert!(
        warned.iter().all(|e| e.fields["policy"] == "allkeys-lru"),
        "{warned:#?}"
    );
}

#[tokio::test]
async fn a_node_that_refuses_info_is_reported_once_and_still_counted() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));
    let fleet = fleet(3);
    acl_on_every_node(&fleet, &["SETUSER", "default", "-info"]);
    // The default quarantine: a young node that could be identified would be left out.
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .build()
        .unwrap();
    for _ in 0..3 {
        redlock
            .acquire("unidentified")
            .await
            .unwrap()
            .release()
            .await;
    }
    redlock.settle().await;
    once_per_node(&captured, "cannot read the node's identity", &fleet);
}

/// The default restart quarantine is this client's own TTL, which says nothing of the others'
/// leases on the same nodes. A lost round that reads another owner's key living longer than
/// the quarantine warns, once per node; a key within the quarantine does not.
#[tokio::test]
async fn another_clients_lease_longer_than_the_quarantine_is_reported_once_per_node() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));
    let started = std::time::Instant::now();
    let fleet = fleet(3);
    let ttl = std::time::Duration::from_secs(1);
    // Older than the quarantine: no node is left out for being young, so every round asks
    // every node.
    wait_until_older_than(started, ttl);
    // The default quarantine: the TTL.
    let redlock = redlock::Redlock::builder()
        .nodes(fleet.urls())
        .ttl(ttl)
        .retry_count(1)
        .build()
        .unwrap();
    let warning = "another client's lease outlives";
    // Within the quarantine: covered, nothing to say. (The second round reads how long the
    // key has left; it may also find it gone and win.)
    let short = format!("{PREFIX}short");
    fleet
        .occupy(&[0, 1, 2], &short, std::time::Duration::from_millis(900))
        .unwrap();
    if let Ok(lease) = redlock.acquire("short").await {
        lease.release().await;
    }
    assert!(
        captured
            .events_where(|e| e.name.starts_with(warning))
            .is_empty()
    );
    // Another client's minute-long lease: the first round finds it taken, the second reads
    // its remaining time.
    let long = format!("{PREFIX}long");
    fleet
        .occupy(&[0, 1, 2], &long, std::time::Duration::from_secs(60))
        .unwrap();
    for _ in 0..3 {
        assert!(redlock.acquire("long").await.is_err());
    }
    redlock.settle().await;
    // A round is lost once two nodes found the key taken, and only the replies in by then
    // are read: at least those two nodes warn, and no node twice.
    let warned = captured.events_where(|e| e.name.starts_with(warning));
    let mut nodes: Vec<&str> = warned.iter().map(|e| e.fields["node"].as_str()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    assert!(
        nodes.len() == warned.len() && warned.len() >= 2,
        "{warned:#?}"
    );
    for event in warned {
        assert_eq!(event.fields["quarantine_ms"], "1000", "{event:?}");
        let remaining: u64 = event.fields["remaining_ms"].parse().unwrap();
        assert!(remaining > 50_000, "{event:?}");
        assert_eq!(event.within.as_deref(), Some("acquire"), "{event:?}");
    }
    fleet.vacate(&[0, 1, 2], &long).unwrap();
    assert_no_lock_keys(&fleet).await;
}
