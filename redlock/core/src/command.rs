//! What the machines ask the driver to send, and what the driver hands back.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::renumber::{NodePermutation, RenumberNodes};
use super::{KeyReading, LockKey, Readable, ServerGeneration, Target, Token};

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

/// The driver's number for one connection to one node; a reconnection gets a new one.
///
/// Numbers must grow with every connection opened to a node: a lower number is an older
/// connection, and [`Eligibility::identified`](super::Eligibility::identified) ignores what an older connection than the one
/// on record says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionId(pub u64);

/// One command for one node. Each maps to exactly one Redis operation (`SET NX PX` or one of
/// the client's Lua scripts); the simulator's nodes implement the single-key ones.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Command {
    /// `SET key token NX GET PX ttl`: take the key if nobody holds it, and otherwise say
    /// which token holds it ([`Reply::TakenBy`]), in the same command: the holder is what
    /// tells its release notification from any other message on the key's channel (see
    /// [`Waiting`](super::Waiting)). `SET` with both `NX` and `GET` needs Redis 7.0: an
    /// older server is sent [`Command::SetIfAbsentNoGet`] instead ([`Command::for_server`]).
    SetIfAbsent {
        /// The lock key.
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX` (a whole number of milliseconds once validated).
        ttl: Duration,
    },
    /// `SET key token NX GET PX ttl` and the key's remaining time to live (`PTTL`), in the
    /// same request: a waiter's round, which learns who holds the key and when the holder's
    /// key expires if it is taken ([`Reply::TakenBy`], or [`Reply::TakenFor`] when the value
    /// there is not a token of this protocol). The holder is what tells a genuine release
    /// notification from any other message on the key's channel (see
    /// [`Waiting`](super::Waiting)). `SET` with both `NX` and `GET` needs Redis 7.0: an
    /// older server is sent [`Command::SetIfAbsentThenReadHolder`] instead
    /// ([`Command::for_server`]).
    SetIfAbsentReportHolder {
        /// The lock key.
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX`.
        ttl: Duration,
    },
    /// `SET key token NX PX ttl`: [`Command::SetIfAbsent`] for a server before Redis 7.0,
    /// which refuses `NX` with `GET`. A refusal does not say who holds the key
    /// ([`Reply::TakenUnread`]): an acquisition that loses the round and will wait reads it
    /// afterwards, with one more request ([`Command::ReadHolder`]).
    SetIfAbsentNoGet {
        /// The lock key.
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX`.
        ttl: Duration,
    },
    /// `SET key token NX PX ttl`, then `GET key` and `PTTL key` in the same request:
    /// [`Command::SetIfAbsentReportHolder`] for a server before Redis 7.0, with the same
    /// replies. One more command than on Redis 7 (the `GET`), in the same round trip; as with
    /// the `PTTL`, the key may have changed hands between the `SET` and the reads, which
    /// costs the waiter time (a wait for the wrong release), never safety.
    SetIfAbsentThenReadHolder {
        /// The lock key.
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX`.
        ttl: Duration,
    },
    /// Delete the key only if it still holds `token` (never a plain `DEL`).
    ReleaseIfOwner {
        /// The lock key.
        key: LockKey,
        /// The owner token.
        token: Token,
    },
    /// `SET key token NX PX ttl`, and read the resource's fence counter in the same atomic
    /// step (the first phase of a fenced acquisition).
    SetIfAbsentReadFence {
        /// The lock key; its fence counter lives under [`LockKey::fence_key`].
        key: LockKey,
        /// This round's owner token.
        token: Token,
        /// The expiry written with `PX`.
        ttl: Duration,
    },
    /// Raise the resource's fence counter to `fence` unless it is already higher, only if
    /// the lock key still holds `token` (the second phase of a fenced acquisition). The
    /// counter has no TTL.
    RaiseFence {
        /// The lock key; the counter lives under [`LockKey::fence_key`].
        key: LockKey,
        /// This round's owner token: a node that no longer holds it answers
        /// [`Reply::NotHeld`] or [`Reply::HeldByOther`] and raises nothing.
        token: Token,
        /// The fencing token of the new lease.
        fence: u64,
    },
    /// `SET key token PX ttl` on every key, only if none exists (all-or-nothing, atomically).
    SetAllIfAbsent {
        /// The lock keys.
        keys: Arc<[LockKey]>,
        /// This round's owner token.
        token: Token,
        /// The expiry.
        ttl: Duration,
    },
    /// Delete each key that still holds `token`.
    ReleaseAllIfOwner {
        /// The lock keys.
        keys: Arc<[LockKey]>,
        /// The owner token.
        token: Token,
    },
    /// Reset every key's expiry, only if every key still holds `token` (all-or-nothing).
    ExtendAllIfOwner {
        /// The lock keys.
        keys: Arc<[LockKey]>,
        /// The owner token.
        token: Token,
        /// The new expiry.
        ttl: Duration,
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
    /// Read, in one atomic step and without writing anything, the lock key's value, its
    /// remaining time to live and the resource's fence counter ([`Reply::Read`]): a
    /// [`HolderQuery`](super::HolderQuery).
    ReadHolder {
        /// The lock key; the counter lives under [`LockKey::fence_key`].
        key: LockKey,
    },
    /// A waiter asks to be told of the key's release: field `waiter` set in the hash at
    /// [`LockKey::wait_key`], whose expiry is raised to `ttl` unless it is already later
    /// (never shortened: other waiters' marks share it), and the lock key read in the same
    /// atomic step. The release scripts delete the hash with the key and publish only if it
    /// was there, so the next release after this command is announced; the reply tells of
    /// a release before it: the key's
    /// holder ([`Reply::TakenBy`], [`Reply::Taken`] for a value that is not a token), or
    /// [`Reply::NotHeld`] when the key is free. Sent by [`Waiting`](super::Waiting).
    MarkWaiting {
        /// The lock key.
        key: LockKey,
        /// The waiter's own id (one per acquisition): its field in the hash.
        waiter: Token,
        /// How long the mark lives at least.
        ttl: Duration,
    },
    /// The waiter no longer waits (granted, or gave up): its field removed from the hash at
    /// [`LockKey::wait_key`] (`HDEL`; the hash goes with its last field). [`Reply::Released`]
    /// when the field was there, [`Reply::NotHeld`] otherwise.
    UnmarkWaiting {
        /// The lock key.
        key: LockKey,
        /// The waiter's id, as marked.
        waiter: Token,
    },
}

