//! The simulator's sharded outputs and pages: merging 10⁴ runs' JSON Lines from four
//! shards into the table (target: under a second), and the page of a 30 s run (target:
//! under 1 MB, rendered in under a second in headless Chromium).
//!
//! ```text
//! cargo bench --bench simulator_outputs
//! ```
//!
//! The headless group needs Chromium (`scripts/ensure-chromium`; `REDLOCK_CHROMIUM` names
//! another binary) and is left out, with a note, without it. Its times are whole browser
//! processes loading the page and an empty page: their difference is what the page costs
//! (parsing, script, layout), which the page itself also reports (`data-render-ms`, its
//! script's time), printed once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use redlock_sim::Scenario;
use redlock_sim::runs::jsonl::{COMMIT, Line, RunLine};
use redlock_sim::runs::merge::{Merged, merge};
use redlock_sim::runs::run_output::{RunFormat, render};
use redlock_sim::runs::shard::{Shard, run_key};

const RUNS: usize = 10_000;
const SHARDS: u64 = 4;

fn simulator_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../simulator")
}

fn catalogue() -> Vec<Scenario> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(simulator_dir().join("scenarios"))
        .expect("the scenarios")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| Scenario::load(f).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// 10⁴ real runs of the catalogue (every scenario, consecutive seeds), written as four
/// shards' JSON Lines.
fn shard_files(dir: &Path) -> Vec<PathBuf> {
    let scenarios = catalogue();
    let per_scenario = RUNS.div_ceil(scenarios.len()) as u64;
    let total = scenarios.len() as u64 * per_scenario;
    let mut shards: Vec<Vec<Line>> = vec![Vec::new(); SHARDS as usize];
    for (s, scenario) in scenarios.iter().enumerate() {
        for offset in 0..per_scenario {
            let seed = scenario.seed.wrapping_add(offset);
            let report = redlock_sim::run(scenario, seed, false)
                .expect("a run")
                .report;
            let key = run_key(&scenario.name, seed);
            let shard = (1..=SHARDS)
                .map(|i| Shard::new(i, SHARDS).expect("a shard"))
                .find(|shard| shard.contains(key))
                .expect("every run has a shard");
            shards[shard.index() as usize - 1].push(Line::Run(RunLine {
                commit: COMMIT.to_owned(),
                shard: Some(shard.to_string()),
                index: s as u64 * per_scenario + offset,
                runs: total,
                scenarios: scenarios.len() as u64,
                tokens: None,
                mismatch: report.mismatch(),
                report,
            }));
        }
    }
    shards
        .iter()
        .enumerate()
        .map(|(i, lines)| {
            let path = dir.join(format!("shard-{}-of-{SHARDS}.jsonl", i + 1));
            redlock_sim::runs::jsonl::write(&path, lines).expect("write a shard");
            path
        })
        .collect()
}

fn merging(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("redlock-bench-merge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let files = shard_files(&dir);
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    let runs = match merge(&files).expect("the shards merge") {
        Merged::Runs { lines, .. } => lines.len(),
        Merged::Sweep(_) | Merged::Swarm(_) => unreachable!("runs of `run`"),
    };
    println!("merge: {runs} runs in {} files, {bytes} bytes", files.len());
    let mut group = c.benchmark_group("simulator_outputs");
    group.sample_size(20);
    group.throughput(Throughput::Elements(runs as u64));
    group.bench_function("merge_10k_runs_jsonl", |b| {
        b.iter(|| {
            let Merged::Runs { lines, scenarios } = merge(&files).expect("the shards merge") else {
                unreachable!("runs of `run`")
            };
            render(&lines, scenarios, RunFormat::Table, None)
                .expect("the table")
                .len()
        });
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn chromium() -> Option<String> {
    let binary = std::env::var("REDLOCK_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let runs = Command::new(&binary)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    runs.then_some(binary)
}

/// Headless Chromium's DOM of `page` after its script ran.
fn load(chromium: &str, page: &Path, profile: &Path) -> String {
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--proxy-server=socks5://127.0.0.1:9",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn page(c: &mut Criterion) {
    let scenario =
        Scenario::load(&simulator_dir().join("tests/fixtures/thirty-seconds-of-contention.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
    let run = redlock_sim::run(&scenario, scenario.seed, true).expect("a run");
    let html = redlock_sim::explain::html(&scenario, &run);
    println!(
        "page of a {:.1} s run: {} bytes, {} messages",
        run.report.simulated_ns as f64 / 1e9,
        html.len(),
        run.recording.as_ref().map_or(0, |r| r.messages.len())
    );
    let mut group = c.benchmark_group("simulator_outputs");
    group.sample_size(10);
    group.bench_function("page_30s_write", |b| {
        b.iter(|| redlock_sim::explain::html(&scenario, &run).len());
    });
    let Some(chromium) = chromium() else {
        println!(
            "page_30s_headless: left out, Chromium is not installed (scripts/ensure-chromium)"
        );
        group.finish();
        return;
    };
    let dir = std::env::temp_dir().join(format!("redlock-bench-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("page.html");
    std::fs::write(&path, &html).expect("the page");
    let profile = dir.join("profile");
    let dom = load(&chromium, &path, &profile);
    let render_ms = dom
        .split("data-render-ms=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("?");
    println!("page_30s: the page's own render time, once: {render_ms} ms");
    // The same browser on an empty page: what start-up alone costs, to subtract.
    let empty = dir.join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><html><body></body></html>").expect("a page");
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("page_30s_headless_load", |b| {
        b.iter(|| load(&chromium, &path, &profile).len());
    });
    group.bench_function("empty_page_headless_load", |b| {
        b.iter(|| load(&chromium, &empty, &profile).len());
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, merging, page);
criterion_main!(benches);
