//! The run in Chrome's Trace Event format (`explain --trace-format chrome`), which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open: a process per kind (clients, servers, the
//! resource, the judge), a track per lane, complete events for windows, validity, pauses,
//! keys and overlaps, instant events for accesses and faults. Timestamps are microseconds of
//! true time.

use serde_json::{Value, json};

use super::derived::{Derived, LaneKind};
use crate::Run;
use crate::scenario::Scenario;
use crate::time::Nanos;

const CLIENTS: u64 = 1;
const SERVERS: u64 = 2;
const RESOURCE: u64 = 3;
const CHECKER: u64 = 4;
/// Tracks per client: its windows, its validity, its pauses and faults.
const CLIENT_TRACKS: u64 = 3;

fn us(t: Nanos) -> f64 {
    t as f64 / 1000.0
}

fn complete(
    name: String,
    cat: &str,
    pid: u64,
    tid: u64,
    from: Nanos,
    until: Nanos,
    args: Value,
) -> Value {
    json!({
        "name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
        "ts": us(from), "dur": us(until.saturating_sub(from)), "args": args,
    })
}

fn instant(name: String, cat: &str, pid: u64, tid: u64, at: Nanos, args: Value) -> Value {
    json!({
        "name": name, "cat": cat, "ph": "i", "s": "t", "pid": pid, "tid": tid,
        "ts": us(at), "args": args,
    })
}

fn name_track(events: &mut Vec<Value>, pid: u64, tid: u64, name: String) {
    events.push(json!({
        "name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": { "name": name },
    }));
    events.push(json!({
        "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": { "sort_index": tid },
    }));
}

/// The run as Trace Event JSON (the object form, with `traceEvents`).
pub fn chrome_trace(scenario: &Scenario, run: &Run) -> String {
    let derived = Derived::new(scenario, run);
    let mut events = tracks(scenario);
    lease_events(&mut events, &derived, run);
    pause_events(&mut events, &derived, run);
    key_events(&mut events, &derived, run);
    access_events(&mut events, &derived, scenario, run);
    overlap_events(&mut events, scenario, run);
    note_events(&mut events, &derived, run);
    let trace = json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "scenario": scenario.name, "seed": run.report.seed,
            "verdict": super::verdict_words(scenario, run).join(" "),
        },
    });
    trace.to_string()
}

/// The processes and their named tracks: three per client, one per server, the resource's
/// accesses, and the checker's overlaps and world events.
fn tracks(scenario: &Scenario) -> Vec<Value> {
    let mut events: Vec<Value> = Vec::new();
    for (pid, name) in [
        (CLIENTS, "clients"),
        (SERVERS, "servers"),
        (RESOURCE, "resource"),
        (CHECKER, "checker"),
    ] {
        events.push(json!({
            "name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": { "name": name },
        }));
    }
    for (c, client) in scenario.clients.iter().enumerate() {
        let base = c as u64 * CLIENT_TRACKS;
        for (offset, track) in ["windows", "validity", "faults"].into_iter().enumerate() {
            let name = format!("{} {track}", client.name);
            name_track(&mut events, CLIENTS, base + offset as u64, name);
        }
    }
    for (s, server) in scenario.servers.iter().enumerate() {
        name_track(&mut events, SERVERS, s as u64, server.name.clone());
    }
    name_track(&mut events, RESOURCE, 0, "accesses".into());
    name_track(&mut events, CHECKER, 0, "overlaps".into());
    name_track(&mut events, CHECKER, 1, "world".into());
    events
}

/// Each lease's believed windows and its validity, on its client's tracks.
fn lease_events(events: &mut Vec<Value>, derived: &Derived, run: &Run) {
    for (lease, view) in run.history.leases.iter().zip(&derived.leases) {
        let base = lease.client as u64 * CLIENT_TRACKS;
        let args = json!({
            "epoch": lease.epoch, "fence": lease.fence, "token": lease.token.short(),
            "valid_until_local_ns": lease.valid_until_local,
        });
        for &(from, until) in &view.windows {
            let name = format!("epoch {} believed", lease.epoch);
            let window = complete(name, "window", CLIENTS, base, from, until, args.clone());
            events.push(window);
        }
        let reached = view.valid_until.unwrap_or(Nanos::MAX);
        let name = format!("epoch {} validity", lease.epoch);
        let (from, until) = (lease.granted_at, reached.min(derived.end));
        events.push(complete(
            name,
            "validity",
            CLIENTS,
            base + 1,
            from,
            until,
            args,
        ));
    }
}

