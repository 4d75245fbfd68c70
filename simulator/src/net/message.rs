//! What travels on the simulated network.

use std::sync::Arc;

use crate::net::name::Name;

use redlock_core::{ConnectionId, NodeFailure, Reply, RequestId, Token};

/// An operation a Redis server performs. The first six and the last two are exactly what
/// the client's `SET NX GET PX`, single-key Lua scripts and `HDEL` do; `Identify` is the `INFO` the client reads on
/// every new connection; the rest model broken clients and weak token sources.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NodeOp {
    /// `SET key token NX GET PX ttl`: a refusal names the holder's token.
    SetNx {
        key: Name,
        token: Token,
        ttl_ms: u64,
    },
    /// `SET key token NX GET PX ttl` followed by `PTTL key` in the same request.
    SetNxReportHolder {
        key: Name,
        token: Token,
        ttl_ms: u64,
    },
    /// The fenced acquisition script: `SET NX PX` and read the fence counter.
    SetNxReadFence {
        key: Name,
        fence_key: Name,
        token: Token,
        ttl_ms: u64,
    },
    /// The fence-raising script: `counter = max(counter, fence)` while `key` holds `token`.
    RaiseFence {
        key: Name,
        fence_key: Name,
        token: Token,
        fence: u64,
    },
    /// The compare-and-delete script: deletes `key` while it holds `token`, with the
    /// waiters' marks at `wait_key` (and publishes when there were marks).
    ReleaseIfOwner {
        key: Name,
        wait_key: Name,
        token: Token,
    },
    /// The compare-and-`PEXPIRE` script.
    ExtendIfOwner {
        key: Name,
        token: Token,
        ttl_ms: u64,
    },
    /// `INFO`: the server's `run_id` and uptime.
    Identify,
    /// `PING`: the probe a client sends to a node that left a request unanswered.
    Ping,
    /// A plain `DEL`, whoever holds the key.
    Del { key: Name },
    /// Extension that re-creates a missing key.
    SetOrExtend {
        key: Name,
        token: Token,
        ttl_ms: u64,
    },
    /// `INCR key` (a Redis-derived fencing counter).
    Incr { key: Name },
    /// The mark script: field `waiter` in the hash `wait_key`, whose expiry is raised to
    /// `ttl_ms` unless already later; answers `key`'s holder.
    MarkWaiting {
        key: Name,
        wait_key: Name,
        waiter: Token,
        ttl_ms: u64,
    },
    /// `HDEL wait_key waiter`.
    UnmarkWaiting { wait_key: Name, waiter: Token },
}

/// One incarnation of one server: what a `run_id` names. A restart makes a new one, and so
/// does a failover to another server behind the same address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ServerId {
    pub(crate) server: usize,
    pub(crate) incarnation: u64,
}

impl ServerId {
    /// The `run_id` the server reports.
    pub(crate) fn run_id(self) -> String {
        format!("sim-{}-{}", self.server, self.incarnation)
    }

    /// The server a [`Self::run_id`] names, if it is one.
    pub(crate) fn from_run_id(run_id: &str) -> Option<Self> {
        let (server, incarnation) = run_id.strip_prefix("sim-")?.split_once('-')?;
        Some(Self {
            server: server.parse().ok()?,
            incarnation: incarnation.parse().ok()?,
        })
    }

    /// Renames, in place, the server a [`Self::run_id`] names to `to(server)` (a model
    /// checker's servers name their node in it, and so it is renamed with the node); any
    /// other `run_id` is left alone. A one-digit server renamed to another is one byte
    /// rewritten: renumbering runs for every state the checker fingerprints, and neither
    /// parses nor formats nor allocates there.
    pub(crate) fn renumber_run_id(run_id: &mut String, to: impl Fn(usize) -> usize) {
        let bytes = run_id.as_bytes();
        let one_digit = bytes.len() > 6
            && bytes.starts_with(b"sim-")
            && bytes[4].is_ascii_digit()
            && bytes[5] == b'-'
            && bytes.len() - 6 <= 19
            && bytes[6..].iter().all(u8::is_ascii_digit);
        if one_digit {
            let server = usize::from(bytes[4] - b'0');
            let renamed = to(server);
            if renamed == server {
                return;
            }
            if let Some(digit) = char::from_digit(renamed as u32, 10).filter(|_| renamed < 10) {
                run_id.replace_range(4..5, digit.encode_utf8(&mut [0; 4]));
                return;
            }
        }
        if let Some(server) = Self::from_run_id(run_id) {
            *run_id = Self {
                server: to(server.server),
                ..server
            }
            .run_id();
        }
    }
}

