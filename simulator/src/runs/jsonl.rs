//! JSON Lines: one line per run, as `run --jsonl` and `sweep --jsonl` write them and
//! `merge` reads them back; and one line per swarm member, as `check --swarm I/N --jsonl`
//! writes it ([`SwarmLine`]).
//!
//! Every line stands alone: the build's commit, the shard that ran it, where the run sits
//! in the whole (unsharded) run, the scenario and parameters, the seed, the verdicts, the
//! cause and the counts. `merge` needs nothing else to print what one unsharded run prints.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Report;
use crate::runs::swarm::SwarmLine;
use crate::runs::sweep::SweepRun;

/// The commit the simulator was built from (`git rev-parse --short=12 HEAD` at build time,
/// `REDLOCK_SIM_COMMIT` when set, else `unknown`).
pub const COMMIT: &str = env!("REDLOCK_SIM_COMMIT");

/// One line: a run of `run` or of `sweep`, or a member of a swarm of `check`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Line {
    /// A run of `run --seeds`.
    Run(RunLine),
    /// A run of a sweep.
    Sweep(SweepLine),
    /// A member of `check --swarm I/N`.
    Swarm(SwarmLine),
}

/// A run of `run`: where it sits in the whole run, and its report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunLine {
    /// The build's commit ([`COMMIT`]).
    pub commit: String,
    /// The shard that ran it (`I/N`), if sharded.
    pub shard: Option<String>,
    /// Its position in the whole run: scenario files in order, then seeds.
    pub index: u64,
    /// How many runs the whole run has.
    pub runs: u64,
    /// How many scenario files the whole run has.
    pub scenarios: u64,
    /// The fencing-token source that replaced the scenario's (`run --tokens`), if any.
    pub tokens: Option<String>,
    /// The verdicts, cause and counts.
    #[serde(flatten)]
    pub report: Report,
    /// What differs from the scenario's expectation, in words; `None` when it matches or
    /// was not checked.
    pub mismatch: Option<String>,
}

/// A run of a sweep: the grid point, the seed and the outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SweepLine {
    /// The build's commit ([`COMMIT`]).
    pub commit: String,
    /// The shard that ran it (`I/N`), if sharded.
    pub shard: Option<String>,
    /// The scenario's name.
    pub scenario: String,
    /// The parameter, with its unit.
    pub parameter: String,
    /// The client or node it applies to (empty when none).
    pub target: String,
    /// The boundary the chart draws, if known.
    pub threshold: Option<(f64, String)>,
    /// How many values the whole sweep has.
    pub values: usize,
    /// Which of them this run's value is (from 0).
    pub value_index: usize,
    /// Seeds per value.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Whether the runs had background noise (`--no-noise` turns it off): shards of a sweep
    /// with noise and of one without are two sweeps.
    pub noise: bool,
    /// The outcome.
    #[serde(flatten)]
    pub run: SweepRun,
}

/// A line that could not be read, or a file that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JsonlError {
    /// The file could not be opened, read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a run.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// Writes `lines` to `path`, one JSON object a line, replacing the file.
///
/// # Errors
///
/// When the file cannot be written.
pub fn write(path: &Path, lines: &[Line]) -> Result<(), JsonlError> {
    let io = |source| JsonlError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io)?;
    let mut out = std::io::BufWriter::new(file);
    for line in lines {
        serde_json::to_writer(&mut out, line).map_err(|e| io(e.into()))?;
        out.write_all(b"\n").map_err(io)?;
    }
    out.flush().map_err(io)
}

/// Reads every line of `path`, each with its line number (from 1); blank lines are skipped.
///
/// # Errors
///
/// When the file cannot be read, or a line is not a run: the error names the file and line.
pub fn read(path: &Path) -> Result<Vec<(usize, Line)>, JsonlError> {
    let io = |source| JsonlError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut lines = Vec::new();
    for (number, text) in BufReader::new(file).lines().enumerate() {
        let text = text.map_err(|e| JsonlError::Line {
            path: path.to_owned(),
            line: number + 1,
            message: e.to_string(),
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let line = serde_json::from_str(&text).map_err(|e| JsonlError::Line {
            path: path.to_owned(),
            line: number + 1,
            message: format!("not a run of redlock-sim: {e}"),
        })?;
        lines.push((number + 1, line));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn temp(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("redlock-sim-jsonl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn a_run_line() -> Line {
        let scenario = crate::scenario::parse(
            "name = \"one\"\n[expect]\nexclusion = \"SAFE\"\nplain = \"SAFE\"\n\
             fenced = \"SAFE\"\nstrict = \"SAFE\"\n[[client]]\nname = \"c1\"\n\
             steps = [\"write\"]\n",
            "one.toml",
        )
        .unwrap();
        let run = crate::run(&scenario, 3, false).unwrap();
        Line::Run(RunLine {
            commit: COMMIT.into(),
            shard: Some("1/2".into()),
            index: 0,
            runs: 1,
            scenarios: 1,
            tokens: None,
            mismatch: run.report.mismatch(),
            report: run.report,
        })
    }

    #[test]
    fn a_line_reads_back_as_written() {
        let path = temp("roundtrip.jsonl", "");
        let line = a_run_line();
        write(&path, &[line.clone(), line]).unwrap();
        let read = read(&path).unwrap();
        assert_eq!(read.len(), 2);
        assert_eq!(read[1].0, 2);
        let Line::Run(run) = &read[0].1 else {
            panic!("a run line")
        };
        assert_eq!(run.report.seed, 3);
        assert_eq!(run.shard.as_deref(), Some("1/2"));
        // Byte for byte: what was written is what a re-write gives.
        let again = serde_json::to_string(&read[0].1).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().next().unwrap(), again);
    }

    #[test]
    fn a_bad_line_is_named_by_file_and_number() {
        let good = serde_json::to_string(&a_run_line()).unwrap();
        let path = temp(
            "bad.jsonl",
            &format!("{good}\n\n{{\"kind\": \"run\", \"seed\": 1}}\n"),
        );
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("bad.jsonl:3: not a run"), "{error}");
        let path = temp("garbage.jsonl", "not json\n");
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("garbage.jsonl:1:"), "{error}");
        let error = read(Path::new("/nonexistent/x.jsonl"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("/nonexistent/x.jsonl"), "{error}");
    }
}
