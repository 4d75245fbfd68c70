//! One Redis node: its connection and the translation of core commands into Redis calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{ErrorKind, RedisError, Value};

use super::scripts;
use crate::core::{Command, NodeFailure, Reply};

/// A node of the fleet, with one auto-reconnecting multiplexed connection that is opened on
/// first use (so a client can be built while some nodes are down, and outside a runtime).
pub(crate) struct Node {
    address: Arc<str>,
    client: redis::Client,
    config: ConnectionManagerConfig,
    connection: OnceLock<ConnectionManager>,
    connect_timeout: Duration,
    restarts: Option<RestartWatch>,
}

/// Notices restarts of a node by its `run_id` and quarantines it for a while after each.
///
/// The Redlock description's answer to nodes that restart without their keys is a *delayed
/// restart*: a node must not take part for a TTL after it comes back. Operators rarely
/// configure that; the client applies it instead. Whenever a command to the node fails in a
/// way a restart would cause (connection refused, dropped, timed out), the next command is
/// preceded by `INFO server`; a changed `run_id` starts a quarantine of the configured length,
/// counted from the restart (`uptime_in_seconds`). During it the node gets no `SET` or
/// extension (releases still go out) and counts as a failure.
struct RestartWatch {
    quarantine: Duration,
    /// Whether the next command must check the `run_id` first. Atomic, like `quarantined`,
    /// because every command reads it and it is almost always false.
    check: AtomicBool,
    /// Whether `state.quarantined_until` may lie in the future.
    quarantined: AtomicBool,
    state: Mutex<RestartState>,
}

#[derive(Default)]
struct RestartState {
    run_id: Option<String>,
    quarantined_until: Option<Instant>,
}

impl Node {
    pub(crate) fn new(
        client: redis::Client,
        connect_timeout: Duration,
        restart_quarantine: Option<Duration>,
    ) -> Self {
        let address = client.get_connection_info().addr().to_string().into();
        // The per-request budget is enforced by the driver (a timeout far below the TTL, per
        // command), so the connection itself has no response timeout: a slow reply must not
        // tear down the connection that later commands to this node are ordered on. Failed
        // connection attempts are not retried inside redis-rs either; the next command simply
        // tries again, so a node that comes back is used at once.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(0);
        let restarts = restart_quarantine.map(|quarantine| RestartWatch {
            quarantine,
            check: AtomicBool::new(true),
            quarantined: AtomicBool::new(false),
            state: Mutex::new(RestartState::default()),
        });
        Self {
            address,
            client,
            config,
            connection: OnceLock::new(),
            connect_timeout,
            restarts,
        }
    }

    /// Whether the node's TCP connection sends small writes at once.
    #[cfg(test)]
    pub(crate) fn nodelay(&self) -> bool {
        self.client.get_connection_info().tcp_settings().nodelay()
    }

    /// The node's `host:port` (or socket path), without credentials.
    pub(crate) fn address(&self) -> &Arc<str> {
        &self.address
    }

    fn connection(&self) -> Result<ConnectionManager, NodeFailure> {
        if let Some(connection) = self.connection.get() {
            return Ok(connection.clone());
        }
        let connection =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
                .map_err(classify)?;
        Ok(self.connection.get_or_init(|| connection).clone())
    }

    /// Opens the connection (and checks for a restart) ahead of the first command, within
    /// the connect timeout plus `request_timeout`.
    pub(crate) async fn connect(&self, request_timeout: Duration) -> Result<(), NodeFailure> {
        let open = async {
            let mut connection = self.connection()?;
            if let Some(watch) = &self.restarts
                && watch.needs_check()
            {
                return self.check_restart(watch, &mut connection).await;
            }
            redis::cmd("PING")
                .query_async::<()>(&mut connection)
                .await
                .map_err(classify)
        };
        tokio::time::timeout(self.connect_timeout + request_timeout, open)
            .await
            .unwrap_or(Err(NodeFailure::TimedOut))
    }

    /// Runs one command. The caller bounds it with the per-node timeout.
    pub(crate) async fn execute(&self, command: &Command) -> Result<Reply, NodeFailure> {
        let mut connection = self.connection()?;
        if let Some(watch) = &self.restarts {
            if watch.needs_check() {
                self.check_restart(watch, &mut connection).await?;
            }
            let takes = !matches!(
                command,
                Command::ReleaseIfOwner { .. } | Command::ReleaseAllIfOwner { .. }
            );
            if takes && let Some(remaining) = watch.quarantine_left() {
                return Err(NodeFailure::Quarantined { remaining });
            }
        }
        let result = self.run(command, &mut connection).await;
        if let (Some(watch), Err(failure)) = (&self.restarts, &result)
            && matches!(
                failure,
                NodeFailure::Io(_) | NodeFailure::Refused | NodeFailure::TimedOut
            )
        {
            watch.flag();
        }
        result
    }

