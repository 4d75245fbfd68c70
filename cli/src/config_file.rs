//! The config file: TOML with the fields of `redlock.toml` (`nodes`, `ttl`, `key_prefix`,
//! …; durations as strings). Unknown fields are refused, and every error names the line,
//! the column and the field, so a typo never silently changes what runs.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use crate::duration::HumanDuration;
use crate::exit::Failure;
use crate::quarantine::Quarantine;
use crate::settings::{Origin, Setting, Settings};

/// The config file as written. Durations are strings (`"30s"`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    nodes: Option<Spanned<Vec<Spanned<String>>>>,
    key_prefix: Option<Spanned<String>>,
    ttl: Option<Spanned<HumanDuration>>,
    node_timeout: Option<Spanned<HumanDuration>>,
    retry_delay: Option<Spanned<HumanDuration>>,
    retry_jitter: Option<Spanned<HumanDuration>>,
    wait: Option<Spanned<HumanDuration>>,
    kill_after: Option<Spanned<HumanDuration>>,
    max_hold: Option<Spanned<HumanDuration>>,
    restart_quarantine: Option<Spanned<Quarantine>>,
}

/// Turns byte offsets of one file into `path:line:column` origins.
struct Locator<'a> {
    path: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn origin(&self, offset: usize, field: impl Into<String>) -> Origin {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        Origin::File {
            path: self.path.to_owned(),
            line: before.matches('\n').count() + 1,
            column: before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1,
            field: field.into(),
        }
    }

    fn setting<T, U>(
        &self,
        field: &str,
        spanned: Option<Spanned<T>>,
        map: impl Fn(T) -> U,
    ) -> Option<Setting<U>> {
        spanned.map(|s| Setting {
            origin: self.origin(s.span().start, field),
            value: map(s.into_inner()),
        })
    }
}

/// Reads the config file at `path`.
///
/// # Errors
///
/// A usage failure naming the file, and for a malformed file the line, column and field.
pub(crate) fn load(path: &Path) -> Result<Settings, Failure> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("cannot read the config file {shown}: {e}")))?;
    parse(&text, &shown)
}

/// Parses the text of a config file; `path` names it in errors.
///
/// # Errors
///
/// A usage failure naming the line, column and field of the first problem.
pub(crate) fn parse(text: &str, path: &str) -> Result<Settings, Failure> {
    let at = Locator { path, text };
    let deserializer = toml::Deserializer::parse(text).map_err(|e| {
        let place = at.origin(e.span().map_or(0, |s| s.start), "").place();
        Failure::usage(format!("{place}: {}", e.message()))
    })?;
    let file: FileConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = field_path(&e.path().to_string());
        let inner = e.into_inner();
        let origin = at.origin(inner.span().map_or(0, |s| s.start), field);
        Failure::usage(format!("{origin}: {}", inner.message()))
    })?;
    let duration = |d: HumanDuration| d.0;
    let (nodes_origin, nodes) = match file.nodes {
        Some(list) => {
            let origin = at.origin(list.span().start, "nodes");
            let nodes = list
                .into_inner()
                .into_iter()
                .enumerate()
                .map(|(index, url)| Setting {
                    origin: at.origin(url.span().start, format!("nodes[{index}]")),
                    value: url.into_inner(),
                })
                .collect();
            (Some(origin), nodes)
        }
        None => (None, Vec::new()),
    };
    Ok(Settings {
        nodes,
        nodes_origin,
        key_prefix: at.setting("key_prefix", file.key_prefix, |p| p),
        ttl: at.setting("ttl", file.ttl, duration),
        node_timeout: at.setting("node_timeout", file.node_timeout, duration),
        retry_delay: at.setting("retry_delay", file.retry_delay, duration),
        retry_jitter: at.setting("retry_jitter", file.retry_jitter, duration),
        wait: at.setting("wait", file.wait, duration),
        kill_after: at.setting("kill_after", file.kill_after, duration),
        max_hold: at.setting("max_hold", file.max_hold, duration),
        restart_quarantine: at.setting("restart_quarantine", file.restart_quarantine, |q| q),
    })
}