/// The clients' pauses, on their fault tracks.
fn pause_events(events: &mut Vec<Value>, derived: &Derived, run: &Run) {
    for &(client, from, until) in &run.history.pauses {
        let track = client as u64 * CLIENT_TRACKS + 2;
        let until = until.min(derived.end);
        events.push(complete(
            "paused".into(),
            "fault",
            CLIENTS,
            track,
            from,
            until,
            json!({}),
        ));
    }
}

/// The lock keys on each server, named by the epoch of the lease they belong to.
fn key_events(events: &mut Vec<Value>, derived: &Derived, run: &Run) {
    for (key, epoch) in run.history.keys.iter().zip(&derived.key_epochs) {
        let name = epoch.map_or_else(|| "key".to_owned(), |e| format!("key of epoch {e}"));
        let args = json!({ "token": key.token.short(), "ended": format!("{:?}", key.ended) });
        let server = key.server as u64;
        events.push(complete(
            name, "key", SERVERS, server, key.from, key.until, args,
        ));
    }
}

/// Each access that arrived, with its fate under the three modes.
fn access_events(events: &mut Vec<Value>, derived: &Derived, scenario: &Scenario, run: &Run) {
    for (i, (access, fates)) in run.history.accesses.iter().zip(&derived.fates).enumerate() {
        let args = json!({
            "client": scenario.clients[access.client].name, "epoch": access.epoch,
            "fence": access.fence, "sent_us": us(access.sent_at),
            "plain": format!("{:?}", fates[0]), "fenced": format!("{:?}", fates[1]),
            "strict": format!("{:?}", fates[2]),
        });
        let name = format!("{:?} #{i} ({:?} unfenced)", access.kind, fates[0]);
        if let Some(at) = access.arrived_at {
            events.push(instant(name, "access", RESOURCE, 0, at, args));
        }
    }
}

/// The overlaps of two leases' windows, on the checker's track.
fn overlap_events(events: &mut Vec<Value>, scenario: &Scenario, run: &Run) {
    let history = &run.history;
    for overlap in &run.judgement.overlaps {
        let (a, b) = (
            &history.leases[overlap.first],
            &history.leases[overlap.second],
        );
        let name = format!(
            "overlap: {} (epoch {}) and {} (epoch {})",
            scenario.clients[a.client].name, a.epoch, scenario.clients[b.client].name, b.epoch
        );
        let args = json!({ "cause": overlap.cause.to_string(), "used": overlap.used });
        let (from, until) = (overlap.from, overlap.until);
        events.push(complete(name, "overlap", CHECKER, 0, from, until, args));
    }
}

/// The script's notes: on the client's fault track, the server's track, or the world's.
fn note_events(events: &mut Vec<Value>, derived: &Derived, run: &Run) {
    for note in &run.history.notes {
        let name = format!("{}: {}", note.who, note.what);
        let (pid, tid) = match derived.process_lane(&note.who) {
            Some((LaneKind::Client, c)) => (CLIENTS, c as u64 * CLIENT_TRACKS + 2),
            Some((_, s)) => (SERVERS, s as u64),
            None => (CHECKER, 1),
        };
        events.push(instant(name, "fault", pid, tid, note.at, json!({})));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_trace_has_a_track_per_lane_and_the_overlap() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios/rl-05-crash-no-persistence.toml");
        let scenario = Scenario::load(&path).unwrap();
        let run = crate::run(&scenario, scenario.seed, true).unwrap();
        let trace: Value = serde_json::from_str(&chrome_trace(&scenario, &run)).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let named = |name: &str| {
            events
                .iter()
                .any(|e| e["ph"] == "M" && e["args"]["name"] == name)
        };
        assert!(named("c1 windows") && named("c2 validity") && named("n2"));
        let overlap = events
            .iter()
            .find(|e| e["cat"] == "overlap")
            .expect("the overlap");
        assert_eq!(overlap["ph"], "X");
        assert!(overlap["dur"].as_f64().unwrap() > 0.0);
        // Every event names a phase, a process and a track, and a non-negative time.
        for event in events {
            assert!(event["ph"].is_string() && event["pid"].is_u64() && event["tid"].is_u64());
            if event["ph"] != "M" {
                assert!(event["ts"].as_f64().unwrap() >= 0.0, "{event}");
            }
        }
        assert!(
            events
                .iter()
                .any(|e| e["cat"] == "fault" && e["name"].as_str().unwrap().contains("crashes"))
        );
    }
}