impl Command {
    /// The lock keys the command is about.
    pub fn keys(&self) -> &[LockKey] {
        match self {
            Self::SetIfAbsent { key, .. }
            | Self::SetIfAbsentReportHolder { key, .. }
            | Self::SetIfAbsentNoGet { key, .. }
            | Self::SetIfAbsentThenReadHolder { key, .. }
            | Self::SetIfAbsentReadFence { key, .. }
            | Self::RaiseFence { key, .. }
            | Self::ReleaseIfOwner { key, .. }
            | Self::ExtendIfOwner { key, .. }
            | Self::ReadHolder { key }
            | Self::MarkWaiting { key, .. }
            | Self::UnmarkWaiting { key, .. } => std::slice::from_ref(key),
            Self::SetAllIfAbsent { keys, .. }
            | Self::ReleaseAllIfOwner { keys, .. }
            | Self::ExtendAllIfOwner { keys, .. } => keys,
        }
    }

    /// `ttl` in the whole milliseconds `PX` takes, at least 1 (`PX 0` is an error). A
    /// validated TTL is a whole number of milliseconds, so nothing is rounded.
    pub fn px(ttl: Duration) -> u64 {
        u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
    }

    /// Whether the command only ever removes this client's keys (a release), which is safe
    /// on any node at any time.
    pub fn is_release(&self) -> bool {
        matches!(
            self,
            Self::ReleaseIfOwner { .. } | Self::ReleaseAllIfOwner { .. }
        )
    }

