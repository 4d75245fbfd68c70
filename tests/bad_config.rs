//! Bad input, table-driven: every configuration field at and past its limits, and resource
//! names that are empty, huge, binary-looking, non-ASCII or full of separators.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use common::*;
use redlock::core::{MAX_RESOURCE_LEN, MAX_RETRY_DELAY, MAX_TTL, RetryPolicy};
use redlock::{Error, Redlock, RedlockBuilder};

/// Three syntactically fine nodes; nothing listens there, nothing is connected.
fn three() -> RedlockBuilder {
    Redlock::builder().nodes([
        "redis://127.0.0.1:1",
        "redis://127.0.0.1:2",
        "redis://127.0.0.1:3",
    ])
}

type Tweak = fn(RedlockBuilder) -> RedlockBuilder;

/// `None`: the configuration builds; `Some(field)`: it is refused naming `field`.
struct Case {
    name: &'static str,
    tweak: Tweak,
    refused: Option<&'static str>,
}

const fn ok(name: &'static str, tweak: Tweak) -> Case {
    Case {
        name,
        tweak,
        refused: None,
    }
}

const fn refused(name: &'static str, field: &'static str, tweak: Tweak) -> Case {
    Case {
        name,
        tweak,
        refused: Some(field),
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const CASES: &[Case] = &[
    // nodes
    refused("no node at all", "nodes", |_| Redlock::builder()),
    ok("one node (weak, allowed)", |_| {
        Redlock::builder().node("redis://127.0.0.1:1")
    }),
    ok("four nodes (even, allowed)", |b| {
        b.node("redis://127.0.0.1:4")
    }),
    refused("an http URL", "nodes[3]", |b| b.node("http://127.0.0.1:4")),
    refused("an empty URL", "nodes[3]", |b| b.node("")),
    refused("a URL without a host", "nodes[3]", |b| b.node("redis://")),
    refused("a port out of range", "nodes[3]", |b| {
        b.node("redis://127.0.0.1:70000")
    }),
    refused("the same node twice", "nodes[3]", |b| {
        b.node("redis://127.0.0.1:2")
    }),
    refused("the same node with another db", "nodes[3]", |b| {
        b.node("redis://127.0.0.1:2/5")
    }),
    ok("a unix socket", |b| {
        b.node("redis+unix:///run/redis/nowhere.sock")
    }),
    // ttl
    refused("ttl zero", "ttl", |b| b.ttl(Duration::ZERO)),
    refused("ttl 1 ms (below the drift allowance)", "ttl", |b| {
        b.ttl(ms(1))
    }),
    refused("ttl 2 ms (the drift floor)", "ttl", |b| b.ttl(ms(2))),
    ok("ttl 3 ms (the smallest that can be valid)", |b| {
        b.ttl(ms(3))
    }),
    refused("ttl 1.5 ms (not whole milliseconds)", "ttl", |b| {
        b.ttl(Duration::from_micros(1_500))
    }),
    refused("ttl one nanosecond past a millisecond", "ttl", |b| {
        b.ttl(Duration::from_nanos(10_000_001))
    }),
    ok("ttl the maximum (24 h)", |b| b.ttl(MAX_TTL)),
    refused("ttl past the maximum", "ttl", |b| b.ttl(MAX_TTL + ms(1))),
    refused("ttl Duration::MAX", "ttl", |b| b.ttl(Duration::MAX)),
    // drift_factor
    ok("drift 0", |b| b.drift_factor(0.0)),
    ok("drift 0.99 (allowed: little validity is left)", |b| {
        b.drift_factor(0.99)
    }),
    refused("drift 1", "drift_factor", |b| b.drift_factor(1.0)),
    refused("drift negative", "drift_factor", |b| b.drift_factor(-0.01)),
    refused("drift negative zero's neighbour", "drift_factor", |b| {
        b.drift_factor(-f64::MIN_POSITIVE)
    }),
    refused("drift NaN", "drift_factor", |b| b.drift_factor(f64::NAN)),
    refused("drift infinite", "drift_factor", |b| {
        b.drift_factor(f64::INFINITY)
    }),
    refused("drift so large no lease is valid", "ttl", |b| {
        b.drift_factor(0.999)
    }),
    // node_timeout
    refused("node timeout zero", "node_timeout", |b| {
        b.node_timeout(Duration::ZERO)
    }),
    ok("node timeout 1 ns", |b| {
        b.node_timeout(Duration::from_nanos(1))
    }),
    ok("node timeout just below a tenth of the ttl", |b| {
        b.ttl(ms(1_000)).node_timeout(ms(99))
    }),
    refused("node timeout a tenth of the ttl", "node_timeout", |b| {
        b.ttl(ms(1_000)).node_timeout(ms(100))
    }),
    refused("node timeout Duration::MAX", "node_timeout", |b| {
        b.node_timeout(Duration::MAX)
    }),
    // connect_timeout
    refused("connect timeout zero", "connect_timeout", |b| {
        b.connect_timeout(Duration::ZERO)
    }),
    ok("connect timeout 1 ns", |b| {
        b.connect_timeout(Duration::from_nanos(1))
    }),
    ok("connect timeout Duration::MAX", |b| {
        b.connect_timeout(Duration::MAX)
    }),
    // retry_count
    ok("no retry", |b| b.retry_count(0)),
    ok("u32::MAX retries", |b| b.retry_count(u32::MAX)),
    // retry_delay / retry_jitter
    ok("retry delay zero", |b| b.retry_delay(Duration::ZERO)),
    ok("retry delay at the maximum", |b| {
        b.retry_delay(MAX_RETRY_DELAY)
    }),
    refused("retry delay past the maximum", "retry_delay", |b| {
        b.retry_delay(MAX_RETRY_DELAY + Duration::from_nanos(1))
    }),
    refused("retry delay Duration::MAX", "retry_delay", |b| {
        b.retry_delay(Duration::MAX)
    }),
    ok("retry jitter zero", |b| b.retry_jitter(Duration::ZERO)),
    ok("retry jitter at the maximum", |b| {
        b.retry_jitter(MAX_RETRY_DELAY)
    }),
    refused("retry jitter past the maximum", "retry_jitter", |b| {
        b.retry_jitter(MAX_RETRY_DELAY + Duration::from_nanos(1))
    }),
    // max_hold
    refused("longest hold zero", "max_hold", |b| {
        b.max_hold(Duration::ZERO)
    }),
    ok("longest hold 1 ns", |b| b.max_hold(Duration::from_nanos(1))),
    ok("longest hold Duration::MAX", |b| b.max_hold(Duration::MAX)),
    // restart_quarantine
    ok("no restart quarantine (persistent nodes)", |b| {
        b.restart_quarantine(None)
    }),
    ok("restart quarantine zero", |b| {
        b.restart_quarantine(Some(Duration::ZERO))
    }),
    ok("restart quarantine Duration::MAX", |b| {
        b.restart_quarantine(Some(Duration::MAX))
    }),
    // key_prefix
    ok("empty key prefix", |b| b.key_prefix("")),
    ok("key prefix of 256 bytes", |b| b.key_prefix("p".repeat(256))),
    refused("a key prefix with a NUL byte", "key_prefix", |b| {
        b.key_prefix("locks\0")
    }),
    refused("key prefix of 257 bytes", "key_prefix", |b| {
        b.key_prefix("p".repeat(257))
    }),
    ok("key prefix with separators and unicode", |b| {
        b.key_prefix("{tenant:ü}:locks:")
    }),
];

#[test]
fn every_configuration_field_at_and_past_its_limits() {
    let mut failures = Vec::new();
    for case in CASES {
        let result = (case.tweak)(three()).build();
        match (case.refused, result) {
            (None, Ok(redlock)) => {
                // Whatever is accepted has a finite, saturating budget.
                let _ = redlock.config().acquire_budget();
            }
            (Some(field), Err(Error::Config(e))) if e.field() == field => {
                let text = e.to_string();
                if !text.starts_with("invalid configuration:") || !text.contains(field) {
                    failures.push(format!("{}: unclear message {text:?}", case.name));
                }
            }
            (expected, got) => failures.push(format!(
                "{}: expected {}, got {:?}",
                case.name,
                expected.map_or("Ok".to_owned(), |f| format!("Config({f})")),
                got.map(|_| ())
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn derived_handles_validate_too() {
    let redlock = three().build().unwrap();
    let field = |result: Result<Redlock, Error>| match result {
        Err(Error::Config(e)) => e.field().to_owned(),
        other => panic!("expected a configuration error, got {other:?}"),
    };
    assert_eq!(field(redlock.with_ttl(Duration::ZERO)), "ttl");
    assert_eq!(field(redlock.with_ttl(MAX_TTL + ms(1))), "ttl");
    assert_eq!(
        field(redlock.with_retry(RetryPolicy::new(1, Duration::MAX, Duration::ZERO))),
        "retry_delay"
    );
    // A TTL change re-derives the per-node timeout that was not set explicitly.
    let short = redlock.with_ttl(ms(200)).unwrap();
    assert_eq!(short.config().node_timeout(), ms(10));
}

/// Names that must each lock their own key, byte for byte.
fn odd_names() -> Vec<String> {
    vec![
        "a".into(),
        "x".repeat(MAX_RESOURCE_LEN),
        "a:b".into(),
        ":".into(),
        "::::".into(),
        ":leading".into(),
        "trailing:".into(),
        "redlock:".into(),
        "redlock:a:b".into(),
        "{hash-tag}".into(),
        "*".into(),
        "?[]\\".into(),
        " ".into(),
        "tab\there".into(),
        "crlf\r\nSET injected 1\r\n".into(),
        "\u{7f}\u{1}\u{1b}[31m".into(),
        "café".into(),
        "日本語のロック".into(),
        "🔒🔑".into(),
        "\u{202e}right-to-left".into(),
        "\u{feff}bom".into(),
        "e\u{301}".into(), // decomposed é, distinct from "é"
        "é".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_resource_names_each_lock_their_own_key() {
    let fleet = fleet(3);
    let redlock = builder(&fleet).build().unwrap();
    let names = odd_names();
    // Hold them all at once: any two names sharing a key would refuse each other.
    let mut leases = Vec::new();
    for name in &names {
        let lease = redlock
            .try_acquire(name)
            .await
            .unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(lease.resource(), name);
        assert_eq!(lease.key(), format!("{PREFIX}{name}"));
        leases.push(lease);
    }
    for i in 0..3 {
        let keys = fleet.keys_with_prefix(i, PREFIX).unwrap();
        for lease in &leases {
            let token = lease.token().to_string();
            assert!(
                keys.contains(&(lease.key().to_owned(), Some(token))),
                "node {i} lacks {:?}",
                lease.resource()
            );
        }
    }
    for lease in leases {
        let report = lease.release().await;
        // It returns at a quorum; the rest finish in the background.
        assert_eq!(report.released() + report.pending(), 3, "{report:?}");
    }
    assert_no_lock_keys(&fleet).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_resource_names_are_refused_before_anything_is_sent() {
    // Nothing listens: a name that got past the check would fail with NoQuorum instead.
    let redlock = three().build().unwrap();
    let too_long = "x".repeat(MAX_RESOURCE_LEN + 1);
    let huge = "y".repeat(10 << 20);
    let multibyte_too_long = "é".repeat(MAX_RESOURCE_LEN / 2 + 1);
    // NUL is reserved: it separates a lock key from its fence counter's key.
    for name in [
        "",
        &too_long,
        &huge,
        &multibyte_too_long,
        "\0",
        "nul\0inside",
    ] {
        for result in [redlock.acquire(name).await, redlock.try_acquire(name).await] {
            let Err(Error::Resource(e)) = result else {
                panic!("{} bytes: {result:?}", name.len())
            };
            let text = e.to_string();
            assert!(text.len() < 200, "the message echoes the name: {text}");
            assert!(!Error::Resource(e).is_retryable());
        }
    }
}
