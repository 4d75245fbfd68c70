//! Release: compare-and-delete on every node, with a typed outcome per node.

use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};

use super::command::RequestKind;
use super::hash_renumbered::{HashRenumbered, hash_per_node};
use super::renumber::{NodePermutation, RenumberNodes, renumber_per_node};
use super::round::count;
use super::{
    Command, LockConfig, Machine, NodeFailure, NodeId, NodeStatus, Reply, RequestId, Target,
    Timestamp, Token, Transmit, quorum,
};

/// What a release did on each node.
///
/// Releasing a lease that already expired is not an error: the nodes answer
/// [`Reply::NotHeld`] and the report says so.
///
/// A release that returns at a quorum (the default, [`Release::new`]) leaves the other nodes
/// **in flight**: they were asked, had not answered when the quorum was reached, and their
/// requests finish in the background. A healthy node is usually among them, so count
/// [`released`](Self::released) only on a report that [`is_complete`](Self::is_complete)
/// (a release made [`waiting_for_all`](Release::waiting_for_all)) to learn where the key was
/// deleted.
///
/// ```
/// use redlock_core::{NodeFailure, NodeStatus, Reply, ReleaseReport};
///
/// let mut report = ReleaseReport::default();
/// report.nodes = vec![
///     NodeStatus::Replied(Reply::Released),
///     NodeStatus::Replied(Reply::NotHeld),
///     NodeStatus::Pending,
/// ];
/// assert_eq!((report.released(), report.not_held(), report.in_flight()), (1, 1, 1));
/// assert!(report.is_quorum_free() && !report.is_complete());
/// assert_eq!(
///     report.to_string(),
///     "released on 1 of 3 nodes, not held on 1, 1 still in flight"
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ReleaseReport {
    /// What each node did, indexed by [`NodeId::index`]. Nodes still in flight when the
    /// release finished are [`NodeStatus::Pending`]; their requests complete in the
    /// background.
    pub nodes: Vec<NodeStatus>,
    /// On how many of the nodes that released (counted in [`released`](Self::released)) a
    /// waiter of another client had marked its interest
    /// ([`Reply::ReleasedOthersWaiting`]): what bounds this client's hand-offs among its
    /// own waiters ([`Bypass`](crate::Bypass)).
    pub others_waiting: usize,
}

impl ReleaseReport {
    /// Nodes where our key was deleted.
    pub fn released(&self) -> usize {
        count(&self.nodes, Reply::Released)
    }

    /// Nodes where no key existed any more (expired, or never set).
    pub fn not_held(&self) -> usize {
        count(&self.nodes, Reply::NotHeld)
    }

    /// Nodes where another owner's key was found and left alone.
    pub fn held_by_other(&self) -> usize {
        count(&self.nodes, Reply::HeldByOther)
    }

    /// Nodes that failed (timeout, connection, server error): their keys expire with the TTL,
    /// unless a release still on its way reaches them (a client finishes a release cut by its
    /// deadline in the background, which it settles before it ends).
    pub fn failed(&self) -> usize {
        self.nodes
            .iter()
            .filter(|s| matches!(s, NodeStatus::Failed(_)))
            .count()
    }

    /// Nodes still in flight: asked, not answered when the release returned at a quorum.
    /// Their requests finish in the background; this says nothing against them.
    pub fn in_flight(&self) -> usize {
        self.nodes
            .iter()
            .filter(|s| matches!(s, NodeStatus::Pending))
            .count()
    }

    /// The older name of [`in_flight`](Self::in_flight).
    pub fn pending(&self) -> usize {
        self.in_flight()
    }

    /// Whether every node's outcome is known (none [in flight](Self::in_flight)).
    pub fn is_complete(&self) -> bool {
        self.in_flight() == 0
    }

    /// Whether a quorum of nodes is known to no longer hold our key, so another client can
    /// acquire the resource at once.
    pub fn is_quorum_free(&self) -> bool {
        freed(&self.nodes) >= quorum(self.nodes.len())
    }
}

/// Nodes known to no longer hold our key: released, not held, or held by another owner.
fn freed(nodes: &[NodeStatus]) -> usize {
    nodes
        .iter()
        .filter(|s| {
            matches!(
                s.reply(),
                Some(Reply::Released | Reply::NotHeld | Reply::HeldByOther)
            )
        })
        .count()
}