    /// Whether the command only reads: it creates, changes and deletes nothing on any node.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Self::ReadHolder { .. })
    }

    /// Whether the command can create a lock key (the `SET NX` of an acquisition round).
    pub fn creates_key(&self) -> bool {
        matches!(
            self,
            Self::SetIfAbsent { .. }
                | Self::SetIfAbsentReportHolder { .. }
                | Self::SetIfAbsentNoGet { .. }
                | Self::SetIfAbsentThenReadHolder { .. }
                | Self::SetIfAbsentReadFence { .. }
                | Self::SetAllIfAbsent { .. }
        )
    }

    /// The owner token the command carries.
    pub fn token(&self) -> Option<Token> {
        match self {
            Self::SetIfAbsent { token, .. }
            | Self::SetIfAbsentReportHolder { token, .. }
            | Self::SetIfAbsentNoGet { token, .. }
            | Self::SetIfAbsentThenReadHolder { token, .. }
            | Self::SetIfAbsentReadFence { token, .. }
            | Self::ReleaseIfOwner { token, .. }
            | Self::ExtendIfOwner { token, .. }
            | Self::SetAllIfAbsent { token, .. }
            | Self::ReleaseAllIfOwner { token, .. }
            | Self::ExtendAllIfOwner { token, .. }
            | Self::RaiseFence { token, .. } => Some(*token),
            // A waiter's id is not an owner token: no key ever holds it.
            Self::ReadHolder { .. } | Self::MarkWaiting { .. } | Self::UnmarkWaiting { .. } => None,
        }
    }

    /// The command in the form a server of `generation` takes: before Redis 7.0, an
    /// acquisition's `SET … NX GET` becomes `SET … NX` ([`Command::SetIfAbsentNoGet`]), and a
    /// waiter's becomes `SET … NX` with the holder read after it
    /// ([`Command::SetIfAbsentThenReadHolder`]); every other command is the same on every
    /// server. A driver calls it once it knows the node's generation, just before sending.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{Command, LockKey, ServerGeneration, Token};
    ///
    /// let key = LockKey::new("lock:", "report")?;
    /// let token = Token::from_bytes([1; 16]);
    /// let set = Command::SetIfAbsent { key: key.clone(), token, ttl: Duration::from_secs(10) };
    /// assert_eq!(set.clone().for_server(ServerGeneration::Redis7), set);
    /// assert!(matches!(
    ///     set.for_server(ServerGeneration::BeforeRedis7),
    ///     Command::SetIfAbsentNoGet { .. }
    /// ));
    /// # Ok::<(), redlock_core::ResourceError>(())
    /// ```
    #[must_use]
    pub fn for_server(self, generation: ServerGeneration) -> Self {
        match (self, generation) {
            (Self::SetIfAbsent { key, token, ttl }, ServerGeneration::BeforeRedis7) => {
                Self::SetIfAbsentNoGet { key, token, ttl }
            }
            (Self::SetIfAbsentReportHolder { key, token, ttl }, ServerGeneration::BeforeRedis7) => {
                Self::SetIfAbsentThenReadHolder { key, token, ttl }
            }
            (command, _) => command,
        }
    }

    /// The command that takes `target`; a waiter's round also asks for the holder's
    /// remaining time (`report_holder`).
    pub(crate) fn set(
        target: &Target,
        token: Token,
        ttl: Duration,
        fencing: bool,
        report_holder: bool,
    ) -> Self {
        match target {
            Target::One(key) if fencing => Self::SetIfAbsentReadFence {
                key: key.clone(),
                token,
                ttl,
            },
            Target::One(key) if report_holder => Self::SetIfAbsentReportHolder {
                key: key.clone(),
                token,
                ttl,
            },
            Target::One(key) => Self::SetIfAbsent {
                key: key.clone(),
                token,
                ttl,
            },
            Target::Many(keys) => Self::SetAllIfAbsent {
                keys: keys.clone(),
                token,
                ttl,
            },
        }
    }

    /// The command that releases `target`.
    pub(crate) fn release(target: &Target, token: Token) -> Self {
        match target {
            Target::One(key) => Self::ReleaseIfOwner {
                key: key.clone(),
                token,
            },
            Target::Many(keys) => Self::ReleaseAllIfOwner {
                keys: keys.clone(),
                token,
            },
        }
    }

    /// The command that extends `target`.
    pub(crate) fn extend(target: &Target, token: Token, ttl: Duration) -> Self {
        match target {
            Target::One(key) => Self::ExtendIfOwner {
                key: key.clone(),
                token,
                ttl,
            },
            Target::Many(keys) => Self::ExtendAllIfOwner {
                keys: keys.clone(),
                token,
                ttl,
            },
        }
    }
}

