//! [`RedisFleet`]: N `redis-server` processes on free loopback ports, each in its own
//! temporary directory, started, paused, killed and restarted on command.

use std::fmt;
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The environment variable that overrides the `redis-server` binary.
pub const SERVER_ENV: &str = "REDLOCK_REDIS_SERVER";

/// How long a node may take to answer its first `PING`.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How a node persists its keys, which decides what a crash (`kill -9`) loses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Persistence {
    /// No persistence: a restarted node is empty.
    #[default]
    None,
    /// Append-only file fsynced on every write: a restarted node has every key it had.
    AppendFsyncAlways,
}

/// Options for the nodes of a fleet.
#[derive(Clone, Debug, Default)]
pub struct FleetOptions {
    /// Persistence mode of every node.
    pub persistence: Persistence,
    /// Also listen on a Unix socket in the node's directory.
    pub unix_socket: bool,
    /// Also listen for TLS connections on a port of their own ([`RedisFleet::tls_url`]).
    pub tls: Option<TlsFiles>,
    /// Extra `redis-server` arguments, e.g. `["--maxmemory", "1mb"]`.
    pub extra_args: Vec<String>,
}

/// The certificate files of a node that accepts TLS (`redis-server --tls-port`), in PEM.
///
/// Every node of the fleet presents the same certificate, so it must name `127.0.0.1` (an IP
/// address SAN) for clients that verify the server's name. The plain port stays open beside
/// the TLS port, for the fixture's own readiness check and inspection helpers.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The server's certificate (`--tls-cert-file`).
    pub cert: PathBuf,
    /// The server's private key (`--tls-key-file`).
    pub key: PathBuf,
    /// The authority whose client certificates the server accepts (`--tls-ca-cert-file`).
    pub ca: PathBuf,
    /// Whether clients must present a certificate signed by `ca` (mutual TLS,
    /// `--tls-auth-clients yes`).
    pub require_client_certs: bool,
}

/// Why a fleet could not be started or driven.
#[derive(Debug)]
pub enum FleetError {
    /// No `redis-server` binary was found.
    BinaryNotFound(String),
    /// A node did not come up.
    Startup {
        /// The node's index.
        node: usize,
        /// What went wrong, with the tail of its log.
        detail: String,
    },
    /// An operating-system call failed.
    Io(std::io::Error),
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BinaryNotFound(detail) => write!(
                f,
                "redis-server not found ({detail}). Install it (`apt-get install -y redis-server`, \
                 or run scripts/test which does) or point {SERVER_ENV} at the binary"
            ),
            Self::Startup { node, detail } => {
                write!(f, "redis node {node} did not start: {detail}")
            }
            Self::Io(e) => write!(f, "I/O error driving the redis fleet: {e}"),
        }
    }
}

impl std::error::Error for FleetError {}

impl From<std::io::Error> for FleetError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

struct Node {
    port: u16,
    /// The TLS port, when the fleet has [`FleetOptions::tls`] (0 otherwise).
    tls_port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

/// N `redis-server` processes on loopback, stopped when dropped.
pub struct RedisFleet {
    binary: PathBuf,
    options: FleetOptions,
    nodes: Vec<Node>,
    // Kept last so the directories outlive the processes using them.
    _root: tempfile::TempDir,
}

impl RedisFleet {
    /// Starts `count` nodes without persistence.
    ///
    /// # Errors
    ///
    /// [`FleetError`] when the binary is missing or a node does not answer `PING` in time.
    pub fn start(count: usize) -> Result<Self, FleetError> {
        Self::start_with(count, FleetOptions::default())
    }

    /// Starts `count` nodes with `options`.
    ///
    /// # Errors
    ///
    /// As [`RedisFleet::start`].
    pub fn start_with(count: usize, options: FleetOptions) -> Result<Self, FleetError> {
        let binary = find_binary()?;
        let root = tempfile::Builder::new()
            .prefix("redlock-fleet-")
            .tempdir()?;
        let mut fleet = Self {
            binary,
            options,
            nodes: Vec::with_capacity(count),
            _root: root,
        };
        for index in 0..count {
            let dir = fleet._root.path().join(format!("node-{index}"));
            std::fs::create_dir_all(&dir)?;
            fleet.nodes.push(Node {
                port: 0,
                tls_port: 0,
                dir,
                child: None,
            });
            fleet.launch(index, None)?;
        }
        Ok(fleet)
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the fleet has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `redis://127.0.0.1:<port>` of every node.
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// `redis://127.0.0.1:<port>` of node `index`.
    pub fn url(&self, index: usize) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[index].port)
    }

