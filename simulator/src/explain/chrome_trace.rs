//! The run in Chrome's Trace Event format (`explain --trace-format chrome`), which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open: a process per kind (clients, servers, the
//! resource, the judge), a track per lane, complete events for windows, validity, pauses,
//! keys and overlaps, instant events for accesses and faults. Timestamps are microseconds of
//! true time.

use serde_json::{Value, json};

use crate::Run;
use crate::judge::judgement::Fate;
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
    let history = &run.history;
    let end = run.report.simulated_ns;
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
        name_track(
            &mut events,
            CLIENTS,
            base,
            format!("{} windows", client.name),
        );
        name_track(
            &mut events,
            CLIENTS,
            base + 1,
            format!("{} validity", client.name),
        );
        name_track(
            &mut events,
            CLIENTS,
            base + 2,
            format!("{} faults", client.name),
        );
    }
    for (s, server) in scenario.servers.iter().enumerate() {
        name_track(&mut events, SERVERS, s as u64, server.name.clone());
    }
    name_track(&mut events, RESOURCE, 0, "accesses".into());
    name_track(&mut events, CHECKER, 0, "overlaps".into());
    name_track(&mut events, CHECKER, 1, "world".into());

    for (i, lease) in history.leases.iter().enumerate() {
        let base = lease.client as u64 * CLIENT_TRACKS;
        let args = json!({
            "epoch": lease.epoch, "fence": lease.fence, "token": lease.token.short(),
            "valid_until_local_ns": lease.valid_until_local,
        });
        for &(from, until) in history.windows_of(i) {
            let name = format!("epoch {} believed", lease.epoch);
            events.push(complete(
                name,
                "window",
                CLIENTS,
                base,
                from,
                until.min(end),
                args.clone(),
            ));
        }
        let reached = history
            .deadlines_reached
            .get(i)
            .copied()
            .unwrap_or(Nanos::MAX);
        let name = format!("epoch {} validity", lease.epoch);
        events.push(complete(
            name,
            "validity",
            CLIENTS,
            base + 1,
            lease.granted_at,
            reached.min(end),
            args,
        ));
    }
    for &(client, from, until) in &history.pauses {
        let base = client as u64 * CLIENT_TRACKS;
        events.push(complete(
            "paused".into(),
            "fault",
            CLIENTS,
            base + 2,
            from,
            until.min(end),
            json!({}),
        ));
    }
    for key in &history.keys {
        let epoch = history
            .leases
            .iter()
            .find(|l| l.token == key.token)
            .map(|l| l.epoch);
        let name = epoch.map_or_else(|| "key".to_owned(), |e| format!("key of epoch {e}"));
        let args = json!({ "token": key.token.short(), "ended": format!("{:?}", key.ended) });
        events.push(complete(
            name,
            "key",
            SERVERS,
            key.server as u64,
            key.from,
            key.until,
            args,
        ));
    }
    for (i, access) in history.accesses.iter().enumerate() {
        let fates = run
            .judgement
            .fates
            .get(i)
            .copied()
            .unwrap_or([Fate::Lost; 3]);
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
        events.push(complete(
            name,
            "overlap",
            CHECKER,
            0,
            overlap.from,
            overlap.until,
            args,
        ));
    }
    for note in &history.notes {
        let track = scenario.clients.iter().position(|c| c.name == note.who);
        let server = scenario.servers.iter().position(|s| s.name == note.who);
        let name = format!("{}: {}", note.who, note.what);
        let event = match (track, server) {
            (Some(c), _) => instant(
                name,
                "fault",
                CLIENTS,
                c as u64 * CLIENT_TRACKS + 2,
                note.at,
                json!({}),
            ),
            (None, Some(s)) => instant(name, "fault", SERVERS, s as u64, note.at, json!({})),
            (None, None) => instant(name, "fault", CHECKER, 1, note.at, json!({})),
        };
        events.push(event);
    }
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