/// `released on 2 of 3 nodes, 1 still in flight`: the released count and every other
/// outcome that occurred, in words that tell them apart.
impl fmt::Display for ReleaseReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes = self.nodes.len();
        let noun = if nodes == 1 { "node" } else { "nodes" };
        write!(f, "released on {} of {nodes} {noun}", self.released())?;
        let others = [
            (self.not_held(), "not held on ", ""),
            (self.held_by_other(), "held by another owner on ", ""),
            (self.failed(), "failed on ", ""),
            (self.in_flight(), "", " still in flight"),
        ];
        for (count, before, after) in others {
            if count > 0 {
                write!(f, ", {before}{count}{after}")?;
            }
        }
        Ok(())
    }
}

/// The release state machine.
///
/// It finishes when every node has answered, as soon as a quorum of nodes is known to no
/// longer hold our key (the rest complete in the background and the report shows them
/// [in flight](ReleaseReport::in_flight)), or at the per-node timeout. Made
/// [`waiting_for_all`](Release::waiting_for_all), it waits for every node, still bounded by
/// the per-node timeout.
///
/// ```
/// use redlock_core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new("redlock:", "report").unwrap();
/// let now = Timestamp::ZERO;
/// let mut release = Release::new(&config, key, Token::from_bytes([1; 16]), now);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| release.poll_transmit()).collect();
/// release.handle_reply(sent[0].request, Ok(Reply::Released), now);
/// release.handle_reply(sent[1].request, Ok(Reply::NotHeld), now); // expired there
/// let report = release.poll_outcome().unwrap();
/// assert_eq!((report.released(), report.not_held(), report.in_flight()), (1, 1, 1));
/// assert!(report.is_quorum_free());
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Release {
    quorum: usize,
    timeout_at: Timestamp,
    statuses: Vec<NodeStatus>,
    transmits: VecDeque<Transmit>,
    /// Whether it waits for every node rather than for a quorum.
    all: bool,
    /// Nodes that answered [`Reply::ReleasedOthersWaiting`].
    others_waiting: usize,
    done: bool,
    outcome: Option<ReleaseReport>,
}

const ROUND: u32 = 1;

impl Release {
    /// Starts releasing `target` (a [`LockKey`](super::LockKey) or a [`Target`]) held with `token` at `now`.
    pub fn new(
        config: &LockConfig,
        target: impl Into<Target>,
        token: Token,
        now: Timestamp,
    ) -> Self {
        let target = target.into();
        let transmits = (0..config.nodes())
            .map(|index| {
                let node = NodeId::new(index);
                Transmit {
                    request: RequestId::new(ROUND, node, RequestKind::Main),
                    node,
                    command: Command::release(&target, token),
                }
            })
            .collect();
        let mut release = Self {
            quorum: config.quorum(),
            timeout_at: now.saturating_add(config.node_timeout()),
            statuses: vec![NodeStatus::Pending; config.nodes()],
            transmits,
            all: false,
            others_waiting: 0,
            done: false,
            outcome: None,
        };
        release.decide();
        release
    }

    /// Sends nothing to the nodes for which `spared` gives a status, and reports that status
    /// for them: the caller knows that nothing of this token was ever written there.
    #[must_use]
    pub fn sparing(mut self, spared: impl Fn(NodeId) -> Option<NodeStatus>) -> Self {
        self.transmits.retain(|t| spared(t.node).is_none());
        for (index, slot) in self.statuses.iter_mut().enumerate() {
            if let Some(status) = spared(NodeId::new(index)) {
                *slot = status;
            }
        }
        self.decide();
        self
    }

    /// Finishes only when every node has answered or the per-node timeout has passed,
    /// rather than at a quorum: the report then [is complete](ReleaseReport::is_complete).
    /// Call it before polling the machine.
    ///
    /// ```
    /// use redlock_core::*;
    ///
    /// let config = LockConfig::new(3);
    /// let key = LockKey::new("redlock:", "report").unwrap();
    /// let now = Timestamp::ZERO;
    /// let token = Token::from_bytes([1; 16]);
    /// let mut release = Release::new(&config, key, token, now).waiting_for_all();
    /// let sent: Vec<Transmit> = std::iter::from_fn(|| release.poll_transmit()).collect();
    /// release.handle_reply(sent[0].request, Ok(Reply::Released), now);
    /// release.handle_reply(sent[1].request, Ok(Reply::Released), now);
    /// assert!(release.poll_outcome().is_none(), "a quorum is not enough");
    /// release.handle_reply(sent[2].request, Ok(Reply::Released), now);
    /// let report = release.poll_outcome().unwrap();
    /// assert_eq!(report.to_string(), "released on 3 of 3 nodes");
    /// ```
    #[must_use]
    pub fn waiting_for_all(mut self) -> Self {
        self.all = true;
        // `new` or `sparing` may have decided at a quorum already: undo that, unless it was
        // taken.
        if self.outcome.take().is_some() {
            self.done = false;
        }
        self.decide();
        self
    }