    /// Reads the node's `run_id`; a new one starts a quarantine.
    async fn check_restart(
        &self,
        watch: &RestartWatch,
        connection: &mut ConnectionManager,
    ) -> Result<(), NodeFailure> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(connection)
            .await
            .map_err(|e| {
                let failure = classify(e);
                if matches!(failure, NodeFailure::Io(_) | NodeFailure::Refused) {
                    watch.flag();
                }
                failure
            })?;
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let Some(run_id) = field("run_id") else {
            // No run_id (a proxy, or INFO renamed): nothing to compare; do not ask again.
            watch.checked(None, Duration::ZERO, &self.address);
            return Ok(());
        };
        let uptime = field("uptime_in_seconds")
            .and_then(|s| s.parse().ok())
            .map_or(Duration::ZERO, Duration::from_secs);
        watch.checked(Some(run_id.to_owned()), uptime, &self.address);
        Ok(())
    }

    async fn run(
        &self,
        command: &Command,
        connection: &mut ConnectionManager,
    ) -> Result<Reply, NodeFailure> {
        match command {
            Command::SetIfAbsent { key, token, ttl } => {
                let value: Value = redis::cmd("SET")
                    .arg(key.as_str())
                    .arg(&token.to_hex()[..])
                    .arg("NX")
                    .arg("PX")
                    .arg(millis(*ttl))
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                match value {
                    Value::Okay => Ok(Reply::Acquired),
                    Value::SimpleString(text) if text == "OK" => Ok(Reply::Acquired),
                    Value::Nil => Ok(Reply::Taken),
                    other => Err(unexpected("SET NX", &other)),
                }
            }
            Command::SetIfAbsentReadFence { key, token, ttl } => {
                let value: Value = scripts::ACQUIRE_FENCED
                    .eval(&[key.as_str(), &key.fence_key()])
                    .arg(&token.to_hex()[..])
                    .arg(millis(*ttl))
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                match value {
                    Value::Array(items) => match items.as_slice() {
                        [Value::Int(taken), Value::Int(counter)] if *counter >= 0 => {
                            let counter = counter.unsigned_abs();
                            Ok(if *taken == 1 {
                                Reply::AcquiredWithFence { counter }
                            } else {
                                Reply::TakenWithFence { counter }
                            })
                        }
                        _ => Err(unexpected("the fenced SET NX", &Value::Array(items))),
                    },
                    other => Err(unexpected("the fenced SET NX", &other)),
                }
            }
            Command::RaiseFence { key, token, fence } => {
                let value: Value = scripts::RAISE_FENCE
                    .eval(&[key.as_str(), &key.fence_key()])
                    .arg(&token.to_hex()[..])
                    .arg(*fence)
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                match value {
                    Value::Int(-1) => Ok(Reply::HeldByOther),
                    Value::Int(-2) => Ok(Reply::NotHeld),
                    Value::Int(counter) if counter >= 0 => Ok(Reply::FenceRaised {
                        counter: counter.unsigned_abs(),
                    }),
                    other => Err(unexpected("the fence raise", &other)),
                }
            }
            Command::ReleaseIfOwner { key, token } => {
                let value: Value = scripts::RELEASE
                    .eval(&[key.as_str()])
                    .arg(&token.to_hex()[..])
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Released, "release")
            }
            Command::SetAllIfAbsent { keys, token, ttl } => {
                let keys: Vec<&str> = keys.iter().map(|key| key.as_str()).collect();
                let value: Value = scripts::ACQUIRE_ALL
                    .eval(&keys)
                    .arg(&token.to_hex()[..])
                    .arg(millis(*ttl))
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                match value {
                    Value::Int(1) => Ok(Reply::Acquired),
                    Value::Int(0) => Ok(Reply::Taken),
                    other => Err(unexpected("the multi-key SET NX", &other)),
                }
            }
            Command::ReleaseAllIfOwner { keys, token } => {
                let keys: Vec<&str> = keys.iter().map(|key| key.as_str()).collect();
                let value: Value = scripts::RELEASE_ALL
                    .eval(&keys)
                    .arg(&token.to_hex()[..])
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Released, "multi-key release")
            }
            Command::ExtendAllIfOwner { keys, token, ttl } => {
                let keys: Vec<&str> = keys.iter().map(|key| key.as_str()).collect();
                let value: Value = scripts::EXTEND_ALL
                    .eval(&keys)
                    .arg(&token.to_hex()[..])
                    .arg(millis(*ttl))
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Extended, "multi-key extend")
            }
            Command::ExtendIfOwner { key, token, ttl } => {
                let value: Value = scripts::EXTEND
                    .eval(&[key.as_str()])
                    .arg(&token.to_hex()[..])
                    .arg(millis(*ttl))
                    .query_async(connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Extended, "extend")
            }
        }
    }
}

