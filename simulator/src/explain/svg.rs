//! The space-time diagram of a run (SVG), drawn by hand: one lane per client, server and
//! the resource, true time left to right. Each section has its helper, drawn in this
//! order (later ones on top): lanes, axis, the first overlap, pauses, lease windows, lock
//! keys, accesses, notes, then the legend.

use std::collections::BTreeMap;
use std::fmt::Write;

use redlock_core::Token;

use super::derived::Derived;
use super::fate_word;
use crate::Run;
use crate::judge::judgement::{Fate, Problem};
use crate::scenario::Scenario;
use crate::time::{MS, Nanos, fmt_duration, fmt_ms};

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

/// The canvas's width, the lane labels' column and the room kept right of the time axis
/// (half the widest axis label).
const WIDTH: f64 = 1100.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 40.0;
/// The narrowest an interval is drawn, in pixels: wide enough to be seen and counted.
const MIN_OVERLAP_PX: f64 = 6.0;
const MIN_KEY_PX: f64 = 2.0;
const MIN_WINDOW_PX: f64 = 3.0;
/// Text sizes and line heights.
const TITLE_PX: f64 = 13.0;
const TITLE_LINE: f64 = 17.0;
const TEXT_PX: f64 = 11.0;
const TEXT_LINE: f64 = 15.0;
/// The overlap's colour: its band across the lanes, its marker and its label.
const OVERLAP: &str = "#c62828";
const DARK: &str = "#1a1a1a";

/// A generous estimate of a label's width: an average glyph of the common sans-serif fonts
/// is about 0.55 em (0.62 em bold); a little more keeps a label inside in any of them.
fn text_width(text: &str, size: f64, bold: bool) -> f64 {
    let em = if bold { 0.68 } else { 0.62 };
    text.chars().count() as f64 * size * em
}

/// `text` cut at spaces into lines no wider than `width`.
fn wrap(text: &str, width: f64, size: f64, bold: bool) -> Vec<String> {
    crate::explain::text_fit::wrap(text, width, |line| text_width(line, size, bold))
}

/// An `#rrggbb` colour's channels.
fn rgb(hex: &str) -> [f64; 3] {
    let channel =
        |i: usize| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("00"), 16).map_or(0.0, f64::from);
    [channel(1), channel(3), channel(5)]
}

/// `top` painted with `opacity` over `under`.
fn over(top: [f64; 3], opacity: f64, under: [f64; 3]) -> [f64; 3] {
    [0, 1, 2].map(|i| top[i] * opacity + under[i] * (1.0 - opacity))
}

