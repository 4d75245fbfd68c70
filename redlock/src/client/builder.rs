//! Building a client: node URLs (or ready `redis::Client`s) and lock parameters, checked once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redis::IntoConnectionInfo;

use super::clock::Clock;
use super::node::{Node, Nodes};
use super::redact::redact_url;
use super::{Redlock, Shared};
use crate::error::Error;
use redlock_core::{
    ConfigError, DEFAULT_KEY_PREFIX, DriftFactor, LockConfig, LockKey, NodeId, RememberedServer,
    RestartPolicy, RetryPolicy,
};

/// The connection-establishment timeout used when none is set.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// `TCP_NODELAY` on: a lock request is a few dozen bytes that must leave at once. redis-rs
/// leaves Nagle's algorithm on by default, which holds a small write back while an earlier
/// one is unacknowledged: a lease's release can wait for the delayed ACK of its `SET`.
fn with_nodelay(info: redis::ConnectionInfo) -> redis::ConnectionInfo {
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    info.set_tcp_settings(tcp)
}

enum NodeSource {
    Url(String),
    // Boxed: a client is large next to a URL.
    Client(Box<redis::Client>),
}

/// Configures a [`Redlock`]. Nothing is checked or connected until [`build`](Self::build).
///
/// Node URLs are written as redis-rs users write them:
/// `redis://[user][:password@]host[:port][/db]`, `rediss://…` for TLS (with the `tls-rustls`
/// or `tls-native-tls` feature), `redis+unix:///path/to/socket?db=0&pass=…` for a Unix
/// socket. Ready-made `redis::Client`s (mutual TLS, custom settings) are accepted too.
///
/// ```
/// use std::time::Duration;
/// use redlock::Redlock;
///
/// let err = Redlock::builder()
///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
///     .ttl(Duration::from_millis(100))
///     .node_timeout(Duration::from_millis(50))
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "invalid configuration: `node_timeout` is 50ms, not below a tenth of the ttl (10ms); a slow node would eat the validity",
/// );
/// ```
pub struct RedlockBuilder {
    nodes: Vec<NodeSource>,
    /// The lock parameters, set by the setters as they come; the node count is filled in
    /// and the whole checked at [`build`](Self::build).
    config: LockConfig,
    /// A drift factor that is no [`DriftFactor`] (not finite, or outside `[0, 1)`): kept
    /// as given, so that `build` refuses it naming the value.
    invalid_drift_factor: Option<f64>,
    connect_timeout: Duration,
    key_prefix: String,
    restart_quarantine: Quarantine,
    /// What an earlier process met behind the nodes' names, by address.
    remembered: Vec<(String, RememberedServer)>,
}

/// How long a restarted node is left out.
#[derive(Clone, Copy, Debug)]
enum Quarantine {
    /// As long as the longest TTL of the client's handles (the default).
    Ttl,
    Fixed(Duration),
    /// The nodes persist every write: no quarantine.
    Persistent,
}

impl Quarantine {
    /// The core's policy for leases of `ttl`.
    fn policy(self, ttl: Duration) -> RestartPolicy {
        match self {
            Self::Ttl => RestartPolicy::default_for(ttl),
            Self::Fixed(duration) => RestartPolicy::Quarantine(duration),
            Self::Persistent => RestartPolicy::Persistent,
        }
    }
}

impl std::fmt::Debug for RedlockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|source| match source {
                NodeSource::Url(url) => redact_url(url),
                NodeSource::Client(client) => client.get_connection_info().addr().to_string(),
            })
            .collect();
        f.debug_struct("RedlockBuilder")
            .field("nodes", &nodes)
            .field("config", &self.config)
            .field("invalid_drift_factor", &self.invalid_drift_factor)
            .field("connect_timeout", &self.connect_timeout)
            .field("key_prefix", &self.key_prefix)
            .field("restart_quarantine", &self.restart_quarantine)
            .field("remembered", &self.remembered)
            .finish()
    }
}

impl Default for RedlockBuilder {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            // The node count is only known at `build`.
            config: LockConfig::new(0),
            invalid_drift_factor: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            restart_quarantine: Quarantine::Ttl,
            remembered: Vec::new(),
        }
    }
}

impl RedlockBuilder {
    /// Adds a node by URL.
    #[must_use]
    pub fn node(mut self, url: impl Into<String>) -> Self {
        self.nodes.push(NodeSource::Url(url.into()));
        self
    }

