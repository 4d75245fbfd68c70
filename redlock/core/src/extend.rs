//! Extension: compare-and-`PEXPIRE` on every node, won by a quorum inside a validity measured
//! from the extension's own start. It never re-creates a key and never deletes one.

use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::command::RequestKind;
use super::hash_renumbered::{HashRenumbered, hash_per_node};
use super::renumber::{NodePermutation, RenumberNodes, renumber_per_node};
use super::round::{QuorumRound, Verdict, Vote};
use super::{
    Command, LockConfig, Machine, NodeFailure, NodeId, NodeStatus, Reply, RequestId, RoundFailure,
    Target, Timestamp, Token, Transmit,
};

/// A successful extension.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Extension {
    /// When the extension started.
    pub started_at: Timestamp,
    /// When the quorum was reached.
    pub decided_at: Timestamp,
    /// The new end of validity: `started_at + ttl − drift`.
    pub valid_until: Timestamp,
    /// What each node did.
    pub nodes: Vec<NodeStatus>,
}

impl Extension {
    /// The validity left when the quorum was reached.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(self.decided_at)
    }
}

/// Why an extension failed. The lease itself is unchanged: it stays valid until its old
/// deadline, and no key was deleted, so another extension may still succeed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExtendFailure {
    /// The lease's validity had ended before the extension started; nothing was sent.
    Expired,
    /// The lease has been held for [`LockConfig::max_hold`] already; nothing was sent.
    HoldLimit {
        /// The configured longest hold.
        max_hold: Duration,
    },
    /// The round did not reach a quorum in time.
    Round(RoundFailure),
}

impl ExtendFailure {
    /// Whether the failure shows that too few nodes still hold the lease's key for any
    /// extension to succeed: more than `N − quorum` nodes answered that the key is gone or
    /// someone else's. The lease can no longer be trusted, whatever its deadline says.
    pub fn keys_gone(&self, config: &LockConfig) -> bool {
        let Self::Round(round) = self else {
            return false;
        };
        let gone = round.count(Reply::NotHeld) + round.count(Reply::HeldByOther);
        gone > config.nodes().saturating_sub(config.quorum())
    }
}

impl fmt::Display for ExtendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expired => f.write_str("the lease's validity had ended"),
            Self::HoldLimit { max_hold } => {
                write!(
                    f,
                    "the lease reached its longest hold ({})",
                    super::Readable(*max_hold)
                )
            }
            Self::Round(round) => fmt::Display::fmt(&round.reason, f),
        }
    }
}

/// What an [`Extend`] produces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExtendOutcome {
    /// A quorum reset its expiry; the lease is valid until the new deadline.
    Extended(Extension),
    /// The extension failed.
    Failed(ExtendFailure),
}

/// The extension state machine.
///
/// ```
/// use redlock_core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new("redlock:", "report").unwrap();
/// let token = Token::from_bytes([1; 16]);
/// let valid_until = Timestamp::from_nanos(5_000_000_000);
///
/// let acquired_at = Timestamp::ZERO;
/// // Past the deadline nothing is sent: an expired lease cannot be revived.
/// let mut late = Extend::new(&config, key.clone(), token, valid_until, acquired_at, valid_until);
/// assert!(late.poll_transmit().is_none());
/// assert_eq!(late.poll_outcome(), Some(ExtendOutcome::Failed(ExtendFailure::Expired)));
///
/// let now = Timestamp::from_nanos(1_000);
/// let mut extend = Extend::new(&config, key, token, valid_until, acquired_at, now);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| extend.poll_transmit()).collect();
/// for t in &sent[..2] {
///     extend.handle_reply(t.request, Ok(Reply::Extended), now);
/// }
/// let Some(ExtendOutcome::Extended(ext)) = extend.poll_outcome() else { panic!() };
/// assert_eq!(ext.valid_until, now.saturating_add(config.ttl() - config.drift()));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Extend {
    target: Target,
    token: Token,
    /// The number its requests carry.
    number: u32,
    round: Option<QuorumRound>,
    transmits: VecDeque<Transmit>,
    outcome: Option<ExtendOutcome>,
}

impl Extend {
    /// Starts extending the lease on `target` (a [`LockKey`](super::LockKey) or a [`Target`])
    /// held with `token`, acquired at `acquired_at` (the start of its winning round) and
    /// currently valid until `valid_until`, at `now`.
    ///
    /// [`Held::extend`](super::Held::extend) calls this with the lease's own values.
    pub fn new(
        config: &LockConfig,
        target: impl Into<Target>,
        token: Token,
        valid_until: Timestamp,
        acquired_at: Timestamp,
        now: Timestamp,
    ) -> Self {
        Self::numbered(
            config,
            target.into(),
            token,
            valid_until,
            acquired_at,
            now,
            1,
        )
    }

    /// As [`Extend::new`], with its requests numbered as round `round`, so that a driver that
    /// runs several extensions of one lease in a row (the keep-alive) can tell their replies
    /// apart.
    pub(crate) fn numbered(
        config: &LockConfig,
        target: Target,
        token: Token,
        valid_until: Timestamp,
        acquired_at: Timestamp,
        now: Timestamp,
        round: u32,
    ) -> Self {
        let mut extend = Self {
            target,
            token,
            number: round,
            round: None,
            transmits: VecDeque::new(),
            outcome: None,
        };
        if now >= valid_until {
            extend.outcome = Some(ExtendOutcome::Failed(ExtendFailure::Expired));
        } else if now >= acquired_at.saturating_add(config.max_hold()) {
            extend.outcome = Some(ExtendOutcome::Failed(ExtendFailure::HoldLimit {
                max_hold: config.max_hold(),
            }));
        } else {
            extend.round = Some(QuorumRound::new(config, Vote::Extended, now));
            for index in 0..config.nodes() {
                let node = NodeId::new(index);
                extend.transmits.push_back(Transmit {
                    request: RequestId::new(round, node, RequestKind::Main),
                    node,
                    command: Command::extend(&extend.target, extend.token, config.ttl()),
                });
            }
        }
        extend
    }

