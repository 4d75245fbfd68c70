//! What the binary's tests share: running `redlock-sim` from the package's directory, and
//! reading what it printed.
// Each test file uses what it needs of this.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `redlock-sim` with `args` in the package's directory (where `scenarios/` is).
pub(crate) fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run redlock-sim")
}

/// What a run printed: its standard output, then its standard error.
pub(crate) fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// How many scenario files the catalogue (`scenarios/`) holds.
pub(crate) fn scenario_count() -> usize {
    std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
        .expect("the scenarios directory")
        .filter(|e| {
            e.as_ref()
                .expect("a directory entry")
                .path()
                .extension()
                .is_some_and(|x| x == "toml")
        })
        .count()
}
