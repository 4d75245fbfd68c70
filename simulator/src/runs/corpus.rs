//! The corpus of failing seeds: runs whose verdicts differed from their scenario's
//! expectation, kept in a JSON Lines file that `run --corpus FILE` replays before any fresh
//! seed, and to which it adds the new failures. A build that fixes a failure keeps
//! replaying it, so a regression shows up at once.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::runs::jsonl::COMMIT;

/// One failing run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The scenario's name (not its file, which may move).
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The build that found it.
    pub commit: String,
    /// What differed from the expectation then.
    pub mismatch: String,
}

impl Entry {
    /// A failure found by this build.
    pub fn new(scenario: &str, seed: u64, mismatch: &str) -> Self {
        Self {
            scenario: scenario.to_owned(),
            seed,
            commit: COMMIT.to_owned(),
            mismatch: mismatch.to_owned(),
        }
    }
}

/// A corpus file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct CorpusError {
    path: PathBuf,
    line: Option<usize>,
    message: String,
}

/// The entries of the corpus at `path`; none when the file does not exist yet.
///
/// # Errors
///
/// When the file cannot be read or a line is not an entry (the error names the line).
pub fn read(path: &Path) -> Result<Vec<Entry>, CorpusError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(CorpusError {
                path: path.to_owned(),
                line: None,
                message: e.to_string(),
            });
        }
    };
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line).map_err(|e| CorpusError {
                path: path.to_owned(),
                line: Some(number + 1),
                message: format!("not a corpus entry: {e}"),
            })
        })
        .collect()
}

/// Appends the entries of `found` whose (scenario, seed) the corpus does not hold yet;
/// returns how many it added.
///
/// # Errors
///
/// When the corpus cannot be read or written.
pub fn add(path: &Path, found: &[Entry]) -> Result<usize, CorpusError> {
    let mut known: Vec<(String, u64)> = read(path)?
        .into_iter()
        .map(|e| (e.scenario, e.seed))
        .collect();
    let mut text = String::new();
    let mut added = 0;
    for entry in found {
        let key = (entry.scenario.clone(), entry.seed);
        if known.contains(&key) {
            continue;
        }
        known.push(key);
        added += 1;
        let line = serde_json::to_string(entry).map_err(|e| CorpusError {
            path: path.to_owned(),
            line: None,
            message: e.to_string(),
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    if added > 0 {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .map_err(|e| CorpusError {
                path: path.to_owned(),
                line: None,
                message: e.to_string(),
            })?;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn adds_each_failure_once_and_reads_them_back() {
        let dir = std::env::temp_dir().join(format!("redlock-sim-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("corpus.jsonl");
        let _ = std::fs::remove_file(&path);
        assert!(read(&path).unwrap().is_empty());
        let a = Entry::new("RL-02", 7, "plain: got SAFE, expected VIOLATED");
        let b = Entry::new("RL-03", 1, "cause: got A, expected B");
        assert_eq!(add(&path, &[a.clone(), b.clone(), a.clone()]).unwrap(), 2);
        assert_eq!(add(&path, std::slice::from_ref(&b)).unwrap(), 0);
        assert_eq!(read(&path).unwrap(), [a, b]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let dir = std::env::temp_dir().join(format!("redlock-sim-corpus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.jsonl");
        std::fs::write(&path, "\n{\"scenario\": \"x\"}\n").unwrap();
        let error = read(&path).unwrap_err().to_string();
        assert!(error.contains("bad.jsonl:2: not a corpus entry"), "{error}");
    }
}
