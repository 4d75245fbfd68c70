//! The holder read after a lost round on servers before Redis 7.0, whose `SET … NX` does not
//! say who holds the key ([`Reply::TakenUnread`]).
//!
//! A waiter wakes early only on the release of a holder its lost round saw (see
//! [`Waiting`](super::Waiting)). On Redis 7 the `SET … NX GET` names the holder for free;
//! before 7.0, an acquisition that lost a round it will wait after reads the key on each
//! node that refused it ([`Command::ReadHolder`]): one more request per such node, only
//! then. The [`AcquireEvent::Retry`] is held back until the reads answer or the node timeout
//! passes; a read that fails or times out leaves its node's holder unknown, which costs the
//! waiter an early wake-up, never safety.
//!
//! A read that finds the key free saw a release that landed between the refusal and the
//! read (two clients that start together: the winner's work is short). That release
//! announced nothing, as no waiter had marked the node yet, so the node counts as freed
//! from the start of the wait, as a mark that finds the key free does.

use std::hash::{Hash, Hasher};

use super::acquire_event::AcquireEvent;
use super::command::RequestKind;
use super::hash_renumbered::HashRenumbered;
use super::renumber::{NodePermutation, RenumberNodes};
use super::{
    Command, KeyValue, LockKey, NodeFailure, NodeId, NodeStatus, Reply, RequestId, Timestamp,
    Transmit,
};

/// The reads of one lost round, and the retry event they complete.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct HolderReads {
    /// The lost round's retry, its nodes' statuses completed as the reads answer.
    event: AcquireEvent,
    /// The nodes still to answer, in index order.
    waiting_for: Vec<NodeId>,
    /// When the reads are given up.
    deadline: Timestamp,
}

impl HolderReads {
    /// The reads `event` (a retry) needs: one for each node that answered
    /// [`Reply::TakenUnread`], on `key`, in round `round`, given up at `deadline`. `None`
    /// when no node needs one, or when what they could tell would not make the round one
    /// that wakes on a release (`RoundFailure::worth_reading_holders`).
    pub(crate) fn start(
        event: &AcquireEvent,
        key: &LockKey,
        round: u32,
        deadline: Timestamp,
    ) -> Option<(Self, Vec<Transmit>)> {
        let AcquireEvent::Retry { failure, .. } = event else {
            return None;
        };
        if !failure.worth_reading_holders() {
            return None;
        }
        let waiting_for: Vec<NodeId> = failure
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, status)| **status == NodeStatus::Replied(Reply::TakenUnread))
            .map(|(index, _)| NodeId::new(index))
            .collect();
        if waiting_for.is_empty() {
            return None;
        }
        let transmits = waiting_for
            .iter()
            .map(|&node| Transmit {
                request: RequestId::new(round, node, RequestKind::HolderRead),
                node,
                command: Command::ReadHolder { key: key.clone() },
            })
            .collect();
        let reads = Self {
            event: event.clone(),
            waiting_for,
            deadline,
        };
        Some((reads, transmits))
    }

    /// When the reads are given up.
    pub(crate) fn deadline(&self) -> Timestamp {
        self.deadline
    }

    /// Node `node`'s read answered `reply`: its holder (a token of this protocol) replaces
    /// the unread refusal, and so does a key found free (the holder released or expired
    /// after the refusal, and [`Waiting`](super::Waiting) counts the node as freed, as it
    /// does for a mark that finds the key free). Returns whether every read has answered.
    pub(crate) fn answer(
        &mut self,
        node: NodeId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) -> bool {
        let Some(position) = self.waiting_for.iter().position(|&n| n == node) else {
            return self.waiting_for.is_empty();
        };
        // `remove`, not `swap_remove`: the list stays in index order (see `renumber_nodes`).
        self.waiting_for.remove(position);
        if let (
            Ok(Reply::Read(reading)),
            AcquireEvent::Retry {
                failure, free_at, ..
            },
        ) = (reply, &mut self.event)
            && let Some(status) = failure.nodes.get_mut(node.index())
        {
            match reading.value {
                Some(KeyValue::Token(holder)) => {
                    *status = NodeStatus::Replied(Reply::TakenBy {
                        holder,
                        remaining: reading.expires_in,
                    });
                }
                // Found free: a release between the refusal and the read, which announced
                // nothing (no waiter had marked the node yet).
                None => *status = NodeStatus::Replied(Reply::Read(reading)),
                Some(_) => {}
            }
            // The holders' remaining times may now tell when a quorum frees up. A read tells
            // the time left when it is answered (`now`), which may be a node timeout after
            // the round was decided: counted from the decision, the retry came before the
            // keys expired and lost to them. (A remaining time a `SET` named at the decision
            // is then counted a little late, which only waits longer.)
            if let Some(left) = failure.free_after() {
                *free_at = Some(now.saturating_add(left));
            }
        }
        self.waiting_for.is_empty()
    }

    /// The retry, with what the reads told.
    pub(crate) fn finish(self) -> AcquireEvent {
        match self.event {
            AcquireEvent::Retry {
                window,
                failure,
                free_at,
                ..
            } => AcquireEvent::Retry {
                window: free_at.map_or(window, |at| window.ending_by(at)),
                // The holders read may show one owner on a quorum (a round that won some
                // nodes then wakes on its release).
                wake_on_release: failure.wakes_on_release(),
                failure,
                free_at,
            },
            other => other,
        }
    }
}

impl RenumberNodes for HolderReads {
    /// The nodes still to answer stay in index order, as `HolderReads::start` lists them,
    /// so that a renumbered value equals the one the renumbered round would have made.
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.event.renumber_nodes(perm);
        for node in &mut self.waiting_for {
            node.renumber_nodes(perm);
        }
        self.waiting_for.sort_unstable();
    }
}

/// As many nodes still to answer as are renamed on the stack; more (never in a checker's
/// models) are renamed on a copy.
const READS_RENAMED_IN_PLACE: usize = 32;

impl HashRenumbered for HolderReads {
    /// The nodes still to answer, renamed and sorted as `renumber_nodes` leaves them.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            event,
            waiting_for,
            deadline,
        } = self;
        event.hash_renumbered(perm, state);
        let count = waiting_for.len();
        if count > READS_RENAMED_IN_PLACE {
            let mut renamed = waiting_for.clone();
            renamed
                .iter_mut()
                .for_each(|node| node.renumber_nodes(perm));
            renamed.sort_unstable();
            renamed.hash(state);
        } else {
            let mut renamed = [NodeId::new(0); READS_RENAMED_IN_PLACE];
            for (slot, node) in renamed.iter_mut().zip(waiting_for) {
                *slot = perm.node(*node);
            }
            renamed[..count].sort_unstable();
            // As a vector hashes: its length, then each node.
            state.write_usize(count);
            renamed[..count].iter().for_each(|node| node.hash(state));
        }
        deadline.hash(state);
    }
}
