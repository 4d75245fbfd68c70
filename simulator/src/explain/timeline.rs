//! The text timeline of a run, in true time: the scenario and its verdicts, the first
//! problem the judge found, every grant, extension, window, release, access, pause and
//! fault in order, then each client's outcomes and the command that replays the run.

use std::fmt::Write;

use super::derived::Derived;
use super::fate_word;
use crate::Run;
use crate::judge::history::{AccessKind, History, LeaseRecord};
use crate::judge::judgement::Problem;
use crate::scenario::{Cause, ResourceMode, Scenario};
use crate::time::{Nanos, fmt_duration, fmt_ms};

/// The run as a timeline in true time: verdicts, the first problem, then every grant,
/// release, access, pause and fault in order.
pub fn timeline(scenario: &Scenario, run: &Run) -> String {
    let mut out = String::new();
    verdicts(&mut out, scenario, run);
    first_problem(&mut out, scenario, run);
    let _ = writeln!(out, "\nin words:");
    for sentence in super::verdict_words(scenario, run) {
        let _ = writeln!(out, "  - {sentence}");
    }
    let mut events = Events::default();
    for (index, lease) in run.history.leases.iter().enumerate() {
        lease_events(&mut events, scenario, &run.history, index, lease);
    }
    access_events(&mut events, scenario, run, &Derived::new(scenario, run));
    for note in &run.history.notes {
        events.push(note.at, note.who.clone(), format!("** {}", note.what));
    }
    events.0.sort();
    let _ = writeln!(out, "\ntimeline (true time, ms):");
    for (at, _, who, what) in events.0 {
        let _ = writeln!(out, "{:>14}  {who:<12} {what}", fmt_ms(at));
    }
    let _ = writeln!(out, "\noutcomes by client:");
    for (c, outcomes) in run.history.outcomes.iter().enumerate() {
        let outcomes: Vec<String> = outcomes.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "  {}: {}", name(scenario, c), outcomes.join("; "));
    }
    let _ = writeln!(
        out,
        "\nreplay: redlock-sim explain {} --seed {}",
        scenario.source, run.report.seed
    );
    out
}

/// Client `c`'s display name.
fn name(scenario: &Scenario, c: usize) -> String {
    scenario.clients[c].name.clone()
}

/// The timeline's lines, each (true time, order pushed, who, what): sorted by time, and
/// in the order pushed at the same time.
#[derive(Default)]
struct Events(Vec<(Nanos, usize, String, String)>);

impl Events {
    fn push(&mut self, at: Nanos, who: String, what: String) {
        let n = self.0.len();
        self.0.push((at, n, who, what));
    }
}

/// The heading: the scenario, its description, the verdicts, and a mismatch with the
/// expected verdicts if any.
fn verdicts(out: &mut String, scenario: &Scenario, run: &Run) {
    let report = &run.report;
    let _ = writeln!(out, "{} (seed {})", scenario.name, report.seed);
    if !scenario.description.is_empty() {
        for line in scenario.description.trim().lines() {
            let _ = writeln!(out, "  {}", line.trim());
        }
    }
    let _ = writeln!(
        out,
        "\nverdicts: mutual exclusion {}; resource plain {}, fenced {}, strict {}; cause {}",
        report.exclusion,
        report.verdicts[0],
        report.verdicts[1],
        report.verdicts[2],
        report.cause.map_or_else(|| "-".into(), |c| c.to_string())
    );
    if let Some(mismatch) = report.mismatch() {
        let _ = writeln!(out, "DIFFERS FROM THE EXPECTATION: {mismatch}");
    }
}

