//! One quorum round: N requests, one vote per node, an early decision, a deadline.
//!
//! Acquisition and extension are both "ask every node, win with a quorum inside the validity";
//! this is that logic, once.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::hash_renumbered::{HashRenumbered, hash_per_node, hash_permuted};
use super::renumber::{NodePermutation, RenumberNodes, renumber_per_node};
use super::validity::validity_deadline;
use super::{LockConfig, NodeFailure, NodeId, NodeStatus, Reply, Timestamp, Token};

/// Why a round did not win.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureReason {
    /// A quorum agreed, but only after the validity was used up (slow replies).
    ValidityExhausted,
    /// At least one node holds the key for another owner.
    Contended,
    /// At least one node no longer holds our key (an extension came too late there).
    NotHeld,
    /// Not enough nodes answered: timeouts, refused connections, errors.
    Unavailable,
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ValidityExhausted => "a quorum agreed only after the validity was used up",
            Self::Contended => "another owner holds the resource",
            Self::NotHeld => "the key has expired on too many nodes",
            Self::Unavailable => "too few nodes answered",
        })
    }
}

/// The record of a round that did not win.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RoundFailure {
    /// Why it failed.
    pub reason: FailureReason,
    /// What each node did, indexed by [`NodeId::index`].
    pub nodes: Vec<NodeStatus>,
    /// When the round started, on the client's clock.
    pub started_at: Timestamp,
    /// When the round was decided.
    pub decided_at: Timestamp,
}

impl RoundFailure {
    /// How many nodes answered with `reply`.
    pub fn count(&self, reply: Reply) -> usize {
        count(&self.nodes, reply)
    }

    /// How long until enough of the other owners' keys have expired for a quorum to be
    /// possible again, when every node that found the key taken said for how long
    /// ([`Reply::TakenFor`], [`Reply::TakenBy`]); `None` when that is unknown or nothing blocks a quorum.
    ///
    /// A node that had not answered when the round was decided may hold a key too, one
    /// that outlives every known one: the answer is when enough *known* keys are gone for a
    /// quorum even so, and `None` when that takes an unknown one.
    pub fn free_after(&self) -> Option<Duration> {
        let nodes = self.nodes.len();
        let spare = nodes.saturating_sub(super::quorum(nodes));
        let mut remaining = Vec::new();
        let mut unanswered = 0;
        for status in &self.nodes {
            match status {
                NodeStatus::Pending => unanswered += 1,
                _ => match status
                    .reply()
                    .map(|reply| (reply, reply.holder_remaining()))
                {
                    Some((_, Some(left))) => remaining.push(left),
                    Some((reply, None)) if reply.is_taken() => return None,
                    _ => {}
                },
            }
        }
        // A quorum needs all but `spare` nodes: that many taken keys may stay.
        let must_expire = (remaining.len() + unanswered)
            .checked_sub(spare)
            .filter(|n| *n > 0)?;
        remaining.sort_unstable();
        remaining.get(must_expire - 1).copied()
    }

    /// The token that the round read holding the key ([`Reply::TakenBy`]) on a quorum of
    /// the nodes, if one did: the owner whose release frees the resource.
    pub fn owner_with_quorum(&self) -> Option<Token> {
        let quorum = super::quorum(self.nodes.len());
        let holders: Vec<Token> = self
            .nodes
            .iter()
            .filter_map(|status| status.reply().and_then(Reply::holder))
            .collect();
        holders
            .iter()
            .find(|&&token| holders.iter().filter(|&&t| t == token).count() >= quorum)
            .copied()
    }

    /// Whether a release of the holders this round saw is worth waking early for (see
    /// [`AcquireEvent::Retry`](super::AcquireEvent::Retry)): the round lost to others, and
    /// either won no node, or read one owner on a quorum (the race of clients that start
    /// together: the loser won a node, but the winner's release frees the resource). A round
    /// that won some nodes and names no owner with a quorum lost to a split vote: the other
    /// losers' cleanups would wake every one of them at once into the same split, so it
    /// waits for its jittered start.
    pub fn wakes_on_release(&self) -> bool {
        self.reason == FailureReason::Contended
            && (!self.won_any() || self.owner_with_quorum().is_some())
    }

