//! Turns the benchmarks' results (criterion's `target/criterion`) into the tables, target
//! ratios and latency chart of `docs/benchmarks.md`.
//!
//! ```text
//! cargo bench -p redlock-benches                                          # measure (a quarter of an hour)
//! cargo run --release -p redlock-benches --bin bench_report               # print the report
//! cargo run --release -p redlock-benches --bin bench_report -- --write docs/benchmarks.md
//! cargo run --release -p redlock-benches --bin bench_report -- --chart docs/benchmarks.md
//! ```
//!
//! With `--write FILE`, the text between `<!-- results:begin -->` and `<!-- results:end -->`
//! in FILE is replaced and the chart goes to `img/bench-latency.svg` beside it. Every figure
//! is a median of one run of `cargo bench`. With `--chart FILE`, only the chart is redrawn,
//! from the latency table in FILE (for a change of the drawing, without measuring again). The interleaved ratios of `benches/paired.rs`
//! are used only when they are at least as recent as the oldest criterion result (the same
//! run, or a later one).

use std::collections::BTreeMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const BEGIN: &str = "<!-- results:begin -->";
const END: &str = "<!-- results:end -->";

/// One benchmark's outcome: its median and, where criterion knew it, the elements one
/// iteration processes.
#[derive(Clone, Copy, Debug)]
struct Measured {
    median_ns: f64,
    elements: Option<f64>,
}

/// Results by `group/function/value` (criterion's full id), and the interleaved ratios of
/// `benches/paired.rs` when it ran.
struct Results(BTreeMap<String, Measured>, Option<Value>);

impl Results {
    /// Reads every `new/` result under `root`.
    fn load(root: &Path) -> Result<Self> {
        let mut found = BTreeMap::new();
        let mut oldest: Option<std::time::SystemTime> = None;
        let mut pending = vec![root.to_path_buf()];
        while let Some(dir) = pending.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|e| {
                format!(
                    "{}: {e} (run `cargo bench -p redlock-benches` first)",
                    dir.display()
                )
            })?;
            for entry in entries {
                let path = entry?.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.ends_with("new/benchmark.json") {
                    let modified = std::fs::metadata(&path)?.modified()?;
                    oldest = Some(oldest.map_or(modified, |o| o.min(modified)));
                    let folder = path.parent().ok_or("a result file has a folder")?;
                    let benchmark = read_json(&path)?;
                    let estimates = read_json(&folder.join("estimates.json"))?;
                    let id = benchmark["full_id"]
                        .as_str()
                        .ok_or_else(|| format!("{}: no full_id", path.display()))?;
                    let median_ns = estimates["median"]["point_estimate"]
                        .as_f64()
                        .ok_or_else(|| format!("{}: no median", path.display()))?;
                    let elements = benchmark["throughput"]["Elements"].as_f64();
                    found.insert(
                        id.to_owned(),
                        Measured {
                            median_ns,
                            elements,
                        },
                    );
                }
            }
        }
        if found.is_empty() {
            return Err(format!(
                "no results under {}: run `cargo bench -p redlock-benches` first",
                root.display()
            )
            .into());
        }
        let paired = root.join("paired").join("ratios.json");
        let fresh = |path: &Path| -> bool {
            let modified = std::fs::metadata(path).and_then(|m| m.modified());
            matches!((modified, oldest), (Ok(m), Some(o)) if m >= o)
        };
        let paired = if fresh(&paired) {
            Some(read_json(&paired)?)
        } else {
            None
        };
        Ok(Self(found, paired))
    }

    /// An interleaved ratio: (median, first quartile, third quartile).
    fn paired(&self, key: &str) -> Option<(f64, f64, f64)> {
        let ratio = self.1.as_ref()?.get(key)?;
        Some((
            ratio["median"].as_f64()?,
            ratio["q1"].as_f64()?,
            ratio["q3"].as_f64()?,
        ))
    }

    fn get(&self, id: &str) -> Option<Measured> {
        self.0.get(id).copied()
    }

    /// The median in microseconds.
    fn micros(&self, id: &str) -> Option<f64> {
        self.get(id).map(|m| m.median_ns / 1e3)
    }

    /// Elements per second at the median.
    fn per_second(&self, id: &str) -> Option<f64> {
        let m = self.get(id)?;
        Some(m.elements.unwrap_or(1.0) / (m.median_ns / 1e9))
    }
}