/// The WCAG contrast ratio of two colours (1 to 21).
fn contrast(a: [f64; 3], b: [f64; 3]) -> f64 {
    let luminance = |c: [f64; 3]| {
        let lin = |v: f64| {
            let v = v / 255.0;
            if v <= 0.040_45 {
                v / 12.92
            } else {
                ((v + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
    };
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The text colour, near-black or white, that stands out most from every one of the
/// backgrounds a label may sit on.
fn ink_on(backgrounds: &[[f64; 3]]) -> &'static str {
    let worst = |ink: &str| {
        backgrounds
            .iter()
            .map(|&b| contrast(rgb(ink), b))
            .fold(f64::INFINITY, f64::min)
    };
    if worst("#ffffff") > worst(DARK) {
        "#ffffff"
    } else {
        DARK
    }
}

/// `[x0, x1]` widened about its centre to at least `min` pixels.
fn at_least(x0: f64, x1: f64, min: f64) -> (f64, f64) {
    if x1 - x0 >= min {
        (x0, x1)
    } else {
        let centre = (x0 + x1) / 2.0;
        (centre - min / 2.0, centre + min / 2.0)
    }
}

/// The diagram's geometry: the title, a row for the overlap's marker, lanes from `top` (the
/// clients, the servers, then the resource), the axis, the legend; true time from `left` up
/// to `horizon`.
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
    title: Vec<String>,
    legend: Vec<String>,
    /// The y of the overlap's marker row, when there is an overlap.
    marker_y: Option<f64>,
}

impl Frame {
    fn new(scenario: &Scenario, run: &Run) -> Self {
        let clients = scenario.clients.len();
        let servers = scenario.servers.len();
        let lanes = clients + servers + 1;
        let text_room = WIDTH - 20.0;
        let mut title = wrap(&scenario.name, text_room, TITLE_PX, true);
        title.extend(wrap(
            &format!(
                "seed {}: exclusion {}, plain {}, fenced {}, strict {}",
                run.report.seed,
                run.report.exclusion,
                run.report.verdicts[0],
                run.report.verdicts[1],
                run.report.verdicts[2]
            ),
            text_room,
            TITLE_PX,
            true,
        ));
        let mut y = 8.0 + title.len() as f64 * TITLE_LINE;
        let marker_y =
            matches!(run.judgement.first_problem, Some(Problem::Overlap { .. })).then(|| {
                y += 18.0;
                y - 10.0
            });
        // The faults' triangles above the lanes.
        let top = y + 18.0;
        let lane_h = 34.0;
        let legend: Vec<String> = LEGEND
            .iter()
            .flat_map(|l| wrap(l, text_room, TEXT_PX, false))
            .collect();
        let height = top + lanes as f64 * lane_h + 34.0 + legend.len() as f64 * TEXT_LINE + 8.0;
        Self {
            clients,
            servers,
            lanes,
            left: LEFT,
            top,
            lane_h,
            width: WIDTH,
            height,
            horizon: horizon(run),
            title,
            legend,
            marker_y,
        }
    }

    /// The x of true time `t` (a time past the horizon is drawn at the horizon).
    fn x(&self, t: Nanos) -> f64 {
        self.left
            + (t.min(self.horizon) as f64 / self.horizon as f64) * (self.width - self.left - RIGHT)
    }

    /// The top of lane `lane`.
    fn lane_y(&self, lane: usize) -> f64 {
        self.top + lane as f64 * self.lane_h
    }

    /// The first overlap's span on the canvas, widened to be seen.
    fn overlap_x(&self, run: &Run) -> Option<(f64, f64)> {
        match &run.judgement.first_problem {
            Some(Problem::Overlap { from, until, .. }) => {
                Some(at_least(self.x(*from), self.x(*until), MIN_OVERLAP_PX))
            }
            _ => None,
        }
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
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {0} {1}" font-family="sans-serif" font-size="{TEXT_PX}">"#,
        f.width, f.height
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, line) in f.title.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="10" y="{}" font-size="{TITLE_PX}" font-weight="bold">{}</text>"#,
            4.0 + (i + 1) as f64 * TITLE_LINE,
            esc(line)
        );
    }
    lanes(&mut s, &f, scenario);
    axis(&mut s, &f);
    overlap(&mut s, &f, run);
    pauses(&mut s, &f, run);
    windows(&mut s, &f, run);
    keys(&mut s, &f, run);
    accesses(&mut s, &f, run, &Derived::new(scenario, run));
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
            f.width - RIGHT
        );
        let _ = writeln!(s, r#"<text x="10" y="{}">{}</text>"#, y + 4.0, esc(&label));
    }
}

/// The time axis: round steps (1, 2 or 5 times a power of ten, about ten of them), with a
/// faint line across the lanes at each, and as many decimals as the step needs.
fn axis(s: &mut String, f: &Frame) {
    let axis_y = f.lane_y(f.lanes) + 10.0;
    let rough = f.horizon as f64 / 10.0 / MS as f64;
    let power = 10f64.powf(rough.log10().floor());
    let step_ms = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|&s| s >= rough)
        .unwrap_or(10.0 * power);
    let decimals = (-step_ms.log10().floor()).max(0.0) as usize;
    let step = (step_ms * MS as f64).round().max(1.0) as Nanos;
    let mut t: Nanos = 0;
    while t <= f.horizon {
        let _ = writeln!(
            s,
            r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#eee"/>"##,
            f.x(t),
            f.top,
            axis_y
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{:.decimals$}ms</text>"#,
            f.x(t),
            axis_y + 14.0,
            t as f64 / MS as f64
        );
        t += step;
    }
}