/// The field's path as written in the file: `Spanned` wrappers add private segments to
/// serde's path (`ttl.$__serde_spanned_private_value`) that mean nothing to a user.
fn field_path(path: &str) -> String {
    path.split('.')
        .map(|segment| match segment.find("$__") {
            Some(0) => segment.find('[').map_or("", |at| &segment[at..]),
            _ => segment,
        })
        .fold(String::new(), |mut joined, segment| {
            if !joined.is_empty() && !segment.is_empty() && !segment.starts_with('[') {
                joined.push('.');
            }
            joined.push_str(segment);
            joined
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn file_origin(line: usize, column: usize, field: &str) -> Origin {
        Origin::File {
            path: "redlock.toml".into(),
            line,
            column,
            field: field.into(),
        }
    }

    #[test]
    fn field_paths_hide_serde_internals() {
        let private = "$__serde_spanned_private_value";
        assert_eq!(field_path(&format!("ttl.{private}")), "ttl");
        assert_eq!(
            field_path(&format!("nodes.{private}[0].{private}")),
            "nodes[0]"
        );
        assert_eq!(field_path("tll"), "tll");
    }

    #[test]
    fn a_file_gives_every_field_with_its_line() {
        let text = "nodes = [\"redis://127.0.0.1:1\", \"redis://127.0.0.1:2\"]\n\
                    key_prefix = \"jobs:\"\nttl = \"30s\"\nwait = \"1m\"\nkill_after = \"5s\"\n\
                    max_hold = \"2h\"\nnode_timeout = \"20ms\"\nretry_delay = \"1s\"\n\
                    retry_jitter = \"250ms\"\nrestart_quarantine = \"off\"\n";
        let settings = parse(text, "redlock.toml").unwrap();
        assert_eq!(settings.restart_quarantine.unwrap().value, Quarantine::Off);
        assert_eq!(settings.nodes.len(), 2);
        assert_eq!(settings.nodes[1].origin, file_origin(1, 33, "nodes[1]"));
        assert_eq!(settings.key_prefix.unwrap().value, "jobs:");
        let ttl = settings.ttl.unwrap();
        assert_eq!(ttl.value, Duration::from_secs(30));
        assert_eq!(ttl.origin, file_origin(3, 7, "ttl"));
        assert_eq!(ttl.origin.to_string(), "redlock.toml:3:7: `ttl`");
        assert_eq!(settings.wait.unwrap().value, Duration::from_secs(60));
        assert_eq!(settings.max_hold.unwrap().value, Duration::from_secs(7200));
        assert_eq!(
            settings.retry_jitter.unwrap().value,
            Duration::from_millis(250)
        );
    }

    #[test]
    fn a_bare_number_of_a_duration_gets_the_string_to_write() {
        let err = parse("nodes = []\nttl = 30\n", "redlock.toml").unwrap_err();
        assert!(
            err.message.starts_with("redlock.toml:2:7: `ttl`: "),
            "{err}"
        );
        assert!(err.message.contains("write \"30s\""), "{err}");
        let err = parse("nodes = []\nwait = true\n", "redlock.toml").unwrap_err();
        assert!(
            err.message.contains("a duration written as a string"),
            "{err}"
        );
    }

    #[test]
    fn unknown_fields_and_bad_values_name_line_and_field() {
        let err = parse("nodes = []\n\ntll = \"5s\"\n", "redlock.toml").unwrap_err();
        assert!(err.message.starts_with("redlock.toml:3:1: "), "{err}");
        assert!(err.message.contains("unknown field `tll`"), "{err}");

        let err = parse("nodes = []\nttl = \"5 parsecs\"\n", "redlock.toml").unwrap_err();
        assert!(
            err.message.starts_with("redlock.toml:2:7: `ttl`: "),
            "{err}"
        );
        assert!(err.message.contains("not a duration"), "{err}");

        let err = parse("nodes = [1]\n", "redlock.toml").unwrap_err();
        assert!(
            err.message.starts_with("redlock.toml:1:10: `nodes[0]`"),
            "{err}"
        );

        let err = parse("nodes = [\n", "redlock.toml").unwrap_err();
        assert!(err.message.starts_with("redlock.toml:"), "{err}");
    }
}