fn read_json(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?)
}

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.decimals$}"))
}

fn thousands(value: Option<f64>) -> String {
    value.map_or_else(
        || "–".to_owned(),
        |v| {
            let digits = format!("{:.0}", v);
            let mut out = String::new();
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i) % 3 == 0 {
                    out.push(',');
                }
                out.push(c);
            }
            out
        },
    )
}

const SIZES: [u32; 4] = [1, 3, 5, 7];

/// The latency table: one row per contender, one column per N.
fn latency_table(results: &Results, out: &mut String) {
    out.push_str(
        "Uncontended acquire + release, median µs (`benches/latency.rs`; mt: multi-thread \
         runtime with two workers, ct: current-thread):\n\n",
    );
    out.push_str("| contender | N = 1 | N = 3 | N = 5 | N = 7 |\n|---|---:|---:|---:|---:|\n");
    for (label, function) in LATENCY_SERIES {
        let _ = write!(out, "| {label} |");
        for n in SIZES {
            let id = format!("acquire_release/{function}/{n}");
            let _ = write!(out, " {} |", cell(results.micros(&id), 0));
        }
        out.push('\n');
    }
    out.push('\n');
}

const LATENCY_SERIES: [(&str, &str); 8] = [
    ("ours, mt", "ours_mt"),
    ("floor deciding at quorum, mt", "floor_quorum_mt"),
    ("floor waiting for all, mt", "floor_all_mt"),
    ("rslock 0.10, mt", "rslock_mt"),
    ("ours, ct", "ours_ct"),
    ("floor deciding at quorum, ct", "floor_quorum_ct"),
    ("floor waiting for all, ct", "floor_all_ct"),
    ("redlock-rs 2.0 (blocking)", "redlock_rs"),
];

fn tail_table(results: &Results, out: &mut String) {
    out.push_str(
        "One of five nodes unhealthy, acquire + release, median µs (`benches/tail.rs`; every \
         node behind a proxy, multi-thread runtime):\n\n",
    );
    out.push_str(
        "| contender | healthy | node 4 20 ms slower | node 4 paused |\n|---|---:|---:|---:|\n",
    );
    for (label, function) in [
        ("ours", "ours"),
        ("floor deciding at quorum", "floor_quorum"),
        ("rslock 0.10", "rslock"),
    ] {
        let _ = write!(out, "| {label} |");
        for condition in ["healthy", "slow_20ms", "paused"] {
            let id = format!("unhealthy_node/{function}/{condition}");
            let _ = write!(out, " {} |", cell(results.micros(&id), 0));
        }
        out.push('\n');
    }
    out.push('\n');
}

