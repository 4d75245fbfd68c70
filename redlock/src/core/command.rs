//! What the machines ask the driver to send, and what the driver hands back.

use std::fmt;
use std::time::Duration;

use super::{LockKey, Token};

/// The position of a node in the configured list, from 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(u32);

impl NodeId {
    /// The node at `index` in the configured list (indices beyond `u32::MAX` saturate).
    pub fn new(index: usize) -> Self {
        Self(u32::try_from(index).unwrap_or(u32::MAX))
    }

    /// The node's index in the configured list.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

/// One command for one node. Each maps to exactly one Redis operation; the client's Lua
/// scripts and the simulator's nodes implement the same three.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// `SET key token NX PX ttl`: take the key if nobody holds it.
    SetIfAbsent {
        /// The lock key.
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX` (a whole number of milliseconds once validated).
        ttl: Duration,
    },
    /// Delete the key only if it still holds `token` (never a plain `DEL`).
    ReleaseIfOwner {
        /// The lock key.
        key: LockKey,
        /// The owner token.
        token: Token,
    },
    /// Reset the key's expiry to `ttl` only if it still holds `token`; a missing key stays
    /// missing (an extension never re-creates a lock).
    ExtendIfOwner {
        /// The lock key.
        key: LockKey,
        /// The owner token.
        token: Token,
        /// The new expiry.
        ttl: Duration,
    },
}

impl Command {
    /// The key the command operates on.
    pub fn key(&self) -> &LockKey {
        match self {
            Self::SetIfAbsent { key, .. }
            | Self::ReleaseIfOwner { key, .. }
            | Self::ExtendIfOwner { key, .. } => key,
        }
    }

    /// The token the command carries.
    pub fn token(&self) -> Token {
        match self {
            Self::SetIfAbsent { token, .. }
            | Self::ReleaseIfOwner { token, .. }
            | Self::ExtendIfOwner { token, .. } => *token,
        }
    }
}

/// A node's answer to a [`Command`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reply {
    /// `SetIfAbsent`: the key was free and now holds the token.
    Acquired,
    /// `SetIfAbsent`: another value holds the key.
    Taken,
    /// `ReleaseIfOwner`: the key held the token and is deleted.
    Released,
    /// `ExtendIfOwner`: the key held the token and its expiry was reset.
    Extended,
    /// `ReleaseIfOwner`/`ExtendIfOwner`: the key does not exist (expired or never set).
    NotHeld,
    /// `ReleaseIfOwner`/`ExtendIfOwner`: another token holds the key; it was left alone.
    HeldByOther,
}

/// Why a node gave no usable answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeFailure {
    /// No reply within the per-node timeout.
    TimedOut,
    /// The connection was refused (nothing listens at the address).
    Refused,
    /// The connection failed or broke.
    Io(String),
    /// The node answered with an error (`READONLY`, `OOM`, `NOPERM`, …).
    Server(String),
    /// The node answered something no Redis would (not Redis, or a proxy in the way).
    Protocol(String),
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut => f.write_str("timed out"),
            Self::Refused => f.write_str("connection refused"),
            Self::Io(detail) => write!(f, "I/O error: {detail}"),
            Self::Server(detail) => write!(f, "server error: {detail}"),
            Self::Protocol(detail) => write!(f, "protocol error: {detail}"),
        }
    }
}

/// Identifies a request so that its reply can be matched to the round that sent it.
///
/// Opaque to drivers: hand back the id that came with the [`Transmit`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RequestId(u64);

impl RequestId {
    const CLEANUP_BIT: u64 = 1 << 31;

    pub(crate) fn new(round: u32, node: NodeId, cleanup: bool) -> Self {
        let cleanup = if cleanup { Self::CLEANUP_BIT } else { 0 };
        Self(u64::from(round) << 32 | cleanup | u64::from(node.0 & !(Self::CLEANUP_BIT as u32)))
    }

    pub(crate) fn round(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub(crate) fn node(self) -> NodeId {
        NodeId((self.0 & (Self::CLEANUP_BIT - 1)) as u32)
    }

    pub(crate) fn is_cleanup(self) -> bool {
        self.0 & Self::CLEANUP_BIT != 0
    }

    /// The raw value, for traces.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

/// A command to send to one node.
///
/// Commands for the same node must reach it in the order they were polled: a cleanup release
/// overtaking the `SET` it cleans up would leave an orphan key until its TTL. A driver that
/// sends each node's commands one after the other over one ordered connection satisfies this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Hand this back with the reply.
    pub request: RequestId,
    /// Where to send the command.
    pub node: NodeId,
    /// What to send.
    pub command: Command,
}

/// What a node did in one round, as reported to the caller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NodeStatus {
    /// No answer yet when the round was decided; the request still runs in the background.
    Pending,
    /// The node answered.
    Replied(Reply),
    /// The node failed.
    Failed(NodeFailure),
}

impl NodeStatus {
    /// The reply, if the node answered.
    pub fn reply(&self) -> Option<Reply> {
        match self {
            Self::Replied(reply) => Some(*reply),
            Self::Pending | Self::Failed(_) => None,
        }
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("no answer yet"),
            Self::Replied(Reply::Acquired) => f.write_str("acquired"),
            Self::Replied(Reply::Taken) => f.write_str("taken by another owner"),
            Self::Replied(Reply::Released) => f.write_str("released"),
            Self::Replied(Reply::Extended) => f.write_str("extended"),
            Self::Replied(Reply::NotHeld) => f.write_str("not held"),
            Self::Replied(Reply::HeldByOther) => f.write_str("held by another owner"),
            Self::Failed(failure) => fmt::Display::fmt(failure, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_round_trip() {
        let id = RequestId::new(7, NodeId::new(4), true);
        assert_eq!(id.round(), 7);
        assert_eq!(id.node(), NodeId::new(4));
        assert!(id.is_cleanup());
        let id = RequestId::new(u32::MAX, NodeId::new(0), false);
        assert_eq!(id.round(), u32::MAX);
        assert!(!id.is_cleanup());
    }
}