    fn decide(&mut self) {
        if self.done {
            return;
        }
        // Counted in place: the report is built (and the statuses copied) only once decided.
        let all_answered = !self.statuses.contains(&NodeStatus::Pending);
        if all_answered || (!self.all && freed(&self.statuses) >= self.quorum) {
            self.done = true;
            self.outcome = Some(ReleaseReport {
                nodes: self.statuses.clone(),
                others_waiting: self.others_waiting,
            });
        }
    }
}

impl Machine for Release {
    type Outcome = ReleaseReport;

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        _now: Timestamp,
    ) {
        if self.done || request.round() != ROUND {
            return;
        }
        let Some(slot) = self.statuses.get_mut(request.node().index()) else {
            return;
        };
        if *slot != NodeStatus::Pending {
            return;
        }
        *slot = match reply {
            Ok(Reply::ReleasedOthersWaiting) => {
                self.others_waiting += 1;
                NodeStatus::Replied(Reply::Released)
            }
            Ok(reply @ (Reply::Released | Reply::NotHeld | Reply::HeldByOther)) => {
                NodeStatus::Replied(reply)
            }
            Ok(other) => NodeStatus::Failed(NodeFailure::Protocol(format!(
                "unexpected reply {other:?} to a release"
            ))),
            Err(failure) => NodeStatus::Failed(failure),
        };
        self.decide();
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.done || now < self.timeout_at {
            return;
        }
        for slot in &mut self.statuses {
            if *slot == NodeStatus::Pending {
                *slot = NodeStatus::Failed(NodeFailure::TimedOut);
            }
        }
        self.decide();
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        (!self.done).then_some(self.timeout_at)
    }

    fn poll_outcome(&mut self) -> Option<ReleaseReport> {
        self.outcome.take()
    }
}

impl RenumberNodes for ReleaseReport {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.nodes, perm);
    }
}

impl RenumberNodes for Release {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.statuses, perm);
        self.transmits.renumber_nodes(perm);
        self.outcome.renumber_nodes(perm);
    }
}

impl HashRenumbered for ReleaseReport {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the report must be added here.
        let Self {
            nodes,
            others_waiting,
        } = self;
        hash_per_node(nodes, perm, state);
        others_waiting.hash(state);
    }
}