    /// `rediss://127.0.0.1:<tls port>` of node `index` (with [`FleetOptions::tls`]).
    ///
    /// # Panics
    ///
    /// When the fleet was started without TLS.
    pub fn tls_url(&self, index: usize) -> String {
        assert!(
            self.options.tls.is_some(),
            "the fleet was started without FleetOptions::tls"
        );
        format!("rediss://127.0.0.1:{}", self.nodes[index].tls_port)
    }

    /// `redis+unix://…` of node `index` (with [`FleetOptions::unix_socket`]).
    pub fn unix_url(&self, index: usize) -> String {
        format!("redis+unix://{}", self.socket_path(index).display())
    }

    fn socket_path(&self, index: usize) -> PathBuf {
        self.nodes[index].dir.join("redis.sock")
    }

    /// The TCP port of node `index`.
    pub fn port(&self, index: usize) -> u16 {
        self.nodes[index].port
    }

    /// The socket address (`127.0.0.1:<port>`) of node `index`.
    pub fn addr(&self, index: usize) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.nodes[index].port))
    }

    /// The pid of node `index`, if it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.nodes[index].child.as_ref().map(Child::id)
    }

    /// Stops node `index` with `SIGSTOP`: it keeps its connections but answers nothing.
    ///
    /// # Errors
    ///
    /// When the node is not running or the signal fails.
    pub fn pause(&mut self, index: usize) -> Result<(), FleetError> {
        self.signal(index, Signal::SIGSTOP)
    }

    /// Resumes node `index` with `SIGCONT`.
    ///
    /// # Errors
    ///
    /// When the node is not running or the signal fails.
    pub fn resume(&mut self, index: usize) -> Result<(), FleetError> {
        self.signal(index, Signal::SIGCONT)
    }

    /// Stops node `index` with `SIGSTOP` now and resumes it with `SIGCONT` after `pause`,
    /// from a thread of its own (join it to know the node runs again), while the test's
    /// runtime goes on: for a node that stalls in the middle of an operation.
    ///
    /// # Errors
    ///
    /// When the node is not running or the signal fails.
    pub fn pause_for(
        &mut self,
        index: usize,
        pause: Duration,
    ) -> Result<std::thread::JoinHandle<()>, FleetError> {
        self.pause(index)?;
        let pid = self
            .pid(index)
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| std::io::Error::other(format!("node {index} is not running")))?;
        Ok(std::thread::spawn(move || {
            std::thread::sleep(pause);
            // The node is this fleet's child, stopped above: resuming it cannot fail but by
            // its death, which the test then sees as an unanswered node.
            let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
        }))
    }

    /// Kills node `index` with `SIGKILL` (a crash: nothing is flushed) and reaps it.
    ///
    /// # Errors
    ///
    /// When the signal or the wait fails.
    pub fn kill(&mut self, index: usize) -> Result<(), FleetError> {
        if let Some(mut child) = self.nodes[index].child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Starts node `index` again on its port (after [`kill`](Self::kill)). Without
    /// persistence it comes back empty, with an empty script cache.
    ///
    /// # Errors
    ///
    /// When the node does not come up.
    pub fn restart(&mut self, index: usize) -> Result<(), FleetError> {
        self.kill(index)?;
        let port = self.nodes[index].port;
        self.launch(index, Some(port))
    }

    /// Deletes what node `index` persisted (its append-only files and snapshot), as a lost
    /// disk would: after this, [`restart`](Self::restart) brings it back empty even with
    /// [`Persistence::AppendFsyncAlways`]. The node must not be running.
    ///
    /// # Errors
    ///
    /// When the node is running or the files cannot be removed.
    pub fn wipe_data(&mut self, index: usize) -> Result<(), FleetError> {
        if self.nodes[index].child.is_some() {
            return Err(FleetError::Io(std::io::Error::other(format!(
                "node {index} is running; kill it before wiping its data"
            ))));
        }
        let dir = &self.nodes[index].dir;
        for name in ["appendonlydir", "appendonly.aof", "dump.rdb"] {
            let path = dir.join(name);
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else if path.exists() {
                std::fs::remove_file(&path)?;
            }
        }
        Ok(())
    }

    /// A synchronous connection to node `index`, for inspecting its keys.
    ///
    /// # Errors
    ///
    /// When the node cannot be reached.
    pub fn connect(&self, index: usize) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url(index))?.get_connection_with_timeout(Duration::from_secs(2))
    }

    /// Every `(key, value)` on node `index` whose key starts with `prefix`.
    ///
    /// # Errors
    ///
    /// When the node cannot be reached.
    pub fn keys_with_prefix(
        &self,
        index: usize,
        prefix: &str,
    ) -> redis::RedisResult<Vec<(String, Option<String>)>> {
        let mut connection = self.connect(index)?;
        let pattern = format!("{}*", glob_escape(prefix));
        let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut connection)?;
        let mut entries = Vec::with_capacity(keys.len());
        for key in keys {
            let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut connection)?;
            entries.push((key, value));
        }
        entries.sort();
        Ok(entries)
    }

    /// The number of keys starting with `prefix` over all running nodes.
    ///
    /// # Errors
    ///
    /// When a running node cannot be reached.
    pub fn count_keys(&self, prefix: &str) -> redis::RedisResult<usize> {
        let mut total = 0;
        for index in 0..self.len() {
            if self.nodes[index].child.is_some() {
                total += self.keys_with_prefix(index, prefix)?.len();
            }
        }
        Ok(total)
    }

    /// Sets `key` to `someone-else` for `ttl` (`SET key someone-else PX <ms>`) on each of
    /// `nodes`, as another client holding the lock there would.
    ///
    /// # Errors
    ///
    /// When a node cannot be reached or refuses the `SET`.
    pub fn occupy(&self, nodes: &[usize], key: &str, ttl: Duration) -> redis::RedisResult<()> {
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        for &index in nodes {
            let mut connection = self.connect(index)?;
            let () = redis::cmd("SET")
                .arg(key)
                .arg("someone-else")
                .arg("PX")
                .arg(millis)
                .query(&mut connection)?;
        }
        Ok(())
    }

    /// Deletes `key` on each of `nodes` (`DEL key`): what [`occupy`](Self::occupy) set, once
    /// the other client is gone.
    ///
    /// # Errors
    ///
    /// When a node cannot be reached or refuses the `DEL`.
    pub fn vacate(&self, nodes: &[usize], key: &str) -> redis::RedisResult<()> {
        for &index in nodes {
            let mut connection = self.connect(index)?;
            let () = redis::cmd("DEL").arg(key).query(&mut connection)?;
        }
        Ok(())
    }

    fn signal(&mut self, index: usize, signal: Signal) -> Result<(), FleetError> {
        let child = self.nodes[index].child.as_ref().ok_or_else(|| {
            FleetError::Io(std::io::Error::other(format!(
                "node {index} is not running"
            )))
        })?;
        let pid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
        kill(Pid::from_raw(pid), signal).map_err(std::io::Error::from)?;
        Ok(())
    }

    /// Starts node `index`, on `port` or on a free one. A free port can be taken by someone
    /// else between our probe and the server's bind, so that case is retried.
    fn launch(&mut self, index: usize, port: Option<u16>) -> Result<(), FleetError> {
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = match port {
                Some(port) => port,
                None => free_port()?,
            };
            let tls_port = match (&self.options.tls, self.nodes[index].tls_port) {
                (None, _) => 0,
                (Some(_), 0) => free_port()?,
                // A restart keeps its TLS port too.
                (Some(_), tls_port) => tls_port,
            };
            match self.spawn(index, port, tls_port) {
                Ok(child) => {
                    self.nodes[index].port = port;
                    self.nodes[index].tls_port = tls_port;
                    self.nodes[index].child = Some(child);
                    return Ok(());
                }
                Err(detail) => last_error = detail,
            }
            if port_is_fixed(port, self.nodes[index].port) {
                // A restart must keep its port: wait for the old socket to go away.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Err(FleetError::Startup {
            node: index,
            detail: last_error,
        })
    }

    fn spawn(&self, index: usize, port: u16, tls_port: u16) -> Result<Child, String> {
        let dir = &self.nodes[index].dir;
        let log = dir.join("redis.log");
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.display().to_string(),
            "--logfile".into(),
            log.display().to_string(),
            "--daemonize".into(),
            "no".into(),
            "--save".into(),
            String::new(),
        ];
        match self.options.persistence {
            Persistence::None => args.extend(["--appendonly".into(), "no".into()]),
            Persistence::AppendFsyncAlways => args.extend([
                "--appendonly".into(),
                "yes".into(),
                "--appendfsync".into(),
                "always".into(),
            ]),
        }
        if let Some(tls) = &self.options.tls {
            args.extend([
                "--tls-port".into(),
                tls_port.to_string(),
                "--tls-cert-file".into(),
                tls.cert.display().to_string(),
                "--tls-key-file".into(),
                tls.key.display().to_string(),
                "--tls-ca-cert-file".into(),
                tls.ca.display().to_string(),
                "--tls-auth-clients".into(),
                if tls.require_client_certs {
                    "yes"
                } else {
                    "no"
                }
                .into(),
            ]);
        }
        if self.options.unix_socket {
            args.extend([
                "--unixsocket".into(),
                self.socket_path(index).display().to_string(),
                "--unixsocketperm".into(),
                "700".into(),
            ]);
        }
        args.extend(self.options.extra_args.iter().cloned());
        // A restarted node appends to the same log: count the readiness lines of this run.
        let ready_before = ready_lines(&log);
        let mut child = Command::new(&self.binary)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.binary.display()))?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = pipe.read_to_string(&mut stderr);
                }
                return Err(format!("exited with {status}: {stderr}{}", log_tail(&log)));
            }
            // A PONG alone is not enough: when two fleets start at once they can probe the
            // same free port, and the other fleet's server answers while ours, which could
            // not bind, is still exiting. Our server says it is ready in its own log.
            if ready_lines(&log) > ready_before && ping(port) {
                return Ok(child);
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no PONG within {STARTUP_TIMEOUT:?}{}",
                    log_tail(&log)
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for RedisFleet {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // SIGKILL ends a stopped process too; only our own children are signalled.
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl fmt::Debug for RedisFleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisFleet")
            .field(
                "ports",
                &self.nodes.iter().map(|n| n.port).collect::<Vec<_>>(),
            )
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn port_is_fixed(port: u16, current: u16) -> bool {
    current != 0 && port == current
}

fn find_binary() -> Result<PathBuf, FleetError> {
    if let Some(path) = std::env::var_os(SERVER_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(FleetError::BinaryNotFound(format!(
                "{SERVER_ENV}={} is not a file",
                path.display()
            )))
        };
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("redis-server"))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| FleetError::BinaryNotFound("not on PATH".into()))
}

