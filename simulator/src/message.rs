//! What travels on the simulated network.

use std::sync::Arc;

use redlock::core::{Reply, RequestId, Token};

/// An operation a Redis server performs. The first three are exactly what the client's
/// `SET NX PX` and Lua scripts do; the rest model broken clients and weak token sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NodeOp {
    /// `SET key token NX PX ttl`.
    SetNx {
        key: Arc<str>,
        token: Token,
        ttl_ms: u64,
    },
    /// The fenced acquisition script: `SET NX PX` and read the fence counter.
    SetNxReadFence {
        key: Arc<str>,
        fence_key: Arc<str>,
        token: Token,
        ttl_ms: u64,
    },
    /// The fence-raising script: `counter = max(counter, fence)` while `key` holds `token`.
    RaiseFence {
        key: Arc<str>,
        fence_key: Arc<str>,
        token: Token,
        fence: u64,
    },
    /// The compare-and-delete script.
    ReleaseIfOwner { key: Arc<str>, token: Token },
    /// The compare-and-`PEXPIRE` script.
    ExtendIfOwner {
        key: Arc<str>,
        token: Token,
        ttl_ms: u64,
    },
    /// A plain `DEL`, whoever holds the key.
    Del { key: Arc<str> },
    /// Extension that re-creates a missing key.
    SetOrExtend {
        key: Arc<str>,
        token: Token,
        ttl_ms: u64,
    },
    /// `INCR key` (a Redis-derived fencing counter).
    Incr { key: Arc<str> },
}

/// A server's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeReply {
    /// One of the answers the core understands.
    Core(Reply),
    /// The value of a counter after `INCR`.
    Counter(i64),
}

/// What a request belongs to, so that its reply finds its way back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tag {
    /// A command of a core machine.
    Core(RequestId),
    /// An `INCR` of the Redis-derived token source, for the client's n-th node.
    Mint(usize),
}

/// A message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    /// Client to server.
    Request {
        client: usize,
        op: u64,
        tag: Tag,
        cmd: NodeOp,
    },
    /// Server to client.
    Reply { op: u64, tag: Tag, reply: NodeReply },
    /// Client to resource: the access recorded under this index.
    Access { access: usize },
    /// Resource to client.
    AccessAck { access: usize },
}
