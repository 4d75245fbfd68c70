//! Where each setting comes from: a flag, else its environment variable (`REDLOCK_TTL`,
//! `REDLOCK_NODES`, …), else the config file (read by `config_file`, into the [`Settings`]
//! defined here), else the library's default. Every value remembers its origin, so that a
//! refused value is reported where it was written (`--ttl`, `REDLOCK_TTL`,
//! `redlock.toml:3:7`). Node URLs are never printed with their passwords: the library
//! redacts them in its errors, and nothing here repeats a URL.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use redlock::{Error, Redlock};

use crate::args::NodeArgs;
use crate::duration;
use crate::exit::Failure;
use crate::memory::Met;
use crate::quarantine::{self, Quarantine};

/// The environment variable listing the nodes, comma-separated.
pub(crate) const NODES_ENV: &str = "REDLOCK_NODES";
/// The environment variables of the other settings a flag can give, each the flag's name in
/// capitals after `REDLOCK_` (as `--ttl` and `REDLOCK_TTL`), so that a unit's `Environment=`
/// or a CI job sets them without a config file.
pub(crate) const KEY_PREFIX_ENV: &str = "REDLOCK_KEY_PREFIX";
pub(crate) const NODE_TIMEOUT_ENV: &str = "REDLOCK_NODE_TIMEOUT";
pub(crate) const RESTART_QUARANTINE_ENV: &str = "REDLOCK_RESTART_QUARANTINE";
pub(crate) const TTL_ENV: &str = "REDLOCK_TTL";
pub(crate) const WAIT_ENV: &str = "REDLOCK_WAIT";
pub(crate) const KILL_AFTER_ENV: &str = "REDLOCK_KILL_AFTER";
pub(crate) const MAX_HOLD_ENV: &str = "REDLOCK_MAX_HOLD";

/// Where a value was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    Flag(&'static str),
    Env(&'static str),
    File {
        path: String,
        line: usize,
        column: usize,
        field: String,
    },
}

impl Origin {
    /// The place alone, for messages that name the field themselves (the library's).
    pub(crate) fn place(&self) -> String {
        match self {
            Self::Flag(name) | Self::Env(name) => (*name).to_owned(),
            Self::File {
                path, line, column, ..
            } => format!("{path}:{line}:{column}"),
        }
    }
}

/// The place and, in a file, the field: `--ttl`, `redlock.toml:3:7: `ttl``.
impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag(_) | Self::Env(_) => f.write_str(&self.place()),
            Self::File { field, .. } => write!(f, "{}: `{field}`", self.place()),
        }
    }
}

/// A value and where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Setting<T> {
    pub(crate) value: T,
    pub(crate) origin: Origin,
}

/// The command-line values that can also come from the config file.
#[derive(Debug, Default)]
pub(crate) struct Flags {
    pub(crate) nodes: Vec<String>,
    pub(crate) key_prefix: Option<String>,
    pub(crate) node_timeout: Option<Duration>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) wait: Option<Duration>,
    pub(crate) kill_after: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) restart_quarantine: Option<Quarantine>,
}

impl Flags {
    pub(crate) fn from_node_args(args: &NodeArgs) -> Self {
        Self {
            nodes: args.nodes.clone(),
            key_prefix: args.key_prefix.clone(),
            node_timeout: args.node_timeout,
            restart_quarantine: args.restart_quarantine,
            ..Self::default()
        }
    }
}

/// Every setting, merged; `None` means the default.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    pub(crate) nodes: Vec<Setting<String>>,
    /// Where the node list as a whole came from (for "no nodes" errors).
    pub(crate) nodes_origin: Option<Origin>,
    pub(crate) key_prefix: Option<Setting<String>>,
    pub(crate) ttl: Option<Setting<Duration>>,
    pub(crate) node_timeout: Option<Setting<Duration>>,
    pub(crate) retry_delay: Option<Setting<Duration>>,
    pub(crate) retry_jitter: Option<Setting<Duration>>,
    pub(crate) wait: Option<Setting<Duration>>,
    pub(crate) kill_after: Option<Setting<Duration>>,
    pub(crate) max_hold: Option<Setting<Duration>>,
    pub(crate) restart_quarantine: Option<Setting<Quarantine>>,
}

