//! A node connection: the client's own over plain TCP (`socket.rs`), redis-rs' multiplexed
//! connection over TLS or a Unix socket.
//!
//! The client's own connection writes a command from the task that sends it and hands each
//! reply straight to its request; redis-rs' passes both through its connection's task. TLS
//! (its handshake, certificates and the two TLS libraries) and Unix sockets stay with
//! redis-rs, which does them well; on those, the client's queue (`pipe.rs`) gathers the
//! commands.

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, ConnectionAddr, RedisFuture, RedisResult, Value};

use super::socket::Socket;

/// One open node connection (cheap to clone: every clone is the same connection).
#[derive(Clone)]
pub(crate) enum Transport {
    /// Plain TCP, driven by the client.
    Own(Socket),
    /// TLS or a Unix socket, through redis-rs.
    Multiplexed(MultiplexedConnection),
}

impl Transport {
    /// Opens a connection to `client`'s node, within `connect_timeout`.
    pub(crate) async fn open(
        client: &redis::Client,
        config: &AsyncConnectionConfig,
        connect_timeout: Duration,
    ) -> RedisResult<Self> {
        let info = client.get_connection_info();
        match info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let (tcp, settings) = (info.tcp_settings(), info.redis_settings());
                Socket::connect(host, *port, tcp, settings, connect_timeout)
                    .await
                    .map(Self::Own)
            }
            _ => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(Self::Multiplexed),
        }
    }
}

impl ConnectionLike for Transport {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Own(socket) => socket.req_packed_command(cmd),
            Self::Multiplexed(connection) => connection.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Own(socket) => socket.req_packed_commands(pipeline, offset, count),
            Self::Multiplexed(connection) => {
                connection.req_packed_commands(pipeline, offset, count)
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Own(socket) => socket.get_db(),
            Self::Multiplexed(connection) => connection.get_db(),
        }
    }
}
