//! The space-time diagram of a run (SVG), drawn by hand: one lane per client, server and
//! the resource, true time left to right. Each section has its helper, drawn in this
//! order (later ones on top): lanes, axis, the first overlap, pauses, lease windows, lock
//! keys, accesses, notes, then the legend.

use std::collections::BTreeMap;
use std::fmt::Write;

use redlock_core::Token;

use super::fate_word;
use crate::Run;
use crate::checker::{Fate, Problem};
use crate::scenario::Scenario;
use crate::time::{MS, Nanos, fmt_ms};

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759",
];

/// A lease's colour, by epoch (the same on its holder's lane and on the servers' keys).
fn color(epoch: u64) -> &'static str {
    PALETTE[(epoch as usize + PALETTE.len() - 1) % PALETTE.len()]
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The diagram's geometry: lanes from the top (the clients, the servers, then the
/// resource), true time from `left` up to `horizon`.
struct Frame {
    clients: usize,
    servers: usize,
    lanes: usize,
    left: f64,
    top: f64,
    lane_h: f64,
    width: f64,
    height: f64,
    horizon: Nanos,
}

impl Frame {
    fn new(scenario: &Scenario, run: &Run) -> Self {
        let clients = scenario.clients.len();
        let servers = scenario.servers.len();
        let lanes = clients + servers + 1;
        let (left, top, lane_h, width) = (130.0, 40.0, 34.0, 1100.0);
        let height = top + lanes as f64 * lane_h + 72.0;
        Self {
            clients,
            servers,
            lanes,
            left,
            top,
            lane_h,
            width,
            height,
            horizon: horizon(run),
        }
    }

    /// The x of true time `t` (a time past the horizon is drawn at the horizon).
    fn x(&self, t: Nanos) -> f64 {
        self.left
            + (t.min(self.horizon) as f64 / self.horizon as f64) * (self.width - self.left - 20.0)
    }

    /// The top of lane `lane`.
    fn lane_y(&self, lane: usize) -> f64 {
        self.top + lane as f64 * self.lane_h
    }
}

/// The last time worth drawing (the end of the last window, access, note or pause), with a
/// margin of 5 % and 1 ms.
fn horizon(run: &Run) -> Nanos {
    let history = &run.history;
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
    (horizon as f64 * 1.05) as Nanos + MS
}

/// A space-time diagram of the run: one lane per client, server and the resource; lease
/// windows (believed, in true time) on client lanes; lock-key lifetimes on server lanes;
/// accesses as arrows to the resource (green applied, red stale, orange rejected by fencing);
/// pauses shaded; faults marked; the first overlap highlighted.
pub fn svg(scenario: &Scenario, run: &Run) -> String {
    let f = Frame::new(scenario, run);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">"#,
        f.width, f.height
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
    lanes(&mut s, &f, scenario);
    axis(&mut s, &f);
    overlap(&mut s, &f, run);
    pauses(&mut s, &f, run);
    windows(&mut s, &f, run);
    keys(&mut s, &f, run);
    accesses(&mut s, &f, run);
    notes(&mut s, &f, scenario, run);
    legend(&mut s, &f);
    s.push_str("</svg>\n");
    s
}

/// One labelled line per lane.
fn lanes(s: &mut String, f: &Frame, scenario: &Scenario) {
    for lane in 0..f.lanes {
        let label = if lane < f.clients {
            scenario.clients[lane].name.clone()
        } else if lane < f.clients + f.servers {
            scenario.servers[lane - f.clients].name.clone()
        } else {
            "resource".into()
        };
        let y = f.lane_y(lane) + f.lane_h / 2.0;
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/>"##,
            f.left,
            f.width - 20.0
        );
        let _ = writeln!(s, r#"<text x="10" y="{}">{}</text>"#, y + 4.0, esc(&label));
    }
}

/// The time axis: ten steps, with a faint line across the lanes at each.
fn axis(s: &mut String, f: &Frame) {
    let axis_y = f.lane_y(f.lanes) + 10.0;
    for i in 0..=10 {
        let t = f.horizon / 10 * i;
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#eee"/>"##,
            f.x(t),
            f.top,
            axis_y
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.0}ms</text>"#,
            f.x(t),
            axis_y + 14.0,
            t as f64 / MS as f64
        );
    }
}

/// The first overlap, highlighted across every lane.
fn overlap(s: &mut String, f: &Frame, run: &Run) {
    if let Some(Problem::Overlap { from, until, .. }) = &run.judgement.first_problem {
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{}" width="{:.1}" height="{}" fill="#e15759" fill-opacity="0.15"><title>windows overlap {}–{} ms</title></rect>"##,
            f.x(*from),
            f.top,
            (f.x(*until) - f.x(*from)).max(1.0),
            f.lanes as f64 * f.lane_h,
            fmt_ms(*from),
            fmt_ms(*until)
        );
    }
}