    fn decide(&mut self, now: Timestamp) {
        let Some(round) = &self.round else { return };
        let outcome = match round.verdict(now) {
            None => return,
            Some(Verdict::Won { valid_until }) => ExtendOutcome::Extended(Extension {
                started_at: round.started_at(),
                decided_at: now,
                valid_until,
                nodes: round.statuses().to_vec(),
            }),
            Some(Verdict::Lost(reason)) => {
                ExtendOutcome::Failed(ExtendFailure::Round(round.failure(reason, now)))
            }
        };
        self.round = None;
        self.outcome = Some(outcome);
    }
}

impl Machine for Extend {
    type Outcome = ExtendOutcome;

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        let Some(round) = &mut self.round else { return };
        if request.round() != self.number || request.kind() != RequestKind::Main {
            return;
        }
        let reply = match reply {
            Ok(Reply::Extended | Reply::NotHeld | Reply::HeldByOther) => reply,
            Ok(other) => Err(NodeFailure::Protocol(format!(
                "unexpected reply {other:?} to an extension"
            ))),
            Err(failure) => Err(failure),
        };
        round.record(request.node(), reply);
        self.decide(now);
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if let Some(round) = &mut self.round
            && now >= round.timeout_at()
        {
            round.expire();
            self.decide(now);
        }
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        self.round.as_ref().map(QuorumRound::timeout_at)
    }

    fn poll_outcome(&mut self) -> Option<ExtendOutcome> {
        self.outcome.take()
    }
}

impl RenumberNodes for Extension {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.nodes, perm);
    }
}

impl RenumberNodes for ExtendFailure {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Self::Round(round) = self {
            round.renumber_nodes(perm);
        }
    }
}

impl RenumberNodes for ExtendOutcome {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Extended(extension) => extension.renumber_nodes(perm),
            Self::Failed(failure) => failure.renumber_nodes(perm),
        }
    }
}

impl RenumberNodes for Extend {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.round.renumber_nodes(perm);
        self.transmits.renumber_nodes(perm);
        self.outcome.renumber_nodes(perm);
    }
}

impl HashRenumbered for Extension {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the extension must be added here.
        let Self {
            started_at,
            decided_at,
            valid_until,
            nodes,
        } = self;
        (started_at, decided_at, valid_until).hash(state);
        hash_per_node(nodes, perm, state);
    }
}

impl HashRenumbered for ExtendFailure {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        match self {
            Self::Round(round) => {
                std::mem::discriminant(self).hash(state);
                round.hash_renumbered(perm, state);
            }
            Self::Expired | Self::HoldLimit { .. } => self.hash(state),
        }
    }
}

impl HashRenumbered for ExtendOutcome {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Self::Extended(extension) => extension.hash_renumbered(perm, state),
            Self::Failed(failure) => failure.hash_renumbered(perm, state),
        }
    }
}

impl HashRenumbered for Extend {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            target,
            token,
            number,
            round,
            transmits,
            outcome,
        } = self;
        (target, token, number).hash(state);
        round.hash_renumbered(perm, state);
        transmits.hash_renumbered(perm, state);
        outcome.hash_renumbered(perm, state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureReason;
    use crate::LockKey;

    #[test]
    fn limit_and_failure_send_no_deletes() {
        let hour = Duration::from_secs(3_600);
        let config = LockConfig::new(3).with_max_hold(hour);
        let key = LockKey::new("", "r").unwrap();
        let token = Token::from_bytes([3; 16]);
        let far = Timestamp::MAX;
        let acquired = Timestamp::ZERO;
        let at_limit = acquired.saturating_add(hour);
        let mut capped = Extend::new(&config, key.clone(), token, far, acquired, at_limit);
        assert!(capped.poll_transmit().is_none());
        assert_eq!(
            capped.poll_outcome(),
            Some(ExtendOutcome::Failed(ExtendFailure::HoldLimit {
                max_hold: hour
            }))
        );

        let just_before = at_limit.saturating_sub(Duration::from_nanos(1));
        let mut m = Extend::new(&config, key, token, far, acquired, just_before);
        let sent: Vec<_> = std::iter::from_fn(|| m.poll_transmit()).collect();
        assert!(
            sent.iter()
                .all(|t| matches!(t.command, Command::ExtendIfOwner { .. }))
        );
        m.handle_reply(sent[0].request, Ok(Reply::NotHeld), just_before);
        m.handle_reply(sent[1].request, Ok(Reply::NotHeld), just_before);
        let Some(ExtendOutcome::Failed(failure)) = m.poll_outcome() else {
            panic!()
        };
        assert!(
            failure.keys_gone(&config),
            "two of three nodes lost the key"
        );
        let ExtendFailure::Round(f) = failure else {
            panic!()
        };
        assert_eq!(f.reason, FailureReason::NotHeld);
        assert!(
            m.poll_transmit().is_none(),
            "a failed extension deletes nothing"
        );
    }
}