    /// Adds several nodes by URL.
    #[must_use]
    pub fn nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes
            .extend(urls.into_iter().map(|url| NodeSource::Url(url.into())));
        self
    }

    /// Adds a node from a ready `redis::Client` (for TLS with custom certificates, say).
    ///
    /// The client is used as it is: its address, credentials, database, protocol and TCP
    /// settings (`TCP_NODELAY`, keepalive, `TCP_USER_TIMEOUT`; over plain TCP, where the
    /// connection is this crate's own, not the linger time, which `TcpSettings` does not
    /// let it read). Nodes given by URL get `TCP_NODELAY`, which redis-rs leaves off by
    /// default, and a lock client wants it too (`ConnectionInfo::set_tcp_settings` with
    /// `TcpSettings::set_nodelay(true)`).
    #[must_use]
    pub fn node_client(mut self, client: redis::Client) -> Self {
        self.nodes.push(NodeSource::Client(Box::new(client)));
        self
    }

    /// The lease time-to-live (default 10 s): a whole number of milliseconds, at most 24 h.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config = self.config.with_ttl(ttl);
        self
    }

    /// The clock-drift factor (default 0.01): how much faster or slower than real time any
    /// clock involved may run. The drift allowance is `ttl × factor + 2 ms`.
    #[must_use]
    pub fn drift_factor(mut self, factor: f64) -> Self {
        match DriftFactor::from_f64(factor) {
            Some(valid) => {
                self.config = self.config.with_drift_factor(valid);
                self.invalid_drift_factor = None;
            }
            None => self.invalid_drift_factor = Some(factor),
        }
        self
    }

    /// How long to wait for one node's reply (default 50 ms, or a twentieth of the TTL when
    /// that is shorter). Must be below a tenth of the TTL.
    #[must_use]
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.config = self.config.with_node_timeout(timeout);
        self
    }

    /// How long establishing a connection to one node may take (default 1 s). Requests
    /// waiting for the connection are still bounded by the per-node timeout, except a
    /// release: its wait for a connection may take this long, and the release then gets the
    /// per-node timeout for itself, so that a slow reconnection does not leave the key to its
    /// TTL. No round waits for that (a release's answers are not needed to decide).
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How many rounds may follow a failed first round (default 3).
    #[must_use]
    pub fn retry_count(mut self, retries: u32) -> Self {
        let retry = self.config.retry();
        let retry = RetryPolicy::new(retries, retry.delay(), retry.jitter());
        self.config = self.config.with_retry(retry);
        self
    }

    /// The fixed part of the wait between rounds (default 100 ms). Zero is allowed.
    ///
    /// This is the longest wait: a waiter also wakes when the holder releases (the nodes'
    /// release notifications, or a release by this client) and when the holder's keys
    /// expire, whichever comes first. With notifications, the delay only matters when one
    /// is lost: a node that cannot publish or subscribe (its ACL has no `&` rule for the
    /// lock keys' channels), or a subscription that was down at the time.
    #[must_use]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        let retry = self.config.retry();
        let retry = RetryPolicy::new(retry.retries(), delay, retry.jitter());
        self.config = self.config.with_retry(retry);
        self
    }

    /// The random part of the wait between rounds, uniform in `[0, jitter)` (default 100 ms).
    #[must_use]
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        let retry = self.config.retry();
        let retry = RetryPolicy::new(retry.retries(), retry.delay(), jitter);
        self.config = self.config.with_retry(retry);
        self
    }

    /// How long one lease may be held through extensions (default 1 h): no extension starts
    /// later than this after the grant, so a lease ends at most one TTL after it. Keep-alive
    /// obeys it too: this is the one bound on a lease's life.
    #[must_use]
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.config = self.config.with_max_hold(max_hold);
        self
    }

    /// How long after it started a node is left out of quorums when this client first meets
    /// it, and for how long from the moment a node's `run_id` changes (a restart, or another
    /// server behind the name, whatever its uptime): it may have lost the keys it held, and a
    /// node that forgot a key can hand a second client a majority (the Redis documentation's
    /// "delayed restart", applied by the client; see [`redlock_core::Eligibility`]).
    ///
    /// The quarantine must cover the longest TTL **of any client of these nodes**, since a
    /// restart forgets every client's keys. The default is the longest TTL of this client's
    /// handles ([`ttl`](Self::ttl), raised by [`Redlock::with_ttl`]); set it when other
    /// clients use longer leases.
    ///
    /// Its cost: nodes started less than the quarantine ago answer but are not counted, so
    /// a fleet started less than one TTL ago gives no lease until the quarantine has passed
    /// ([`Error::NoQuorum`] says so, with the nodes and the time left).
    ///
    /// `None` turns the quarantine **off**; it is not the default. It declares that every
    /// node persists each write before acknowledging it (`appendfsync always`), and is the
    /// same as [`nodes_persist_every_write`](Self::nodes_persist_every_write), which says so
    /// by its name.
    #[must_use]
    pub fn restart_quarantine(mut self, quarantine: Option<Duration>) -> Self {
        self.restart_quarantine = quarantine.map_or(Quarantine::Persistent, Quarantine::Fixed);
        self
    }

    /// Declares that every node persists each write before acknowledging it (`appendonly
    /// yes` with `appendfsync always`): a restart then loses no key, so the restart
    /// quarantine is off and no node is left out of quorums, however recently it started.
    ///
    /// Declare it only when it holds on every node: a node that restarts without a key it
    /// acknowledged can hand a second client a majority at once (`redlock doctor` checks
    /// each node's persistence). Without it, the default quarantine (the TTL) applies; see
    /// [`restart_quarantine`](Self::restart_quarantine).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock::Redlock;
    ///
    /// let redlock = Redlock::builder()
    ///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
    ///     .ttl(Duration::from_secs(30))
    ///     .nodes_persist_every_write()
    ///     .build()
    ///     .unwrap();
    /// # drop(redlock);
    /// ```
    #[must_use]
    pub fn nodes_persist_every_write(mut self) -> Self {
        self.restart_quarantine = Quarantine::Persistent;
        self
    }

    /// The servers an earlier process of the application met behind the nodes' names, as
    /// [`Redlock::servers_met`] read them then, by node address (as
    /// [`Redlock::node_addresses`] shows it; other addresses are ignored). The application
    /// keeps them between processes (a small file, a table).
    ///
    /// Without them, every process meets every server for the first time and can date it by
    /// its uptime alone: another long-running server behind a known name (a promoted
    /// replica, a DNS name or virtual IP moved to another master), which never held the keys
    /// the old server held, votes at once. With them, such a server is a change, left out
    /// for the whole restart quarantine, as it is for a process that saw the change itself;
    /// and a change an earlier process saw keeps the rest of its quarantine.
    ///
    /// ```no_run
    /// # async fn demo(stored: Vec<(String, redlock::core::RememberedServer)>) -> Result<(), redlock::Error> {
    /// let redlock = redlock::Redlock::builder()
    ///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .remembered_servers(stored)
    ///     .build()?;
    /// redlock.connect().await;
    /// let to_store = redlock.servers_met(); // keep these for the next process
    /// # drop(to_store); Ok(()) }
    /// ```
    #[must_use]
    pub fn remembered_servers<A: Into<String>>(
        mut self,
        servers: impl IntoIterator<Item = (A, RememberedServer)>,
    ) -> Self {
        self.remembered = servers
            .into_iter()
            .map(|(address, server)| (address.into(), server))
            .collect();
        self
    }

    /// The prefix of every lock key (default `redlock:`), keeping lock keys apart from data.
    #[must_use]
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Checks the configuration and builds the client. No connection is opened yet: each
    /// node is connected on first use, so a client can be built while nodes are down.
    ///
    /// Allowed but weak configurations (fewer than 3 nodes, an even number) are logged at
    /// warn level through `tracing`.
    ///
    /// # Errors
    ///
    /// [`Error::Config`], naming the field, when a node URL does not parse (shown without
    /// its password), two nodes share an address, or a parameter is out of range.
    pub fn build(self) -> Result<Redlock, Error> {
        let (nodes, subscribers) = open_nodes(self.nodes, self.connect_timeout)?;
        if let Some(factor) = self.invalid_drift_factor {
            return Err(ConfigError::new(
                "drift_factor",
                format!("is {factor}, must be a finite number in [0, 1)"),
            )
            .into());
        }
        let config = self.config.with_nodes(nodes.len());
        for warning in config.validate()? {
            tracing::warn!(%warning, "weak Redlock configuration");
        }
        LockKey::new(&self.key_prefix, "resource")
            .map_err(|e| ConfigError::new("key_prefix", e.to_string()))?;

        let policy = self.restart_quarantine.policy(config.ttl());
        let addresses: Arc<[Arc<str>]> = nodes.iter().map(|n| n.address().clone()).collect();
        let clock = Clock::new();
        let remembered = self.remembered.into_iter().filter_map(|(address, server)| {
            let index = addresses.iter().position(|known| **known == *address)?;
            Some((NodeId::new(index), server))
        });
        let waiting = super::waiting::Waiting::default();
        let background = super::background::Background::default();
        let nodes = Nodes::new(nodes, policy, clock, background.clone());
        nodes.remember(remembered);
        let notifications = super::notifications::Notifications::new(
            subscribers,
            self.connect_timeout,
            waiting.by_key(),
        );
        Ok(Redlock {
            shared: Arc::new(Shared {
                lanes: super::lanes::LaneRegistry::new(nodes.len()),
                waiting,
                notifications,
                tokens: super::tokens::Tokens::new()?,
                own_leases: Default::default(),
                nodes: Arc::new(nodes),
                background,
                addresses,
                key_prefix: self.key_prefix.into(),
                connect_timeout: self.connect_timeout,
                quarantine_follows_ttl: matches!(self.restart_quarantine, Quarantine::Ttl),
                telemetry: super::telemetry::Telemetry::default(),
            }),
            config: Arc::new(config),
            fencing: super::Fencing::None,
            keep_alive: super::KeepAlive::default(),
        })
    }
}

