//! Acquisition: rounds of `SET NX PX` on every node, decided by quorum and validity, with
//! cleanup after every failed round and jittered retries.

use std::collections::VecDeque;
use std::time::Duration;

use super::round::{QuorumRound, Verdict};
use super::{
    Command, LockConfig, LockKey, Machine, NodeFailure, NodeId, NodeStatus, Reply, RequestId,
    RetryWindow, RoundFailure, Timestamp, Token, Transmit,
};

/// A lease won by an acquisition.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Grant {
    /// The lock key.
    pub key: LockKey,
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
}

impl Grant {
    /// The validity left when the quorum was reached.
    pub fn validity(&self) -> Duration {
        self.valid_until.saturating_duration_since(self.decided_at)
    }
}

/// An acquisition that ran out of rounds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AcquireFailure {
    /// How many rounds ran.
    pub attempts: u32,
    /// The last round.
    pub last_round: RoundFailure,
}

/// What an [`Acquire`] produces.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireEvent {
    /// A quorum agreed in time. The lease is the caller's until [`Grant::valid_until`].
    Acquired(Grant),
    /// The round failed and its cleanup releases were queued. Pick a start in `window` with
    /// [`RetryWindow::pick`], wait until then and call [`Acquire::retry`].
    Retry {
        /// When the next round may start.
        window: RetryWindow,
        /// The round that failed.
        failure: RoundFailure,
    },
    /// The last allowed round failed; its cleanup releases were queued.
    Failed(AcquireFailure),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    AwaitingRetry,
    Finished,
}

/// The acquisition state machine (see [the module documentation](super) for the call order).
///
/// ```
/// use redlock::core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new("redlock:", "report").unwrap();
/// let now = Timestamp::ZERO;
/// let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), now);
///
/// // One SET NX PX per node...
/// let sent: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
/// assert_eq!(sent.len(), 3);
/// // ...and two yes votes out of three win at once.
/// acquire.handle_reply(sent[0].request, Ok(Reply::Acquired), now);
/// assert!(acquire.poll_outcome().is_none());
/// acquire.handle_reply(sent[2].request, Ok(Reply::Acquired), now);
/// let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else { panic!() };
/// assert_eq!(grant.attempts, 1);
/// assert_eq!(grant.nodes[1], NodeStatus::Pending);
/// ```
#[derive(Debug)]
pub struct Acquire {
    config: LockConfig,
    key: LockKey,
    token: Token,
    attempt: u32,
    round: QuorumRound,
    state: State,
    transmits: VecDeque<Transmit>,
    outcome: Option<AcquireEvent>,
}

impl Acquire {
    /// Starts the first round at `now` with `token`. Read `now` *before* the first command
    /// is sent: validity is measured from it.
    pub fn new(config: &LockConfig, key: LockKey, token: Token, now: Timestamp) -> Self {
        let mut acquire = Self {
            config: config.clone(),
            key,
            token,
            attempt: 0,
            round: QuorumRound::new(config, Reply::Acquired, now),
            state: State::Finished,
            transmits: VecDeque::new(),
            outcome: None,
        };
        acquire.start_round(token, now);
        acquire
    }

    /// Starts the next round at `now` with a fresh `token`, after an [`AcquireEvent::Retry`].
    /// Returns `false` (and does nothing) when no retry is pending.
    pub fn retry(&mut self, token: Token, now: Timestamp) -> bool {
        if self.state != State::AwaitingRetry {
            return false;
        }
        self.start_round(token, now);
        true
    }

    /// Abandons the acquisition: if a round is running, queues a release of its token on
    /// every node (the round may already have set some keys). No outcome follows.
    pub fn cancel(&mut self) {
        if self.state == State::Running {
            self.queue_cleanup();
        }
        self.state = State::Finished;
        self.outcome = None;
    }

    /// The current round, from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The token of the current round.
    pub fn token(&self) -> Token {
        self.token
    }

    fn start_round(&mut self, token: Token, now: Timestamp) {
        self.attempt = self.attempt.saturating_add(1);
        self.token = token;
        self.round = QuorumRound::new(&self.config, Reply::Acquired, now);
        self.state = State::Running;
        for index in 0..self.config.nodes() {
            let node = NodeId::new(index);
            self.transmits.push_back(Transmit {
                request: RequestId::new(self.attempt, node, false),
                node,
                command: Command::SetIfAbsent {
                    key: self.key.clone(),
                    token,
                    ttl: self.config.ttl(),
                },
            });
        }
    }

    /// Releases this round's token everywhere, including on nodes that did not answer or
    /// refused: a `SET` may still land after its timeout.
    fn queue_cleanup(&mut self) {
        for index in 0..self.config.nodes() {
            let node = NodeId::new(index);
            self.transmits.push_back(Transmit {
                request: RequestId::new(self.attempt, node, true),
                node,
                command: Command::ReleaseIfOwner {
                    key: self.key.clone(),
                    token: self.token,
                },
            });
        }
    }

