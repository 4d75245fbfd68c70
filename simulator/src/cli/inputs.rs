//! What the commands read: the scenario files a list of paths names (files, directories,
//! `catalogue:NAME`), a scenario file itself, and the name of a fencing-token source.

use std::path::{Path, PathBuf};

use redlock_sim::Scenario;
use redlock_sim::scenario::TokenSource;
use redlock_sim::scenario::catalogue;

/// The files `paths` name, in order: a directory gives its `.toml` files sorted by name, and
/// `catalogue:NAME` a scenario of the embedded catalogue.
pub(crate) fn scenario_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if let Some(name) = catalogue::name_of(path) {
            let (file, _) = catalogue::find(name).ok_or_else(|| super::scenarios::unknown(name))?;
            files.push(PathBuf::from(format!("{}{file}", catalogue::PREFIX)));
        } else if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| format!("{}: {e}", path.display()))?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "toml"))
                .collect();
            found.sort();
            files.extend(found);
        } else if path.is_file() {
            files.push(path.clone());
        } else {
            return Err(format!("{}: no such file or directory", path.display()));
        }
    }
    Ok(files)
}

/// The scenario in `path`, its error as the message the command prints.
pub(crate) fn load(path: &Path) -> Result<Scenario, String> {
    Scenario::load(path).map_err(|e| e.to_string())
}

/// The token source `--tokens` names.
pub(crate) fn parse_tokens(name: &str) -> Result<TokenSource, String> {
    match name {
        "linearizable" => Ok(TokenSource::Linearizable),
        "redis-counter" => Ok(TokenSource::RedisCounter),
        "quorum-minted" => Ok(TokenSource::QuorumMinted),
        other => Err(format!(
            "unknown token source `{other}`; expected linearizable, redis-counter or quorum-minted"
        )),
    }
}
