//! One Redis node: its connection and the translation of core commands into Redis calls.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

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
}

impl Node {
    pub(crate) fn new(client: redis::Client, connect_timeout: Duration) -> Self {
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
        Self {
            address,
            client,
            config,
            connection: OnceLock::new(),
        }
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

    /// Runs one command. The caller bounds it with the per-node timeout.
    pub(crate) async fn execute(&self, command: &Command) -> Result<Reply, NodeFailure> {
        let mut connection = self.connection()?;
        match command {
            Command::SetIfAbsent { key, token, ttl } => {
                let value: Value = redis::cmd("SET")
                    .arg(key.as_str())
                    .arg(&token.to_hex()[..])
                    .arg("NX")
                    .arg("PX")
                    .arg(millis(*ttl))
                    .query_async(&mut connection)
                    .await
                    .map_err(classify)?;
                match value {
                    Value::Okay => Ok(Reply::Acquired),
                    Value::SimpleString(text) if text == "OK" => Ok(Reply::Acquired),
                    Value::Nil => Ok(Reply::Taken),
                    other => Err(unexpected("SET NX", &other)),
                }
            }
            Command::ReleaseIfOwner { key, token } => {
                let value: Value = scripts::RELEASE
                    .key(key.as_str())
                    .arg(&token.to_hex()[..])
                    .invoke_async(&mut connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Released, "release")
            }
            Command::ExtendIfOwner { key, token, ttl } => {
                let value: Value = scripts::EXTEND
                    .key(key.as_str())
                    .arg(&token.to_hex()[..])
                    .arg(millis(*ttl))
                    .invoke_async(&mut connection)
                    .await
                    .map_err(classify)?;
                owner_reply(value, Reply::Extended, "extend")
            }
        }
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
