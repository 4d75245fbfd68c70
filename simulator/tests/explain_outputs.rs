//! `explain`'s files: the run's page, the trace in Chrome's Trace Event format and in
//! Perfetto's protobuf format; and the size of every catalogue scenario's page.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::Path;

mod common;
use common::{sim, text};

#[test]
fn explain_writes_the_page_and_a_chrome_trace() {
    let dir = std::env::temp_dir().join(format!("redlock-sim-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (page, trace) = (dir.join("run.html"), dir.join("run.trace.json"));
    let output = sim(&[
        "explain",
        "scenarios/rl-05-crash-no-persistence.toml",
        "--html",
        page.to_str().unwrap(),
        "--trace-file",
        trace.to_str().unwrap(),
        "--trace-format",
        "chrome",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Content-Security-Policy"));
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["cat"] == "overlap"), "{trace}");
    assert!(events.iter().any(|e| e["cat"] == "window"), "{trace}");

    // The text trace to a file is the one --trace prints.
    let text_trace = dir.join("run.trace.txt");
    let output = sim(&[
        "explain",
        "scenarios/rl-00-baseline.toml",
        "--trace",
        "--trace-file",
        text_trace.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let written = std::fs::read_to_string(&text_trace).unwrap();
    assert!(!written.is_empty());
    assert!(String::from_utf8_lossy(&output.stdout).contains(&written));
}

#[test]
fn a_trace_format_needs_a_trace_file() {
    let output = sim(&[
        "explain",
        "scenarios/rl-00-baseline.toml",
        "--trace-format",
        "chrome",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("--trace-file"), "{}", text(&output));
}

/// Every catalogue scenario's page stays under 1 MB, and so does the page of 30 s of
/// contention (tests/fixtures/), a run longer and busier than any in the catalogue.
#[test]
fn pages_stay_under_a_megabyte() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let long = root.join("tests/fixtures/thirty-seconds-of-contention.toml");
    files.push(long.clone());
    for file in files {
        let scenario = redlock_sim::Scenario::load(&file).unwrap();
        let run = redlock_sim::run(&scenario, scenario.seed, true).unwrap();
        let size = redlock_sim::explain::html(&scenario, &run).len();
        assert!(size < 1_000_000, "{}: {size} bytes", file.display());
        if file == long {
            assert!(
                run.report.simulated_ns >= 30_000_000_000,
                "{:?}",
                run.report
            );
            assert!(run.report.matches, "{:?}", run.report.mismatch());
            let messages = run.recording.as_ref().unwrap().messages.len();
            assert!(messages > 20_000, "{messages}");
        }
    }
}

/// `explain --perfetto` on the 30 s run of tests/fixtures/ (24,486 messages): the file
/// decodes as a Perfetto trace with a track per lane, and every message that arrived is a
/// flow that starts once and ends once.
#[test]
fn explain_writes_a_perfetto_trace_with_a_flow_per_message() {
    use prost::Message as _;
    use redlock_sim::explain::perfetto::Trace;
    let dir = std::env::temp_dir().join(format!("redlock-sim-perfetto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.pftrace");
    let output = sim(&[
        "explain",
        "tests/fixtures/thirty-seconds-of-contention.toml",
        "--perfetto",
        file.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let trace = Trace::decode(std::fs::read(&file).unwrap().as_slice()).unwrap();
    let tracks: Vec<String> = trace
        .packet
        .iter()
        .filter_map(|p| p.track_descriptor.as_ref()?.name.clone())
        .collect();
    for lane in ["c1", "c2", "n0", "n1", "n2", "n3", "n4", "resource"] {
        assert!(tracks.iter().any(|t| t == lane), "{lane}: {tracks:?}");
    }
    let events = trace.packet.iter().filter_map(|p| p.track_event.as_ref());
    let (mut starts, mut ends) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for event in events {
        for &flow in &event.flow_ids {
            assert!(starts.insert(flow), "flow {flow} starts twice");
        }
        for &flow in &event.terminating_flow_ids {
            assert!(ends.insert(flow), "flow {flow} ends twice");
        }
    }
    assert!(starts.len() > 20_000, "{} flows", starts.len());
    assert_eq!(starts, ends);
    let _ = std::fs::remove_dir_all(&dir);
}
