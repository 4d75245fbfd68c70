//! Reads every source of settings (the config file, the process environment) and merges them
//! with the command line's flags on top: the one place that knows all three, so that neither
//! the merge rule (`settings`) nor the file's reader (`config_file`) depends on the other.
//!
//! The config file is `--config`, else `REDLOCK_CONFIG`, else the first that exists of
//! `$XDG_CONFIG_HOME/redlock/redlock.toml` (`~/.config/redlock/redlock.toml` when unset)
//! and the system-wide `/etc/redlock/redlock.toml`: where users of systemd's and git's tools
//! look first. Only one file is read, never a merge of several; finding none is no error.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};

use crate::args::NodeArgs;
use crate::config_file;
use crate::exit::Failure;
use crate::settings::{self, Flags, Settings, gather};

/// The environment variable naming the config file, as `--config` does.
pub(crate) const CONFIG_ENV: &str = "REDLOCK_CONFIG";
/// The environment variable that moves the system-wide config file, for an installation
/// under another prefix (and for tests, which must never read the real one).
pub(crate) const SYSTEM_CONFIG_ENV: &str = "REDLOCK_SYSTEM_CONFIG";
/// The system-wide config file.
pub(crate) const SYSTEM_CONFIG: &str = "/etc/redlock/redlock.toml";

/// Reads every source named by `args` and the process environment, then merges them with
/// `flags` on top.
///
/// # Errors
///
/// As `config_file::load`, [`settings::from_env`] and [`gather`], and when no source names
/// any node.
pub(crate) fn from_sources(args: &NodeArgs, flags: Flags) -> Result<Settings, Failure> {
    from_sources_in(args, flags, &|name| std::env::var_os(name))
}