/// The first overlap: a band across every lane and a solid marker above them, both at least
/// `MIN_OVERLAP_PX` wide however short the overlap, and its duration written beside the
/// marker (on its right, or on its left when the right has no room).
fn overlap(s: &mut String, f: &Frame, run: &Run) {
    let (Some(Problem::Overlap { from, until, .. }), Some((x0, x1)), Some(marker_y)) =
        (&run.judgement.first_problem, f.overlap_x(run), f.marker_y)
    else {
        return;
    };
    let _ = writeln!(
        s,
        r#"<rect x="{x0:.1}" y="{}" width="{:.1}" height="{}" fill="{OVERLAP}" fill-opacity="0.15"><title>windows overlap {}–{} ms</title></rect>"#,
        f.top,
        x1 - x0,
        f.lanes as f64 * f.lane_h,
        fmt_ms(*from),
        fmt_ms(*until)
    );
    let _ = writeln!(
        s,
        r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="10" fill="{OVERLAP}"/>"#,
        marker_y - 5.0,
        x1 - x0
    );
    let label = format!(
        "first overlap: {} ({}–{} ms)",
        fmt_duration(until.saturating_sub(*from)),
        short_ms(*from),
        short_ms(*until)
    );
    let (x, anchor) = if x1 + 6.0 + text_width(&label, TEXT_PX, false) <= f.width - 10.0 {
        (x1 + 6.0, "start")
    } else {
        (x0 - 6.0, "end")
    };
    let _ = writeln!(
        s,
        r#"<text x="{x:.1}" y="{:.1}" text-anchor="{anchor}" fill="{OVERLAP}">{}</text>"#,
        marker_y + 4.0,
        esc(&label)
    );
}

/// A duration in milliseconds without trailing zeros (`2`, `12003.5`).
fn short_ms(t: Nanos) -> String {
    let text = format!("{:.3}", t as f64 / MS as f64);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
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

/// Lease windows: one bar per interval of belief, on the holder's lane, labelled with its
/// epoch and fence: inside the bar in the colour that stands out from it (over the white,
/// the overlap's band or a pause's shading), or just right of a bar too narrow to hold it,
/// in dark ink on the lane.
fn windows(s: &mut String, f: &Frame, run: &Run) {
    let history = &run.history;
    let white = [255.0; 3];
    let band = over(rgb(OVERLAP), 0.15, white);
    let shade = over(rgb("#999999"), 0.35, white);
    // Every bar, by lane and left edge: a label beside a bar must end before the next one.
    let mut bars: Vec<(usize, f64, f64, usize, Nanos, Nanos)> = Vec::new();
    for (index, lease) in history.leases.iter().enumerate() {
        for &(from, until) in history.windows_of(index) {
            let x0 = f.x(from);
            let width = (f.x(until) - x0).max(MIN_WINDOW_PX);
            bars.push((lease.client, x0, width, index, from, until));
        }
    }
    bars.sort_by(|a, b| {
        (a.0, a.1)
            .partial_cmp(&(b.0, b.1))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    for (i, &(lane, x0, width, index, from, until)) in bars.iter().enumerate() {
        let lease = &history.leases[index];
        let y = f.lane_y(lane) + 9.0;
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{y}" width="{width:.1}" height="{}" fill="{}" fill-opacity="0.7"><title>epoch {} fence {}: believed held {}–{} ms (validity until {} ms on its clock)</title></rect>"#,
            f.lane_h - 18.0,
            color(lease.epoch),
            lease.epoch,
            lease.fence,
            fmt_ms(from),
            fmt_ms(until),
            fmt_ms(lease.valid_until_local)
        );
        let label = format!("e{} f{}", lease.epoch, lease.fence);
        let needed = text_width(&label, TEXT_PX, false) + 6.0;
        let next = bars
            .get(i + 1)
            .filter(|b| b.0 == lane)
            .map_or(f.width - 10.0, |b| b.1);
        let (x, ink) = if needed <= width {
            let backgrounds =
                [white, band, shade].map(|under| over(bar_rgb(lease.epoch), 0.7, under));
            (x0 + 3.0, ink_on(&backgrounds))
        } else if x0 + width + needed <= next {
            (x0 + width + 3.0, DARK)
        } else {
            // No room inside or beside: the bar's tooltip names it.
            continue;
        };
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{}" fill="{ink}">{label}</text>"#,
            y + 11.0,
        );
    }
}

fn bar_rgb(epoch: u64) -> [f64; 3] {
    rgb(color(epoch))
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
            (f.x(key.until) - f.x(key.from)).max(MIN_KEY_PX),
            f.lane_h - 22.0,
            key.token.short(),
            fmt_ms(key.from),
            fmt_ms(key.until)
        );
    }
}

