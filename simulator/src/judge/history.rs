//! What happened, in true time: the record that is judged and the diagrams draw.

use redlock_core::Token;
use serde::Serialize;

use crate::time::Nanos;

/// A lease as its holder believed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeaseRecord {
    /// The holder.
    pub client: usize,
    /// Global order of grants in true time, from 1.
    pub epoch: u64,
    /// The fencing token the holder attached to its accesses.
    pub fence: u64,
    /// The owner token on the nodes.
    #[serde(serialize_with = "token_hex")]
    pub token: Token,
    /// When the quorum was reached, true time.
    pub granted_at: Nanos,
    /// The end of validity on the holder's clock (after the last extension).
    pub valid_until_local: u64,
    /// Successful extensions: (true time, new end of validity on the holder's clock).
    pub extensions: Vec<(Nanos, u64)>,
    /// When the holder started releasing, true time.
    pub released_at: Option<Nanos>,
    /// When the holder crashed, true time.
    pub crashed_at: Option<Nanos>,
    /// Whether the holder's work started under this lease.
    #[serde(skip)]
    pub work_started: bool,
    /// When that work stopped, true time (a work still running when the run ended has
    /// none).
    #[serde(skip)]
    pub work_stopped_at: Option<Nanos>,
    /// When the holder stopped believing it holds the lease for good: the end of the last of
    /// its windows (see [`History::windows`]), or the grant when it had none. Set when the
    /// run ends.
    pub window_end: Nanos,
}

fn token_hex<S: serde::Serializer>(token: &Token, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&token.short())
}

/// The kind of an access to the protected resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AccessKind {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// One access to the protected resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessRecord {
    /// Who.
    pub client: usize,
    /// Under which lease (index into the leases).
    pub lease: usize,
    /// That lease's epoch.
    pub epoch: u64,
    /// The fencing token carried.
    pub fence: u64,
    /// Read or write.
    pub kind: AccessKind,
    /// Sent, true time.
    pub sent_at: Nanos,
    /// Arrived at the resource, true time (`None`: lost or still in flight at the end).
    pub arrived_at: Option<Nanos>,
}

/// A fault or notable event, for timelines and diagrams.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Note {
    /// When, true time.
    pub at: Nanos,
    /// Which process (display name).
    pub who: String,
    /// What.
    pub what: String,
}

/// How a lock key's span ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum KeyEnd {
    /// The key expired on the server's clock.
    Expired,
    /// The key went before its expiry: deleted (by its owner's release, or by anyone's plain
    /// `DEL`) or lost in a crash or a failover.
    Removed,
    /// The key was still there when the run ended.
    Held,
}

/// A lock key held on a server during `[from, until)`, true time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeySpan {
    /// The server.
    pub server: usize,
    /// The holder's token.
    #[serde(serialize_with = "token_hex")]
    pub token: Token,
    /// From.
    pub from: Nanos,
    /// Until (the run's end when still held).
    pub until: Nanos,
    /// How it ended.
    pub ended: KeyEnd,
}

/// The record of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct History {
    /// Every lease, in the order its holder started to hold it: the order of the grants,
    /// except with tokens from Redis counters, where a lease is recorded once its token is
    /// minted (`epoch` is always the order of the grants).
    pub leases: Vec<LeaseRecord>,
    /// The windows of each lease (same index as `leases`): the true-time intervals, in
    /// order, during which its holder believed it held it — its clock read before the
    /// lease's deadline, from the grant to the later of the release and the work's stop (work
    /// that still runs after the release still acts under the lease), or to the crash,
    /// whichever comes first. The deadline is the one
    /// the last extension set (if any), for the whole lease: a lease extended after its
    /// deadline had passed counts as believed throughout. One interval for a clock that only
    /// moves forward; a wall clock that steps back past the deadline opens another. Set when
    /// the run ends.
    pub windows: Vec<Vec<(Nanos, Nanos)>>,
    /// For each lease (same index as `leases`), when its holder's clock first read the
    /// lease's deadline, true time (`Nanos::MAX` when it never did). Set when the run ends.
    pub deadlines_reached: Vec<Nanos>,
    /// Every access, in the order sent.
    pub accesses: Vec<AccessRecord>,
    /// Faults and notable events, in time order.
    pub notes: Vec<Note>,
    /// Stop-the-world pauses: (client, from, until).
    pub pauses: Vec<(usize, Nanos, Nanos)>,
    /// Lock-key lifetimes on the servers.
    pub keys: Vec<KeySpan>,
    /// Acquisition calls made.
    pub acquire_calls: u64,
    /// Acquisition calls that ended without a lease.
    pub acquire_failures: u64,
    /// Each client's outcomes, in order.
    pub outcomes: Vec<Vec<ClientOutcome>>,
}