impl HashRenumbered for Release {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            quorum,
            timeout_at,
            statuses,
            transmits,
            all,
            others_waiting,
            done,
            outcome,
        } = self;
        (quorum, timeout_at).hash(state);
        hash_per_node(statuses, perm, state);
        transmits.hash_renumbered(perm, state);
        (all, others_waiting, done).hash(state);
        outcome.hash_renumbered(perm, state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockKey;

    #[test]
    fn waits_for_a_quorum_of_answers_or_the_timeout() {
        let config = LockConfig::new(5);
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::ZERO;
        let mut m = Release::new(&config, key, Token::from_bytes([1; 16]), t0);
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_transmit()).collect();
        assert_eq!(sent.len(), 5);
        m.handle_reply(sent[0].request, Ok(Reply::Released), t0);
        m.handle_reply(sent[1].request, Err(NodeFailure::Refused), t0);
        m.handle_reply(sent[1].request, Ok(Reply::Released), t0);
        assert!(m.poll_outcome().is_none());
        m.handle_timeout(m.poll_timeout().unwrap());
        let report = m.poll_outcome().unwrap();
        assert_eq!(report.released(), 1);
        assert_eq!(report.failed(), 4);
        assert!(!report.is_quorum_free());
        assert_eq!(m.poll_timeout(), None);
    }

    #[test]
    fn a_lease_releases_only_where_its_set_may_have_written() {
        use crate::{Acquire, AcquireEvent, Held, Machine};
        let config = LockConfig::new(5);
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::ZERO;
        let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), t0);
        let sets: Vec<_> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
        acquire.handle_reply(sets[0].request, Err(NodeFailure::Unresponsive), t0);
        acquire.handle_reply(sets[1].request, Ok(Reply::Taken), t0);
        for set in &sets[2..] {
            acquire.handle_reply(set.request, Ok(Reply::Acquired), t0);
        }
        let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else {
            panic!("three of five")
        };
        let mut release = Held::new(grant).release(&config, t0);
        let sent: Vec<usize> = std::iter::from_fn(|| release.poll_transmit())
            .map(|t| t.node.index())
            .collect();
        // Node 0 never got the SET, node 1 had another owner's key: nothing to delete there.
        assert_eq!(sent, [2, 3, 4]);
        assert_eq!(release.poll_outcome(), None);
    }

    #[test]
    fn waiting_for_all_finishes_at_the_last_answer_or_the_timeout() {
        let config = LockConfig::new(3);
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::ZERO;
        let mut m = Release::new(&config, key, Token::from_bytes([1; 16]), t0).waiting_for_all();
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_transmit()).collect();
        m.handle_reply(sent[0].request, Ok(Reply::Released), t0);
        m.handle_reply(sent[1].request, Ok(Reply::NotHeld), t0);
        assert!(m.poll_outcome().is_none());
        m.handle_timeout(m.poll_timeout().unwrap());
        let report = m.poll_outcome().unwrap();
        assert!(report.is_complete());
        assert_eq!(
            (report.released(), report.not_held(), report.failed()),
            (1, 1, 1)
        );
        assert_eq!(
            report.to_string(),
            "released on 1 of 3 nodes, not held on 1, failed on 1"
        );
    }

    #[test]
    fn waiting_for_all_undoes_a_decision_the_spared_nodes_made() {
        let config = LockConfig::new(3);
        let key = LockKey::new("", "r").unwrap();
        let spared =
            |node: NodeId| (node.index() < 2).then_some(NodeStatus::Replied(Reply::NotHeld));
        let quorum_only = Release::new(
            &config,
            key.clone(),
            Token::from_bytes([1; 16]),
            Timestamp::ZERO,
        )
        .sparing(spared)
        .poll_outcome()
        .expect("two spared nodes are a quorum");
        assert_eq!(quorum_only.in_flight(), 1);
        let mut all = Release::new(&config, key, Token::from_bytes([1; 16]), Timestamp::ZERO)
            .sparing(spared)
            .waiting_for_all();
        assert_eq!(all.poll_outcome(), None);
        let sent: Vec<_> = std::iter::from_fn(|| all.poll_transmit()).collect();
        assert_eq!(sent.len(), 1);
        all.handle_reply(sent[0].request, Ok(Reply::Released), Timestamp::ZERO);
        let report = all.poll_outcome().unwrap();
        assert_eq!(
            (report.released(), report.not_held(), report.in_flight()),
            (1, 2, 0)
        );
    }

    #[test]
    fn the_report_names_each_outcome_apart() {
        let report = ReleaseReport {
            nodes: vec![
                NodeStatus::Replied(Reply::Released),
                NodeStatus::Replied(Reply::HeldByOther),
                NodeStatus::Failed(NodeFailure::Refused),
                NodeStatus::Pending,
                NodeStatus::Pending,
            ],
            others_waiting: 0,
        };
        assert_eq!(
            report.to_string(),
            "released on 1 of 5 nodes, held by another owner on 1, failed on 1, 2 still in flight"
        );
        assert_eq!(report.pending(), report.in_flight());
        let one = ReleaseReport {
            nodes: vec![NodeStatus::Replied(Reply::Released)],
            others_waiting: 0,
        };
        assert_eq!(one.to_string(), "released on 1 of 1 node");
        assert_eq!(
            ReleaseReport::default().to_string(),
            "released on 0 of 0 nodes"
        );
    }

    #[test]
    fn zero_nodes_finish_at_once() {
        let mut m = Release::new(
            &LockConfig::new(0),
            LockKey::new("", "r").unwrap(),
            Token::from_bytes([0; 16]),
            Timestamp::ZERO,
        );
        assert!(m.poll_outcome().is_some());
    }
}