/// Merges the sources: `flags` over `env` (the settings of the environment, [`from_env`])
/// over `file` (the config file's settings, or none). The node list is taken whole from
/// the first source that has one, never merged.
///
/// # Errors
///
/// A usage failure when a `--node` URL is empty.
pub(crate) fn gather(flags: Flags, env: Settings, file: Settings) -> Result<Settings, Failure> {
    let mut settings = file.under(env);
    if !flags.nodes.is_empty() {
        settings.nodes = from_flag("--node", flags.nodes)?;
        settings.nodes_origin = Some(Origin::Flag("--node"));
    }
    let flag = |name: &'static str, value: Option<Duration>| {
        value.map(|value| Setting {
            value,
            origin: Origin::Flag(name),
        })
    };
    if let Some(prefix) = flags.key_prefix {
        settings.key_prefix = Some(Setting {
            value: prefix,
            origin: Origin::Flag("--key-prefix"),
        });
    }
    settings.node_timeout = flag("--node-timeout", flags.node_timeout).or(settings.node_timeout);
    settings.ttl = flag("--ttl", flags.ttl).or(settings.ttl);
    settings.wait = flag("--wait", flags.wait).or(settings.wait);
    settings.kill_after = flag("--kill-after", flags.kill_after).or(settings.kill_after);
    settings.max_hold = flag("--max-hold", flags.max_hold).or(settings.max_hold);
    if let Some(quarantine) = flags.restart_quarantine {
        settings.restart_quarantine = Some(Setting {
            value: quarantine,
            origin: Origin::Flag("--restart-quarantine"),
        });
    }
    Ok(settings)
}

/// Refuses settings without nodes; `file` says which config file was read, or where none
/// was found, so that a user whose default file is not the one they expected sees why.
///
/// # Errors
///
/// A usage failure when no source names any node.
pub(crate) fn require_nodes(settings: &Settings, file: &str) -> Result<(), Failure> {
    if settings.nodes_origin.is_some() {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "no nodes: give --node URL (repeatable), set {NODES_ENV}=URL,URL,… or write \
         `nodes = [\"redis://…\", …]` in a config file ({file})"
    )))
}

/// The settings the environment gives, each with the variable's name as its origin;
/// `lookup` reads one variable (the process environment, or a test's map).
///
/// # Errors
///
/// A usage failure naming the variable when a value is empty, not UTF-8 or malformed.
pub(crate) fn from_env(lookup: &dyn Fn(&str) -> Option<OsString>) -> Result<Settings, Failure> {
    // An empty variable is refused rather than ignored, as `REDLOCK_NODES=` always was: a
    // variable set by a unit or a CI job whose value went missing is a mistake to report.
    let text = |name: &'static str| -> Result<Option<String>, Failure> {
        let Some(value) = lookup(name) else {
            return Ok(None);
        };
        let value = value
            .into_string()
            .map_err(|_| Failure::usage(format!("{name} is not valid UTF-8")))?;
        if value.trim().is_empty() {
            return Err(Failure::usage(format!(
                "{name} is set but empty (unset it to use the next source)"
            )));
        }
        Ok(Some(value))
    };
    let parsed = |name: &'static str| {
        text(name)?
            .map(|value| {
                duration::parse(&value)
                    .map(|value| Setting {
                        value,
                        origin: Origin::Env(name),
                    })
                    .map_err(|e| Failure::usage(format!("{name}: {e}")))
            })
            .transpose()
    };
    let mut settings = Settings::default();
    if let Some(list) = text(NODES_ENV)? {
        settings.nodes = nodes_from_env(&list)?;
        settings.nodes_origin = Some(Origin::Env(NODES_ENV));
    }
    settings.key_prefix = text(KEY_PREFIX_ENV)?.map(|value| Setting {
        value,
        origin: Origin::Env(KEY_PREFIX_ENV),
    });
    settings.node_timeout = parsed(NODE_TIMEOUT_ENV)?;
    settings.ttl = parsed(TTL_ENV)?;
    settings.wait = parsed(WAIT_ENV)?;
    settings.kill_after = parsed(KILL_AFTER_ENV)?;
    settings.max_hold = parsed(MAX_HOLD_ENV)?;
    settings.restart_quarantine = text(RESTART_QUARANTINE_ENV)?
        .map(|value| {
            quarantine::parse(&value)
                .map(|value| Setting {
                    value,
                    origin: Origin::Env(RESTART_QUARANTINE_ENV),
                })
                .map_err(|e| Failure::usage(format!("{RESTART_QUARANTINE_ENV}: {e}")))
        })
        .transpose()?;
    Ok(settings)
}

fn from_flag(flag: &'static str, urls: Vec<String>) -> Result<Vec<Setting<String>>, Failure> {
    urls.into_iter()
        .enumerate()
        .map(|(index, url)| {
            let url = url.trim().to_owned();
            if url.is_empty() {
                return Err(Failure::usage(format!(
                    "{flag}: URL number {} is empty",
                    index + 1
                )));
            }
            Ok(Setting {
                value: url,
                origin: Origin::Flag(flag),
            })
        })
        .collect()
}

fn nodes_from_env(list: &str) -> Result<Vec<Setting<String>>, Failure> {
    list.split(',')
        .enumerate()
        .map(|(index, url)| {
            let url = url.trim();
            if url.is_empty() {
                return Err(Failure::usage(format!(
                    "{NODES_ENV}: URL number {} is empty (stray comma?)",
                    index + 1
                )));
            }
            Ok(Setting {
                value: url.to_owned(),
                origin: Origin::Env(NODES_ENV),
            })
        })
        .collect()
}