/// Accesses: a line from the client, when sent, to the resource, when it arrived, coloured
/// by what became of it.
fn accesses(s: &mut String, f: &Frame, run: &Run, derived: &Derived) {
    let resource_lane = f.clients + f.servers;
    let ry = f.lane_y(resource_lane) + f.lane_h / 2.0;
    for (i, (access, &fates)) in run.history.accesses.iter().zip(&derived.fates).enumerate() {
        let Some(arrived) = access.arrived_at else {
            continue;
        };
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

/// The legend's sentences, wrapped to the canvas under the axis.
const LEGEND: [&str; 2] = [
    "client bars: lease believed held, in true time (eN fN = epoch, fence) · server bars: lock key held (colour = lease; grey = a failed round)",
    "lines: accesses to the resource (green applied, orange rejected by fencing, red stale when unfenced) · grey shading: pauses · red band and marker: first overlap (drawn at least 6 px wide) · triangles: faults",
];

/// The legend, under the axis.
fn legend(s: &mut String, f: &Frame) {
    let first = f.height - 8.0 - (f.legend.len() as f64 - 1.0) * TEXT_LINE - 4.0;
    for (i, line) in f.legend.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="10" y="{:.1}" fill="#555">{}</text>"##,
            first + i as f64 * TEXT_LINE,
            esc(line)
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::explain::svg_check::{near, render};

    fn scenario(file: &str) -> Scenario {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        Scenario::load(&dir.join(file)).expect("the scenario loads")
    }

    fn diagram(scenario: &Scenario) -> (Run, String) {
        let run = crate::run(scenario, scenario.seed, false).expect("the run ends");
        let svg = svg(scenario, &run);
        (run, svg)
    }

    #[test]
    fn the_clock_jump_overlap_is_seen_and_measured() {
        // RL-04's overlap lasts 2 ms of a run of several seconds: a tenth of a pixel at
        // its true width. Its marker must be a few pixels across, in its own colour.
        let scenario = scenario("rl-04-node-clock-jump-bare-majority.toml");
        let (run, svg) = diagram(&scenario);
        let picture = render(&svg);
        picture.save_if_asked("rl-04");
        let frame = Frame::new(&scenario, &run);
        let row = frame.marker_y.expect("RL-04 has an overlap") as u32;
        let red = rgb(OVERLAP).map(|c| c as u8);
        let across = (0..picture.width())
            .filter(|&x| near(picture.rgb(x, row), red, 8))
            .count();
        assert!(across >= 5, "the overlap's marker is {across} px across");
        let Some(Problem::Overlap { from, until, .. }) = &run.judgement.first_problem else {
            panic!("RL-04's first problem is its overlap");
        };
        let written = format!("first overlap: {}", fmt_duration(until - from));
        assert!(until - from < 3 * MS && svg.contains(&written), "{written}");
        picture.assert_inside_canvas();
        picture.assert_labels_readable();
        picture.assert_labels_apart();
    }

    #[test]
    fn every_catalogue_diagram_is_readable() {
        // Whatever the run (short leases, pauses, many clients, long names): nothing past
        // the canvas, every label readable on what lies under it, no label on another.
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("the catalogue")
            .map(|e| e.expect("an entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        assert!(files.len() > 20, "the catalogue is there");
        for file in files {
            let scenario = Scenario::load(&file).expect("the scenario loads");
            let (_, svg) = diagram(&scenario);
            let picture = render(&svg);
            let name = file.file_stem().map(|s| s.to_string_lossy().into_owned());
            picture.save_if_asked(&name.unwrap_or_default());
            let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                picture.assert_inside_canvas();
                picture.assert_labels_readable();
                picture.assert_labels_apart();
            }));
            assert!(checks.is_ok(), "{}", file.display());
        }
    }

    #[test]
    fn a_long_title_wraps_inside_the_canvas() {
        let mut scenario = scenario("rl-04-node-clock-jump-bare-majority.toml");
        scenario.name = "a scenario whose name goes on ".repeat(8);
        let (_, svg) = diagram(&scenario);
        assert!(
            svg.matches("font-weight=\"bold\"").count() >= 3,
            "the title wraps"
        );
        let picture = render(&svg);
        picture.assert_inside_canvas();
        picture.assert_labels_apart();
    }

    #[test]
    fn labels_take_the_ink_that_stands_out() {
        // Dark ink on a light bar, white on a dark one; both at least 4.5 to 1.
        for fill in PALETTE {
            let bar = over(rgb(fill), 0.7, [255.0; 3]);
            let ink = ink_on(&[bar]);
            assert!(contrast(rgb(ink), bar) >= 4.5, "{ink} on {fill}");
        }
        assert_eq!(ink_on(&[rgb("#202020")]), "#ffffff");
        assert_eq!(ink_on(&[rgb("#f0f0f0")]), DARK);
    }
}