/// What a node's subscription connection is opened from: its client and its address.
type SubscriberSource = (redis::Client, Arc<str>);

/// The nodes of `sources` (each with its client and address, for its subscription
/// connection), in order; refuses a URL that does not parse, a zero `connect_timeout` and
/// two nodes at one address.
fn open_nodes(
    sources: Vec<NodeSource>,
    connect_timeout: Duration,
) -> Result<(Vec<Node>, Vec<SubscriberSource>), Error> {
    let mut nodes = Vec::with_capacity(sources.len());
    let mut subscribers = Vec::with_capacity(sources.len());
    let mut seen = BTreeMap::new();
    for (index, source) in sources.into_iter().enumerate() {
        let field = format!("nodes[{index}]");
        let client = match source {
            NodeSource::Client(client) => *client,
            NodeSource::Url(url) => url
                .as_str()
                .into_connection_info()
                .map(with_nodelay)
                .and_then(redis::Client::open)
                .map_err(|e| ConfigError::new(field.clone(), unusable_url(&url, &e)))?,
        };
        if connect_timeout.is_zero() {
            return Err(ConfigError::new("connect_timeout", "must be greater than zero").into());
        }
        let node = Node::new(index, client.clone(), connect_timeout);
        subscribers.push((client, node.address().clone()));
        if let Some(first) = seen.insert(node.address().clone(), index) {
            return Err(ConfigError::new(
                field,
                format!(
                    "has the same address ({}) as nodes[{first}]; one server must not vote twice",
                    node.address()
                ),
            )
            .into());
        }
        nodes.push(node);
    }
    Ok((nodes, subscribers))
}