/// A node's answer to a [`Command`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reply {
    /// `SetIfAbsent`: the key was free and now holds the token.
    Acquired,
    /// `SetIfAbsent`: another value holds the key (one that is not a [`Token`], or the
    /// node did not say which).
    Taken,
    /// `SetIfAbsentNoGet`: another value holds the key; the server (before Redis 7.0) was
    /// not asked which. An acquisition that loses a round it will wait after reads the
    /// holder then ([`Command::ReadHolder`]), so that it can tell the holder's release.
    TakenUnread,
    /// `SetIfAbsentReportHolder`: another value holds the key, and expires in `remaining`
    /// (on the node's clock; a key without expiry reports `Duration::MAX`). The value is not
    /// a [`Token`] (or the node did not say which): the holder is unknown.
    TakenFor {
        /// The holder's remaining time to live on the node.
        remaining: Duration,
    },
    /// `SetIfAbsent`/`SetIfAbsentReportHolder`: the lease `holder` holds the key; for
    /// `SetIfAbsentReportHolder`, it expires in `remaining` (as for [`Reply::TakenFor`]),
    /// read by the same request.
    TakenBy {
        /// The token stored in the key: the one the holder's release will announce.
        holder: Token,
        /// The holder's remaining time to live on the node, when the command asked.
        remaining: Option<Duration>,
    },
    /// `ReleaseIfOwner`: the key held the token and is deleted.
    Released,
    /// `ReleaseIfOwner`: the key held the token and is deleted, and a waiter of another
    /// client had marked its interest there (a field of the marks' hash whose
    /// [client prefix](crate::CLIENT_PREFIX_LEN) differs from the token's). The
    /// [`Release`](crate::Release) machine counts it as [`Reply::Released`] and reports the
    /// node in [`ReleaseReport::others_waiting`](crate::ReleaseReport::others_waiting).
    ReleasedOthersWaiting,
    /// `ExtendIfOwner`: the key held the token and its expiry was reset.
    Extended,
    /// `ReleaseIfOwner`/`ExtendIfOwner`: the key does not exist (expired or never set).
    NotHeld,
    /// `ReleaseIfOwner`/`ExtendIfOwner`: another token holds the key; it was left alone.
    HeldByOther,
    /// `SetIfAbsentReadFence`: the key was free and now holds the token; the resource's fence
    /// counter reads `counter`.
    AcquiredWithFence {
        /// The fence counter (0 when it never existed).
        counter: u64,
    },
    /// `SetIfAbsentReadFence`: another value holds the key; the fence counter reads `counter`.
    TakenWithFence {
        /// The fence counter (0 when it never existed).
        counter: u64,
    },
    /// `RaiseFence`: the fence counter now reads `counter` (the requested value, or a higher
    /// one that was already there).
    FenceRaised {
        /// The counter after the command.
        counter: u64,
    },
    /// `ReadHolder`: what the node holds for the resource.
    Read(KeyReading),
}

impl Reply {
    /// Whether the reply takes the lock key (with or without a fence counter).
    pub fn is_acquired(self) -> bool {
        matches!(self, Self::Acquired | Self::AcquiredWithFence { .. })
    }

    /// Whether another owner holds the key.
    pub fn is_taken(self) -> bool {
        matches!(
            self,
            Self::Taken
                | Self::TakenUnread
                | Self::TakenFor { .. }
                | Self::TakenBy { .. }
                | Self::TakenWithFence { .. }
                | Self::HeldByOther
        )
    }

    /// How long the holder's key has left on the node, when the reply says.
    pub fn holder_remaining(self) -> Option<Duration> {
        match self {
            Self::TakenFor { remaining } => Some(remaining),
            Self::TakenBy { remaining, .. } => remaining,
            _ => None,
        }
    }

    /// Whether the reply is a [`Command::ReadHolder`] that found no lock key: whoever held
    /// it released it, or let it expire, before the read.
    pub fn is_read_free(self) -> bool {
        matches!(self, Self::Read(KeyReading { value: None, .. }))
    }

    /// The token that holds the key, when the reply says ([`Reply::TakenBy`]).
    pub fn holder(self) -> Option<Token> {
        match self {
            Self::TakenBy { holder, .. } => Some(holder),
            _ => None,
        }
    }

