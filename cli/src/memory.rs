//! The servers `redlock run` has met behind the nodes' names, remembered between runs.
//!
//! Every run is a new process, and a process that meets a server for the first time can
//! date it only by its uptime: another long-running server behind a known name (a promoted
//! replica, a DNS name or virtual IP moved to another master) would vote at once, although
//! it never held the keys the old server held. So each run writes down the `run_id` it met
//! per node address, and when a change of it was seen; the next run hands that to the
//! library ([`RedlockBuilder::remembered_servers`](redlock::RedlockBuilder)), whose core
//! then treats another `run_id` as a change (a whole restart quarantine).
//!
//! The file: `$REDLOCK_SERVERS_FILE`, else `$XDG_STATE_HOME/redlock/servers`, else
//! `~/.local/state/redlock/servers`; `--servers-file PATH|off` overrides both. One line per
//! address, tab-separated: the address, the `run_id`, and the wall-clock time (Unix
//! milliseconds) when a change to it was seen, or `-`. It is rewritten whole through a
//! temporary file and a rename, so a reader never sees half of it; two runs that write at
//! once may lose one's news, which leaves the next run where a run without memory is.
//! Memory is a help, never a condition: a file that cannot be read or written is reported
//! once on stderr and the run goes on without it.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redlock_core::RememberedServer;

use crate::exit::Failure;

/// The environment variable naming the file (or `off`).
pub(crate) const SERVERS_FILE_ENV: &str = "REDLOCK_SERVERS_FILE";

/// The first line of the file, saying what it is.
const HEADER: &str =
    "# redlock run: the servers met behind the nodes' names (address, run_id, changed-at ms)";

/// Where the servers met are remembered, if anywhere.
#[derive(Debug)]
pub(crate) struct Memory {
    path: Option<PathBuf>,
}

/// One remembered server, by address.
pub(crate) type Met = (String, RememberedServer);

impl Memory {
    /// The memory `flag` (`--servers-file`) or the environment points to: a path, `off`, or
    /// the user's state directory by default. None at all when no location can be found
    /// (no absolute `XDG_STATE_HOME` or `HOME`).
    ///
    /// # Errors
    ///
    /// A usage failure for an empty flag or variable, as for every setting.
    pub(crate) fn locate(flag: Option<&OsString>) -> Result<Self, Failure> {
        Self::locate_with(flag, &|name| std::env::var_os(name))
    }