fn throughput_table(results: &Results, out: &mut String) {
    out.push_str(
        "Throughput, acquire + release per second on distinct resources, N = 5 \
         (`benches/throughput.rs`, multi-thread runtime):\n\n",
    );
    out.push_str("| contender | 1 task | 16 tasks | 64 tasks |\n|---|---:|---:|---:|\n");
    for (label, function) in [
        ("ours", "ours"),
        ("floor waiting for all", "floor_all"),
        ("rslock 0.10", "rslock"),
    ] {
        let _ = write!(out, "| {label} |");
        for tasks in [1, 16, 64] {
            let id = format!("throughput/{function}/{tasks}");
            let _ = write!(out, " {} |", thousands(results.per_second(&id)));
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\nContended, 16 workers on one resource: ours {} acquisitions/s, rslock {}.\n",
        thousands(results.per_second("contended_16_workers/ours")),
        thousands(results.per_second("contended_16_workers/rslock")),
    );
}

fn other_table(results: &Results, out: &mut String) {
    out.push_str("The rest:\n\n| measurement | median |\n|---|---:|\n");
    for n in [3, 5, 7] {
        let _ = writeln!(
            out,
            "| core alone, one acquire round, N = {n} (`benches/core.rs`) | {} ns |",
            cell(
                results
                    .get(&format!("core/acquire_round/{n}"))
                    .map(|m| m.median_ns),
                0
            )
        );
    }
    let _ = writeln!(
        out,
        "| core alone, one release round, N = 5 | {} ns |",
        cell(results.get("core/release_round/5").map(|m| m.median_ns), 0)
    );
    for variant in ["plain", "fenced"] {
        let _ = writeln!(
            out,
            "| acquire + release, N = 5, {variant} (`benches/fencing.rs`) | {} µs |",
            cell(results.micros(&format!("acquire_release_n5/{variant}")), 0)
        );
    }
    let _ = writeln!(
        out,
        "| simulator, standard scenario (`benches/simulator.rs`) | {} events/s |",
        thousands(results.per_second("simulator/events_rl18"))
    );
    let _ = writeln!(
        out,
        "| simulator, whole catalogue × 100 seeds | {} s |",
        cell(
            results
                .get("simulator/catalogue_x100_seeds")
                .map(|m| m.median_ns / 1e9),
            2
        )
    );
    let millis = |id: &str| results.get(id).map(|m| m.median_ns / 1e6);
    let _ = writeln!(
        out,
        "| simulator, merge of 10⁴ runs' JSON Lines (`benches/simulator_outputs.rs`) | {} ms |",
        cell(millis("simulator_outputs/merge_10k_runs_jsonl"), 0)
    );
    let _ = writeln!(
        out,
        "| simulator, writing the page of a 30 s run | {} ms |",
        cell(millis("simulator_outputs/page_30s_write"), 1)
    );
    let _ = writeln!(
        out,
        "| headless Chromium loading that page, start-up included | {} ms |",
        cell(millis("simulator_outputs/page_30s_headless_load"), 0)
    );
    let _ = writeln!(
        out,
        "| headless Chromium loading an empty page | {} ms |\n",
        cell(millis("simulator_outputs/empty_page_headless_load"), 0)
    );
}

/// What loading the 30 s run's page in headless Chromium costs beyond the browser's own
/// start-up: the median load of the page less the median load of an empty page.
fn page_render_ns(results: &Results) -> Option<f64> {
    let page = results.get("simulator_outputs/page_30s_headless_load")?;
    let empty = results.get("simulator_outputs/empty_page_headless_load")?;
    Some(page.median_ns - empty.median_ns)
}

/// A target: its text, the ratio measured by criterion (contenders one after another), the
/// key of its interleaved measurement, and the bound it must meet.
struct Target {
    text: String,
    ratio: Option<f64>,
    paired: Option<String>,
    at_most: Option<f64>,
    at_least: Option<f64>,
}

impl Target {
    fn at_most(text: impl Into<String>, ratio: Option<f64>, paired: &str, bound: f64) -> Self {
        Self {
            text: text.into(),
            ratio,
            paired: (!paired.is_empty()).then(|| paired.to_owned()),
            at_most: Some(bound),
            at_least: None,
        }
    }

    fn at_least(text: impl Into<String>, ratio: Option<f64>, paired: &str, bound: f64) -> Self {
        Self {
            text: text.into(),
            ratio,
            paired: (!paired.is_empty()).then(|| paired.to_owned()),
            at_most: None,
            at_least: Some(bound),
        }
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn targets(results: &Results) -> Vec<Target> {
    let us = |id: &str| results.micros(id);
    let rate = |id: &str| results.per_second(id);
    let mut targets = Vec::new();
    for (runtime, name) in [("mt", "multi-thread"), ("ct", "current-thread")] {
        for n in [1, 3, 5, 7] {
            targets.push(Target::at_most(
                format!("ours ÷ quorum floor, N = {n}, {name}"),
                ratio(
                    us(&format!("acquire_release/ours_{runtime}/{n}")),
                    us(&format!("acquire_release/floor_quorum_{runtime}/{n}")),
                ),
                &format!("ours_floor_{runtime}_n{n}"),
                if n == 5 { 1.05 } else { 1.1 },
            ));
        }
    }
    for n in [1, 3, 5] {
        targets.push(Target::at_least(
            format!("rslock ÷ ours (speed-up), N = {n}, multi-thread"),
            ratio(
                us(&format!("acquire_release/rslock_mt/{n}")),
                us(&format!("acquire_release/ours_mt/{n}")),
            ),
            &format!("rslock_ours_mt_n{n}"),
            if n == 5 { 1.3 } else { 1.0 },
        ));
    }
    targets.extend([
        Target::at_most(
            "ours with a node 20 ms slow ÷ healthy quorum floor",
            ratio(
                us("unhealthy_node/ours/slow_20ms"),
                us("unhealthy_node/floor_quorum/healthy"),
            ),
            "slow_ours_floor_healthy",
            1.2,
        ),
        Target::at_most(
            "ours with a node paused ÷ healthy quorum floor",
            ratio(
                us("unhealthy_node/ours/paused"),
                us("unhealthy_node/floor_quorum/healthy"),
            ),
            "paused_ours_floor_healthy",
            1.2,
        ),
        Target::at_least(
            "throughput at 64 tasks, ours ÷ wait-all floor",
            ratio(rate("throughput/ours/64"), rate("throughput/floor_all/64")),
            "throughput_ours_floor_all",
            1.0,
        ),
        Target::at_least(
            "throughput at 64 tasks, ours ÷ rslock",
            ratio(rate("throughput/ours/64"), rate("throughput/rslock/64")),
            "throughput_ours_rslock",
            1.5,
        ),
        Target::at_least(
            "contended, 16 workers: acquisitions/s, ours ÷ rslock (its default retries)",
            ratio(
                rate("contended_16_workers/ours"),
                rate("contended_16_workers/rslock"),
            ),
            "contended_ours_rslock",
            3.0,
        ),
        Target::at_least(
            "contended, 16 workers: acquisitions/s, ours ÷ a floor spinning on one-round attempts",
            None,
            "contended_ours_floor_spin",
            1.0,
        ),
        Target::at_most(
            "contended, 16 workers: hand-off p50 (a release to the next grant), ms",
            None,
            "contended_handoff_ms",
            1.0,
        ),
        Target::at_least(
            "contended, 16 workers: the least-served worker's share of a fair share, over 10 s",
            None,
            "contended_least_share",
            0.25,
        ),
        Target::at_least(
            "one of five nodes stopped 2 s under 64 tasks: acquisitions/s ÷ healthy",
            None,
            "overload_stopped_healthy",
            0.8,
        ),
        Target::at_least(
            "simulator, million events/s (one core)",
            rate("simulator/events_rl18").map(|r| r / 1e6),
            "",
            2.0,
        ),
        Target::at_most(
            "simulator, merging 10⁴ runs' JSON Lines from 4 shards into the table, s",
            results
                .get("simulator_outputs/merge_10k_runs_jsonl")
                .map(|m| m.median_ns / 1e9),
            "",
            1.0,
        ),
        Target::at_most(
            "simulator, page of a 30 s run in headless Chromium (its load less an empty page's), s",
            page_render_ns(results).map(|ns| ns / 1e9),
            "",
            1.0,
        ),
    ]);
    targets
}

fn targets_table(results: &Results, out: &mut String) {
    out.push_str(
        "Targets. *One after another*: the ratio of criterion's medians below, each \
         contender measured in its own phase. *Interleaved*: `benches/paired.rs`, the \
         contenders taking turns in short blocks, round after round; the median of the \
         per-round ratios, with its quartiles. The verdict uses the interleaved ratio where \
         there is one.\n\n\
         | target | one after another | interleaved (quartiles) | bound | met |\n\
         |---|---:|---:|---:|---|\n",
    );
    for target in targets(results) {
        let paired = target.paired.as_deref().and_then(|key| results.paired(key));
        let judged = paired.map(|(median, _, _)| median).or(target.ratio);
        let (bound, met) = match (target.at_most, target.at_least, judged) {
            (Some(max), _, Some(r)) => (format!("≤ {max}"), r <= max),
            (_, Some(min), Some(r)) => (format!("≥ {min}"), r >= min),
            (Some(max), _, None) => (format!("≤ {max}"), false),
            (_, Some(min), None) => (format!("≥ {min}"), false),
            (None, None, _) => (String::new(), false),
        };
        let measured = cell(target.ratio, 2);
        let interleaved = paired.map_or_else(
            || cell(None, 2),
            |(median, q1, q3)| format!("{median:.2} ({q1:.2}–{q3:.2})"),
        );
        let verdict = match (judged, met) {
            (None, _) => "not measured",
            (_, true) => "yes",
            (_, false) => "**no**",
        };
        let _ = writeln!(
            out,
            "| {} | {measured} | {interleaved} | {bound} | {verdict} |",
            target.text
        );
    }
    out.push('\n');
    let context = [
        (
            "the floor with node 4 slow ÷ the floor healthy",
            "slow_floor_floor_healthy",
        ),
        (
            "the floor with node 4 paused ÷ the floor healthy",
            "paused_floor_floor_healthy",
        ),
        (
            "ours ÷ the floor, both with node 4 slow",
            "slow_ours_floor_slow",
        ),
        (
            "ours ÷ the floor, both with node 4 paused",
            "paused_ours_floor_paused",
        ),
    ];
    if context.iter().any(|(_, key)| results.paired(key).is_some()) {
        out.push_str("Interleaved, for context:\n\n| ratio | median (quartiles) |\n|---|---:|\n");
        for (text, key) in context {
            if let Some((median, q1, q3)) = results.paired(key) {
                let _ = writeln!(out, "| {text} | {median:.2} ({q1:.2}–{q3:.2}) |");
            }
        }
        out.push('\n');
    }
}

/// One line of the latency chart: a contender's median µs at each N.
struct LatencyLine {
    label: String,
    /// The current-thread flavour, dashed beside its multi-thread line of the same colour.
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// The latency chart's lines, from criterion's results.
fn latency_lines(results: &Results) -> Vec<LatencyLine> {
    LATENCY_SERIES
        .iter()
        .map(|(label, function)| LatencyLine {
            label: (*label).to_owned(),
            dashed: function.ends_with("_ct"),
            points: SIZES
                .iter()
                .filter_map(|n| {
                    results
                        .micros(&format!("acquire_release/{function}/{n}"))
                        .map(|us| (f64::from(*n), us))
                })
                .collect(),
        })
        .filter(|line| !line.points.is_empty())
        .collect()
}

/// The latency chart's lines, from the latency table of a results section this program
/// wrote (the numbers the document shows, to the µs): to redraw the chart without measuring.
fn latency_lines_from_doc(doc: &str) -> Result<Vec<LatencyLine>> {
    let header = "| contender | N = 1 | N = 3 | N = 5 | N = 7 |";
    let start = doc
        .find(header)
        .ok_or("no latency table (`| contender | N = 1 | …`) in the document")?;
    let mut lines = Vec::new();
    for row in doc[start..].lines().skip(2) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        if cells.len() < 6 {
            break;
        }
        let Some((_, function)) = LATENCY_SERIES.iter().find(|(l, _)| *l == cells[1]) else {
            continue;
        };
        let points = SIZES
            .iter()
            .zip(&cells[2..6])
            .filter_map(|(n, cell)| cell.parse::<f64>().ok().map(|us| (f64::from(*n), us)))
            .collect::<Vec<_>>();
        if !points.is_empty() {
            lines.push(LatencyLine {
                label: cells[1].to_owned(),
                dashed: function.ends_with("_ct"),
                points,
            });
        }
    }
    if lines.is_empty() {
        return Err("the latency table has no row of figures".into());
    }
    Ok(lines)
}

/// The ticks of a log axis from `low` to `high`: 1, 2 and 5 times each power of ten.
fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut power = 10f64.powf(low.log10().floor());
    while power <= high {
        for m in [1.0, 2.0, 5.0] {
            let tick = m * power;
            if (low..=high).contains(&tick) {
                ticks.push(tick);
            }
        }
        power *= 10.0;
    }
    ticks
}

/// The 1-2-5 value at or below `v` (`down`), or at or above it.
fn round_125(v: f64, down: bool) -> f64 {
    let power = 10f64.powf(v.log10().floor());
    let steps = [1.0, 2.0, 5.0, 10.0].map(|m| m * power);
    if down {
        steps.into_iter().rev().find(|&s| s <= v).unwrap_or(power)
    } else {
        steps.into_iter().find(|&s| s >= v).unwrap_or(10.0 * power)
    }
}

fn px(v: f64) -> i32 {
    // Pixel coordinates of a chart of a few hundred pixels: always in range.
    #[allow(clippy::cast_possible_truncation)]
    let v = v.round() as i32;
    v
}

/// Where each line's markers went: (line, centre in pixels).
type Markers = Vec<(usize, (i32, i32))>;

/// The colours of the contenders, shared by a contender's two flavours, in the order of
/// `LATENCY_SERIES` with its current-thread half after the multi-thread one.
const LINE_COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(230, 120, 0),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(31, 119, 180),
    RGBColor(140, 86, 75),
];

/// Latency against N, on a log scale (redlock-rs is an order of magnitude slower), with a
/// labelled tick at 1, 2 and 5 times each power of ten. Lines of equal values would hide
/// each other: each line is drawn a few pixels apart across (in the legend's order), the
/// multi-thread flavour solid with circles, the current-thread one dashed with squares.
fn latency_chart(lines: &[LatencyLine]) -> Result<(String, Markers)> {
    let values = || lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (min, max) = (
        values().fold(f64::INFINITY, f64::min),
        values().fold(0.0, f64::max),
    );
    if !(min > 0.0 && max.is_finite()) {
        return Err("no latency to draw".into());
    }
    let (low, high) = (round_125(min / 1.05, true), round_125(max * 1.05, false));
    let rows = i32::try_from(lines.len().div_ceil(2)).unwrap_or(4);
    let height = 440 + u32::try_from(rows * 22 + 40).unwrap_or(140);
    let mut markers = Vec::new();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, height)).into_drawing_area();
        let fail = |e: &dyn std::fmt::Display| e.to_string();
        root.fill(&WHITE).map_err(|e| fail(&e))?;
        let (plot, legend_area) = root.split_vertically(440);
        let mut chart = ChartBuilder::on(&plot)
            .caption(
                "acquire + release, median latency against the number of nodes",
                ("sans-serif", 19),
            )
            .margin(12)
            .margin_right(24)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                0.5f64..7.5f64,
                (low..high)
                    .log_scale()
                    .with_key_points(log_ticks(low, high)),
            )
            .map_err(|e| fail(&e))?;
        chart
            .configure_mesh()
            .x_desc("nodes (N)")
            .y_desc("µs, log scale")
            .x_labels(8)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| fail(&e))?;
        let middle = (lines.len() as f64 - 1.0) / 2.0;
        // Each line a few pixels left or right of its N (in the legend's order), markers
        // on it: equal values stay side by side instead of on top of each other.
        let placed: Vec<Vec<(i32, i32)>> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let across = (i as f64 - middle) * 5.0;
                line.points
                    .iter()
                    .map(|p| {
                        let (x, y) = chart.backend_coord(p);
                        (px(f64::from(x) + across), y)
                    })
                    .collect()
            })
            .collect();
        // Every line before every marker, so that no line hides a marker.
        for ((line, points), color) in lines.iter().zip(&placed).zip(LINE_COLORS) {
            let style = color.stroke_width(2);
            if line.dashed {
                root.draw(&plotters::element::DashedPathElement::new(
                    points.clone(),
                    6,
                    4,
                    style,
                ))
                .map_err(|e| fail(&e))?;
            } else {
                root.draw(&PathElement::new(points.clone(), style))
                    .map_err(|e| fail(&e))?;
            }
        }
        for (i, ((line, points), color)) in lines.iter().zip(&placed).zip(LINE_COLORS).enumerate() {
            for &centre in points {
                draw_marker(&root, line.dashed, centre, color).map_err(|e| fail(&e))?;
                markers.push((i, centre));
            }
        }
        for (slot, (line, color)) in lines.iter().zip(LINE_COLORS).enumerate() {
            let column = i32::try_from(slot % 2).unwrap_or(0);
            let row = i32::try_from(slot / 2).unwrap_or(0);
            let (x, y) = (60 + column * 370, 14 + row * 22);
            let style = color.stroke_width(2);
            if line.dashed {
                legend_area
                    .draw(&plotters::element::DashedPathElement::new(
                        vec![(x, y), (x + 28, y)],
                        6,
                        4,
                        style,
                    ))
                    .map_err(|e| fail(&e))?;
            } else {
                legend_area
                    .draw(&PathElement::new(vec![(x, y), (x + 28, y)], style))
                    .map_err(|e| fail(&e))?;
            }
            draw_marker(&legend_area, line.dashed, (x + 14, y), color).map_err(|e| fail(&e))?;
            let suffix = if line.dashed { " (dashed)" } else { "" };
            legend_area
                .draw(&Text::new(
                    format!("{}{suffix}", line.label),
                    (x + 36, y - 7),
                    ("sans-serif", 14),
                ))
                .map_err(|e| fail(&e))?;
        }
        legend_area
            .draw(&Text::new(
                "equal values are drawn side by side, a few pixels apart, in the order above",
                (60, 14 + rows * 22 - 7),
                ("sans-serif", 14),
            ))
            .map_err(|e| fail(&e))?;
        root.present().map_err(|e| fail(&e))?;
    }
    Ok((svg, markers))
}