    /// Whether reading the holders of the nodes that refused without naming one
    /// ([`Reply::TakenUnread`], servers before Redis 7.0) could show the round
    /// [worth waking for](Self::wakes_on_release): it lost to others, and won no node or
    /// was refused by enough nodes that one owner may hold a quorum.
    pub(crate) fn worth_reading_holders(&self) -> bool {
        let refused = self
            .nodes
            .iter()
            .filter(|status| {
                status
                    .reply()
                    .is_some_and(|reply| reply == Reply::TakenUnread || reply.holder().is_some())
            })
            .count();
        self.reason == FailureReason::Contended
            && (!self.won_any() || refused >= super::quorum(self.nodes.len()))
    }

    fn won_any(&self) -> bool {
        self.nodes
            .iter()
            .any(|status| status.reply().is_some_and(Reply::is_acquired))
    }

    /// Whether so many nodes refused this client ([`NodeFailure::Denied`]: credentials,
    /// permissions) or are not Redis servers ([`NodeFailure::Protocol`]) that the others
    /// could never make a quorum: no retry can help.
    pub fn is_denied(&self) -> bool {
        denies_quorum(self.nodes.iter())
    }
}

impl RenumberNodes for RoundFailure {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.nodes, perm);
    }
}

impl RenumberNodes for QuorumRound {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.statuses, perm);
        if let Some(eligible) = &mut self.eligible {
            perm.permute(eligible);
        }
    }
}

impl HashRenumbered for RoundFailure {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the failure must be added here.
        let Self {
            reason,
            nodes,
            started_at,
            decided_at,
        } = self;
        reason.hash(state);
        hash_per_node(nodes, perm, state);
        started_at.hash(state);
        decided_at.hash(state);
    }
}

impl HashRenumbered for QuorumRound {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            started_at,
            timeout_at,
            valid_until,
            quorum,
            vote,
            eligible,
            statuses,
            yes,
            no,
            expired,
        } = self;
        (started_at, timeout_at, valid_until, quorum, vote).hash(state);
        std::mem::discriminant(eligible).hash(state);
        if let Some(eligible) = eligible {
            hash_permuted(eligible, perm, state);
        }
        hash_per_node(statuses, perm, state);
        (yes, no, expired).hash(state);
    }
}

/// Whether so many of a round's `statuses` are refusals of this client
/// ([`NodeFailure::Denied`]) or answers no Redis would give ([`NodeFailure::Protocol`]: an
/// HTTP or SSH server on the port, a proxy in the way) that the other nodes could never make
/// a quorum: retrying cannot help, and a driver reports the refusal (bad credentials, an ACL,
/// a wrong address) rather than a busy resource.
///
/// ```
/// use redlock_core::{NodeFailure, NodeStatus, denies_quorum};
///
/// let denied = NodeStatus::Failed(NodeFailure::Denied("NOPERM".into()));
/// let statuses = [denied.clone(), denied, NodeStatus::Pending];
/// assert!(denies_quorum(statuses.iter()));
///
/// let not_redis = NodeStatus::Failed(NodeFailure::Protocol("Unexpected `72`".into()));
/// let timed_out = NodeStatus::Failed(NodeFailure::TimedOut);
/// assert!(denies_quorum([not_redis.clone(), not_redis.clone(), timed_out.clone()].iter()));
/// // A node that timed out may answer next time: two of them leave a quorum possible.
/// assert!(!denies_quorum([not_redis, timed_out.clone(), timed_out].iter()));
/// ```
pub fn denies_quorum<'a>(statuses: impl ExactSizeIterator<Item = &'a NodeStatus>) -> bool {
    let nodes = statuses.len();
    let denied = statuses
        .filter(|s| {
            matches!(
                s,
                NodeStatus::Failed(NodeFailure::Denied(_) | NodeFailure::Protocol(_))
            )
        })
        .count();
    denied > nodes.saturating_sub(super::quorum(nodes))
}