    fn locate_with(
        flag: Option<&OsString>,
        lookup: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Self, Failure> {
        let (chosen, origin) = match flag {
            Some(value) => (Some(value.clone()), "--servers-file"),
            None => (lookup(SERVERS_FILE_ENV), SERVERS_FILE_ENV),
        };
        let path = match chosen {
            Some(value) if value.is_empty() => {
                return Err(Failure::usage(format!(
                    "{origin} is set but empty (a path, or `off`; unset it for the default)"
                )));
            }
            Some(value) if value == "off" => None,
            Some(value) => Some(PathBuf::from(value)),
            None => default_path(lookup),
        };
        Ok(Self { path })
    }

    /// What earlier runs met; nothing when there is no file yet, or it cannot be read.
    pub(crate) fn load(&self) -> Vec<Met> {
        let Some(path) = &self.path else {
            return Vec::new();
        };
        match std::fs::read_to_string(path) {
            Ok(text) => parse(&text, SystemTime::now()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                warn(path, "read", &e);
                Vec::new()
            }
        }
    }

    /// Writes down what this run met, keeping what earlier runs met at other addresses.
    pub(crate) fn save(&self, met: &[Met]) {
        let Some(path) = &self.path else {
            return;
        };
        if met.is_empty() {
            return;
        }
        let now = SystemTime::now();
        let mut all = match std::fs::read_to_string(path) {
            Ok(text) => parse(&text, now),
            Err(_) => Vec::new(),
        };
        for (address, server) in met {
            all.retain(|(known, _)| known != address);
            all.push((address.clone(), server.clone()));
        }
        all.sort_by(|a, b| a.0.cmp(&b.0));
        if let Err(e) = write_atomically(path, &render(&all, now)) {
            warn(path, "write", &e);
        }
    }
}

/// `$XDG_STATE_HOME/redlock/servers`, else `~/.local/state/redlock/servers`; relative
/// values are ignored, as the XDG base directory specification says.
fn default_path(lookup: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| {
        lookup(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    absolute("XDG_STATE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".local").join("state")))
        .map(|dir| dir.join("redlock").join("servers"))
}

fn warn(path: &Path, what: &str, error: &std::io::Error) {
    say!(
        "redlock: warning: cannot {what} the servers met ({}: {error}); a server replaced \
         behind a node's name between runs may go unnoticed (--servers-file)",
        path.display()
    );
}

/// The lines of the file, read at `now`; lines that do not parse are skipped.
fn parse(text: &str, now: SystemTime) -> Vec<Met> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (address, run_id, changed) = (fields.next()?, fields.next()?, fields.next()?);
            if fields.next().is_some() || address.is_empty() || run_id.is_empty() {
                return None;
            }
            let changed_ago = match changed {
                "-" => None,
                // A time in the future (the wall clock stepped back) counts as now.
                ms => Some(
                    now.duration_since(UNIX_EPOCH + Duration::from_millis(ms.parse().ok()?))
                        .unwrap_or(Duration::ZERO),
                ),
            };
            let server = RememberedServer {
                run_id: run_id.to_owned(),
                changed_ago,
            };
            Some((address.to_owned(), server))
        })
        .collect()
}

/// The file's text for `servers`, at `now`.
fn render(servers: &[Met], now: SystemTime) -> String {
    let mut text = format!("{HEADER}\n");
    for (address, server) in servers {
        let changed = server.changed_ago.map_or_else(
            || "-".to_owned(),
            |ago| {
                let at = now.checked_sub(ago).unwrap_or(UNIX_EPOCH);
                let ms = at
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_millis();
                ms.to_string()
            },
        );
        text.push_str(&format!("{address}\t{}\t{changed}\n", server.run_id));
    }
    text
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`, creating
/// the directory (private to the user) first.
fn write_atomically(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;

    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = dir.join(name);
    let written = std::fs::File::create(&temporary).and_then(|mut file| {
        file.write_all(text.as_bytes())?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temporary, path));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    renamed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(run_id: &str, changed_ago: Option<u64>) -> RememberedServer {
        RememberedServer {
            run_id: run_id.into(),
            changed_ago: changed_ago.map(Duration::from_secs),
        }
    }

    #[test]
    fn the_file_reads_back_what_was_written() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let servers = vec![
            ("10.0.0.1:6379".to_owned(), server("a1", None)),
            ("10.0.0.2:6379".to_owned(), server("b2", Some(7))),
        ];
        let text = render(&servers, now);
        assert!(text.starts_with("# "), "{text}");
        let later = now + Duration::from_secs(3);
        assert_eq!(
            parse(&text, later),
            [
                ("10.0.0.1:6379".to_owned(), server("a1", None)),
                ("10.0.0.2:6379".to_owned(), server("b2", Some(10))),
            ]
        );
        // A change dated after now (a clock stepped back) counts as just now; junk is skipped.
        let odd = "x:1\tr\t99999999999999\nnot a line\ny:1\t\t-\nz:1\tr\t-\textra\n";
        assert_eq!(parse(odd, now), [("x:1".to_owned(), server("r", Some(0)))]);
    }

    #[test]
    fn the_file_is_the_flag_else_the_variable_else_the_state_directory() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| OsString::from(value))
            }
        };
        let at = |flag: Option<&str>, lookup: &dyn Fn(&str) -> Option<OsString>| {
            Memory::locate_with(flag.map(OsString::from).as_ref(), lookup)
                .unwrap()
                .path
        };
        let home = env(&[("HOME", "/home/ann")]);
        assert_eq!(
            at(None, &home),
            Some(PathBuf::from("/home/ann/.local/state/redlock/servers"))
        );
        let xdg = env(&[("HOME", "/home/ann"), ("XDG_STATE_HOME", "/state")]);
        assert_eq!(
            at(None, &xdg),
            Some(PathBuf::from("/state/redlock/servers"))
        );
        let variable = env(&[("HOME", "/home/ann"), (SERVERS_FILE_ENV, "/var/lib/x")]);
        assert_eq!(at(None, &variable), Some(PathBuf::from("/var/lib/x")));
        assert_eq!(at(Some("/flag"), &variable), Some(PathBuf::from("/flag")));
        assert_eq!(at(Some("off"), &xdg), None);
        assert_eq!(at(None, &env(&[(SERVERS_FILE_ENV, "off")])), None);
        assert_eq!(at(None, &env(&[("HOME", "relative")])), None);
        let empty = Memory::locate_with(None, &env(&[(SERVERS_FILE_ENV, "")])).unwrap_err();
        assert!(
            empty
                .message
                .starts_with("REDLOCK_SERVERS_FILE is set but empty"),
            "{empty}"
        );
    }

    #[test]
    fn saving_keeps_other_addresses_and_replaces_this_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deeper").join("servers");
        let memory = Memory {
            path: Some(path.clone()),
        };
        assert!(memory.load().is_empty());
        memory.save(&[
            ("a:1".to_owned(), server("old", None)),
            ("b:1".to_owned(), server("kept", None)),
        ]);
        memory.save(&[("a:1".to_owned(), server("new", Some(0)))]);
        let loaded = memory.load();
        assert_eq!(loaded.len(), 2, "{loaded:?}");
        assert_eq!(loaded[0].1.run_id, "new");
        assert!(loaded[0].1.changed_ago.is_some());
        assert_eq!(loaded[1], ("b:1".to_owned(), server("kept", None)));
        // Nothing is left beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["servers"]);
    }
}