/// A line's marker: a circle for the multi-thread flavour, a square for the current-thread
/// one.
fn draw_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    square: bool,
    (x, y): (i32, i32),
    color: RGBColor,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if square {
        area.draw(&Rectangle::new(
            [(x - 3, y - 3), (x + 3, y + 3)],
            color.filled(),
        ))
    } else {
        area.draw(&Circle::new((x, y), 3, color.filled()))
    }
}

/// The machine, as far as the figures depend on it.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let redis = std::process::Command::new(
        std::env::var("REDLOCK_REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_owned()),
    )
    .arg("--version")
    .output()
    .ok()
    .and_then(|o| String::from_utf8(o.stdout).ok())
    .and_then(|v| {
        v.split_whitespace()
            .find_map(|w| w.strip_prefix("v="))
            .map(str::to_owned)
    })
    .unwrap_or_else(|| "unknown".to_owned());
    format!(
        "{cpu}, {cores} cores (shared, virtualised), Linux {kernel}, redis-server {redis} on \
         loopback, release build"
    )
}

fn report(results: &Results) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Machine: {}.\n", machine());
    targets_table(results, &mut out);
    latency_table(results, &mut out);
    out.push_str("![acquire + release latency against N](img/bench-latency.svg)\n\n");
    tail_table(results, &mut out);
    throughput_table(results, &mut out);
    other_table(results, &mut out);
    out
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, file] = args.as_slice()
        && flag == "--chart"
    {
        // Only the drawing changed: redraw the chart from the figures the document shows.
        let file = PathBuf::from(file);
        let doc = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let chart = file
            .parent()
            .unwrap_or(Path::new("."))
            .join("img/bench-latency.svg");
        std::fs::write(&chart, latency_chart(&latency_lines_from_doc(&doc)?)?.0)?;
        println!("wrote {}", chart.display());
        return Ok(());
    }
    let results = Results::load(&redlock_tests::target_dir().join("criterion"))?;
    let text = report(&results);
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next()) {
        (None, _) => print!("{text}"),
        (Some("--write"), Some(file)) => {
            let file = PathBuf::from(file);
            let doc =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let (Some(begin), Some(end)) = (doc.find(BEGIN), doc.find(END)) else {
                return Err(format!("{}: no {BEGIN} … {END} section", file.display()).into());
            };
            let updated = format!("{}{BEGIN}\n\n{text}{}", &doc[..begin], &doc[end..]);
            std::fs::write(&file, updated)?;
            let chart = file
                .parent()
                .unwrap_or(Path::new("."))
                .join("img/bench-latency.svg");
            std::fs::write(&chart, latency_chart(&latency_lines(&results))?.0)?;
            println!("wrote {} and {}", file.display(), chart.display());
        }
        _ => return Err("usage: bench_report [--write FILE | --chart FILE]".into()),
    }
    Ok(())
}