/// The clients' pauses, shaded on their lanes.
fn pauses(s: &mut String, f: &Frame, run: &Run) {
    for &(client, from, until) in &run.history.pauses {
        let y = f.lane_y(client) + 4.0;
        let _ = writeln!(
            s,
            r##"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="#999" fill-opacity="0.35"><title>paused {}–{} ms</title></rect>"##,
            f.x(from),
            (f.x(until) - f.x(from)).max(1.0),
            f.lane_h - 8.0,
            fmt_ms(from),
            fmt_ms(until)
        );
    }
}

/// Lease windows: one bar per interval of belief, on the holder's lane.
fn windows(s: &mut String, f: &Frame, run: &Run) {
    let history = &run.history;
    for (index, lease) in history.leases.iter().enumerate() {
        let y = f.lane_y(lease.client) + 9.0;
        for &(from, until) in history.windows_of(index) {
            let (x0, x1) = (f.x(from), f.x(until));
            let _ = writeln!(
                s,
                r#"<rect x="{x0:.1}" y="{y}" width="{:.1}" height="{}" fill="{}" fill-opacity="0.7"><title>epoch {} fence {}: believed held {}–{} ms (validity until {} ms on its clock)</title></rect>"#,
                (x1 - x0).max(3.0),
                f.lane_h - 18.0,
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
}

/// Lock keys on the servers, coloured by the lease that holds them (grey: a token no lease
/// came of, a failed round).
fn keys(s: &mut String, f: &Frame, run: &Run) {
    let history = &run.history;
    let epoch_of: BTreeMap<Token, u64> =
        history.leases.iter().map(|l| (l.token, l.epoch)).collect();
    for key in &history.keys {
        let y = f.lane_y(f.clients + key.server) + 11.0;
        let fill = epoch_of.get(&key.token).map_or("#bbb", |&e| color(e));
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{y}" width="{:.1}" height="{}" fill="{fill}" fill-opacity="0.5"><title>key held by token {} {}–{} ms</title></rect>"#,
            f.x(key.from),
            (f.x(key.until) - f.x(key.from)).max(1.0),
            f.lane_h - 22.0,
            key.token.short(),
            fmt_ms(key.from),
            fmt_ms(key.until)
        );
    }
}

/// Accesses: a line from the client, when sent, to the resource, when it arrived, coloured
/// by what became of it.
fn accesses(s: &mut String, f: &Frame, run: &Run) {
    let resource_lane = f.clients + f.servers;
    let ry = f.lane_y(resource_lane) + f.lane_h / 2.0;
    for (i, access) in run.history.accesses.iter().enumerate() {
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
        let cy = f.lane_y(access.client) + f.lane_h / 2.0;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{cy}" x2="{:.1}" y2="{ry}" stroke="{stroke}" stroke-width="1.5"><title>{:?} #{i} epoch {} fence {}: plain {}, fenced {}, strict {}</title></line>"#,
            f.x(access.sent_at),
            f.x(arrived),
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
            f.x(arrived)
        );
    }
}

/// Faults and notes: a triangle on the lane of the process named (above the lanes for the
/// network and the rest).
fn notes(s: &mut String, f: &Frame, scenario: &Scenario, run: &Run) {
    for note in &run.history.notes {
        let lane = scenario
            .clients
            .iter()
            .position(|c| c.name == note.who)
            .or_else(|| {
                scenario
                    .servers
                    .iter()
                    .position(|v| v.name == note.who)
                    .map(|i| f.clients + i)
            });
        let y = lane.map_or(f.top - 6.0, |l| f.lane_y(l) + 6.0);
        let _ = writeln!(
            s,
            r##"<path d="M{0:.1},{1} l-4,-6 h8 z" fill="#333"><title>{2} ms {3}: {4}</title></path>"##,
            f.x(note.at),
            y,
            fmt_ms(note.at),
            esc(&note.who),
            esc(&note.what)
        );
    }
}

/// The legend, two lines under the lanes.
fn legend(s: &mut String, f: &Frame) {
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#555">client bars: lease believed held, in true time (eN fN = epoch, fence) · server bars: lock key held (colour = lease; grey = a failed round)</text>"##,
        f.height - 26.0
    );
    let _ = writeln!(
        s,
        r##"<text x="10" y="{}" fill="#555">lines: accesses to the resource (green applied, orange rejected by fencing, red stale when unfenced) · grey shading: pauses · red band: first overlap · triangles: faults</text>"##,
        f.height - 10.0
    );
}
