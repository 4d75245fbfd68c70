//! The scenario's script as events: everything the scenario decides in advance (starts,
//! pauses, crashes, fsyncs, failovers, spoofers) scheduled before the first event runs,
//! and the notes that narrate the faults (clock steps and rates, partitions, delays) for the
//! trace and the timeline.
//!
//! The order of the calls to [`World::at`] is the order of the sequence numbers, which
//! breaks ties between events at the same time: it is part of the run's determinism, and
//! each helper here keeps the order the scenario lists things in.

use super::{Event, World};
use crate::scenario::{ClockKind, PartitionKind, Persistence, Scenario};
use crate::time::{MS, Nanos, fmt_duration};

impl World<'_> {
    /// Everything the scenario scripts in advance.
    pub(super) fn schedule_script(&mut self) {
        let scenario = self.scenario;
        for i in 0..scenario.clients.len() {
            self.schedule_client(i);
        }
        for (k, spoof) in scenario.notifications.spoofs.iter().enumerate() {
            self.at(spoof.start, Event::Spoof(k));
        }
        for s in 0..scenario.servers.len() {
            self.schedule_server(s);
        }
        for client in &scenario.clients {
            if client.clock.rate_ppm() != 0 {
                let ppm = client.clock.rate_ppm();
                self.note_at(0, &client.name, format!("clock runs {ppm:+} ppm"));
            }
        }
        self.narrate_network();
    }

    /// A note scheduled at `at`, in `who`'s name.
    fn note_at(&mut self, at: Nanos, who: &str, what: String) {
        let who = who.to_owned();
        self.at(at, Event::Note { who, what });
    }

    /// Client `i`'s start, pauses, crash and wall-clock steps.
    fn schedule_client(&mut self, i: usize) {
        let scenario = self.scenario;
        let client = &scenario.clients[i];
        self.at(client.start, Event::ClientStart(i));
        for &(at, length) in &client.pauses {
            let until = at + length;
            self.at(at, Event::ClientPause { client: i, until });
        }
        if let Some(at) = client.crash_at {
            self.at(at, Event::ClientCrash(i));
        }
        for &(at, by) in client.clock.steps() {
            let seen = match client.clock_kind {
                ClockKind::Wall => "the client reads it",
                ClockKind::Monotonic => "the client's monotonic clock is unaffected",
            };
            let what = format!("host wall clock steps {} ({seen})", signed_duration(by));
            self.note_at(at, &client.name, what);
        }
    }

    /// Server `s`'s crashes, first fsync, failover, and clock steps and rate.
    fn schedule_server(&mut self, s: usize) {
        let scenario = self.scenario;
        let server = &scenario.servers[s];
        for crash in &server.crashes {
            let restart_after = crash.restart_after;
            self.at(
                crash.at,
                Event::ServerCrash {
                    server: s,
                    restart_after,
                },
            );
        }
        if server.persistence == Persistence::Everysec {
            self.at(1_000 * MS, Event::ServerFsync(s));
        }
        if let Some(failover) = &server.failover {
            self.at(failover.at, Event::FailoverStop(s));
            let promote = failover.at + failover.promote_after;
            self.at(promote, Event::FailoverPromote(s));
        }
        for &(at, by) in server.clock.steps() {
            let what = format!("clock steps {}", signed_duration(by));
            self.note_at(at, &server.name, what);
        }
        if server.clock.rate_ppm() != 0 {
            let what = format!("clock runs {:+} ppm", server.clock.rate_ppm());
            self.note_at(0, &server.name, what);
        }
    }

    /// The network's partitions (and their healing) and scripted delays, as notes: the
    /// network applies them itself, from the same scenario.
    fn narrate_network(&mut self) {
        let scenario = self.scenario;
        for partition in &scenario.network.partitions {
            let what = partition_words(scenario, &partition.kind);
            self.note_at(partition.start, "network", what.clone());
            if partition.end != Nanos::MAX {
                self.note_at(partition.end, "network", format!("healed ({what})"));
            }
        }
        for delay in &scenario.network.delays {
            let what = format!(
                "messages {}->{} delayed by {}",
                scenario.endpoint_name(delay.from),
                scenario.endpoint_name(delay.to),
                fmt_duration(delay.extra)
            );
            self.note_at(delay.start, "network", what);
        }
    }
}

/// A partition in words: its groups (`partition: c1,n1 | n2,n3`) or its cut links
/// (`cut: c1->n1, n2->c1`).
fn partition_words(scenario: &Scenario, kind: &PartitionKind) -> String {
    match kind {
        PartitionKind::Groups(groups) => format!(
            "partition: {}",
            groups
                .iter()
                .map(|g| g
                    .iter()
                    .map(|e| scenario.endpoint_name(*e))
                    .collect::<Vec<_>>()
                    .join(","))
                .collect::<Vec<_>>()
                .join(" | ")
        ),
        PartitionKind::Cut(links) => format!(
            "cut: {}",
            links
                .iter()
                .map(|(f, t)| format!(
                    "{}->{}",
                    scenario.endpoint_name(*f),
                    scenario.endpoint_name(*t)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A clock step in words: its direction's sign, then its size (`+10.0 s`, `-500 ms`).
fn signed_duration(by: i64) -> String {
    let sign = if by < 0 { '-' } else { '+' };
    format!("{sign}{}", fmt_duration(by.unsigned_abs()))
}
