//! The target ratios, measured in interleaved blocks.
//!
//! Criterion measures one contender after another, and on a shared, virtualised machine the
//! noise changes between those phases: two runs of `benches/latency.rs` can disagree on a
//! ratio by 30 % or more. Here the contenders take turns in short blocks (100 acquire +
//! release each, a burst of 64 tasks, or a window of contending workers), round after
//! round, on the same nodes; each round gives one ratio per pair, and the median over the
//! rounds is reported with its quartiles. A burst of noise then lands on one round, not on
//! one contender.
//!
//! Writes `target/criterion/paired/ratios.json`, which `src/bin/bench_report.rs` reads.
//!
//! ```text
//! cargo bench --bench paired
//! ```

mod support;

#[path = "paired/contended.rs"]
mod contended;
#[path = "paired/harness.rs"]
mod harness;
#[path = "paired/latency.rs"]
mod latency;
#[path = "paired/overload.rs"]
mod overload;
#[path = "paired/tail.rs"]
mod tail;
#[path = "paired/throughput.rs"]
mod throughput;

use std::collections::BTreeMap;

fn main() {
    // `cargo bench` passes `--bench` (and any filter); `cargo test --benches` does not run
    // benchmarks, so without `--bench` this only checks that it starts.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    // `cargo bench <filter>`: run only if the filter names this benchmark.
    if let Some(filter) = args.iter().find(|a| !a.starts_with('-'))
        && !"paired".contains(filter.as_str())
    {
        return;
    }
    // `PAIRED=latency,contended` runs only those parts (for iterating on one of them).
    let only = std::env::var("PAIRED").ok();
    let runs = |part: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|p| p == part))
    };
    let mut out = BTreeMap::new();
    if runs("latency") {
        latency::run(&mut out);
    }
    if runs("throughput") {
        throughput::run(&mut out);
    }
    if runs("contended") {
        contended::run(&mut out);
    }
    if runs("overload") {
        overload::run(&mut out);
    }
    if runs("tail") {
        tail::run(&mut out);
    }

    let dir = redlock_tests::target_dir().join("criterion").join("paired");
    std::fs::create_dir_all(&dir).expect("create the output directory");
    let file = dir.join("ratios.json");
    // Parts run alone update their entries and keep the others'.
    let mut all: BTreeMap<String, serde_json::Value> = std::fs::read_to_string(&file)
        .ok()
        .filter(|_| only.is_some())
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    all.extend(out);
    let text = serde_json::to_string_pretty(&all).expect("JSON");
    std::fs::write(&file, text).expect("write the ratios");
    println!("wrote {}", file.display());
}