impl RestartWatch {
    fn lock(&self) -> std::sync::MutexGuard<'_, RestartState> {
        // The state is a few plain fields: a poisoned lock still holds usable values.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn needs_check(&self) -> bool {
        self.check.load(Ordering::Acquire)
    }

    fn flag(&self) {
        self.check.store(true, Ordering::Release);
    }

    fn quarantine_left(&self) -> Option<Duration> {
        if !self.quarantined.load(Ordering::Acquire) {
            return None;
        }
        let mut state = self.lock();
        let until = state.quarantined_until?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            state.quarantined_until = None;
            self.quarantined.store(false, Ordering::Release);
            None
        } else {
            Some(left)
        }
    }

    fn checked(&self, run_id: Option<String>, uptime: Duration, address: &str) {
        let mut state = self.lock();
        self.check.store(false, Ordering::Release);
        let Some(run_id) = run_id else { return };
        if state.run_id.as_ref().is_some_and(|known| *known != run_id) {
            let left = self.quarantine.saturating_sub(uptime);
            if !left.is_zero() {
                tracing::warn!(
                    node = address,
                    quarantine_ms = left.as_millis(),
                    "node restarted; not counted toward a quorum until a TTL has passed"
                );
                state.quarantined_until = Some(Instant::now() + left);
                self.quarantined.store(true, Ordering::Release);
            }
        }
        state.run_id = Some(run_id);
    }
}

/// `PX` takes whole milliseconds, at least one (`PX 0` is an error).
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// Reads the 1 / 0 / -1 answer of the ownership scripts.
fn owner_reply(value: Value, done: Reply, script: &str) -> Result<Reply, NodeFailure> {
    match value {
        Value::Int(1) => Ok(done),
        Value::Int(0) => Ok(Reply::NotHeld),
        Value::Int(-1) => Ok(Reply::HeldByOther),
        other => Err(unexpected(script, &other)),
    }
}

fn unexpected(what: &str, value: &Value) -> NodeFailure {
    // Replies are shown by kind and size only: a misbehaving peer's bytes stay out of logs.
    let shape = match value {
        Value::BulkString(bytes) => format!("a {}-byte bulk string", bytes.len()),
        Value::Array(items) => format!("an array of {}", items.len()),
        other => format!("{other:?}").chars().take(64).collect(),
    };
    NodeFailure::Protocol(format!("unexpected reply to {what}: {shape}"))
}

/// Maps a redis-rs error to the core's failure kinds through its predicates, never by
/// matching message text.
pub(crate) fn classify(error: RedisError) -> NodeFailure {
    if error.is_timeout() {
        NodeFailure::TimedOut
    } else if error.is_connection_refusal() {
        NodeFailure::Refused
    } else if error.is_io_error() || error.is_connection_dropped() {
        NodeFailure::Io(one_line(&error.to_string()))
    } else {
        match error.kind() {
            ErrorKind::Server(_) | ErrorKind::AuthenticationFailed | ErrorKind::Extension => {
                NodeFailure::Server(one_line(&error.to_string()))
            }
            _ => NodeFailure::Protocol(one_line(&error.to_string())),
        }
    }
}

/// The longest error detail kept from a node, in characters.
const MAX_DETAIL_CHARS: usize = 240;

/// An error detail fit for a one-line message: redis-rs parse errors span several lines,
/// and whatever a server (or something that only pretends to be one) puts in an error line
/// is its own choice of length and characters. Control characters become spaces, runs of
/// whitespace one space, and the text is cut at [`MAX_DETAIL_CHARS`].
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(MAX_DETAIL_CHARS + 3));
    let mut chars = 0;
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && (line.is_empty() || line.ends_with(' ')) {
            continue;
        }
        if chars == MAX_DETAIL_CHARS {
            line.push('…');
            return line;
        }
        line.push(c);
        chars += 1;
    }
    line.truncate(line.trim_end().len());
    line
}

#[cfg(test)]
mod tests {
    use super::{MAX_DETAIL_CHARS, one_line};

    #[test]
    fn details_are_one_bounded_line() {
        assert_eq!(
            one_line("Incompatible type - Parse error at 1\nUnexpected `72`\n"),
            "Incompatible type - Parse error at 1 Unexpected `72`"
        );
        assert_eq!(one_line("\x1b[31mred\r\n\tx "), "[31mred x");
        let long = one_line(&"e".repeat(100_000));
        assert_eq!(long.chars().count(), MAX_DETAIL_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(one_line(""), "");
    }
}