/// A server's answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum NodeReply {
    /// One of the answers the core understands.
    Core(Reply),
    /// The value of a counter after `INCR`.
    Counter(i64),
    /// `INFO`: the server's identity and how long it has run, in milliseconds of its clock.
    Identity { server: ServerId, uptime_ms: u64 },
    /// `PONG`.
    Pong,
    /// No answer that the client can use: the connection broke (the server it was opened to
    /// restarted, or another server now answers at the address).
    Failure(NodeFailure),
}

/// What a request belongs to, so that its reply finds its way back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    /// A command of a core machine, to the client's n-th node.
    Core { request: RequestId, node: usize },
    /// An `INCR` of the Redis-derived token source, for the client's n-th node.
    Mint(usize),
    /// The identification of a new connection to the client's n-th node.
    Identify(usize),
    /// The probe of the client's n-th node after a request there went unanswered.
    Probe(usize),
}

impl Tag {
    /// The client's node the request went to.
    pub(crate) fn node(self) -> usize {
        match self {
            Self::Core { node, .. }
            | Self::Mint(node)
            | Self::Identify(node)
            | Self::Probe(node) => node,
        }
    }
}

/// The connection a request travels on: the client's number for it, and the server it was
/// found to lead to (unknown until its first reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Conn {
    pub(crate) id: ConnectionId,
    pub(crate) bound: Option<ServerId>,
}

/// A message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Client to server.
    Request {
        client: usize,
        op: u64,
        tag: Tag,
        conn: Conn,
        cmd: NodeOp,
    },
    /// Server to client, naming the server that answered.
    Reply {
        op: u64,
        tag: Tag,
        conn: ConnectionId,
        server: ServerId,
        reply: NodeReply,
    },
    /// Server to client: a message on the lock key's channel, over the client's
    /// subscription to its `node`-th node (a release script's notification, or anyone
    /// else's message on the channel).
    Notify {
        node: usize,
        channel: Name,
        payload: Arc<[u8]>,
    },
    /// Client to resource: the access recorded under this index.
    Access { access: usize },
    /// Resource to client.
    AccessAck { access: usize },
}

impl Msg {
    /// A few words for a diagram: the command, or the answer's kind.
    pub(crate) fn label(&self) -> String {
        /// A Debug rendering's variant name, without its fields.
        fn variant(debug: String) -> String {
            let end = debug.find([' ', '{', '(']).unwrap_or(debug.len());
            debug[..end].to_owned()
        }
        match self {
            Self::Request { cmd, .. } => match cmd {
                NodeOp::SetNx { .. } => "SET NX".into(),
                NodeOp::SetNxReportHolder { .. } => "SET NX + PTTL".into(),
                NodeOp::SetNxReadFence { .. } => "acquire + read fence".into(),
                NodeOp::RaiseFence { .. } => "raise fence".into(),
                NodeOp::ReleaseIfOwner { .. } => "release".into(),
                NodeOp::ExtendIfOwner { .. } => "extend".into(),
                NodeOp::Identify => "INFO".into(),
                NodeOp::Ping => "PING".into(),
                NodeOp::Del { .. } => "DEL".into(),
                NodeOp::SetOrExtend { .. } => "set or extend".into(),
                NodeOp::Incr { .. } => "INCR".into(),
                NodeOp::MarkWaiting { .. } => "mark waiting".into(),
                NodeOp::UnmarkWaiting { .. } => "HDEL mark".into(),
            },
            Self::Reply { reply, .. } => match reply {
                NodeReply::Core(reply) => format!("reply: {}", variant(format!("{reply:?}"))),
                NodeReply::Counter(n) => format!("reply: counter {n}"),
                NodeReply::Identity { .. } => "reply: INFO".into(),
                NodeReply::Pong => "PONG".into(),
                NodeReply::Failure(_) => "reply: failure".into(),
            },
            Self::Notify { .. } => "notification".into(),
            // The access's own arrow says which: a label shared by all keeps the page small.
            Self::Access { .. } => "access".into(),
            Self::AccessAck { .. } => "ack of an access".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ServerId;

    #[test]
    fn renumbering_a_run_id_renames_its_server_and_nothing_else() {
        let renamed = |run_id: &str, to: fn(usize) -> usize| {
            let mut run_id = run_id.to_owned();
            ServerId::renumber_run_id(&mut run_id, to);
            run_id
        };
        assert_eq!(renamed("sim-1-2", |n| n + 1), "sim-2-2");
        assert_eq!(renamed("sim-9-2", |n| n + 1), "sim-10-2");
        assert_eq!(renamed("sim-12-7", |n| n - 10), "sim-2-7");
        assert_eq!(renamed("sim-3-1", |n| n), "sim-3-1");
        assert_eq!(renamed("redis-1-2", |n| n + 1), "redis-1-2");
        assert_eq!(renamed("sim-1-x", |n| n + 1), "sim-1-x");
        let id = ServerId {
            server: 4,
            incarnation: 17,
        };
        assert_eq!(renamed(&id.run_id(), |n| 7 - n), "sim-3-17");
    }
}
