//! Reads every source of settings (the config file, the process environment) and merges them
//! with the command line's flags on top: the one place that knows all three, so that neither
//! the merge rule (`settings`) nor the file's reader (`config_file`) depends on the other.

use crate::args::NodeArgs;
use crate::config_file;
use crate::exit::Failure;
use crate::settings::{Flags, NODES_ENV, Settings, gather};

/// Reads every source named by `args` and the process environment, then merges them with
/// `flags` on top.
///
/// # Errors
///
/// As `config_file::load` and [`gather`].
pub(crate) fn from_sources(args: &NodeArgs, flags: Flags) -> Result<Settings, Failure> {
    let file = match &args.config {
        Some(path) => config_file::load(path)?,
        None => Settings::default(),
    };
    gather(flags, std::env::var_os(NODES_ENV), file)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::settings::{Flags, Origin, Settings, gather};

    fn file(text: &str) -> Settings {
        config_file::parse(text, "redlock.toml").unwrap()
    }

    #[test]
    fn flags_beat_the_environment_which_beats_the_file() {
        let text = "nodes = [\"redis://127.0.0.1:1\"]\nttl = \"30s\"\n";
        let only_file = gather(Flags::default(), None, file(text)).unwrap();
        assert_eq!(only_file.nodes[0].value, "redis://127.0.0.1:1");

        let env = gather(
            Flags::default(),
            Some("redis://127.0.0.1:2, redis://127.0.0.1:3".into()),
            file(text),
        )
        .unwrap();
        assert_eq!(
            env.nodes
                .iter()
                .map(|n| n.value.as_str())
                .collect::<Vec<_>>(),
            ["redis://127.0.0.1:2", "redis://127.0.0.1:3"]
        );
        assert_eq!(env.nodes[0].origin, Origin::Env(NODES_ENV));
        assert_eq!(env.ttl.as_ref().unwrap().value, Duration::from_secs(30));

        let flags = Flags {
            nodes: vec!["redis://127.0.0.1:4".into()],
            ttl: Some(Duration::from_secs(5)),
            ..Flags::default()
        };
        let all = gather(flags, Some("redis://127.0.0.1:2".into()), file(text)).unwrap();
        assert_eq!(all.nodes[0].value, "redis://127.0.0.1:4");
        assert_eq!(all.nodes[0].origin, Origin::Flag("--node"));
        let ttl = all.ttl.unwrap();
        assert_eq!(
            (ttl.value, ttl.origin),
            (Duration::from_secs(5), Origin::Flag("--ttl"))
        );
    }

    #[test]
    fn malformed_environment_and_missing_nodes_are_refused() {
        let err = gather(Flags::default(), None, Settings::default()).unwrap_err();
        assert!(err.message.starts_with("no nodes"), "{err}");
        let err = gather(Flags::default(), Some("".into()), Settings::default()).unwrap_err();
        assert!(err.message.contains("set but empty"), "{err}");
        let err = gather(
            Flags::default(),
            Some("redis://a:1,,redis://b:1".into()),
            Settings::default(),
        )
        .unwrap_err();
        assert!(err.message.contains("URL number 2 is empty"), "{err}");
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
        let err = gather(flags, None, Settings::default())
            .unwrap()
            .client()
            .unwrap_err();
        assert!(err.message.starts_with("--node-timeout: "), "{err}");
    }
}