/// The checker's first problem in words: two windows that overlap, or a stale access.
fn first_problem(out: &mut String, scenario: &Scenario, run: &Run) {
    let history = &run.history;
    match &run.judgement.first_problem {
        None => {
            let _ = writeln!(out, "no counterexample: nothing went wrong");
        }
        Some(Problem::Overlap {
            first,
            second,
            from,
            until,
            cause,
        }) => {
            let (a, b) = (&history.leases[*first], &history.leases[*second]);
            let why = match cause {
                Cause::C => "an implementation fault of a client made it possible",
                _ => {
                    "Redlock's assumptions failed: a node forgot or expired a key early, or a clock ran beyond the drift factor"
                }
            };
            let _ = writeln!(
                out,
                "first problem: the windows of {} (epoch {}) and {} (epoch {}) overlap from {}ms to {}ms ({}): both believed they held the lease (cause {cause}: {why})",
                name(scenario, a.client),
                a.epoch,
                name(scenario, b.client),
                b.epoch,
                fmt_ms(*from),
                fmt_ms(*until),
                fmt_duration(until - from)
            );
        }
        Some(Problem::StaleAccess { access, after }) => {
            let (a, b) = (&history.accesses[*access], &history.accesses[*after]);
            let _ = writeln!(
                out,
                "first problem: {}'s {:?} #{access} (epoch {}, fence {}) reached the resource at {}ms, after {}'s {:?} #{after} of the newer epoch {} at {}ms",
                name(scenario, a.client),
                a.kind,
                a.epoch,
                a.fence,
                fmt_ms(a.arrived_at.unwrap_or(0)),
                name(scenario, b.client),
                b.kind,
                b.epoch,
                fmt_ms(b.arrived_at.unwrap_or(0))
            );
        }
    }
}

/// The lease at `index`: its grant (with the validity its holder computed and how long it
/// believed it held the lease), its extensions, its windows, its release and the stop of
/// its work after the release.
fn lease_events(
    events: &mut Events,
    scenario: &Scenario,
    history: &History,
    index: usize,
    lease: &LeaseRecord,
) {
    let who = name(scenario, lease.client);
    let windows = history.windows_of(index);
    let deadline_reached = history
        .deadlines_reached
        .get(index)
        .copied()
        .unwrap_or(Nanos::MAX);
    let validity = match lease.extensions.len() {
        0 => format!(
            "validity computed: until {}ms on {who}'s clock{}",
            fmt_ms(lease.valid_until_local),
            reached_words(lease, deadline_reached, lease.valid_until_local)
        ),
        n => format!("extended {n} time(s) (each extension computes a new validity)"),
    };
    let belief = belief_words(lease, windows);
    let grant = format!(
        "granted epoch {} (fence {}, token {}); {validity}; {belief}",
        lease.epoch,
        lease.fence,
        lease.token.short(),
    );
    events.push(lease.granted_at, who.clone(), grant);
    for &(at, valid_until) in &lease.extensions {
        let what = format!(
            "extended epoch {}: validity computed: until {}ms on its clock{}",
            lease.epoch,
            fmt_ms(valid_until),
            reached_words(lease, deadline_reached, valid_until)
        );
        events.push(at, who.clone(), what);
    }
    window_events(events, &who, lease, windows);
    if let Some(at) = lease.released_at {
        events.push(at, who.clone(), format!("releases epoch {}", lease.epoch));
        if let Some(stopped) = lease.work_stopped_at.filter(|&stopped| stopped > at) {
            let what = format!(
                "its work under epoch {} stops, after the release",
                lease.epoch
            );
            events.push(stopped, who.clone(), what);
        }
    }
}

/// When the holder's clock first reached the validity `local`, if `local` is the lease's
/// deadline (the one its windows end at); nothing for an earlier validity.
fn reached_words(lease: &LeaseRecord, deadline_reached: Nanos, local: u64) -> String {
    if local == lease.valid_until_local && deadline_reached != Nanos::MAX {
        format!(
            ", first reached at {}ms true time",
            fmt_ms(deadline_reached)
        )
    } else if local == lease.valid_until_local {
        ", a reading its clock never reaches".to_owned()
    } else {
        String::new()
    }
}

/// How long the holder believed it held the lease: never, until one end, or during
/// several windows (a wall clock that stepped back).
fn belief_words(lease: &LeaseRecord, windows: &[(Nanos, Nanos)]) -> String {
    match windows {
        [] => "never believed it held the lease".to_owned(),
        [(_, until)] => format!(
            "believed it held the lease until {}",
            window_end_words(lease, *until)
        ),
        several => format!(
            "believed it held the lease during {}",
            several
                .iter()
                .map(|&(from, until)| format!(
                    "{}ms to {}",
                    fmt_ms(from),
                    window_end_words(lease, until)
                ))
                .collect::<Vec<_>>()
                .join(", and ")
        ),
    }
}