fn free_port() -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(listener.local_addr()?.port())
}

fn ping(port: u16) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut connection) = client.get_connection_with_timeout(Duration::from_millis(200)) else {
        return false;
    };
    // Any answer means the server is up, including `NOAUTH` from a password-protected one.
    match redis::cmd("PING").query::<String>(&mut connection) {
        Ok(pong) => pong == "PONG",
        Err(e) => e.kind() != redis::ErrorKind::Io,
    }
}

/// How many times the log at `log` says the server is ready (`Ready to accept connections`,
/// followed by ` tcp` since Redis 7.2).
fn ready_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|text| text.matches("Ready to accept connections").count())
        .unwrap_or(0)
}

fn log_tail(log: &Path) -> String {
    std::fs::read_to_string(log)
        .map(|text| {
            let lines: Vec<&str> = text.lines().collect();
            format!(
                "\nlog tail:\n{}",
                lines[lines.len().saturating_sub(8)..].join("\n")
            )
        })
        .unwrap_or_default()
}

/// Escapes the glob characters of a `KEYS` pattern.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two fleets starting at once can probe the same free port. The server that loses the
    /// bind lives on for a moment, and the other fleet's server answers its `PING`: the node
    /// must not be taken for started.
    #[test]
    fn a_node_whose_port_is_taken_is_not_taken_for_started() {
        let owner = RedisFleet::start(1).unwrap();
        let mut late = RedisFleet::start(0).unwrap();
        let dir = late._root.path().join("node-0");
        std::fs::create_dir_all(&dir).unwrap();
        late.nodes.push(Node {
            port: 0,
            tls_port: 0,
            dir,
            child: None,
        });
        match late.spawn(0, owner.port(0), 0) {
            Err(detail) => assert!(detail.contains("exited"), "{detail}"),
            Ok(mut child) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("a server that could not bind was reported as started");
            }
        }
    }
}