    /// The fence counter a reply carries.
    pub fn fence_counter(self) -> Option<u64> {
        match self {
            Self::AcquiredWithFence { counter }
            | Self::TakenWithFence { counter }
            | Self::FenceRaised { counter } => Some(counter),
            _ => None,
        }
    }
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
    /// The node answered with an error (`READONLY`, `OOM`, `BUSY`, …).
    Server(String),
    /// The node refused this client: a wrong or missing password, or an ACL that does not
    /// permit a command the client needs (`WRONGPASS`, `NOAUTH`, `NOPERM`). Trying again
    /// does not help; the configuration must change.
    Denied(String),
    /// The node answered something no Redis would (not Redis, or a proxy in the way).
    /// Trying again does not help; the address or the path to the node must change.
    Protocol(String),
    /// The node restarted recently, or cannot be shown not to have, and is not counted toward
    /// a quorum until the restart quarantine has passed since it started: it may have
    /// forgotten keys it held (the "delayed restart" rule; see
    /// [`Eligibility`](super::Eligibility)).
    Quarantined {
        /// How much of the quarantine was left.
        remaining: Duration,
    },
    /// The node is the same server as another node in the list, met before it: the same
    /// `run_id`, or a name that resolves to the same socket address (`localhost` and
    /// `127.0.0.1`); it would vote twice, so it is refused.
    Duplicate {
        /// The node it duplicates.
        of: NodeId,
    },
    /// A request to the node timed out unanswered and no probe has shown it answers again
    /// since: the `SET` was not sent (see [`Admission::Probe`](super::Admission::Probe)).
    Unresponsive,
}

impl NodeFailure {
    /// Whether the command was refused before it was sent, so that it cannot have written
    /// anything on the node: no cleanup is owed there.
    pub fn never_sent(&self) -> bool {
        matches!(
            self,
            Self::Refused | Self::Quarantined { .. } | Self::Duplicate { .. } | Self::Unresponsive
        )
    }
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut => f.write_str("timed out"),
            Self::Refused => f.write_str("connection refused"),
            Self::Io(detail) => write!(f, "I/O error: {detail}"),
            Self::Server(detail) => write!(f, "server error: {detail}"),
            Self::Denied(detail) => write!(f, "access denied: {detail}"),
            Self::Protocol(detail) => write!(f, "not a Redis server (protocol error: {detail})"),
            Self::Quarantined { remaining } => {
                write!(
                    f,
                    "started or restarted within the restart quarantine (it may have lost keys); not counted for another {}",
                    Readable(*remaining)
                )
            }
            Self::Duplicate { of } => write!(
                f,
                "the same server as {of} (same run_id, or same address under another name); one server must not vote twice"
            ),
            Self::Unresponsive => f.write_str(
                "an earlier request timed out unanswered; no new lock is written there until it answers a probe",
            ),
        }
    }
}

/// What a request is for, within its round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum RequestKind {
    /// The round's main command (`SET NX`, an extension, a release).
    Main = 0,
    /// The second phase of a fenced acquisition: raising the fence counter.
    Fence = 1,
    /// A cleanup release after a lost round.
    Cleanup = 2,
    /// A read of the holder after a lost round, where the `SET` did not say it (servers
    /// before Redis 7.0).
    HolderRead = 3,
}

/// Identifies a request so that its reply can be matched to the round that sent it.
///
/// Opaque to drivers: hand back the id that came with the [`Transmit`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct RequestId(u64);

impl RequestId {
    const NODE_BITS: u32 = 30;
    const NODE_MASK: u64 = (1 << Self::NODE_BITS) - 1;

    pub(crate) fn new(round: u32, node: NodeId, kind: RequestKind) -> Self {
        let node = u64::from(node.0) & Self::NODE_MASK;
        Self(u64::from(round) << 32 | (kind as u64) << Self::NODE_BITS | node)
    }

    pub(crate) fn round(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub(crate) fn node(self) -> NodeId {
        NodeId((self.0 & Self::NODE_MASK) as u32)
    }

    pub(crate) fn kind(self) -> RequestKind {
        match (self.0 >> Self::NODE_BITS) & 0b11 {
            0 => RequestKind::Main,
            1 => RequestKind::Fence,
            2 => RequestKind::Cleanup,
            _ => RequestKind::HolderRead,
        }
    }

    /// The raw value, for traces.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl RenumberNodes for RequestId {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        *self = Self::new(self.round(), perm.node(self.node()), self.kind());
    }
}

impl RenumberNodes for Transmit {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.request.renumber_nodes(perm);
        self.node.renumber_nodes(perm);
    }
}