pub(crate) fn count(nodes: &[NodeStatus], reply: Reply) -> usize {
    nodes.iter().filter(|s| s.reply() == Some(reply)).count()
}

/// The decision of a round.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Verdict {
    /// A quorum agreed in time; the lease is valid until the given instant.
    Won { valid_until: Timestamp },
    /// The round is lost.
    Lost(FailureReason),
}

/// Which replies count as a vote for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Vote {
    /// The lock key was taken (with or without a fence counter).
    Acquired,
    /// The expiry was reset.
    Extended,
    /// The fence counter now holds exactly this value.
    FenceRaisedTo(u64),
}

impl Vote {
    fn accepts(self, reply: Reply) -> bool {
        match self {
            Self::Acquired => reply.is_acquired(),
            Self::Extended => reply == Reply::Extended,
            Self::FenceRaisedTo(target) => reply == Reply::FenceRaised { counter: target },
        }
    }
}

/// Votes of one round. Each node counts once: a duplicated reply changes nothing.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct QuorumRound {
    started_at: Timestamp,
    timeout_at: Timestamp,
    valid_until: Timestamp,
    quorum: usize,
    /// Which replies count as a vote for.
    vote: Vote,
    /// Nodes whose vote for can count; `None` for all. (The fence phase counts only the nodes
    /// that hold the lock key.)
    eligible: Option<Vec<bool>>,
    statuses: Vec<NodeStatus>,
    yes: usize,
    no: usize,
    expired: bool,
}

impl QuorumRound {
    /// A round over `config.nodes()` nodes starting at `now`, won by a quorum of `vote`s,
    /// whose lease is valid until `now + ttl − drift`.
    pub(crate) fn new(config: &LockConfig, vote: Vote, now: Timestamp) -> Self {
        let valid_until = validity_deadline(now, config.ttl(), config.drift());
        Self::continuing(config, vote, now, valid_until)
    }

    /// A round starting at `now` that continues an earlier one (the second phase of a fenced
    /// acquisition): its validity still ends at `valid_until`, measured from the first.
    pub(crate) fn continuing(
        config: &LockConfig,
        vote: Vote,
        now: Timestamp,
        valid_until: Timestamp,
    ) -> Self {
        Self {
            started_at: now,
            timeout_at: now.saturating_add(config.node_timeout()),
            valid_until,
            quorum: config.quorum(),
            vote,
            eligible: None,
            statuses: vec![NodeStatus::Pending; config.nodes()],
            yes: 0,
            no: 0,
            expired: false,
        }
    }

    /// Starts the round again at `now`, as [`QuorumRound::new`] would make it, in the room it
    /// has (a retry, or the first round of a machine that made its round to have one).
    pub(crate) fn restart(&mut self, config: &LockConfig, vote: Vote, now: Timestamp) {
        self.started_at = now;
        self.timeout_at = now.saturating_add(config.node_timeout());
        self.valid_until = validity_deadline(now, config.ttl(), config.drift());
        self.quorum = config.quorum();
        self.vote = vote;
        self.eligible = None;
        self.statuses.clear();
        self.statuses.resize(config.nodes(), NodeStatus::Pending);
        self.yes = 0;
        self.no = 0;
        self.expired = false;
    }

    /// Counts votes for only from the nodes marked `true` (the others count against).
    pub(crate) fn only_from(mut self, eligible: Vec<bool>) -> Self {
        self.eligible = Some(eligible);
        self
    }

    /// The nodes that voted for.
    pub(crate) fn voted_for(&self) -> Vec<bool> {
        self.statuses
            .iter()
            .map(|s| s.reply().is_some_and(|reply| self.vote.accepts(reply)))
            .collect()
    }

    pub(crate) fn started_at(&self) -> Timestamp {
        self.started_at
    }

    pub(crate) fn timeout_at(&self) -> Timestamp {
        self.timeout_at
    }

    pub(crate) fn statuses(&self) -> &[NodeStatus] {
        &self.statuses
    }

    /// The largest fence counter any node reported in this round.
    pub(crate) fn highest_fence_counter(&self) -> u64 {
        self.statuses
            .iter()
            .filter_map(|s| s.reply().and_then(Reply::fence_counter))
            .max()
            .unwrap_or(0)
    }