impl Settings {
    /// These settings with every value `upper` has put over them; the node list is taken
    /// whole from `upper` when it has one.
    fn under(self, upper: Self) -> Self {
        let (nodes, nodes_origin) = if upper.nodes_origin.is_some() {
            (upper.nodes, upper.nodes_origin)
        } else {
            (self.nodes, self.nodes_origin)
        };
        Self {
            nodes,
            nodes_origin,
            key_prefix: upper.key_prefix.or(self.key_prefix),
            ttl: upper.ttl.or(self.ttl),
            node_timeout: upper.node_timeout.or(self.node_timeout),
            retry_delay: upper.retry_delay.or(self.retry_delay),
            retry_jitter: upper.retry_jitter.or(self.retry_jitter),
            wait: upper.wait.or(self.wait),
            kill_after: upper.kill_after.or(self.kill_after),
            max_hold: upper.max_hold.or(self.max_hold),
            restart_quarantine: upper.restart_quarantine.or(self.restart_quarantine),
        }
    }

    /// Builds the client, and warns on stderr about settings that work but cost something
    /// (an even number of nodes).
    ///
    /// # Errors
    ///
    /// A usage failure naming where the refused value was written.
    pub(crate) fn client(&self) -> Result<Redlock, Failure> {
        self.client_remembering(Vec::new())
    }

    /// Builds the client as [`client`](Self::client) does, with the servers earlier runs met
    /// behind the nodes' names (see `memory.rs`).
    ///
    /// # Errors
    ///
    /// As [`client`](Self::client).
    pub(crate) fn client_remembering(&self, remembered: Vec<Met>) -> Result<Redlock, Failure> {
        let redlock = self.build(remembered)?;
        if let Ok(warnings) = redlock.config().validate() {
            for warning in warnings {
                say!("redlock: warning: {warning}");
            }
        }
        Ok(redlock)
    }

    /// Builds the client without the warnings, for `redlock doctor`, whose report lists them
    /// among its findings: said on stderr too, each would be said twice.
    ///
    /// # Errors
    ///
    /// As [`client`](Self::client).
    pub(crate) fn client_unannounced(&self) -> Result<Redlock, Failure> {
        self.build(Vec::new())
    }

    fn build(&self, remembered: Vec<Met>) -> Result<Redlock, Failure> {
        let mut builder = Redlock::builder()
            .nodes(self.nodes.iter().map(|n| n.value.clone()))
            .remembered_servers(remembered);
        if let Some(ttl) = &self.ttl {
            builder = builder.ttl(ttl.value);
        }
        if let Some(timeout) = &self.node_timeout {
            builder = builder.node_timeout(timeout.value);
        }
        if let Some(prefix) = &self.key_prefix {
            builder = builder.key_prefix(prefix.value.clone());
        }
        if let Some(delay) = &self.retry_delay {
            builder = builder.retry_delay(delay.value);
        }
        if let Some(jitter) = &self.retry_jitter {
            builder = builder.retry_jitter(jitter.value);
        }
        if let Some(max_hold) = &self.max_hold {
            builder = builder.max_hold(max_hold.value);
        }
        if let Some(quarantine) = &self.restart_quarantine {
            builder = builder.restart_quarantine(quarantine.value.as_option());
        }
        let redlock = builder.build().map_err(|e| match e {
            Error::Config(config) => match self.origin_of(config.field()) {
                Some(origin) => Failure::usage(format!("{}: {config}", origin.place())),
                None => Failure::usage(config.to_string()),
            },
            other => Failure::new(crate::exit::for_error(&other), other.to_string()),
        })?;
        Ok(redlock)
    }

    /// Where the library's field `field` (`ttl`, `nodes[2]`, …) was written, if anywhere.
    fn origin_of(&self, field: &str) -> Option<&Origin> {
        if let Some(index) = field
            .strip_prefix("nodes[")
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|index| index.parse::<usize>().ok())
        {
            return self.nodes.get(index).map(|n| &n.origin);
        }
        match field {
            "nodes" => self.nodes_origin.as_ref(),
            "key_prefix" => self.key_prefix.as_ref().map(|s| &s.origin),
            "ttl" => self.ttl.as_ref().map(|s| &s.origin),
            // A derived per-node timeout is refused because of the TTL it derives from.
            "node_timeout" => self
                .node_timeout
                .as_ref()
                .or(self.ttl.as_ref())
                .map(|s| &s.origin),
            "retry_delay" => self.retry_delay.as_ref().map(|s| &s.origin),
            "retry_jitter" => self.retry_jitter.as_ref().map(|s| &s.origin),
            "max_hold" => self.max_hold.as_ref().map(|s| &s.origin),
            _ => None,
        }
    }
}
