//! What a new connection asks first: the server's identity (`run_id`, uptime, eviction
//! policy) and version from `INFO`, and, in the same round trip, `SCRIPT LOAD` of the lock scripts so
//! that the connection can call them by hash. Before that, the socket addresses its name
//! resolves to, which tell two names of one server apart even when `INFO` is refused.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use redis::{ConnectionAddr, RedisResult, Value};

use super::transport::Transport;
use super::wire::classify;
use crate::lua::lock::LOADED;
use redlock_core::{NodeFailure, NodeIdentity, ServerGeneration};

/// What a new connection learned in its first round trip.
pub(crate) struct Greeting {
    /// The identity, or why it cannot be known (the node answered, but not with a usable
    /// identity).
    pub(crate) identity: Result<NodeIdentity, String>,
    /// Whether every lock script is now in the node's cache under the hash this client
    /// calls it by (not when the user's ACL refuses `SCRIPT`: the connection then keeps
    /// sending the scripts whole).
    pub(crate) scripts_loaded: bool,
    /// Which form of the lock request the server takes (from `INFO`'s `redis_version`; a
    /// server whose `INFO` cannot be read is taken to be Redis 7).
    pub(crate) generation: ServerGeneration,
}

/// The socket addresses a TCP node's host name resolves to now (an IP address is its own),
/// looked up within `within`. Empty for a Unix socket, and when the lookup fails or takes
/// longer: the `run_id` then is what tells two names of one server apart.
pub(crate) async fn resolve(addr: &ConnectionAddr, within: Duration) -> Vec<SocketAddr> {
    let (host, port) = match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            (host.as_str(), *port)
        }
        _ => return Vec::new(),
    };
    // A bracketed IPv6 literal is written without its brackets by the URL parser, but
    // accept both.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return vec![SocketAddr::new(ip, port)];
    }
    match tokio::time::timeout(within, tokio::net::lookup_host((bare, port))).await {
        Ok(Ok(found)) => found.collect(),
        Ok(Err(_)) | Err(_) => Vec::new(),
    }
}

/// Sends `INFO` and the `SCRIPT LOAD`s as one pipeline and reads the answers; `Err` only
/// for a failure of the connection itself.
pub(crate) async fn read(connection: &mut Transport) -> Result<Greeting, NodeFailure> {
    let mut pipe = redis::pipe();
    // Each answer on its own: a refused `SCRIPT LOAD` must not cost the identification.
    pipe.ignore_errors();
    // The default sections hold both `server` (run_id, uptime) and `memory` (the policy);
    // older servers take only one section name.
    pipe.cmd("INFO");
    for script in LOADED {
        pipe.add_command(script.load());
    }
    let mut answers: Vec<RedisResult<Value>> = match pipe.query_async(connection).await {
        Ok(answers) => answers,
        Err(error) => return unanswered(error),
    };
    if answers.len() != 1 + LOADED.len() {
        return Err(NodeFailure::Protocol(format!(
            "{} answers to INFO and {} SCRIPT LOADs",
            answers.len(),
            LOADED.len()
        )));
    }
    let loads = answers.split_off(1);
    let scripts_loaded = loads.iter().zip(LOADED).all(|(answer, script)| {
        matches!(answer, Ok(Value::BulkString(hash)) if hash == script.hash().as_bytes())
    });
    let info = answers.pop().expect("one answer per command");
    let mut generation = ServerGeneration::default();
    let identity =
        match info.and_then(|value| redis::from_redis_value::<String>(value).map_err(Into::into)) {
            Ok(text) => {
                generation = ServerGeneration::from_info(&text);
                NodeIdentity::from_info(&text)
            }
            Err(error) => match unanswered(error) {
                Ok(greeting) => greeting.identity,
                Err(failure) => return Err(failure),
            },
        };
    Ok(Greeting {
        identity,
        scripts_loaded,
        generation,
    })
}

/// A failed `INFO`: an answer without an identity when the node answered (INFO refused by
/// an ACL without `+info`, or unknown because renamed), else the connection's failure.
fn unanswered(error: redis::RedisError) -> Result<Greeting, NodeFailure> {
    match classify(error) {
        NodeFailure::Server(why) | NodeFailure::Denied(why) | NodeFailure::Protocol(why) => {
            Ok(Greeting {
                identity: Err(why),
                scripts_loaded: false,
                generation: ServerGeneration::default(),
            })
        }
        failure => Err(failure),
    }
}
