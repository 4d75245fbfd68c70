//! Observations for the rules' tests: a healthy three-node fleet that each test breaks in
//! one place, and [`problems`], the findings above `ok` in a form `assert_eq!` can show.

use std::time::Duration;

use crate::doctor::clock::TimeSample;
use crate::doctor::finding::{Check, Level};
use crate::doctor::observe::{Limits, NodeObservation, Role, ServerInfo};
use crate::doctor::permissions::{Operation, Outcome, Probe};
use crate::doctor::report::Report;

pub(crate) fn limits() -> Limits {
    Limits {
        nodes: 3,
        quorum: 2,
        ttl: Duration::from_secs(10),
        node_timeout: Duration::from_millis(50),
        drift_factor: 0.01,
        quarantine: Some(Duration::from_secs(10)),
        clock_window: Duration::from_secs(2),
        key_prefix: "redlock:".into(),
    }
}

pub(crate) fn server(run_id: &str) -> ServerInfo {
    ServerInfo {
        version: "7.0.15".into(),
        run_id: run_id.into(),
        uptime: Duration::from_secs(3600),
        process_id: None,
        role: Role::Master { replicas: 0 },
        aof_enabled: true,
        maxmemory_policy: Some("noeviction".into()),
        maxmemory: Some(0),
    }
}

/// TIME samples every 100 ms over 2 s of a clock running `rate` fast, 0.2 ms round trips.
pub(crate) fn clock(rate: f64) -> Vec<TimeSample> {
    (0..21)
        .map(|i| {
            let sent_ns = i * 100_000_000;
            let received_ns = sent_ns + 200_000;
            let wall = 1_700_000_000_000_000 + sent_ns / 1_000;
            TimeSample {
                sent_ns,
                received_ns,
                wall_sent_us: wall,
                wall_received_us: wall + 200,
                node_us: 1_700_000_000_000_000
                    + ((sent_ns + 100_000) as f64 * (1.0 + rate) / 1e3) as i64,
            }
        })
        .collect()
}

pub(crate) fn healthy(address: &str, run_id: &str) -> NodeObservation {
    NodeObservation {
        address: address.into(),
        socket_addresses: Vec::new(),
        reached: Ok(()),
        round_trips: vec![Duration::from_micros(200); 26],
        info: Some(Ok(server(run_id))),
        appendfsync: Some(Ok("always".into())),
        clock: Some(Ok(clock(0.0))),
        probe: Some(Probe {
            operations: vec![(Operation::Acquire, Outcome::Done)],
            commands: Vec::new(),
            waiting: Vec::new(),
        }),
        process_age: None,
    }
}

pub(crate) fn fleet() -> Vec<NodeObservation> {
    vec![
        healthy("n1:1", "a"),
        healthy("n2:1", "b"),
        healthy("n3:1", "c"),
    ]
}

pub(crate) fn problems(report: &Report) -> Vec<(Level, Option<&str>, Check)> {
    report
        .findings
        .iter()
        .filter(|f| f.level > Level::Ok)
        .map(|f| (f.level, f.node.as_deref(), f.check))
        .collect()
}
