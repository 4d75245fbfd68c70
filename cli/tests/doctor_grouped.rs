//! `redlock doctor`'s table says each thing once: a finding that holds for several nodes is
//! one entry naming them, and the warning about an even number of nodes appears once (in the
//! report, not also on stderr). `--json` keeps every finding, one per node.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use common::*;
use serde_json::Value;

/// `redlock doctor` over `urls` without a clock window (so that every node gets the same
/// note: its rate was not measured) and with room for a busy machine's round trips.
fn doctor(urls: &[String], json: bool) -> Finished {
    let mut command = redlock();
    command.arg("doctor");
    if json {
        command.arg("--json");
    }
    for url in urls {
        command.args(["--node", url]);
    }
    command.args(["--clock-window", "0s", "--node-timeout", "500ms"]);
    finish(&mut command)
}

fn addresses(urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|url| url.trim_start_matches("redis://").to_owned())
        .collect()
}

#[test]
fn a_finding_on_every_node_is_printed_once_naming_them_all() {
    let fleet = fleet(4);
    let urls = fleet.urls();
    let done = doctor(&urls, false);
    assert!(matches!(done.code, Some(0 | 1)), "{}", done.text());
    let unmeasured: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.contains("the clock's rate was not measured"))
        .collect();
    assert_eq!(unmeasured.len(), 1, "{}", done.stdout);
    let line = unmeasured[0];
    assert!(line.starts_with("NOTE     "), "{line}");
    let named = format!("{}: ", addresses(&urls).join(", "));
    assert!(line.contains(&named), "{line}\nshould name {named}");

    // The even number of nodes: one warning, in the report.
    let text = done.text();
    assert_eq!(
        text.matches("an odd number is cheaper").count(),
        1,
        "{text}"
    );
    assert!(
        done.stdout
            .lines()
            .any(|l| l.starts_with("WARNING  fleet: 4 nodes tolerate 1 failure")),
        "{text}"
    );
    assert_eq!(done.stderr, "", "{text}");
}

#[test]
fn json_keeps_one_finding_per_node() {
    let fleet = fleet(4);
    let urls = fleet.urls();
    let done = doctor(&urls, true);
    assert!(matches!(done.code, Some(0 | 1)), "{}", done.text());
    assert_eq!(done.stderr, "", "{}", done.text());
    let report: Value = serde_json::from_str(&done.stdout).unwrap();
    let findings = report["findings"].as_array().unwrap();
    let mut unmeasured: Vec<&str> = findings
        .iter()
        .filter(|f| f["check"] == "clock-rate" && f["level"] == "note")
        .map(|f| f["node"].as_str().unwrap())
        .collect();
    unmeasured.sort_unstable();
    let mut expected = addresses(&urls);
    expected.sort();
    assert_eq!(unmeasured, expected, "{}", done.stdout);
    let even: Vec<&Value> = findings
        .iter()
        .filter(|f| f["summary"].as_str().unwrap().contains("odd number"))
        .collect();
    assert_eq!(even.len(), 1, "{}", done.stdout);
    assert_eq!(even[0]["node"], Value::Null);
}
