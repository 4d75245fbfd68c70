//! What the collector saw on each node, as plain data: the judgement (`judge`) reads only
//! these, so every rule can be tested without a server.

use std::net::SocketAddr;
use std::time::Duration;

use redlock_core::{NodeIdentity, info_field};

use super::clock::TimeSample;
use super::permissions::Probe;

/// The settings the nodes are judged against.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Limits {
    /// The nodes configured.
    pub(crate) nodes: usize,
    /// Votes a lease needs.
    pub(crate) quorum: usize,
    /// The TTL of the leases.
    pub(crate) ttl: Duration,
    /// How long a client waits for one node's reply.
    pub(crate) node_timeout: Duration,
    /// The fraction of the TTL reserved for clock error (0.01 = 1 %).
    pub(crate) drift_factor: f64,
    /// The restart quarantine; `None` when declared off (every node persists each write).
    pub(crate) quarantine: Option<Duration>,
    /// How long each node's clock was watched.
    pub(crate) clock_window: Duration,
    /// The prefix of lock keys, for ACL key patterns.
    pub(crate) key_prefix: String,
}

/// Everything seen on one node.
#[derive(Clone, Debug)]
pub(crate) struct NodeObservation {
    /// `host:port` or socket path, never with a password.
    pub(crate) address: String,
    /// The socket addresses the name resolves to (an IP literal is its own; none for a Unix
    /// socket or a failed lookup): two names that share one are one server, as the client
    /// counts them, even where `INFO` is refused and no `run_id` says so.
    pub(crate) socket_addresses: Vec<SocketAddr>,
    /// `Err` with the reason when no connection answered `PING`.
    pub(crate) reached: Result<(), String>,
    /// The round trips of every `PING` and `TIME` sent.
    pub(crate) round_trips: Vec<Duration>,
    /// The `INFO` reply, or why there is none (refused, unparsable); `None` when unreachable.
    pub(crate) info: Option<Result<ServerInfo, String>>,
    /// `CONFIG GET appendfsync`, or why it could not be read.
    pub(crate) appendfsync: Option<Result<String, String>>,
    /// `TIME` samples over the clock window, or why `TIME` failed.
    pub(crate) clock: Option<Result<Vec<TimeSample>, String>>,
    /// The permission probe, when it ran.
    pub(crate) probe: Option<Probe>,
    /// The server process's age on this host's boot-time clock, read just after `INFO`;
    /// only for a node on this host whose process could be read.
    pub(crate) process_age: Option<Duration>,
}

impl Default for NodeObservation {
    /// A node reached, of which nothing else is known yet.
    fn default() -> Self {
        Self {
            address: String::new(),
            socket_addresses: Vec::new(),
            reached: Ok(()),
            round_trips: Vec::new(),
            info: None,
            appendfsync: None,
            clock: None,
            probe: None,
            process_age: None,
        }
    }
}

impl NodeObservation {
    /// A node that could not be reached.
    pub(crate) fn unreachable(address: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            address: address.into(),
            reached: Err(why.into()),
            ..Self::default()
        }
    }

    pub(crate) fn is_reachable(&self) -> bool {
        self.reached.is_ok()
    }

    /// The server's `INFO`, when read.
    pub(crate) fn server(&self) -> Option<&ServerInfo> {
        self.info.as_ref().and_then(|info| info.as_ref().ok())
    }
}

/// A node's replication role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A master, with this many connected replicas.
    Master { replicas: u32 },
    /// A replica of `master` (`host:port`).
    Replica { master: String },
    /// Something else (a sentinel, an unknown role).
    Other(String),
}

impl Role {
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Master { replicas: 0 } => "master".to_owned(),
            Self::Master { replicas } => format!("master+{replicas}"),
            Self::Replica { .. } => "replica".to_owned(),
            Self::Other(role) => role.clone(),
        }
    }
}