/// [`from_sources`] with the environment read through `lookup`.
fn from_sources_in(
    args: &NodeArgs,
    flags: Flags,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Settings, Failure> {
    let env = settings::from_env(lookup)?;
    let (file, read) = match config_path(args.config.as_deref(), lookup)? {
        ConfigPath::Found(path) => (
            config_file::load(&path)?,
            format!("read {}", path.display()),
        ),
        ConfigPath::NoneFound(looked) => (
            Settings::default(),
            format!(
                "none found at {}",
                looked
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
    };
    let settings = gather(flags, env, file)?;
    settings::require_nodes(&settings, &read)?;
    Ok(settings)
}

/// Which config file to read.
#[derive(Debug, PartialEq, Eq)]
enum ConfigPath {
    /// This one: named, or the first default location that exists.
    Found(PathBuf),
    /// None was named and none of these default locations exists.
    NoneFound(Vec<PathBuf>),
}

/// The config file: `flag` (`--config`), else `REDLOCK_CONFIG`, else the first default
/// location that exists. A named file is always read, so that a mistyped name is an error
/// rather than silently no file.
fn config_path(
    flag: Option<&Path>,
    lookup: &dyn Fn(&str) -> Option<OsString>,
) -> Result<ConfigPath, Failure> {
    if let Some(path) = flag {
        return Ok(ConfigPath::Found(path.to_owned()));
    }
    if let Some(path) = lookup(CONFIG_ENV) {
        if path.is_empty() {
            return Err(Failure::usage(format!(
                "{CONFIG_ENV} is set but empty (unset it to use the default locations)"
            )));
        }
        return Ok(ConfigPath::Found(path.into()));
    }
    let looked = default_locations(lookup);
    for path in &looked {
        match std::fs::metadata(path) {
            Ok(_) => return Ok(ConfigPath::Found(path.clone())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // A file that may be there but cannot be looked at (a directory without search
            // permission) is not skipped: reading the next one instead would be a surprise.
            Err(e) => {
                return Err(Failure::usage(format!(
                    "cannot read the config file {}: {e}",
                    path.display()
                )));
            }
        }
    }
    Ok(ConfigPath::NoneFound(looked))
}

/// The default locations, in order: the user's, then the system's. As the XDG base directory
/// specification says, a relative `XDG_CONFIG_HOME` is ignored; an unset or relative `HOME`
/// gives no user location.
fn default_locations(lookup: &dyn Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let absolute = |name: &str| {
        lookup(name)
            .map(PathBuf::from)
            .filter(|path| path.is_absolute())
    };
    let user = absolute("XDG_CONFIG_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".config")))
        .map(|dir| dir.join("redlock").join("redlock.toml"));
    let system = lookup(SYSTEM_CONFIG_ENV)
        .filter(|path| !path.is_empty())
        .map_or_else(|| PathBuf::from(SYSTEM_CONFIG), PathBuf::from);
    user.into_iter().chain([system]).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::settings::{NODES_ENV, Origin, TTL_ENV};

    fn file(text: &str) -> Settings {
        config_file::parse(text, "redlock.toml").unwrap()
    }

    /// An environment of exactly `vars`.
    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let vars: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |name| vars.get(name).cloned()
    }

    fn from_env(vars: &[(&str, &str)]) -> Result<Settings, Failure> {
        settings::from_env(&env(vars))
    }

    fn no_args() -> NodeArgs {
        NodeArgs {
            nodes: Vec::new(),
            config: None,
            key_prefix: None,
            node_timeout: None,
            restart_quarantine: None,
        }
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file() {
        let text = "nodes = [\"redis://127.0.0.1:1\"]\nttl = \"30s\"\nwait = \"1m\"\n";
        let only_file = gather(Flags::default(), Settings::default(), file(text)).unwrap();
        assert_eq!(only_file.nodes[0].value, "redis://127.0.0.1:1");

        let vars = [
            (NODES_ENV, "redis://127.0.0.1:2, redis://127.0.0.1:3"),
            (TTL_ENV, "20s"),
        ];
        let with_env = gather(Flags::default(), from_env(&vars).unwrap(), file(text)).unwrap();
        assert_eq!(
            with_env
                .nodes
                .iter()
                .map(|n| n.value.as_str())
                .collect::<Vec<_>>(),
            ["redis://127.0.0.1:2", "redis://127.0.0.1:3"]
        );
        assert_eq!(with_env.nodes[0].origin, Origin::Env(NODES_ENV));
        let ttl = with_env.ttl.unwrap();
        assert_eq!(
            (ttl.value, ttl.origin),
            (Duration::from_secs(20), Origin::Env(TTL_ENV))
        );
        // What neither the flags nor the environment give still comes from the file.
        assert_eq!(with_env.wait.unwrap().value, Duration::from_secs(60));

        let flags = Flags {
            nodes: vec!["redis://127.0.0.1:4".into()],
            ttl: Some(Duration::from_secs(5)),
            ..Flags::default()
        };
        let all = gather(flags, from_env(&vars).unwrap(), file(text)).unwrap();
        assert_eq!(all.nodes[0].value, "redis://127.0.0.1:4");
        assert_eq!(all.nodes[0].origin, Origin::Flag("--node"));
        let ttl = all.ttl.unwrap();
        assert_eq!(
            (ttl.value, ttl.origin),
            (Duration::from_secs(5), Origin::Flag("--ttl"))
        );
    }

    #[test]
    fn every_setting_has_its_variable() {
        let settings = from_env(&[
            ("REDLOCK_KEY_PREFIX", "jobs:"),
            ("REDLOCK_NODE_TIMEOUT", "20ms"),
            ("REDLOCK_RESTART_QUARANTINE", "off"),
            ("REDLOCK_TTL", "1m"),
            ("REDLOCK_WAIT", "5s"),
            ("REDLOCK_KILL_AFTER", "2s"),
            ("REDLOCK_MAX_HOLD", "2h"),
        ])
        .unwrap();
        let prefix = settings.key_prefix.unwrap();
        assert_eq!(
            (prefix.value.as_str(), prefix.origin),
            ("jobs:", Origin::Env("REDLOCK_KEY_PREFIX"))
        );
        assert_eq!(
            settings.node_timeout.unwrap().origin,
            Origin::Env("REDLOCK_NODE_TIMEOUT")
        );
        assert_eq!(
            settings.restart_quarantine.unwrap().value,
            crate::quarantine::Quarantine::Off
        );
        assert_eq!(settings.ttl.unwrap().value, Duration::from_secs(60));
        assert_eq!(settings.wait.unwrap().value, Duration::from_secs(5));
        assert_eq!(settings.kill_after.unwrap().value, Duration::from_secs(2));
        assert_eq!(settings.max_hold.unwrap().value, Duration::from_secs(7200));
        assert!(settings.nodes_origin.is_none());
    }

    #[test]
    fn malformed_variables_are_refused_by_name() {
        let err = from_env(&[(TTL_ENV, "5 parsecs")]).unwrap_err();
        assert_eq!(err.code, crate::exit::USAGE);
        assert!(err.message.starts_with("REDLOCK_TTL: `5 parsecs`"), "{err}");
        let err = from_env(&[("REDLOCK_WAIT", "30")]).unwrap_err();
        assert!(
            err.message.starts_with("REDLOCK_WAIT: `30` has no unit"),
            "{err}"
        );
        let err = from_env(&[("REDLOCK_RESTART_QUARANTINE", "never")]).unwrap_err();
        assert!(
            err.message.starts_with("REDLOCK_RESTART_QUARANTINE: ")
                && err.message.contains("`off`"),
            "{err}"
        );
        let err = from_env(&[("REDLOCK_KEY_PREFIX", " ")]).unwrap_err();
        assert!(
            err.message
                .starts_with("REDLOCK_KEY_PREFIX is set but empty"),
            "{err}"
        );
        let err = from_env(&[(NODES_ENV, "")]).unwrap_err();
        assert!(err.message.contains("set but empty"), "{err}");
        let err = from_env(&[(NODES_ENV, "redis://a:1,,redis://b:1")]).unwrap_err();
        assert!(err.message.contains("URL number 2 is empty"), "{err}");
    }

    #[test]
    fn missing_nodes_name_the_config_files_looked_at() {
        let lookup = env(&[
            ("HOME", "/nonexistent-home"),
            (SYSTEM_CONFIG_ENV, "/nonexistent-etc/redlock.toml"),
        ]);
        let err = from_sources_in(&no_args(), Flags::default(), &lookup).unwrap_err();
        assert!(err.message.starts_with("no nodes"), "{err}");
        assert!(
            err.message.contains(
                "none found at /nonexistent-home/.config/redlock/redlock.toml, \
                 /nonexistent-etc/redlock.toml"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_default_locations_follow_xdg() {
        let locations = |vars: &[(&str, &str)]| default_locations(&env(vars));
        assert_eq!(
            locations(&[("HOME", "/home/ann")]),
            [
                PathBuf::from("/home/ann/.config/redlock/redlock.toml"),
                PathBuf::from(SYSTEM_CONFIG)
            ]
        );
        assert_eq!(
            locations(&[("HOME", "/home/ann"), ("XDG_CONFIG_HOME", "/cfg")]),
            [
                PathBuf::from("/cfg/redlock/redlock.toml"),
                PathBuf::from(SYSTEM_CONFIG)
            ]
        );
        // Relative directories are ignored, as the XDG specification asks.
        assert_eq!(
            locations(&[("HOME", "home"), ("XDG_CONFIG_HOME", "cfg")]),
            [PathBuf::from(SYSTEM_CONFIG)]
        );
        assert_eq!(
            locations(&[(SYSTEM_CONFIG_ENV, "/opt/etc/redlock.toml")]),
            [PathBuf::from("/opt/etc/redlock.toml")]
        );
    }

    #[test]
    fn the_config_file_is_the_flag_then_the_variable_then_the_first_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("xdg/redlock/redlock.toml");
        let system = dir.path().join("etc/redlock.toml");
        std::fs::create_dir_all(system.parent().unwrap()).unwrap();
        std::fs::write(&system, "").unwrap();
        let xdg = dir.path().join("xdg");
        let base = [
            ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
            (SYSTEM_CONFIG_ENV, system.to_str().unwrap()),
        ];
        // Only the system's exists.
        assert_eq!(
            config_path(None, &env(&base)).unwrap(),
            ConfigPath::Found(system.clone())
        );
        // The user's, once it exists, comes first.
        std::fs::create_dir_all(user.parent().unwrap()).unwrap();
        std::fs::write(&user, "").unwrap();
        assert_eq!(
            config_path(None, &env(&base)).unwrap(),
            ConfigPath::Found(user)
        );
        // A named file is taken even when it does not exist (reading it then fails).
        let mut named = base.to_vec();
        named.push((CONFIG_ENV, "/named.toml"));
        assert_eq!(
            config_path(None, &env(&named)).unwrap(),
            ConfigPath::Found("/named.toml".into())
        );
        assert_eq!(
            config_path(Some(Path::new("/flag.toml")), &env(&named)).unwrap(),
            ConfigPath::Found("/flag.toml".into())
        );
        named.pop();
        named.push((CONFIG_ENV, ""));
        let err = config_path(None, &env(&named)).unwrap_err();
        assert!(
            err.message.starts_with("REDLOCK_CONFIG is set but empty"),
            "{err}"
        );
    }

    #[test]
    fn errors_name_the_default_file_they_come_from() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("redlock/redlock.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "nodes = [\"redis://127.0.0.1:1\"]\ntll = \"5s\"\n").unwrap();
        let lookup = env(&[
            ("XDG_CONFIG_HOME", dir.path().to_str().unwrap()),
            (SYSTEM_CONFIG_ENV, "/nonexistent-etc/redlock.toml"),
        ]);
        let err = from_sources_in(&no_args(), Flags::default(), &lookup).unwrap_err();
        assert!(
            err.message
                .starts_with(&format!("{}:2:1: `tll`", path.display())),
            "{err}"
        );
    }

    #[test]
    fn refused_values_are_reported_where_they_were_written() {
        let settings =
            file("nodes = [\"redis://127.0.0.1:1\", \"redis://127.0.0.1:2\", \"nope://x\"]\n");
        let err = settings.client().unwrap_err();
        assert!(err.message.starts_with("redlock.toml:1:56: "), "{err}");
        assert!(err.message.contains("`nodes[2]`"), "{err}");

        let settings = file("nodes = [\"redis://127.0.0.1:1\"]\n\nttl = \"1ms\"\n");
        let err = settings.client().unwrap_err();
        assert!(err.message.starts_with("redlock.toml:3:7: "), "{err}");

        let flags = Flags {
            nodes: vec!["redis://127.0.0.1:1".into()],
            ttl: Some(Duration::from_secs(1)),
            node_timeout: Some(Duration::from_millis(500)),
            ..Flags::default()
        };
        let err = gather(flags, Settings::default(), Settings::default())
            .unwrap()
            .client()
            .unwrap_err();
        assert!(err.message.starts_with("--node-timeout: "), "{err}");

        // A value from the environment that the library refuses names its variable.
        let env = from_env(&[(NODES_ENV, "redis://127.0.0.1:1"), (TTL_ENV, "1ms")]).unwrap();
        let err = gather(Flags::default(), env, Settings::default())
            .unwrap()
            .client()
            .unwrap_err();
        assert!(err.message.starts_with("REDLOCK_TTL: "), "{err}");
    }
}
