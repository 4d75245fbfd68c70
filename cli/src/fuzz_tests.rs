//! Fuzzing the parsers of user input that live in this crate (durations and the config
//! file; node URLs are fuzzed in the library): arbitrary and mutated text gives a value or
//! an error that names the input, never a panic.
//!
//! `PROPTEST_CASES` sets the number of cases per property (default 512).

use std::time::Duration;

use proptest::prelude::*;

use crate::{config_file, duration};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A config file using every field, as a user writes one.
const FULL_FILE: &str = r#"# redlock.toml
nodes = [
    "redis://127.0.0.1:7001",
    "redis://:secret@127.0.0.1:7002/0",
    "unix:///run/redis/3.sock",
]
key_prefix = "jobs:"
ttl = "30s"
node_timeout = "50ms"
retry_delay = "200ms"
retry_jitter = "100ms"
wait = "1m 30s"
kill_after = "5s"
max_hold = "2h"
restart_quarantine = "1h"
"#;

/// Fragments that break TOML and durations in interesting ways.
const FRAGMENTS: &[&str] = &[
    "\n",
    "\r\n",
    "[",
    "]",
    "=",
    "\"",
    "'",
    "'''",
    "#",
    ",",
    "{",
    "}",
    "\u{0}",
    "é",
    "🔒",
    "\u{feff}",
    "ttl = ",
    "\"-1s\"",
    "\"1e309s\"",
    "18446744073709551616",
    "\"99999999999h\"",
    "nodes = 1\n",
    "[nodes]\n",
    "x = 1\n",
    "ms",
    "ns",
    " ",
];

/// Text around a duration: units, signs, digits and junk.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[0-9 .+-]{0,12}(ns|us|µs|ms|s|m|h|d|w|y|months|sec|min|x)?[0-9a-z ]{0,8}",
        (any::<u64>(), "(ns|us|ms|s|m|h|d)").prop_map(|(n, unit)| format!("{n}{unit}")),
    ]
}

/// Moves `at` (any number) into the text, onto a character boundary.
fn boundary(text: &str, at: usize) -> usize {
    let mut at = at % (text.len() + 1);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[derive(Clone, Debug)]
enum Edit {
    Delete { at: usize, len: usize },
    Insert { at: usize, fragment: usize },
    Truncate { at: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1usize..30).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), 0..FRAGMENTS.len())
            .prop_map(|(at, fragment)| Edit::Insert { at, fragment }),
        any::<usize>().prop_map(|at| Edit::Truncate { at }),
    ]
}

fn apply(text: &mut String, edit: &Edit) {
    match *edit {
        Edit::Delete { at, len } => {
            let start = boundary(text, at);
            let end = boundary(text, start.saturating_add(len).min(text.len()));
            text.replace_range(start..end.max(start), "");
        }
        Edit::Insert { at, fragment } => {
            let at = boundary(text, at);
            text.insert_str(at, FRAGMENTS[fragment]);
        }
        Edit::Truncate { at } => {
            let at = boundary(text, at);
            text.truncate(at);
        }
    }
}

/// A config file error must start with `path:line:column` inside the text.
fn assert_placed(message: &str, text: &str) -> Result<(), TestCaseError> {
    let rest = message
        .strip_prefix("fuzz.toml:")
        .ok_or_else(|| TestCaseError::fail(format!("error without the file: {message}")))?;
    let mut parts = rest.splitn(3, ':');
    let line: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| TestCaseError::fail(format!("error without a line: {message}")))?;
    let column: usize = parts
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| TestCaseError::fail(format!("error without a column: {message}")))?;
    let lines = text.matches('\n').count() + 1;
    prop_assert!(
        (1..=lines).contains(&line),
        "line {line} of {lines}: {message}"
    );
    // Columns count bytes from 1; one past the line's end points at its end.
    let width = text.split('\n').nth(line - 1).map_or(0, str::len);
    prop_assert!(
        (1..=width + 1).contains(&column),
        "column {column} of a {width}-byte line: {message}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Any text: a duration or an error quoting the text, never a panic.
    #[test]
    fn a_duration_parses_or_is_refused_by_name(text in duration_text()) {
        if let Err(message) = duration::parse(&text) {
            prop_assert!(message.contains(&format!("`{text}`")), "{message}");
        }
    }

    /// What the CLI prints for a duration reads back as the same duration.
    #[test]
    fn a_shown_duration_reads_back(millis in 1u64..=10_000_000_000_000) {
        let shown = duration::show(Duration::from_millis(millis));
        prop_assert_eq!(duration::parse(&shown), Ok(Duration::from_millis(millis)), "{}", shown);
    }

    /// Arbitrary text as a config file: settings or an error placed in the text.
    #[test]
    fn any_text_as_a_config_file_is_parsed_or_placed(text in any::<String>()) {
        if let Err(failure) = config_file::parse(&text, "fuzz.toml") {
            assert_placed(&failure.message, &text)?;
        }
    }

    /// The full example file after a few edits: settings or an error placed in the text.
    #[test]
    fn a_mutated_config_file_is_parsed_or_placed(edits in prop::collection::vec(edit(), 1..5)) {
        let mut text = FULL_FILE.to_owned();
        for edit in &edits {
            apply(&mut text, edit);
        }
        if let Err(failure) = config_file::parse(&text, "fuzz.toml") {
            assert_placed(&failure.message, &text)?;
        }
    }
}

#[test]
fn the_full_file_parses() {
    let settings = config_file::parse(FULL_FILE, "fuzz.toml").map_err(|f| f.message);
    assert!(settings.is_ok(), "{settings:?}");
}