/// What `INFO` says about a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    pub(crate) version: String,
    /// A new one after every restart; the same under every name of one server.
    pub(crate) run_id: String,
    pub(crate) uptime: Duration,
    /// The server's process id (`process_id`), when `INFO` gives it.
    pub(crate) process_id: Option<u32>,
    pub(crate) role: Role,
    pub(crate) aof_enabled: bool,
    pub(crate) maxmemory_policy: Option<String>,
    /// `maxmemory` in bytes (0: no limit).
    pub(crate) maxmemory: Option<u64>,
}

/// Reads the fields the doctor needs from an `INFO` reply (the default sections).
pub(crate) fn parse_info(text: &str) -> Result<ServerInfo, String> {
    // What the client itself reads (run_id, uptime, eviction policy), read the same way.
    let identity = NodeIdentity::from_info(text)?;
    let field = |name: &str| info_field(text, name);
    let role = match field("role") {
        Some("master") => Role::Master {
            replicas: field("connected_slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        },
        Some("slave" | "replica") => Role::Replica {
            master: format!(
                "{}:{}",
                field("master_host").unwrap_or("?"),
                field("master_port").unwrap_or("?")
            ),
        },
        Some(other) => Role::Other(other.to_owned()),
        None => return Err("INFO has no role (the replication section is missing)".into()),
    };
    Ok(ServerInfo {
        version: field("redis_version").unwrap_or("?").to_owned(),
        run_id: identity.run_id,
        uptime: identity.uptime,
        process_id: field("process_id").and_then(|pid| pid.parse().ok()),
        role,
        aof_enabled: field("aof_enabled") == Some("1"),
        maxmemory_policy: identity.maxmemory_policy,
        maxmemory: field("maxmemory").and_then(|n| n.parse().ok()),
    })
}

/// A Redis version as numbers (`7.0.15` → `[7, 0, 15]`), missing parts as 0.
pub(crate) fn version_numbers(version: &str) -> [u32; 3] {
    let mut numbers = [0; 3];
    for (slot, part) in numbers.iter_mut().zip(version.split('.')) {
        let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
        *slot = digits.parse().unwrap_or(0);
    }
    numbers
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASTER: &str = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\
        run_id:0123456789abcdef0123456789abcdef01234567\r\nprocess_id:4711\r\nuptime_in_seconds:4242\r\n\
        # Memory\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n\
        # Persistence\r\naof_enabled:1\r\n# Replication\r\nrole:master\r\nconnected_slaves:2\r\n";

    #[test]
    fn reads_a_masters_info() {
        let info = parse_info(MASTER).unwrap();
        assert_eq!(info.version, "7.0.15");
        assert_eq!(info.uptime, Duration::from_secs(4242));
        assert_eq!(info.process_id, Some(4711));
        assert_eq!(info.role, Role::Master { replicas: 2 });
        assert_eq!(info.role.label(), "master+2");
        assert!(info.aof_enabled);
        assert_eq!(info.maxmemory_policy.as_deref(), Some("noeviction"));
        assert_eq!(info.maxmemory, Some(0));
    }

    #[test]
    fn reads_a_replicas_info_and_refuses_a_headless_one() {
        let text = "run_id:abc\r\nuptime_in_seconds:1\r\nrole:slave\r\nmaster_host:10.0.0.1\r\n\
                    master_port:6379\r\naof_enabled:0\r\n";
        let info = parse_info(text).unwrap();
        assert_eq!(
            info.role,
            Role::Replica {
                master: "10.0.0.1:6379".into()
            }
        );
        assert!(!info.aof_enabled);
        assert_eq!(info.version, "?");
        assert_eq!(info.process_id, None);
        assert!(parse_info("uptime_in_seconds:1\r\nrole:master\r\n").is_err());
        assert!(parse_info("run_id:abc\r\nuptime_in_seconds:1\r\n").is_err());
    }

    #[test]
    fn versions_compare_as_numbers() {
        assert_eq!(version_numbers("7.0.15"), [7, 0, 15]);
        assert_eq!(version_numbers("2.6"), [2, 6, 0]);
        assert_eq!(version_numbers("255.255.255-rc1"), [255, 255, 255]);
        assert!(version_numbers("2.6.11") < [2, 6, 12]);
    }
}