    /// Records `node`'s answer. Answers from unknown nodes, and second answers, are ignored.
    pub(crate) fn record(&mut self, node: NodeId, result: Result<Reply, NodeFailure>) {
        let Some(slot) = self.statuses.get_mut(node.index()) else {
            return;
        };
        if *slot != NodeStatus::Pending {
            return;
        }
        *slot = match result {
            Ok(reply) => NodeStatus::Replied(reply),
            Err(failure) => NodeStatus::Failed(failure),
        };
        let eligible = self
            .eligible
            .as_ref()
            .is_none_or(|e| e.get(node.index()).copied().unwrap_or(false));
        if eligible && slot.reply().is_some_and(|reply| self.vote.accepts(reply)) {
            self.yes += 1;
        } else {
            self.no += 1;
        }
    }

    /// Counts every node that has not answered by the deadline as timed out.
    pub(crate) fn expire(&mut self) {
        for slot in &mut self.statuses {
            if *slot == NodeStatus::Pending {
                *slot = NodeStatus::Failed(NodeFailure::TimedOut);
                self.no += 1;
            }
        }
        self.expired = true;
    }

    /// The decision at `now`, as soon as one is certain.
    ///
    /// Won as soon as a quorum agreed while validity remains; lost as soon as the refusals and
    /// failures leave too few nodes for a quorum (so an even split ends at once), or a quorum
    /// agreed too late, or the deadline passed.
    pub(crate) fn verdict(&self, now: Timestamp) -> Option<Verdict> {
        let nodes = self.statuses.len();
        if self.yes >= self.quorum {
            return Some(if now < self.valid_until {
                Verdict::Won {
                    valid_until: self.valid_until,
                }
            } else {
                Verdict::Lost(FailureReason::ValidityExhausted)
            });
        }
        if self.no > nodes.saturating_sub(self.quorum) || self.expired {
            return Some(Verdict::Lost(self.classify()));
        }
        None
    }

    fn classify(&self) -> FailureReason {
        let answered =
            |test: fn(Reply) -> bool| self.statuses.iter().any(|s| s.reply().is_some_and(test));
        // A fence counter found above the one we raise means someone else got a larger token.
        let outbid =
            |reply: Reply| matches!(reply, Reply::FenceRaised { .. }) && !self.vote.accepts(reply);
        if answered(Reply::is_taken) || self.statuses.iter().any(|s| s.reply().is_some_and(outbid))
        {
            FailureReason::Contended
        } else if answered(|r| r == Reply::NotHeld) {
            FailureReason::NotHeld
        } else {
            FailureReason::Unavailable
        }
    }

