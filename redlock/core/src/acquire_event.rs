//! What an acquisition produces: a [`Grant`], a [`Retry`](AcquireEvent::Retry) after a lost
//! round, or an [`AcquireFailure`] once no round is left. Kept apart from the machine
//! ([`Acquire`](super::Acquire)) so that what completes an event (the holder reads of
//! `holder_reads.rs`) need not reach into the machine.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::hash_renumbered::{HashRenumbered, hash_per_node};
use super::renumber::{NodePermutation, RenumberNodes, renumber_per_node};
use super::{NodeStatus, RetryWindow, RoundFailure, Target, Timestamp, Token};

/// A lease won by an acquisition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Grant {
    /// What the lease holds.
    pub target: Target,
    /// The token of the winning round, now stored on a quorum of nodes.
    pub token: Token,
    /// When the winning round started (validity is measured from here, not from the first
    /// round).
    pub started_at: Timestamp,
    /// When the quorum was reached.
    pub decided_at: Timestamp,
    /// The end of validity on the client's clock: `started_at + ttl − drift`.
    pub valid_until: Timestamp,
    /// How many rounds it took, from 1.
    pub attempts: u32,
    /// What each node did in the winning round; nodes still in flight are `Pending`.
    pub nodes: Vec<NodeStatus>,
    /// The fencing token minted on the nodes, when [`LockConfig::with_fencing`](super::LockConfig::with_fencing) is set.
    pub fence: Option<u64>,
}

impl Grant {
    /// The validity left when the quorum was reached.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(self.decided_at)
    }
}

/// An acquisition that ran out of rounds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct AcquireFailure {
    /// How many rounds ran.
    pub attempts: u32,
    /// The last round.
    pub last_round: RoundFailure,
}

/// What an [`Acquire`](super::Acquire) produces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireEvent {
    /// A quorum agreed in time. The lease is the caller's until [`Grant::valid_until`].
    Acquired(Grant),
    /// The round failed and its cleanup releases were queued. Pick a start in `window` with
    /// [`RetryWindow::pick`], wait until then and call [`Acquire::retry`](super::Acquire::retry). A driver that
    /// hears of the holder's release earlier (the nodes' notifications) may start sooner
    /// when a [`Waiting`](super::Waiting) fed the failure and the notifications says so:
    /// the next round is an ordinary quorum round either way, so a notification that is
    /// lost, late or wrong costs time, never safety.
    Retry {
        /// When the next round starts: the retry policy's window, ending no later than
        /// `free_at` (there is no point in waiting longer than the holder's keys live) and no
        /// later than the deadline of [`Acquire::waiting_until`](super::Acquire::waiting_until).
        window: RetryWindow,
        /// The round that failed.
        failure: RoundFailure,
        /// When, on the client's clock, enough of the other owners' keys expire for a quorum
        /// to be possible again, if the round learnt it.
        free_at: Option<Timestamp>,
        /// Whether a release of another owner's keys is worth waking early for
        /// ([`RoundFailure::wakes_on_release`]): the round lost to others, and won no node
        /// or read one owner holding the key on a quorum (clients that start together: the
        /// loser won a node, the winner's release frees the resource). A round that won
        /// some nodes and names no such owner lost to a split vote; the other losers'
        /// cleanups would wake every one of them at once into the same split, so it waits
        /// for its jittered start instead. (An input of
        /// [`Waiting::round_lost`](super::Waiting::round_lost).)
        wake_on_release: bool,
    },
    /// The last allowed round failed (or no round may start before the deadline of
    /// [`Acquire::waiting_until`](super::Acquire::waiting_until)); its cleanup releases were queued.
    Failed(AcquireFailure),
}

impl RenumberNodes for Grant {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.nodes, perm);
    }
}

impl RenumberNodes for AcquireFailure {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.last_round.renumber_nodes(perm);
    }
}

impl RenumberNodes for AcquireEvent {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Acquired(grant) => grant.renumber_nodes(perm),
            Self::Retry { failure, .. } => failure.renumber_nodes(perm),
            Self::Failed(failure) => failure.renumber_nodes(perm),
        }
    }
}

impl HashRenumbered for Grant {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the grant must be added here.
        let Self {
            target,
            token,
            started_at,
            decided_at,
            valid_until,
            attempts,
            nodes,
            fence,
        } = self;
        (target, token, started_at, decided_at, valid_until, attempts).hash(state);
        hash_per_node(nodes, perm, state);
        fence.hash(state);
    }
}

impl HashRenumbered for AcquireFailure {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            attempts,
            last_round,
        } = self;
        attempts.hash(state);
        last_round.hash_renumbered(perm, state);
    }
}

impl HashRenumbered for AcquireEvent {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Self::Acquired(grant) => grant.hash_renumbered(perm, state),
            Self::Retry {
                window,
                failure,
                free_at,
                wake_on_release,
            } => {
                window.hash(state);
                failure.hash_renumbered(perm, state);
                (free_at, wake_on_release).hash(state);
            }
            Self::Failed(failure) => failure.hash_renumbered(perm, state),
        }
    }
}