    fn decide(&mut self, now: Timestamp) {
        if self.state != State::Running {
            return;
        }
        match self.round.verdict(now) {
            None => {}
            Some(Verdict::Won { valid_until }) => {
                self.state = State::Finished;
                self.outcome = Some(AcquireEvent::Acquired(Grant {
                    key: self.key.clone(),
                    token: self.token,
                    started_at: self.round.started_at(),
                    decided_at: now,
                    valid_until,
                    attempts: self.attempt,
                    nodes: self.round.statuses().to_vec(),
                }));
            }
            Some(Verdict::Lost(reason)) => {
                self.queue_cleanup();
                let failure = self.round.failure(reason, now);
                if self.attempt < self.config.retry().attempts() {
                    self.state = State::AwaitingRetry;
                    self.outcome = Some(AcquireEvent::Retry {
                        window: self.config.retry().window_after(now),
                        failure,
                    });
                } else {
                    self.state = State::Finished;
                    self.outcome = Some(AcquireEvent::Failed(AcquireFailure {
                        attempts: self.attempt,
                        last_round: failure,
                    }));
                }
            }
        }
    }
}

impl Machine for Acquire {
    type Outcome = AcquireEvent;

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        if self.state != State::Running || request.is_cleanup() || request.round() != self.attempt {
            return;
        }
        let node = request.node();
        let reply = match reply {
            Ok(Reply::Acquired | Reply::Taken) => reply,
            Ok(other) => Err(NodeFailure::Protocol(format!(
                "unexpected reply {other:?} to SET NX"
            ))),
            Err(failure) => Err(failure),
        };
        self.round.record(node, reply);
        self.decide(now);
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.state == State::Running && now >= self.round.timeout_at() {
            self.round.expire();
            self.decide(now);
        }
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        (self.state == State::Running).then(|| self.round.timeout_at())
    }

    fn poll_outcome(&mut self) -> Option<AcquireEvent> {
        self.outcome.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{FailureReason, RetryPolicy};

    fn key() -> LockKey {
        LockKey::new("redlock:", "r").unwrap()
    }

    fn drain(m: &mut Acquire) -> Vec<Transmit> {
        std::iter::from_fn(|| m.poll_transmit()).collect()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn failure_releases_every_node_then_retries_with_a_new_token() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(1, ms(10), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Taken), t0);
        m.handle_reply(sets[1].request, Err(NodeFailure::Refused), t0);
        let cleanup = drain(&mut m);
        assert_eq!(cleanup.len(), 3, "all nodes, answered or not");
        assert!(cleanup.iter().all(|t| matches!(
            t.command,
            Command::ReleaseIfOwner { token, .. } if token == Token::from_bytes([1; 16])
        )));
        let Some(AcquireEvent::Retry { window, failure }) = m.poll_outcome() else {
            panic!("expected a retry")
        };
        assert_eq!(failure.reason, FailureReason::Contended);
        assert_eq!(window.earliest(), t0.saturating_add(ms(10)));

        // A late reply from round 1 changes nothing.
        m.handle_reply(sets[2].request, Ok(Reply::Acquired), t0);
        assert!(m.poll_outcome().is_none());

        let t1 = t0.saturating_add(ms(10));
        assert!(m.retry(Token::from_bytes([2; 16]), t1));
        let sets = drain(&mut m);
        assert!(
            sets.iter()
                .all(|t| t.command.token() == Token::from_bytes([2; 16]))
        );
        for t in &sets[..2] {
            m.handle_reply(t.request, Ok(Reply::Acquired), t1.saturating_add(ms(1)));
        }
        let Some(AcquireEvent::Acquired(grant)) = m.poll_outcome() else {
            panic!("expected a grant")
        };
        // Validity counts from the winning round, not the first.
        assert_eq!(grant.started_at, t1);
        assert_eq!(grant.attempts, 2);
        assert_eq!(
            grant.valid_until,
            t1.saturating_add(config.ttl() - config.drift())
        );
    }

    #[test]
    fn timeout_decides_and_last_round_fails() {
        let config = LockConfig::new(5).with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Acquired), t0);
        assert_eq!(m.poll_timeout(), Some(t0.saturating_add(ms(50))));
        m.handle_timeout(t0.saturating_add(ms(49)));
        assert!(
            m.poll_outcome().is_none(),
            "an early timer call is harmless"
        );
        m.handle_timeout(t0.saturating_add(ms(50)));
        let Some(AcquireEvent::Failed(failure)) = m.poll_outcome() else {
            panic!("expected a failure")
        };
        assert_eq!(failure.last_round.reason, FailureReason::Unavailable);
        assert_eq!(
            failure.last_round.nodes[4],
            NodeStatus::Failed(NodeFailure::TimedOut)
        );
        assert_eq!(drain(&mut m).len(), 5);
        assert_eq!(m.poll_timeout(), None);
    }

    #[test]
    fn cancel_cleans_up_a_running_round_only() {
        let config = LockConfig::new(3);
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), Timestamp::ZERO);
        drain(&mut m);
        m.cancel();
        assert_eq!(drain(&mut m).len(), 3);
        m.cancel();
        assert!(drain(&mut m).is_empty());
        assert!(m.poll_outcome().is_none());
    }

    #[test]
    fn wrong_reply_kind_is_a_protocol_failure() {
        let config = LockConfig::new(1).with_retry(RetryPolicy::no_retry());
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), Timestamp::ZERO);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Released), Timestamp::ZERO);
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!()
        };
        assert!(matches!(
            f.last_round.nodes[0],
            NodeStatus::Failed(NodeFailure::Protocol(_))
        ));
    }
}
