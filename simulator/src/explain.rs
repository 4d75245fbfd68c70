//! Explaining a run: a readable timeline of the first counterexample, and a space-time
//! diagram (SVG) with a lane per client, server and the resource.

use std::collections::BTreeMap;
use std::fmt::Write;

use redlock::core::Token;

use crate::Run;
use crate::checker::{Fate, Problem};
use crate::history::{AccessKind, LeaseRecord};
use crate::scenario::{ResourceMode, Scenario};
use crate::time::{MS, Nanos, fmt_ms};

fn fate_word(fate: Fate) -> &'static str {
    match fate {
        Fate::Lost => "lost",
        Fate::Applied => "applied",
        Fate::Stale => "APPLIED STALE",
        Fate::Rejected => "rejected",
    }
}

/// The run as a timeline in true time: verdicts, the first problem, then every grant,
/// release, access, pause and fault in order.
pub fn timeline(scenario: &Scenario, run: &Run) -> String {
    let report = &run.report;
    let history = &run.history;
    let name = |c: usize| scenario.clients[c].name.clone();
    let mut out = String::new();
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
                crate::scenario::Cause::C => "an implementation fault of a client made it possible",
                _ => {
                    "Redlock's assumptions failed: a node forgot or expired a key early, or a clock ran beyond the drift factor"
                }
            };
            let _ = writeln!(
                out,
                "first problem: the windows of {} (epoch {}) and {} (epoch {}) overlap from {}ms to {}ms ({}ms): both believed they held the lease (cause {cause}: {why})",
                name(a.client),
                a.epoch,
                name(b.client),
                b.epoch,
                fmt_ms(*from),
                fmt_ms(*until),
                fmt_ms(until - from)
            );
        }
        Some(Problem::StaleAccess { access, after }) => {
            let (a, b) = (&history.accesses[*access], &history.accesses[*after]);
            let _ = writeln!(
                out,
                "first problem: {}'s {:?} #{access} (epoch {}, fence {}) reached the resource at {}ms, after {}'s {:?} #{after} of the newer epoch {} at {}ms",
                name(a.client),
                a.kind,
                a.epoch,
                a.fence,
                fmt_ms(a.arrived_at.unwrap_or(0)),
                name(b.client),
                b.kind,
                b.epoch,
                fmt_ms(b.arrived_at.unwrap_or(0))
            );
        }
    }

    let mut events: Vec<(Nanos, usize, String, String)> = Vec::new();
    let mut push = |at: Nanos, who: String, what: String| {
        let n = events.len();
        events.push((at, n, who, what));
    };
    for (index, lease) in history.leases.iter().enumerate() {
        let who = name(lease.client);
        let windows = history.windows_of(index);
        let deadline_reached = history
            .deadlines_reached
            .get(index)
            .copied()
            .unwrap_or(Nanos::MAX);
        let reached = |local: u64| {
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
        };
        let validity = match lease.extensions.len() {
            0 => format!(
                "validity computed: until {}ms on {who}'s clock{}",
                fmt_ms(lease.valid_until_local),
                reached(lease.valid_until_local)
            ),
            n => format!("extended {n} time(s) (each extension computes a new validity)"),
        };
        let belief = match windows {
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
        };
        push(
            lease.granted_at,
            who.clone(),
            format!(
                "granted epoch {} (fence {}, token {}); {validity}; {belief}",
                lease.epoch,
                lease.fence,
                lease.token.short(),
            ),
        );
        for &(at, valid_until) in &lease.extensions {
            push(
                at,
                who.clone(),
                format!(
                    "extended epoch {}: validity computed: until {}ms on its clock{}",
                    lease.epoch,
                    fmt_ms(valid_until),
                    reached(valid_until)
                ),
            );
        }
        for (k, &(from, until)) in windows.iter().enumerate() {
            if k > 0 {
                push(
                    from,
                    who.clone(),
                    format!(
                        "its clock reads before the deadline of epoch {} again: believes it holds the lease again",
                        lease.epoch
                    ),
                );
            }
            if until != Nanos::MAX
                && Some(until) != lease.released_at
                && Some(until) != lease.crashed_at
                && Some(until) != lease.work_stopped_at
            {
                push(
                    until,
                    who.clone(),
                    format!("validity of epoch {} ends (by its clock)", lease.epoch),
                );
            }
        }
        if let Some(at) = lease.released_at {
            push(at, who.clone(), format!("releases epoch {}", lease.epoch));
            if let Some(stopped) = lease.work_stopped_at.filter(|&stopped| stopped > at) {
                push(
                    stopped,
                    who.clone(),
                    format!(
                        "its work under epoch {} stops, after the release",
                        lease.epoch
                    ),
                );
            }
        }
    }
    for (i, access) in history.accesses.iter().enumerate() {
        let kind = match access.kind {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
        };
        push(
            access.sent_at,
            name(access.client),
            format!(
                "sends {kind} #{i} (epoch {}, fence {})",
                access.epoch, access.fence
            ),
        );
        if let Some(at) = access.arrived_at {
            let fates = run
                .judgement
                .fates
                .get(i)
                .copied()
                .unwrap_or([Fate::Lost; 3]);
            let verdicts: Vec<String> = ResourceMode::ALL
                .iter()
                .zip(fates)
                .map(|(mode, fate)| format!("{mode}: {}", fate_word(fate)))
                .collect();
            push(
                at,
                "resource".into(),
                format!(
                    "{kind} #{i} from {} arrives: {}",
                    name(access.client),
                    verdicts.join(", ")
                ),
            );
        }
    }
    for note in &history.notes {
        push(note.at, note.who.clone(), format!("** {}", note.what));
    }
    events.sort();
    let _ = writeln!(out, "\ntimeline (true time, ms):");
    for (at, _, who, what) in events {
        let _ = writeln!(out, "{:>14}  {who:<12} {what}", fmt_ms(at));
    }
    let _ = writeln!(out, "\noutcomes by client:");
    for (c, outcomes) in history.outcomes.iter().enumerate() {
        let outcomes: Vec<String> = outcomes.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "  {}: {}", name(c), outcomes.join("; "));
    }
    let _ = writeln!(
        out,
        "\nreplay: redlock-sim explain {} --seed {}",
        scenario.source, report.seed
    );
    out
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

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759",
];

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A space-time diagram of the run: one lane per client, server and the resource; lease
/// windows (believed, in true time) on client lanes; lock-key lifetimes on server lanes;
/// accesses as arrows to the resource (green applied, red stale, grey rejected by fencing);
/// pauses shaded; faults marked; the first overlap highlighted.
pub fn svg(scenario: &Scenario, run: &Run) -> String {
    let history = &run.history;
    let clients = scenario.clients.len();
    let servers = scenario.servers.len();
    let lanes = clients + servers + 1;
    let (left, top, lane_h, width) = (130.0, 40.0, 34.0, 1100.0);
    let height = top + lanes as f64 * lane_h + 72.0;

    let mut horizon: Nanos = 1;
    for lease in &history.leases {
        horizon = horizon.max(lease.window_end.min(run.report.simulated_ns));
    }
    for access in &history.accesses {
        horizon = horizon.max(access.arrived_at.unwrap_or(access.sent_at));
    }
    for note in &history.notes {
        horizon = horizon.max(note.at);
    }
    for &(_, _, until) in &history.pauses {
        horizon = horizon.max(until);
    }
    let horizon = (horizon as f64 * 1.05) as Nanos + MS;
    let x = |t: Nanos| left + (t.min(horizon) as f64 / horizon as f64) * (width - left - 20.0);
    let lane_y = |lane: usize| top + lane as f64 * lane_h;
    let resource_lane = clients + servers;

    let epoch_of: BTreeMap<Token, u64> =
        history.leases.iter().map(|l| (l.token, l.epoch)).collect();
    let color = |epoch: u64| PALETTE[(epoch as usize + PALETTE.len() - 1) % PALETTE.len()];

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="18" font-size="13" font-weight="bold">{} (seed {}): exclusion {}, plain {}, fenced {}, strict {}</text>"#,
        esc(&scenario.name),
        run.report.seed,
        run.report.exclusion,
        run.report.verdicts[0],
        run.report.verdicts[1],
        run.report.verdicts[2]
    );
    // Lanes.
    for lane in 0..lanes {
        let label = if lane < clients {
            scenario.clients[lane].name.clone()
        } else if lane < clients + servers {
            scenario.servers[lane - clients].name.clone()
        } else {
            "resource".into()
        };
        let y = lane_y(lane) + lane_h / 2.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            width - 20.0
        );
        let _ = writeln!(s, r#"<text x="10" y="{}">{}</text>"#, y + 4.0, esc(&label));
    }
    // Time axis.
    let axis_y = lane_y(lanes) + 10.0;
    for i in 0..=10 {
        let t = horizon / 10 * i;
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#eee"/>"##,
            x(t),
            top,
            axis_y
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.0}ms</text>"#,
            x(t),
            axis_y + 14.0,
            t as f64 / MS as f64
        );
    }
    // The first overlap, highlighted across every lane.
    if let Some(Problem::Overlap { from, until, .. }) = &run.judgement.first_problem {
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{top}" width="{:.1}" height="{}" fill="#e15759" fill-opacity="0.15"><title>windows overlap {}–{} ms</title></rect>"##,
            x(*from),
            (x(*until) - x(*from)).max(1.0),
            lanes as f64 * lane_h,
            fmt_ms(*from),
            fmt_ms(*until)
        );
    }
    // Pauses.
    for &(client, from, until) in &history.pauses {
        let y = lane_y(client) + 4.0;
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="#999" fill-opacity="0.35"><title>paused {}–{} ms</title></rect>"##,
            x(from),
            (x(until) - x(from)).max(1.0),
            lane_h - 8.0,
            fmt_ms(from),
            fmt_ms(until)
        );
    }
    // Lease windows: one bar per interval of belief.
    for (index, lease) in history.leases.iter().enumerate() {
        let y = lane_y(lease.client) + 9.0;
        let windows = history.windows_of(index);
        for &(from, until) in windows {
            let (x0, x1) = (x(from), x(until));
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{y}" width="{:.1}" height="{}" fill="{}" fill-opacity="0.7"><title>epoch {} fence {}: believed held {}–{} ms (validity until {} ms on its clock)</title></rect>"#,
                (x1 - x0).max(3.0),
                lane_h - 18.0,
                color(lease.epoch),
                lease.epoch,
                lease.fence,
                fmt_ms(from),
                fmt_ms(until),
                fmt_ms(lease.valid_until_local)
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" fill="white">e{} f{}</text>"#,
                x0 + 3.0,
                y + 11.0,
                lease.epoch,
                lease.fence
            );
        }
    }
    // Lock keys on the servers.
    for key in &history.keys {
        let y = lane_y(clients + key.server) + 11.0;
        let fill = epoch_of.get(&key.token).map_or("#bbb", |&e| color(e));
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="{fill}" fill-opacity="0.5"><title>key held by token {} {}–{} ms</title></rect>"#,
            x(key.from),
            (x(key.until) - x(key.from)).max(1.0),
            lane_h - 22.0,
            key.token.short(),
            fmt_ms(key.from),
            fmt_ms(key.until)
        );
    }
    // Accesses.
    let ry = lane_y(resource_lane) + lane_h / 2.0;
    for (i, access) in history.accesses.iter().enumerate() {
        let Some(arrived) = access.arrived_at else {
            continue;
        };
        let fates = run
            .judgement
            .fates
            .get(i)
            .copied()
            .unwrap_or([Fate::Lost; 3]);
        let stroke = match fates {
            [Fate::Stale, ..] => "#d62728",
            [_, Fate::Rejected, _] | [_, _, Fate::Rejected] => "#ff9f1c",
            _ => "#2ca02c",
        };
        let cy = lane_y(access.client) + lane_h / 2.0;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{cy}" x2="{:.1}" y2="{ry}" stroke="{stroke}" stroke-width="1.5"><title>{:?} #{i} epoch {} fence {}: plain {}, fenced {}, strict {}</title></line>"#,
            x(access.sent_at),
            x(arrived),
            access.kind,
            access.epoch,
            access.fence,
            fate_word(fates[0]),
            fate_word(fates[1]),
            fate_word(fates[2])
        );
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{ry}" r="3.5" fill="{stroke}"/>"#,
            x(arrived)
        );
    }
    // Faults and notes.
    for note in &history.notes {
        let lane = scenario
            .clients
            .iter()
            .position(|c| c.name == note.who)
            .or_else(|| {
                scenario
                    .servers
                    .iter()
                    .position(|v| v.name == note.who)
                    .map(|i| clients + i)
            });
        let y = lane.map_or(top - 6.0, |l| lane_y(l) + 6.0);
        let _ = writeln!(
            s,
            r##"<path d="M{0:.1},{1} l-4,-6 h8 z" fill="#333"><title>{2} ms {3}: {4}</title></path>"##,
            x(note.at),
            y,
            fmt_ms(note.at),
            esc(&note.who),
            esc(&note.what)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#555">client bars: lease believed held, in true time (eN fN = epoch, fence) · server bars: lock key held (colour = lease; grey = a failed round)</text>"##,
        height - 26.0
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#555">lines: accesses to the resource (green applied, orange rejected by fencing, red stale when unfenced) · grey shading: pauses · red band: first overlap · triangles: faults</text>"##,
        height - 10.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

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