/// Why `url` cannot name a node, with what to write instead when the mistake is a common
/// one: an address without its scheme (`127.0.0.1:6379`), or another protocol's scheme.
fn unusable_url(url: &str, error: &redis::RedisError) -> String {
    let shown = redact_url(url);
    match url.split_once("://") {
        None => format!(
            "`{shown}` is not a Redis URL: it has no scheme; write redis://{shown} (rediss:// for TLS)"
        ),
        Some((scheme, _)) if !scheme.starts_with("redis") && !scheme.starts_with("unix") => {
            format!(
                "`{shown}` is not a Redis URL: a node's URL starts with redis:// (rediss:// for TLS), not {scheme}://"
            )
        }
        Some(_) => format!("`{shown}` is not a usable Redis URL: {error}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_url_without_its_scheme_is_refused_with_the_url_to_write() {
        let error = open_nodes(
            vec![NodeSource::Url("127.0.0.1:27101".into())],
            Duration::from_secs(1),
        )
        .err()
        .expect("refused");
        let text = error.to_string();
        assert!(text.contains("write redis://127.0.0.1:27101"), "{text}");
        assert!(!text.contains("InvalidClientConfig"), "{text}");
    }

    #[test]
    fn a_url_of_another_protocol_is_refused_with_the_scheme_to_use() {
        let error = open_nodes(
            vec![NodeSource::Url("http://127.0.0.1:27101".into())],
            Duration::from_secs(1),
        )
        .err()
        .expect("refused");
        let text = error.to_string();
        assert!(text.contains("starts with redis://"), "{text}");
        assert!(text.contains("not http://"), "{text}");
    }

    use super::*;

    fn three() -> RedlockBuilder {
        Redlock::builder().nodes([
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:3",
        ])
    }

    fn field(result: Result<Redlock, Error>) -> String {
        match result {
            Err(Error::Config(e)) => e.field().to_owned(),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }

    #[test]
    fn nodes_given_by_url_send_small_writes_at_once() {
        let redlock = three().build().unwrap();
        assert!(redlock.shared.nodes.iter().all(Node::nodelay));
        let client = redis::Client::open("redis://127.0.0.1:4").unwrap();
        let redlock = Redlock::builder().node_client(client).build().unwrap();
        assert!(
            !redlock.shared.nodes.iter().all(Node::nodelay),
            "a ready client is used as it is"
        );
    }

    #[test]
    fn builds_without_connecting_or_a_runtime() {
        let redlock = three().build().unwrap();
        assert_eq!(
            redlock.node_addresses().collect::<Vec<_>>(),
            ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]
        );
        assert_eq!(redlock.config().quorum(), 2);
    }

    #[test]
    fn refuses_bad_input_naming_the_field() {
        assert_eq!(field(Redlock::builder().build()), "nodes");
        assert_eq!(field(three().node("http://nope").build()), "nodes[3]");
        assert_eq!(
            field(three().node("redis://127.0.0.1:2").build()),
            "nodes[3]"
        );
        assert_eq!(field(three().ttl(Duration::ZERO).build()), "ttl");
        assert_eq!(
            field(three().drift_factor(f64::NAN).build()),
            "drift_factor"
        );
        assert_eq!(field(three().drift_factor(1.5).build()), "drift_factor");
        assert_eq!(
            field(three().connect_timeout(Duration::ZERO).build()),
            "connect_timeout"
        );
        assert_eq!(
            field(three().key_prefix("p".repeat(300)).build()),
            "key_prefix"
        );
        assert_eq!(
            field(three().node_timeout(Duration::from_secs(1)).build()),
            "node_timeout"
        );
    }

    #[test]
    fn the_setters_land_in_the_lock_config() {
        let redlock = three()
            .ttl(Duration::from_secs(30))
            .drift_factor(0.02)
            .node_timeout(Duration::from_millis(20))
            .retry_count(5)
            .retry_delay(Duration::from_millis(7))
            .retry_jitter(Duration::from_millis(9))
            .max_hold(Duration::from_secs(60))
            .build()
            .unwrap();
        let expected = LockConfig::new(3)
            .with_ttl(Duration::from_secs(30))
            .with_drift_factor(DriftFactor::from_f64(0.02).unwrap())
            .with_node_timeout(Duration::from_millis(20))
            .with_retry(RetryPolicy::new(
                5,
                Duration::from_millis(7),
                Duration::from_millis(9),
            ))
            .with_max_hold(Duration::from_secs(60));
        assert_eq!(*redlock.config(), expected);
    }

    #[test]
    fn the_quarantine_is_the_ttl_unless_set_and_off_when_the_nodes_persist() {
        let ttl = Duration::from_secs(30);
        let policy = |builder: RedlockBuilder| builder.restart_quarantine.policy(ttl);
        assert_eq!(policy(three()), RestartPolicy::Quarantine(ttl));
        assert_eq!(
            policy(three().restart_quarantine(Some(Duration::from_secs(90)))),
            RestartPolicy::Quarantine(Duration::from_secs(90))
        );
        assert_eq!(
            policy(three().nodes_persist_every_write()),
            RestartPolicy::Persistent
        );
        // The old spelling of the same declaration.
        assert_eq!(
            policy(three().restart_quarantine(None)),
            RestartPolicy::Persistent
        );
        // The last word wins.
        assert_eq!(
            policy(
                three()
                    .nodes_persist_every_write()
                    .restart_quarantine(Some(ttl))
            ),
            RestartPolicy::Quarantine(ttl)
        );
    }

    #[test]
    fn a_bad_drift_factor_is_named_as_given_and_a_later_good_one_wins() {
        let err = three().drift_factor(1.5).build().unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: `drift_factor` is 1.5, must be a finite number in [0, 1)"
        );
        assert!(three().drift_factor(1.5).drift_factor(0.5).build().is_ok());
    }

    #[test]
    fn passwords_never_show() {
        let err = three()
            .node("redis://user:hunter2@[bad")
            .build()
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(!text.contains("hunter2"), "{text}");
        let redlock = Redlock::builder()
            .node("redis://:hunter2@127.0.0.1:6379")
            .build()
            .unwrap();
        assert!(!format!("{redlock:?}").contains("hunter2"));
    }
}