    /// The record of this round, decided at `now` for `reason`.
    pub(crate) fn failure(&self, reason: FailureReason, now: Timestamp) -> RoundFailure {
        RoundFailure {
            reason,
            nodes: self.statuses.clone(),
            started_at: self.started_at,
            decided_at: now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(nodes: usize) -> QuorumRound {
        QuorumRound::new(&LockConfig::new(nodes), Vote::Acquired, Timestamp::ZERO)
    }

    #[test]
    fn a_round_started_again_is_the_round_made_new() {
        // Three nodes where there were five, a quorum of two where it was three.
        let config = LockConfig::new(3);
        let mut again = round(5).only_from(vec![true, false, true, true, true]);
        again.record(NodeId::new(0), Ok(Reply::Acquired));
        again.record(NodeId::new(1), Err(NodeFailure::TimedOut));
        again.expire();
        let now = Timestamp::ZERO.saturating_add(Duration::from_millis(7));
        again.restart(&config, Vote::Extended, now);
        assert_eq!(again, QuorumRound::new(&config, Vote::Extended, now));
    }

    #[test]
    fn even_split_is_lost_at_once() {
        let mut r = round(4);
        r.record(NodeId::new(0), Ok(Reply::Acquired));
        r.record(NodeId::new(1), Ok(Reply::Acquired));
        r.record(NodeId::new(2), Ok(Reply::Taken));
        assert!(r.verdict(Timestamp::ZERO).is_none());
        r.record(NodeId::new(3), Ok(Reply::Taken));
        assert!(matches!(
            r.verdict(Timestamp::ZERO),
            Some(Verdict::Lost(FailureReason::Contended))
        ));
    }

    #[test]
    fn duplicates_and_strangers_do_not_vote() {
        let mut r = round(3);
        r.record(NodeId::new(0), Ok(Reply::Acquired));
        r.record(NodeId::new(0), Ok(Reply::Acquired));
        r.record(NodeId::new(9), Ok(Reply::Acquired));
        assert!(r.verdict(Timestamp::ZERO).is_none());
    }

    #[test]
    fn quorum_after_the_validity_is_lost() {
        let mut r = round(3);
        r.record(NodeId::new(0), Ok(Reply::Acquired));
        r.record(NodeId::new(1), Ok(Reply::Acquired));
        let late = Timestamp::ZERO.saturating_add(Duration::from_secs(10));
        assert!(matches!(
            r.verdict(late),
            Some(Verdict::Lost(FailureReason::ValidityExhausted))
        ));
    }

    #[test]
    fn the_holder_expires_when_enough_keys_have() {
        let ms = Duration::from_millis;
        let failure = |replies: &[Reply]| RoundFailure {
            reason: FailureReason::Contended,
            nodes: replies.iter().map(|r| NodeStatus::Replied(*r)).collect(),
            started_at: Timestamp::ZERO,
            decided_at: Timestamp::ZERO,
        };
        let taken = |n| Reply::TakenFor { remaining: ms(n) };
        // Five nodes, quorum three: two taken keys may stay, so the third shortest decides.
        let five = failure(&[
            taken(900),
            taken(100),
            taken(500),
            taken(300),
            Reply::Acquired,
        ]);
        assert_eq!(five.free_after(), Some(ms(300)));
        // A taken node that did not say for how long: unknown.
        let unknown = failure(&[taken(900), Reply::Taken, taken(500), Reply::Acquired]);
        assert_eq!(unknown.free_after(), None);
        // Nothing blocks a quorum.
        let free = failure(&[taken(900), Reply::Acquired, Reply::Acquired]);
        assert_eq!(free.free_after(), None);
    }

    #[test]
    fn a_node_that_has_not_answered_may_hold_a_key_too() {
        let ms = Duration::from_millis;
        let taken = |n| NodeStatus::Replied(Reply::TakenFor { remaining: ms(n) });
        let failure = |nodes: Vec<NodeStatus>| RoundFailure {
            reason: FailureReason::Contended,
            nodes,
            started_at: Timestamp::ZERO,
            decided_at: Timestamp::ZERO,
        };
        // Decided before the fifth node answered: it may hold a key that outlives the known
        // ones, so two of the known keys must go (not one) before a quorum can form.
        let pending = failure(vec![
            taken(10),
            taken(20),
            taken(30),
            NodeStatus::Replied(Reply::Acquired),
            NodeStatus::Pending,
        ]);
        assert_eq!(pending.free_after(), Some(ms(20)));
        // Two unanswered nodes with two known keys: every known key must go, and then one of
        // the unknown ones: when is unknown.
        let two_pending = failure(vec![
            taken(10),
            taken(20),
            NodeStatus::Replied(Reply::Acquired),
            NodeStatus::Pending,
            NodeStatus::Pending,
        ]);
        assert_eq!(two_pending.free_after(), Some(ms(20)));
        let three_pending = failure(vec![
            taken(10),
            NodeStatus::Replied(Reply::Acquired),
            NodeStatus::Pending,
            NodeStatus::Pending,
            NodeStatus::Pending,
        ]);
        assert_eq!(three_pending.free_after(), None);
    }

    #[test]
    fn zero_nodes_still_end() {
        let mut r = round(0);
        assert!(r.verdict(Timestamp::ZERO).is_none());
        r.expire();
        assert!(matches!(
            r.verdict(Timestamp::ZERO),
            Some(Verdict::Lost(FailureReason::Unavailable))
        ));
    }
}