/// A window that opens again (after the first), and a window that ends by the holder's
/// clock (an end by release, crash or the work's stop has a line of its own).
fn window_events(events: &mut Events, who: &str, lease: &LeaseRecord, windows: &[(Nanos, Nanos)]) {
    for (k, &(from, until)) in windows.iter().enumerate() {
        if k > 0 {
            let what = format!(
                "its clock reads before the deadline of epoch {} again: believes it holds the lease again",
                lease.epoch
            );
            events.push(from, who.to_owned(), what);
        }
        if until != Nanos::MAX
            && Some(until) != lease.released_at
            && Some(until) != lease.crashed_at
            && Some(until) != lease.work_stopped_at
        {
            let what = format!("validity of epoch {} ends (by its clock)", lease.epoch);
            events.push(until, who.to_owned(), what);
        }
    }
}

/// Each access as sent by its client and, when it arrived, as the resource judged it
/// under each mode.
fn access_events(events: &mut Events, scenario: &Scenario, run: &Run, derived: &Derived) {
    for (i, (access, &fates)) in run.history.accesses.iter().zip(&derived.fates).enumerate() {
        let kind = match access.kind {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
        };
        let sent = format!(
            "sends {kind} #{i} (epoch {}, fence {})",
            access.epoch, access.fence
        );
        events.push(access.sent_at, name(scenario, access.client), sent);
        if let Some(at) = access.arrived_at {
            let verdicts: Vec<String> = ResourceMode::ALL
                .iter()
                .zip(fates)
                .map(|(mode, fate)| format!("{mode}: {}", fate_word(fate)))
                .collect();
            let what = format!(
                "{kind} #{i} from {} arrives: {}",
                name(scenario, access.client),
                verdicts.join(", ")
            );
            events.push(at, "resource".into(), what);
        }
    }
}

/// Where a window that ends at `until` ended, in words: the release, the work's stop after
/// the release, the crash, or the holder's clock reaching the deadline.
fn window_end_words(lease: &LeaseRecord, until: Nanos) -> String {
    if until == Nanos::MAX {
        return "the end: its clock never reaches the deadline".to_owned();
    }
    let why = if Some(until) == lease.released_at {
        "its release"
    } else if Some(until) == lease.crashed_at {
        "its crash"
    } else if Some(until) == lease.work_stopped_at {
        "its work stopped, after the release"
    } else {
        "its clock reached the deadline"
    };
    format!("{}ms ({why})", fmt_ms(until))
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MS;

    /// The grant line names the validity its holder computed (on its clock, and when that
    /// clock reaches it) apart from how long the holder believed it held the lease (here
    /// until its release, long before the validity ends).
    #[test]
    fn the_timeline_shows_the_validity_apart_from_the_window() {
        let text = r#"
name = "released early"
[expect]
exclusion = "SAFE"
plain = "SAFE"
fenced = "SAFE"
strict = "SAFE"
[[client]]
name = "c1"
clock = { rate_ppm = -10000 }
steps = ["write", "sleep 1000"]
"#;
        let scenario = crate::scenario::parse(text, "inline").unwrap();
        let run = crate::run(&scenario, 3, false).unwrap();
        let lease = &run.history.leases[0];
        let released = lease.released_at.unwrap();
        assert!(released < 1_100 * MS, "{lease:?}");
        // The clock runs 1 % slow: it reads its deadline later in true time.
        let reached = run.history.deadlines_reached[0];
        assert!(reached > lease.valid_until_local + 90 * MS, "{reached}");
        let timeline = timeline(&scenario, &run);
        let grant = timeline
            .lines()
            .find(|l| l.contains("granted epoch 1"))
            .unwrap();
        assert!(
            grant.contains(&format!(
                "validity computed: until {}ms on c1's clock, first reached at {}ms true time",
                fmt_ms(lease.valid_until_local),
                fmt_ms(reached)
            )),
            "{grant}"
        );
        assert!(
            grant.contains(&format!(
                "believed it held the lease until {}ms (its release)",
                fmt_ms(released)
            )),
            "{grant}"
        );
        assert!(!timeline.contains("validity of epoch 1 ends"), "{timeline}");
    }
}