impl RenumberNodes for NodeFailure {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Self::Duplicate { of } = self {
            of.renumber_nodes(perm);
        }
    }
}

impl RenumberNodes for NodeStatus {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Self::Failed(failure) = self {
            failure.renumber_nodes(perm);
        }
    }
}

/// A command to send to one node.
///
/// Commands for the same node must reach it in the order they were polled: a cleanup release
/// overtaking the `SET` it cleans up would leave an orphan key until its TTL. A driver that
/// sends each node's commands one after the other over one ordered connection satisfies this.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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

    /// Whether a round's key-creating command certainly wrote nothing on this node: the
    /// node answered that another owner holds the key, or the command was never sent. Every
    /// other node may hold the round's key (a `SET` can land after its timeout) and is owed
    /// a release.
    pub fn wrote_nothing(&self) -> bool {
        match self {
            Self::Replied(reply) => reply.is_taken(),
            Self::Failed(failure) => failure.never_sent(),
            Self::Pending => false,
        }
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("no answer yet"),
            Self::Replied(Reply::Acquired) => f.write_str("acquired"),
            // The holder's token stays out of messages: it is what its release announces.
            Self::Replied(
                Reply::Taken
                | Reply::TakenUnread
                | Reply::TakenBy {
                    remaining: None, ..
                },
            ) => f.write_str("taken by another owner"),
            Self::Replied(
                Reply::TakenFor { remaining }
                | Reply::TakenBy {
                    remaining: Some(remaining),
                    ..
                },
            ) => write!(f, "taken by another owner for {}", Readable(*remaining)),
            Self::Replied(Reply::Released) => f.write_str("released"),
            Self::Replied(Reply::ReleasedOthersWaiting) => {
                f.write_str("released (another client waits)")
            }
            Self::Replied(Reply::Extended) => f.write_str("extended"),
            Self::Replied(Reply::NotHeld) => f.write_str("not held"),
            Self::Replied(Reply::HeldByOther) => f.write_str("held by another owner"),
            Self::Replied(Reply::AcquiredWithFence { counter }) => {
                write!(f, "acquired (fence counter {counter})")
            }
            Self::Replied(Reply::TakenWithFence { counter }) => {
                write!(f, "taken by another owner (fence counter {counter})")
            }
            Self::Replied(Reply::FenceRaised { counter }) => {
                write!(f, "fence counter now {counter}")
            }
            // As elsewhere, the holder's token stays out of messages.
            Self::Replied(Reply::Read(reading)) => match (reading.value, reading.fence) {
                (None, None) => f.write_str("free"),
                (None, Some(counter)) => write!(f, "free (fence counter {counter})"),
                (Some(_), None) => f.write_str("held"),
                (Some(_), Some(counter)) => write!(f, "held (fence counter {counter})"),
            },
            Self::Failed(failure) => fmt::Display::fmt(failure, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_shown_without_its_token() {
        use crate::{KeyReading, KeyValue};
        let token = Token::from_bytes([0xab; 16]);
        let held = KeyReading {
            value: Some(KeyValue::Token(token)),
            expires_in: Some(Duration::from_secs(1)),
            fence: Some(3),
        };
        let show = |reading| NodeStatus::Replied(Reply::Read(reading)).to_string();
        assert_eq!(show(held), "held (fence counter 3)");
        assert_eq!(
            show(KeyReading {
                fence: None,
                ..held
            }),
            "held"
        );
        assert_eq!(show(KeyReading::FREE), "free");
        assert_eq!(
            show(KeyReading {
                fence: Some(2),
                ..KeyReading::FREE
            }),
            "free (fence counter 2)"
        );
        assert!(!show(held).contains("abab"));
    }

    #[test]
    fn request_ids_round_trip() {
        for kind in [
            RequestKind::Main,
            RequestKind::Fence,
            RequestKind::Cleanup,
            RequestKind::HolderRead,
        ] {
            let id = RequestId::new(7, NodeId::new(4), kind);
            assert_eq!(
                (id.round(), id.node(), id.kind()),
                (7, NodeId::new(4), kind)
            );
        }
        let id = RequestId::new(u32::MAX, NodeId::new(1 << 29), RequestKind::Main);
        assert_eq!(id.round(), u32::MAX);
        assert_eq!(id.node(), NodeId::new(1 << 29));
        assert_eq!(id.kind(), RequestKind::Main);
    }
}
