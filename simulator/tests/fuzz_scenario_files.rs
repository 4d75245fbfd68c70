//! Fuzzing the scenario parser: arbitrary text and mutated catalogue files must give a
//! scenario or an error pointing at a line, never a panic.
//!
//! `PROPTEST_CASES` sets the number of cases per property (default 512); see
//! `docs/reliability.md` for the long run.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::PathBuf;
use std::sync::LazyLock;

use proptest::prelude::*;
use redlock_sim::scenario::parse;

/// Every file of the catalogue: (name, text).
static CATALOGUE: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the catalogue is missing");
    files
});

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

/// Values that break numbers, strings and tables in interesting ways.
const VALUES: &[&str] = &[
    "-1",
    "0",
    "-0.0",
    "1.5",
    "1e309",
    "-1e309",
    "nan",
    "inf",
    "-inf",
    "18446744073709551616",
    "9223372036854775808",
    "4294967296",
    "1e12",
    "0x10",
    "1_000",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "true",
    "'''",
    "\"\\u{0}\"",
    "1979-05-27T07:32:00Z",
];

/// Fragments to insert anywhere.
const FRAGMENTS: &[&str] = &[
    "\n",
    "\r\n",
    "[",
    "]",
    "[[client]]\n",
    "[[server]]\n",
    "[network]\n",
    "=",
    "\"",
    "'",
    "#",
    ",",
    "\u{0}",
    "é",
    "🔒",
    "\u{feff}",
    "steps = [\"slep 5\"]\n",
    "name = \"c1\"\n",
    "x = 1\n",
];

/// One edit of a file. Positions are taken modulo the text's length and moved back to a
/// character boundary.
#[derive(Clone, Debug)]
enum Mutation {
    Delete { at: usize, len: usize },
    Insert { at: usize, fragment: usize },
    InsertByte { at: usize, byte: u8 },
    ReplaceNumber { nth: usize, value: usize },
    ReplaceValue { nth: usize, value: usize },
    DuplicateLine { line: usize },
    SwapLines { a: usize, b: usize },
    DeleteLine { line: usize },
    Truncate { at: usize },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), 0..FRAGMENTS.len())
            .prop_map(|(at, fragment)| Mutation::Insert { at, fragment }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::InsertByte { at, byte }),
        (any::<usize>(), 0..VALUES.len())
            .prop_map(|(nth, value)| Mutation::ReplaceNumber { nth, value }),
        (any::<usize>(), 0..VALUES.len())
            .prop_map(|(nth, value)| Mutation::ReplaceValue { nth, value }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        any::<usize>().prop_map(|line| Mutation::DeleteLine { line }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

fn boundary(text: &str, at: usize) -> usize {
    let mut at = if text.is_empty() {
        0
    } else {
        at % (text.len() + 1)
    };
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Byte ranges of every run of ASCII digits.
fn numbers(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    runs
}

fn apply(text: &str, mutation: &Mutation) -> String {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    match *mutation {
        Mutation::Delete { at, len } => {
            let start = boundary(text, at);
            let end = boundary(text, (start + len).min(text.len()));
            [&text[..start], &text[end.max(start)..]].concat()
        }
        Mutation::Insert { at, fragment } => {
            let at = boundary(text, at);
            [&text[..at], FRAGMENTS[fragment], &text[at..]].concat()
        }
        Mutation::InsertByte { at, byte } => {
            // Bytes become characters (0x80.. as their Latin-1 counterparts): the parser takes
            // `&str`, so invalid UTF-8 cannot reach it.
            let at = boundary(text, at);
            [&text[..at], &char::from(byte).to_string(), &text[at..]].concat()
        }
        Mutation::ReplaceNumber { nth, value } => {
            let runs = numbers(text);
            if runs.is_empty() {
                return text.to_owned();
            }
            let (start, end) = runs[nth % runs.len()];
            [&text[..start], VALUES[value], &text[end..]].concat()
        }
        Mutation::ReplaceValue { nth, value } => {
            // The right-hand side of the nth `key = value` line.
            let assignments: Vec<usize> = (0..lines.len())
                .filter(|&i| lines[i].contains(" = "))
                .collect();
            if assignments.is_empty() {
                return text.to_owned();
            }
            let i = assignments[nth % assignments.len()];
            let key = lines[i].split(" = ").next().unwrap_or_default();
            let replaced = format!("{key} = {}\n", VALUES[value]);
            lines[i] = &replaced;
            lines.concat()
        }
        Mutation::DuplicateLine { line } if !lines.is_empty() => {
            let i = line % lines.len();
            lines.insert(i, lines[i]);
            lines.concat()
        }
        Mutation::SwapLines { a, b } if !lines.is_empty() => {
            let len = lines.len();
            lines.swap(a % len, b % len);
            lines.concat()
        }
        Mutation::DeleteLine { line } if !lines.is_empty() => {
            lines.remove(line % lines.len());
            lines.concat()
        }
        Mutation::Truncate { at } => text[..boundary(text, at)].to_owned(),
        _ => text.to_owned(),
    }
}

/// The parser's contract: a scenario, or an error on a line of the text.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse(text, "fuzzed.toml") {
        Ok(_) => Ok(()),
        Err(e) => {
            let line = e.line();
            prop_assert!(line.is_some(), "an in-memory parse gave no line: {e}");
            let line = line.unwrap();
            let lines = text.split('\n').count();
            prop_assert!(
                (1..=lines).contains(&line),
                "line {line} of a {lines}-line text: {e}"
            );
            prop_assert!(e.to_string().starts_with("fuzzed.toml:"), "{e}");
            Ok(())
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_catalogue_files_parse_or_point_at_a_line(
        file in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let (_, original) = &CATALOGUE[file.index(CATALOGUE.len())];
        let mut text = original.clone();
        for m in &mutations {
            text = apply(&text, m);
        }
        check(&text)?;
    }

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        check(&text)?;
    }

    #[test]
    fn toml_shaped_text_never_panics(
        text in "([a-z_\\[\\]]{1,12}( = )?([0-9.e+-]{1,8}|\"[^\"\n]{0,8}\"|\\[[0-9, \"a-z]{0,12}\\]|true)?\n){0,30}"
    ) {
        check(&text)?;
    }
}

#[test]
fn every_catalogue_file_parses_as_is() {
    for (name, text) in CATALOGUE.iter() {
        parse(text, name).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_mutations_change_the_text() {
    let (_, text) = &CATALOGUE[0];
    let changed = [
        Mutation::Delete { at: 3, len: 5 },
        Mutation::Insert { at: 0, fragment: 4 },
        Mutation::ReplaceNumber { nth: 0, value: 4 },
        Mutation::ReplaceValue { nth: 0, value: 16 },
        Mutation::DuplicateLine { line: 0 },
        Mutation::DeleteLine { line: 0 },
        Mutation::Truncate { at: 10 },
    ];
    for m in &changed {
        assert_ne!(&apply(text, m), text, "{m:?}");
    }
    // An error from a mutated file points at the line the mutation broke: here the file's
    // own `name`, pushed to line 2, now duplicates the inserted one.
    let broken = apply(
        text,
        &Mutation::Insert {
            at: 0,
            fragment: 17,
        },
    );
    let e = parse(&broken, "x.toml").unwrap_err();
    assert_eq!(e.line(), Some(2), "{e}");
    assert!(e.to_string().contains("duplicate key"), "{e}");
}