#[cfg(test)]
#[path = "../simulator/src/explain/svg_check.rs"]
mod svg_check;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::svg_check::{near, render};

    /// A results table as `report` writes it; ours and the quorum floor are equal at N = 3
    /// and 5, as they often nearly are.
    const TABLE: &str = "\
| contender | N = 1 | N = 3 | N = 5 | N = 7 |
|---|---:|---:|---:|---:|
| ours, mt | 725 | 418 | 498 | 1155 |
| floor deciding at quorum, mt | 439 | 418 | 498 | 957 |
| floor waiting for all, mt | 363 | 472 | 776 | 1420 |
| rslock 0.10, mt | 513 | 496 | 599 | 704 |
| ours, ct | 674 | 317 | 437 | 502 |
| floor deciding at quorum, ct | 722 | 235 | 388 | 519 |
| floor waiting for all, ct | 849 | 370 | 533 | 623 |
| redlock-rs 2.0 (blocking) | 650 | 1868 | 3091 | 4600 |

";

    #[test]
    fn log_ticks_are_one_two_five_per_decade() {
        assert_eq!(
            log_ticks(50.0, 5000.0),
            [50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0]
        );
        assert_eq!(
            (round_125(213.0, true), round_125(5060.0, false)),
            (200.0, 10000.0)
        );
    }

    #[test]
    fn the_latency_chart_reads_at_a_glance() {
        let lines = latency_lines_from_doc(TABLE).expect("the table parses");
        assert_eq!(lines.len(), 8);
        assert!(lines.iter().all(|l| l.points.len() == 4));
        let (svg, markers) = latency_chart(&lines).expect("the chart draws");
        let picture = render(&svg);
        picture.save_if_asked("bench-latency");
        picture.assert_inside_canvas();
        picture.assert_labels_readable();
        picture.assert_labels_apart();
        // The log axis is labelled at 1, 2 and 5 times each power of ten in range.
        let labels: Vec<String> = picture.texts().into_iter().map(|t| t.0).collect();
        for tick in ["200", "500", "1000", "2000", "5000"] {
            assert!(
                labels.iter().any(|l| l == tick),
                "no tick {tick} in {labels:?}"
            );
        }
        // Every marker keeps its line's colour at its centre: none is hidden, not even
        // where two contenders measured the same.
        assert_eq!(markers.len(), 32);
        for (line, (x, y)) in markers {
            let c = LINE_COLORS[line];
            let (x, y) = (u32::try_from(x).unwrap(), u32::try_from(y).unwrap());
            assert!(
                near(picture.rgb(x, y), [c.0, c.1, c.2], 10),
                "{}: the marker at ({x}, {y}) is hidden",
                lines[line].label
            );
        }
    }

    #[test]
    fn the_committed_document_has_a_table_to_redraw_from() {
        let doc = include_str!("../docs/benchmarks.md");
        let lines = latency_lines_from_doc(doc).expect("docs/benchmarks.md has the table");
        assert_eq!(lines.len(), LATENCY_SERIES.len());
    }
}