/// What a client's operation came to, as its caller would see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ClientOutcome {
    /// A lease was granted in this round.
    Acquired {
        /// The winning round, from 1.
        round: u32,
    },
    /// The acquisition gave up.
    AcquireFailed {
        /// Why the last round failed.
        reason: String,
        /// Rounds run.
        rounds: u32,
    },
    /// The lease was extended.
    Extended,
    /// The extension failed (the client then stops its critical section and releases).
    ExtendFailed {
        /// Why.
        reason: String,
    },
    /// A validity check before an access failed (the client stops and releases).
    CheckFailed,
    /// The keep-alive gave the lease up (the work is dropped, or the supervisor kills the
    /// command).
    Lost {
        /// Why.
        reason: String,
    },
    /// The supervisor killed the command before the lease could pass to anyone else.
    Killed,
    /// The resource did not answer an access in time.
    AccessTimedOut,
    /// The release finished.
    Released {
        /// Nodes that deleted the key.
        released: usize,
        /// Nodes that no longer had it.
        not_held: usize,
        /// Nodes where another owner held it.
        held_by_other: usize,
        /// Nodes that failed or did not answer in time.
        failed: usize,
        /// Nodes still answering when the release finished (at a quorum).
        pending: usize,
    },
    /// The client crashed.
    Crashed,
}

impl ClientOutcome {
    /// A one-word kind, comparable with what the tokio client reports for the same step:
    /// `acquired`, `taken`, `no-quorum`, `extended`, `extend-failed`, `check-failed`, `lost`,
    /// `killed`, `access-timeout`, `released`, `crashed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Acquired { .. } => "acquired",
            Self::AcquireFailed { reason, .. } if reason.contains("another owner") => "taken",
            Self::AcquireFailed { .. } => "no-quorum",
            Self::Extended => "extended",
            Self::ExtendFailed { .. } => "extend-failed",
            Self::CheckFailed => "check-failed",
            Self::Lost { .. } => "lost",
            Self::Killed => "killed",
            Self::AccessTimedOut => "access-timeout",
            Self::Released { .. } => "released",
            Self::Crashed => "crashed",
        }
    }
}

impl std::fmt::Display for ClientOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Acquired { round } => write!(f, "acquired (round {round})"),
            Self::AcquireFailed { reason, rounds } => {
                write!(f, "acquisition failed after {rounds} round(s): {reason}")
            }
            Self::Extended => f.write_str("extended"),
            Self::ExtendFailed { reason } => write!(f, "extension failed: {reason}"),
            Self::CheckFailed => f.write_str("lease no longer valid: stopped work"),
            Self::Lost { reason } => write!(f, "lease lost: {reason}"),
            Self::Killed => f.write_str("the supervisor killed the command"),
            Self::AccessTimedOut => f.write_str("access timed out"),
            Self::Released {
                released,
                not_held,
                held_by_other,
                failed,
                pending,
            } => write!(
                f,
                "released ({released} released, {not_held} not held, {held_by_other} held by another, {failed} failed, {pending} still answering)"
            ),
            Self::Crashed => f.write_str("crashed"),
        }
    }
}

impl History {
    pub(crate) fn new(clients: usize) -> Self {
        Self {
            outcomes: vec![Vec::new(); clients],
            ..Self::default()
        }
    }

    /// The windows of lease `lease`, true time (none for a history recorded without them).
    pub fn windows_of(&self, lease: usize) -> &[(Nanos, Nanos)] {
        self.windows.get(lease).map_or(&[], Vec::as_slice)
    }

    pub(crate) fn note(&mut self, at: Nanos, who: impl Into<String>, what: impl Into<String>) {
        self.notes.push(Note {
            at,
            who: who.into(),
            what: what.into(),
        });
    }
}
