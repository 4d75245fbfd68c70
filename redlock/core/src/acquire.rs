//! Acquisition: rounds of `SET NX PX` on every node, decided by quorum and validity, with
//! cleanup after every failed round and jittered retries.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use super::acquire_event::{AcquireEvent, AcquireFailure, Grant};
use super::command::RequestKind;
use super::hash_renumbered::HashRenumbered;
use super::holder_reads::HolderReads;
use super::renumber::{NodePermutation, RenumberNodes};
use super::round::{QuorumRound, Verdict, Vote};
use super::waiting::MARK_ROUNDS;
use super::{
    Command, FailureReason, LockConfig, Machine, NodeFailure, NodeId, NodeStatus, Reply, RequestId,
    Target, Timestamp, Token, Transmit,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum State {
    /// Phase 1: `SET NX` (reading fence counters when fencing).
    Locking,
    /// Phase 2 of a fenced acquisition: raising the fence counter to `fence` on a quorum.
    Fencing {
        fence: u64,
    },
    /// The round is lost and the client will wait: reading the holders the `SET`s did not
    /// name (servers before Redis 7.0) before the retry is reported.
    ReadingHolders,
    AwaitingRetry,
    Finished,
}

impl State {
    fn is_running(self) -> bool {
        matches!(self, Self::Locking | Self::Fencing { .. })
    }
}

/// The last round an acquisition may run: its requests' round numbers stay below the
/// waiting marks' ([`MARK_ROUNDS`]), so that no reply of a round is routed to the wait and
/// no two rounds share a number.
const MAX_ROUNDS: u32 = MARK_ROUNDS - 1;

/// The acquisition state machine (see [the module documentation](super) for the call order).
///
/// With [`LockConfig::with_fencing`], a round has two phases. The first sends
/// [`Command::SetIfAbsentReadFence`]: `SET NX PX` plus a read of the resource's fence counter.
/// Once a quorum took the key, the fencing token is `T = max(counters read) + 1`, and the
/// second phase sends [`Command::RaiseFence`] (`counter = max(counter, T)`, only where the key
/// still holds our token) to every node. The lease is granted only when a quorum *of the nodes
/// that took the key* holds exactly `T`, still inside the validity measured from the first
/// phase's start. Each of those nodes refuses any other `SET NX` until this lease's key is
/// gone, so a lease that locks one of them afterwards reads `T` or more there and gets a
/// larger token. As long as no node loses its counter or key, and whatever the clocks do, two
/// granted leases therefore never carry the same token, and on every node where both raised
/// the counter the lease whose key came first has the smaller token (the argument is in the
/// fencing guide). A lease granted *later* has the larger token only under the clock
/// assumptions: a client whose clock stops after its raise landed can be granted after
/// another lease, with a smaller token (which a fenced resource then rejects).
///
/// ```
/// use redlock_core::*;
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
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Acquire {
    config: LockConfig,
    target: Target,
    token: Token,
    attempt: u32,
    /// Whether the rounds ask for the holder's remaining time: from the round after one
    /// that met another owner.
    report_holder: bool,
    /// With a wait budget: the last instant a round may start; the retry count is then not
    /// the limit.
    deadline: Option<Timestamp>,
    round: QuorumRound,
    /// The phase-1 round of a fenced acquisition, kept for its statuses while phase 2 runs.
    locked: Option<QuorumRound>,
    state: State,
    /// The holder reads of [`State::ReadingHolders`].
    reads: Option<HolderReads>,
    transmits: VecDeque<Transmit>,
    outcome: Option<AcquireEvent>,
}

impl Acquire {
    /// Starts the first round at `now` with `token`. Read `now` *before* the first command
    /// is sent: validity is measured from it.
    ///
    /// `target` is a [`LockKey`](super::LockKey) or a [`Target`] (several resources at once). Fencing applies
    /// to single-resource targets only; a multi-resource grant has no fence.
    pub fn new(
        config: &LockConfig,
        target: impl Into<Target>,
        token: Token,
        now: Timestamp,
    ) -> Self {
        let mut acquire = Self {
            config: config.clone(),
            target: target.into(),
            token,
            attempt: 0,
            report_holder: false,
            deadline: None,
            round: QuorumRound::new(config, Vote::Acquired, now),
            locked: None,
            state: State::Finished,
            reads: None,
            // A round's commands, one per node, without growing.
            transmits: VecDeque::with_capacity(config.nodes()),
            outcome: None,
        };
        acquire.start_round(token, now);
        acquire
    }

    /// Waits for the lease until `deadline` instead of for a number of rounds: rounds follow
    /// each other (spaced by the retry policy's delay and jitter, or sooner when the holder's
    /// keys expire sooner) as long as one can start by `deadline`, whatever the policy's
    /// retry count. The last round starts at `deadline` at the latest.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::*;
    ///
    /// let config = LockConfig::new(1).with_retry(RetryPolicy::no_retry());
    /// let key = LockKey::new("lock:", "report")?;
    /// let t0 = Timestamp::ZERO;
    /// let deadline = t0.saturating_add(Duration::from_millis(30));
    /// let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), t0)
    ///     .waiting_until(deadline);
    /// let set = acquire.poll_transmit().unwrap();
    /// acquire.handle_reply(set.request, Ok(Reply::Taken), t0);
    /// // No retry in the policy, but time left in the budget: another round.
    /// let Some(AcquireEvent::Retry { window, .. }) = acquire.poll_outcome() else { panic!() };
    /// assert!(window.latest() <= deadline);
    /// # Ok::<(), redlock_core::ResourceError>(())
    /// ```
    #[must_use]
    pub fn waiting_until(mut self, deadline: Timestamp) -> Self {
        self.deadline = Some(deadline);
        self
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

    /// Abandons the acquisition: if a round is running, or has won and its grant was not
    /// taken yet ([`poll_outcome`](Machine::poll_outcome)), queues a release of its token on
    /// every node that may hold it (the round may already have set some keys). No outcome
    /// follows.
    pub fn cancel(&mut self) {
        let unpolled_grant = matches!(self.outcome, Some(AcquireEvent::Acquired(_)));
        if self.state.is_running() || unpolled_grant {
            self.queue_cleanup();
        }
        self.reads = None;
        self.state = State::Finished;
        self.outcome = None;
    }

    /// Whether `request` belongs to the round in progress: a reply to it can still change
    /// the decision. (Replies to earlier rounds are ignored by [`Machine::handle_reply`]
    /// anyway; a driver that measures the round itself asks this first.)
    pub fn expects(&self, request: RequestId) -> bool {
        self.state.is_running() && request.round() == self.attempt
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
        self.round.restart(&self.config, Vote::Acquired, now);
        self.locked = None;
        self.state = State::Locking;
        for index in 0..self.config.nodes() {
            let node = NodeId::new(index);
            let command = Command::set(
                &self.target,
                token,
                self.config.ttl(),
                self.fenced(),
                self.report_holder,
            );
            self.transmits.push_back(Transmit {
                request: RequestId::new(self.attempt, node, RequestKind::Main),
                node,
                command,
            });
        }
    }

    /// Whether rounds mint a fencing token: only for a single resource.
    fn fenced(&self) -> bool {
        self.config.fencing() && matches!(self.target, Target::One(_))
    }

    /// Phase 2 of a fenced round: raise the counter to one above the largest seen.
    fn start_fencing(&mut self, valid_until: Timestamp, now: Timestamp) {
        let Target::One(key) = &self.target else {
            return;
        };
        let key = key.clone();
        let fence = self.round.highest_fence_counter().saturating_add(1);
        // Only the nodes that hold our lock key count: each keeps refusing every other SET NX
        // until our key is gone, which is after the grant, so the next lease to win a quorum
        // reads our raised counter on at least one of them. A node that did not lock for us
        // could be read by a racing acquisition before our raise reaches it.
        let holders = self.round.voted_for();
        let fencing =
            QuorumRound::continuing(&self.config, Vote::FenceRaisedTo(fence), now, valid_until)
                .only_from(holders);
        self.locked = Some(std::mem::replace(&mut self.round, fencing));
        self.state = State::Fencing { fence };
        for index in 0..self.config.nodes() {
            let node = NodeId::new(index);
            self.transmits.push_back(Transmit {
                request: RequestId::new(self.attempt, node, RequestKind::Fence),
                node,
                command: Command::RaiseFence {
                    key: key.clone(),
                    token: self.token,
                    fence,
                },
            });
        }
    }

    /// Releases this round's token on every node that may hold it: every node but those
    /// that answered that another owner holds the key, or whose `SET` was never sent
    /// ([`NodeStatus::wrote_nothing`]). Nodes that did not answer, or failed otherwise, are
    /// released too: a `SET` may still land after its timeout.
    fn queue_cleanup(&mut self) {
        let locked = self.locked.as_ref().unwrap_or(&self.round);
        for index in 0..self.config.nodes() {
            if locked
                .statuses()
                .get(index)
                .is_some_and(NodeStatus::wrote_nothing)
            {
                continue;
            }
            let node = NodeId::new(index);
            self.transmits.push_back(Transmit {
                request: RequestId::new(self.attempt, node, RequestKind::Cleanup),
                node,
                command: Command::release(&self.target, self.token),
            });
        }
    }

    /// Forgets the round just lost (its failure has what a caller is told of it): nothing
    /// reads it again, as a late reply to it changes nothing and the next round replaces
    /// it. So two acquisitions that lost alike are alike whatever each node answered and
    /// whether it answered before the verdict, and a model checker counts them once.
    fn forget_round(&mut self) {
        self.locked = None;
        self.round
            .restart(&self.config, Vote::Acquired, Timestamp::ZERO);
    }

    fn decide(&mut self, now: Timestamp) {
        let fence = match self.state {
            State::Locking => None,
            State::Fencing { fence } => Some(fence),
            State::ReadingHolders | State::AwaitingRetry | State::Finished => return,
        };
        match self.round.verdict(now) {
            None => {}
            Some(Verdict::Won { valid_until }) if fence.is_none() && self.fenced() => {
                self.start_fencing(valid_until, now);
            }
            Some(Verdict::Won { valid_until }) => {
                // The lock phase's round has the start and the per-node picture of the key.
                let locked = self.locked.as_ref().unwrap_or(&self.round);
                self.state = State::Finished;
                self.outcome = Some(AcquireEvent::Acquired(Grant {
                    target: self.target.clone(),
                    token: self.token,
                    started_at: locked.started_at(),
                    decided_at: now,
                    valid_until,
                    attempts: self.attempt,
                    nodes: locked.statuses().to_vec(),
                    fence,
                }));
            }
            Some(Verdict::Lost(reason)) => {
                self.queue_cleanup();
                let mut failure = self.round.failure(reason, now);
                if let Some(locked) = &self.locked {
                    // Report the whole round: it started with the lock phase.
                    failure.started_at = locked.started_at();
                }
                self.forget_round();
                // Someone else holds it: the next rounds ask how long for.
                self.report_holder |= reason == FailureReason::Contended;
                let free_at = failure.free_after().map(|left| now.saturating_add(left));
                let mut window = self.config.retry().window_after(now);
                if let Some(free_at) = free_at {
                    window = window.ending_by(free_at);
                }
                let may_retry = match self.deadline {
                    Some(deadline) => {
                        window = window.ending_by(deadline);
                        now < deadline
                    }
                    None => self.attempt < self.config.retry().attempts(),
                } && self.attempt < MAX_ROUNDS;
                // Refused credentials or permissions do not pass: no retry for them.
                if may_retry && !failure.is_denied() {
                    self.state = State::AwaitingRetry;
                    let retry = AcquireEvent::Retry {
                        window,
                        wake_on_release: failure.wakes_on_release(),
                        failure,
                        free_at,
                    };
                    self.read_holders_or_report(retry, now);
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

impl Acquire {
    /// Reports `retry`, or first reads the holders its round's `SET`s did not name, when the
    /// client will wait for their release (see [`HolderReads`]).
    fn read_holders_or_report(&mut self, retry: AcquireEvent, now: Timestamp) {
        let deadline = now.saturating_add(self.config.node_timeout());
        let reads = match &self.target {
            Target::One(key) => HolderReads::start(&retry, key, self.attempt, deadline),
            Target::Many(_) => None,
        };
        match reads {
            Some((reads, transmits)) => {
                self.transmits.extend(transmits);
                self.reads = Some(reads);
                self.state = State::ReadingHolders;
            }
            None => self.outcome = Some(retry),
        }
    }

    /// The holder reads are done (answered or given up): the retry is reported.
    fn finish_reads(&mut self) {
        if let Some(reads) = self.reads.take() {
            self.state = State::AwaitingRetry;
            self.outcome = Some(reads.finish());
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
        if request.round() != self.attempt {
            return;
        }
        if self.state == State::ReadingHolders {
            if request.kind() == RequestKind::HolderRead
                && let Some(reads) = &mut self.reads
                && reads.answer(request.node(), reply, now)
            {
                self.finish_reads();
            }
            return;
        }
        let fencing = self.fenced();
        let expected = match (self.state, request.kind()) {
            (State::Locking, RequestKind::Main) => |reply: Reply, fencing: bool| {
                if fencing {
                    matches!(
                        reply,
                        Reply::AcquiredWithFence { .. } | Reply::TakenWithFence { .. }
                    )
                } else {
                    matches!(
                        reply,
                        Reply::Acquired
                            | Reply::Taken
                            | Reply::TakenUnread
                            | Reply::TakenFor { .. }
                            | Reply::TakenBy { .. }
                    )
                }
            },
            (State::Fencing { .. }, RequestKind::Fence) => |reply: Reply, _: bool| {
                matches!(
                    reply,
                    Reply::FenceRaised { .. } | Reply::NotHeld | Reply::HeldByOther
                )
            },
            // Cleanup replies, and replies of a phase already over, change nothing.
            _ => return,
        };
        let reply = match reply {
            Ok(reply) if expected(reply, fencing) => Ok(reply),
            Ok(other) => Err(NodeFailure::Protocol(format!(
                "unexpected reply {other:?} to a {:?} request",
                request.kind()
            ))),
            Err(failure) => Err(failure),
        };
        self.round.record(request.node(), reply);
        self.decide(now);
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.state == State::ReadingHolders {
            if self
                .reads
                .as_ref()
                .is_some_and(|reads| now >= reads.deadline())
            {
                self.finish_reads();
            }
            return;
        }
        if self.state.is_running() && now >= self.round.timeout_at() {
            self.round.expire();
            self.decide(now);
        }
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        if let Some(reads) = &self.reads {
            return Some(reads.deadline());
        }
        self.state.is_running().then(|| self.round.timeout_at())
    }

    fn poll_outcome(&mut self) -> Option<AcquireEvent> {
        self.outcome.take()
    }
}

impl RenumberNodes for Acquire {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.round.renumber_nodes(perm);
        self.locked.renumber_nodes(perm);
        self.reads.renumber_nodes(perm);
        self.transmits.renumber_nodes(perm);
        self.outcome.renumber_nodes(perm);
    }
}

impl HashRenumbered for Acquire {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the machine must be added here.
        let Self {
            config,
            target,
            token,
            attempt,
            report_holder,
            deadline,
            round,
            locked,
            state: phase,
            reads,
            transmits,
            outcome,
        } = self;
        (config, target, token, attempt, report_holder, deadline).hash(state);
        round.hash_renumbered(perm, state);
        locked.hash_renumbered(perm, state);
        phase.hash(state);
        reads.hash_renumbered(perm, state);
        transmits.hash_renumbered(perm, state);
        outcome.hash_renumbered(perm, state);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::LockKey;
    use crate::{FailureReason, RetryPolicy, RetryWindow};

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
    fn failure_releases_every_node_that_may_hold_the_key_then_retries_with_a_new_token() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(1, ms(10), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Taken), t0);
        m.handle_reply(sets[1].request, Err(NodeFailure::Io("reset".into())), t0);
        let cleanup = drain(&mut m);
        // Node 0 answered *taken*: its SET NX wrote nothing. Node 1's connection broke after
        // the SET may have gone out, and node 2 did not answer: either may hold the key.
        let released: Vec<usize> = cleanup.iter().map(|t| t.node.index()).collect();
        assert_eq!(released, [1, 2], "every node but the one that was taken");
        assert!(cleanup.iter().all(|t| matches!(
            t.command,
            Command::ReleaseIfOwner { token, .. } if token == Token::from_bytes([1; 16])
        )));
        let Some(AcquireEvent::Retry {
            window, failure, ..
        }) = m.poll_outcome()
        else {
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
                .all(|t| t.command.token() == Some(Token::from_bytes([2; 16])))
        );
        // After a round that met another owner, the rounds ask for the holder's time.
        assert!(
            sets.iter()
                .all(|t| matches!(t.command, Command::SetIfAbsentReportHolder { .. }))
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

    /// A lost round is forgotten once decided: two acquisitions that lost alike (the same
    /// verdict at the same instant, their cleanups and outcomes taken) are equal whichever
    /// nodes answered before the verdict, and whatever came after it.
    #[test]
    fn a_lost_round_leaves_nothing_of_who_answered() {
        let config = LockConfig::new(3);
        let t0 = Timestamp::ZERO;
        let lose = |first: usize, second: usize, late: Option<usize>| {
            let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
            let sets = drain(&mut m);
            m.handle_reply(sets[first].request, Ok(Reply::Taken), t0);
            m.handle_reply(sets[second].request, Ok(Reply::Taken), t0);
            drain(&mut m);
            assert!(matches!(m.poll_outcome(), Some(AcquireEvent::Retry { .. })));
            if let Some(late) = late {
                m.handle_reply(sets[late].request, Ok(Reply::Taken), t0);
            }
            m
        };
        let lost = lose(0, 1, None);
        assert_eq!(lost, lose(1, 2, None));
        assert_eq!(lost, lose(2, 0, Some(1)));
    }

    /// Before Redis 7.0 the `SET` does not name the holder: a round lost to it, after which
    /// the client waits, reads the holder on each node that refused (one more request there)
    /// before the retry is reported, so that the waiter can tell the holder's release.
    #[test]
    fn a_lost_round_on_older_servers_reads_the_holders_it_will_wait_for() {
        use crate::{KeyReading, KeyValue, ServerGeneration};
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(3, ms(1_000), ms(0)));
        let t0 = Timestamp::ZERO;
        let holder = Token::from_bytes([9; 16]);
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        // As the driver sends them to Redis 6.2: `SET … NX` without `GET`.
        assert!(sets.iter().all(|t| matches!(
            t.command.clone().for_server(ServerGeneration::BeforeRedis7),
            Command::SetIfAbsentNoGet { .. }
        )));
        // Two refusals out of three lose the round; node 2 has not answered.
        m.handle_reply(sets[0].request, Ok(Reply::TakenUnread), t0);
        m.handle_reply(sets[1].request, Ok(Reply::TakenUnread), t0);
        assert!(m.poll_outcome().is_none(), "the retry waits for the reads");
        let reads = holder_reads(&mut m);
        assert_eq!(reads.len(), 2);
        assert_eq!(
            m.poll_timeout(),
            Some(t0.saturating_add(config.node_timeout()))
        );
        let held = KeyReading {
            value: Some(KeyValue::Token(holder)),
            expires_in: Some(ms(400)),
            fence: None,
        };
        m.handle_reply(reads[0].request, Ok(Reply::Read(held)), t0);
        assert!(m.poll_outcome().is_none());
        m.handle_reply(reads[1].request, Ok(Reply::Read(held)), t0);
        let Some(AcquireEvent::Retry {
            failure,
            free_at,
            window,
            wake_on_release,
        }) = m.poll_outcome()
        else {
            panic!("expected a retry")
        };
        assert!(wake_on_release);
        let named = NodeStatus::Replied(Reply::TakenBy {
            holder,
            remaining: Some(ms(400)),
        });
        assert_eq!(failure.nodes[..2], [named.clone(), named]);
        // The holder's keys expire in 400 ms on a quorum: no later than that for the retry.
        assert_eq!(free_at, Some(t0.saturating_add(ms(400))));
        assert!(window.latest() <= t0.saturating_add(ms(400)));
        assert!(m.retry(Token::from_bytes([2; 16]), t0.saturating_add(ms(400))));
    }

    /// A holder read answered 40 ms after the round was decided tells how long the key has
    /// left *then*: the keys expire 400 ms after the answers, not after the decision. Counted
    /// from the decision, the retry came 40 ms before the keys expired, and its `SET` lost
    /// to them (a round and a retry of the budget spent).
    #[test]
    fn the_holders_remaining_time_counts_from_the_reads_answer() {
        use crate::{KeyReading, KeyValue};
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(3, ms(1_000), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::TakenUnread), t0);
        m.handle_reply(sets[1].request, Ok(Reply::TakenUnread), t0);
        let reads = holder_reads(&mut m);
        let held = KeyReading {
            value: Some(KeyValue::Token(Token::from_bytes([9; 16]))),
            expires_in: Some(ms(400)),
            fence: None,
        };
        let answered = t0.saturating_add(ms(40));
        for read in &reads {
            m.handle_reply(read.request, Ok(Reply::Read(held)), answered);
        }
        let Some(AcquireEvent::Retry { free_at, .. }) = m.poll_outcome() else {
            panic!("expected a retry")
        };
        assert_eq!(free_at, Some(answered.saturating_add(ms(400))));
    }

    /// Two clients start together on Redis 6.2: this one is refused unread by a quorum and
    /// reads the holders; the winner releases in between, so the reads find the keys free,
    /// and its release announced nothing (no waiter had marked its interest). The free keys
    /// count as the release heard: the waiter starts its next round at once, not at its
    /// retry timer. A read that finds a holder still waits for that holder's release.
    #[test]
    fn a_release_between_the_refusal_and_the_holder_read_wakes_the_waiter() {
        use crate::{KeyReading, KeyValue, Waiting};
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(3, ms(2_000), ms(0)));
        let t0 = Timestamp::ZERO;
        let timer = t0.saturating_add(ms(2_000));
        let holder = Token::from_bytes([9; 16]);
        let held = KeyReading {
            value: Some(KeyValue::Token(holder)),
            expires_in: Some(ms(400)),
            fence: None,
        };
        for (readings, early) in [
            ([KeyReading::FREE, KeyReading::FREE], Some(t0)),
            ([held, KeyReading::FREE], None),
        ] {
            let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
            let mut waiting = Waiting::new(&config, key());
            let sets = drain(&mut m);
            m.handle_reply(sets[0].request, Ok(Reply::TakenUnread), t0);
            m.handle_reply(sets[1].request, Ok(Reply::TakenUnread), t0);
            for (read, reading) in holder_reads(&mut m).iter().zip(readings) {
                m.handle_reply(read.request, Ok(Reply::Read(reading)), t0);
            }
            let Some(AcquireEvent::Retry {
                failure,
                wake_on_release,
                ..
            }) = m.poll_outcome()
            else {
                panic!("expected a retry")
            };
            waiting.round_lost(&failure, wake_on_release, timer);
            assert_eq!(
                waiting.next_round(),
                Some(early.unwrap_or(timer)),
                "reads {readings:?}"
            );
            if early.is_none() {
                // The holder's release from node 0 makes a quorum with the free node 1.
                let at = t0.saturating_add(ms(5));
                waiting.notified(
                    NodeId::new(0),
                    key().as_str().as_bytes(),
                    &holder.to_hex(),
                    at,
                );
                assert_eq!(waiting.next_round(), Some(at));
            }
        }
    }

    /// The holder reads among `m`'s transmits (the others are cleanup releases).
    fn holder_reads(m: &mut Acquire) -> Vec<Transmit> {
        drain(m)
            .into_iter()
            .filter(|t| matches!(t.command, Command::ReadHolder { .. }))
            .collect()
    }

    /// Reads that fail or never answer are given up at the node timeout: the retry is
    /// reported without those holders. A round that won a node reads the holders only where
    /// they may show one owner on a quorum (whose release it then wakes on); a split vote
    /// that no read can change reads nothing.
    #[test]
    fn holder_reads_are_given_up_at_the_node_timeout_and_skipped_for_split_votes() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(3, ms(1_000), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::TakenUnread), t0);
        m.handle_reply(sets[1].request, Ok(Reply::TakenUnread), t0);
        let reads = holder_reads(&mut m);
        m.handle_reply(reads[0].request, Err(NodeFailure::TimedOut), t0);
        m.handle_timeout(t0.saturating_add(config.node_timeout() - ms(1)));
        assert!(m.poll_outcome().is_none(), "node 1's read may still answer");
        m.handle_timeout(t0.saturating_add(config.node_timeout()));
        let Some(AcquireEvent::Retry { failure, .. }) = m.poll_outcome() else {
            panic!("expected a retry")
        };
        let unread = NodeStatus::Replied(Reply::TakenUnread);
        assert_eq!(failure.nodes[..2], [unread.clone(), unread]);

        // Won node 0, refused unread by the other two: the reads tell whether one owner
        // holds both (a quorum), and so whether its release is worth waking for.
        for (holders, wakes) in [([7, 7], true), ([7, 8], false)] {
            let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
            let sets = drain(&mut m);
            m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
            m.handle_reply(sets[1].request, Ok(Reply::TakenUnread), t0);
            m.handle_reply(sets[2].request, Ok(Reply::TakenUnread), t0);
            assert!(m.poll_outcome().is_none(), "the retry waits for the reads");
            let reads = holder_reads(&mut m);
            assert_eq!(reads.len(), 2);
            for (read, holder) in reads.iter().zip(holders) {
                let held = crate::KeyReading {
                    value: Some(crate::KeyValue::Token(Token::from_bytes([holder; 16]))),
                    expires_in: Some(ms(400)),
                    fence: None,
                };
                m.handle_reply(read.request, Ok(Reply::Read(held)), t0);
            }
            let Some(AcquireEvent::Retry {
                wake_on_release, ..
            }) = m.poll_outcome()
            else {
                panic!("expected a retry")
            };
            assert_eq!(wake_on_release, wakes, "holders {holders:?}");
        }

        // Four nodes, two won and two refused: no owner can hold a quorum of three.
        let config = LockConfig::new(4).with_retry(RetryPolicy::new(3, ms(1_000), ms(0)));
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[2].request, Ok(Reply::TakenUnread), t0);
        m.handle_reply(sets[3].request, Ok(Reply::TakenUnread), t0);
        assert!(matches!(
            m.poll_outcome(),
            Some(AcquireEvent::Retry {
                wake_on_release: false,
                ..
            })
        ));
        assert!(holder_reads(&mut m).is_empty());
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

    /// A round numbers its requests: past `MAX_ROUNDS` the numbers would reach the waiting
    /// marks' (a reply then routed to the wait) and then stop moving (a late reply of the
    /// round before counted as a vote of the next). Days of back-to-back rounds of one
    /// acquisition with a deadline and no retry delay; it fails there instead.
    #[test]
    fn an_acquisition_ends_before_its_round_numbers_run_out() {
        let config = LockConfig::new(1).with_retry(RetryPolicy::new(0, ms(0), ms(0)));
        let t0 = Timestamp::ZERO;
        let far = t0.saturating_add(Duration::from_secs(86_400));
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0).waiting_until(far);
        m.attempt = MAX_ROUNDS - 1;
        let set = drain(&mut m).remove(0);
        let set = RequestId::new(MAX_ROUNDS - 1, set.node, set.request.kind());
        m.handle_reply(set, Ok(Reply::Taken), t0);
        assert!(matches!(m.poll_outcome(), Some(AcquireEvent::Retry { .. })));
        assert!(m.retry(Token::from_bytes([2; 16]), t0));
        assert_eq!(m.attempt(), MAX_ROUNDS);
        let set = drain(&mut m).remove(0);
        m.handle_reply(set.request, Ok(Reply::Taken), t0);
        assert!(matches!(m.poll_outcome(), Some(AcquireEvent::Failed(_))));
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

    /// A grant not yet taken by the driver (its outcome not polled) is the driver's only
    /// record of the keys a quorum set: cancelled then, it was dropped with them left to
    /// their TTL. Now a cancel releases them like a running round's.
    #[test]
    fn cancel_releases_a_grant_not_yet_polled() {
        let config = LockConfig::new(3);
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Acquired), t0);
        m.cancel();
        let releases = drain(&mut m);
        assert_eq!(releases.len(), 3, "{releases:?}");
        assert!(
            releases
                .iter()
                .all(|t| matches!(t.command, Command::ReleaseIfOwner { .. }))
        );
        assert!(m.poll_outcome().is_none());
    }

    #[test]
    fn fencing_raises_one_above_the_highest_counter_before_granting() {
        let config = LockConfig::new(3)
            .with_fencing(true)
            .with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        assert!(
            sets.iter()
                .all(|t| matches!(t.command, Command::SetIfAbsentReadFence { .. }))
        );
        m.handle_reply(
            sets[0].request,
            Ok(Reply::AcquiredWithFence { counter: 4 }),
            t0,
        );
        m.handle_reply(
            sets[1].request,
            Ok(Reply::TakenWithFence { counter: 9 }),
            t0,
        );
        m.handle_reply(
            sets[2].request,
            Ok(Reply::AcquiredWithFence { counter: 7 }),
            t0,
        );
        assert!(
            m.poll_outcome().is_none(),
            "no grant before the counter is raised"
        );
        let raises = drain(&mut m);
        assert_eq!(raises.len(), 3);
        assert!(
            raises
                .iter()
                .all(|t| matches!(t.command, Command::RaiseFence { fence: 10, .. }))
        );
        // A late phase-1 reply changes nothing.
        m.handle_reply(
            sets[1].request,
            Ok(Reply::AcquiredWithFence { counter: 99 }),
            t0,
        );
        let t1 = t0.saturating_add(ms(3));
        m.handle_reply(
            raises[0].request,
            Ok(Reply::FenceRaised { counter: 10 }),
            t1,
        );
        m.handle_reply(
            raises[2].request,
            Ok(Reply::FenceRaised { counter: 10 }),
            t1,
        );
        let Some(AcquireEvent::Acquired(grant)) = m.poll_outcome() else {
            panic!()
        };
        assert_eq!(grant.fence, Some(10));
        assert_eq!(grant.started_at, t0, "validity covers both phases");
        assert_eq!(grant.decided_at, t1);
        assert_eq!(
            grant.nodes[1],
            NodeStatus::Replied(Reply::TakenWithFence { counter: 9 })
        );
    }

    #[test]
    fn only_nodes_holding_the_key_count_in_the_fence_phase() {
        let config = LockConfig::new(5)
            .with_fencing(true)
            .with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        for t in &sets[..3] {
            m.handle_reply(t.request, Ok(Reply::AcquiredWithFence { counter: 0 }), t0);
        }
        let raises = drain(&mut m);
        assert_eq!(raises.len(), 5, "every node gets the raise");
        // Nodes 3 and 4 never locked for us: their raises do not make a quorum with node 0.
        m.handle_reply(raises[0].request, Ok(Reply::FenceRaised { counter: 1 }), t0);
        m.handle_reply(raises[3].request, Ok(Reply::FenceRaised { counter: 1 }), t0);
        m.handle_reply(raises[4].request, Ok(Reply::FenceRaised { counter: 1 }), t0);
        let early = m.poll_outcome();
        assert!(early.is_none(), "{early:?}");
        m.handle_reply(raises[1].request, Err(NodeFailure::TimedOut), t0);
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!("two holders can no longer make a quorum of three")
        };
        assert_eq!(f.last_round.reason, FailureReason::Unavailable);
    }

    #[test]
    fn a_node_that_lost_our_key_does_not_raise_for_us() {
        let config = LockConfig::new(3)
            .with_fencing(true)
            .with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        for t in &sets {
            m.handle_reply(t.request, Ok(Reply::AcquiredWithFence { counter: 0 }), t0);
        }
        let raises = drain(&mut m);
        assert!(
            raises
                .iter()
                .all(|t| t.command.token() == Some(Token::from_bytes([1; 16])))
        );
        m.handle_reply(raises[0].request, Ok(Reply::FenceRaised { counter: 1 }), t0);
        m.handle_reply(raises[1].request, Ok(Reply::HeldByOther), t0);
        m.handle_reply(raises[2].request, Ok(Reply::NotHeld), t0);
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!()
        };
        assert_eq!(f.last_round.reason, FailureReason::Contended);
    }

    #[test]
    fn a_higher_counter_in_phase_two_loses_the_round_and_cleans_up() {
        let config = LockConfig::new(3)
            .with_fencing(true)
            .with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        for t in &sets[..2] {
            m.handle_reply(t.request, Ok(Reply::AcquiredWithFence { counter: 0 }), t0);
        }
        let raises = drain(&mut m);
        m.handle_reply(raises[0].request, Ok(Reply::FenceRaised { counter: 5 }), t0);
        m.handle_reply(raises[1].request, Ok(Reply::FenceRaised { counter: 5 }), t0);
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!()
        };
        assert_eq!(f.last_round.reason, FailureReason::Contended);
        let cleanup = drain(&mut m);
        assert_eq!(cleanup.len(), 3, "each node took the key in phase 1");
        assert!(
            cleanup
                .iter()
                .all(|t| matches!(t.command, Command::ReleaseIfOwner { .. }))
        );
    }

    #[test]
    fn the_fence_phase_cannot_outlive_the_validity() {
        let config = LockConfig::new(3)
            .with_fencing(true)
            .with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        for t in &sets[..2] {
            m.handle_reply(t.request, Ok(Reply::AcquiredWithFence { counter: 0 }), t0);
        }
        let raises = drain(&mut m);
        let late = t0.saturating_add(config.ttl());
        m.handle_reply(
            raises[0].request,
            Ok(Reply::FenceRaised { counter: 1 }),
            late,
        );
        m.handle_reply(
            raises[1].request,
            Ok(Reply::FenceRaised { counter: 1 }),
            late,
        );
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!()
        };
        assert_eq!(f.last_round.reason, FailureReason::ValidityExhausted);
        assert_eq!(f.last_round.started_at, t0);
    }

    #[test]
    fn refused_credentials_on_too_many_nodes_are_not_retried() {
        let config = LockConfig::new(3);
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        let denied = || Err(NodeFailure::Denied("WRONGPASS".into()));
        m.handle_reply(sets[0].request, denied(), t0);
        m.handle_reply(sets[1].request, denied(), t0);
        let Some(AcquireEvent::Failed(f)) = m.poll_outcome() else {
            panic!("a denial is final, whatever the retry policy")
        };
        assert!(f.last_round.is_denied());
        assert_eq!(f.attempts, 1);

        // One refusal among failures of another kind leaves room for a retry.
        let mut m = Acquire::new(&config, key(), Token::from_bytes([2; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, denied(), t0);
        m.handle_reply(sets[1].request, Err(NodeFailure::Refused), t0);
        assert!(matches!(m.poll_outcome(), Some(AcquireEvent::Retry { .. })));
    }

    #[test]
    fn a_set_that_was_never_sent_needs_no_cleanup() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::no_retry());
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Err(NodeFailure::Unresponsive), t0);
        m.handle_reply(sets[1].request, Err(NodeFailure::TimedOut), t0);
        let cleanup: Vec<usize> = drain(&mut m).iter().map(|t| t.node.index()).collect();
        // Node 0 refused before sending; node 1 timed out (its SET may still land); node 2
        // has not answered.
        assert_eq!(cleanup, [1, 2]);
        assert!(matches!(m.poll_outcome(), Some(AcquireEvent::Failed(_))));
    }

    #[test]
    fn a_waiting_round_learns_when_the_holder_expires() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(5, ms(100), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        for t in &sets {
            m.handle_reply(t.request, Ok(Reply::Taken), t0);
        }
        // Decided at the second *taken*: only the node that had not answered may hold ours.
        let cleanup: Vec<usize> = drain(&mut m).iter().map(|t| t.node.index()).collect();
        assert_eq!(cleanup, [2]);
        let Some(AcquireEvent::Retry { free_at: None, .. }) = m.poll_outcome() else {
            panic!("the first round cannot know")
        };
        assert!(m.retry(Token::from_bytes([2; 16]), t0));
        let sets = drain(&mut m);
        let taken = |n| Ok(Reply::TakenFor { remaining: ms(n) });
        m.handle_reply(sets[2].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[0].request, taken(40), t0);
        m.handle_reply(sets[1].request, taken(70), t0);
        let Some(AcquireEvent::Retry { free_at, .. }) = m.poll_outcome() else {
            panic!()
        };
        // Quorum two of three, node 2 ours: one taken key may stay, so the first to expire
        // frees it. (Had node 2 not answered, it could hold a key too:
        // `RoundFailure::free_after` then waits for both known keys.)
        assert_eq!(free_at, Some(t0.saturating_add(ms(40))));
    }

    #[test]
    fn a_waiter_never_sleeps_past_the_holders_expiry() {
        let config = LockConfig::new(1).with_retry(RetryPolicy::new(5, ms(100), ms(100)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        // Answers the round's SET with `reply` and returns the retry window that follows.
        let mut lose = |reply: Reply, token: u8| {
            let set = drain(&mut m);
            m.handle_reply(set[0].request, Ok(reply), t0);
            let Some(AcquireEvent::Retry { window, .. }) = m.poll_outcome() else {
                panic!("a retry")
            };
            m.retry(Token::from_bytes([token; 16]), t0);
            window
        };
        let at = |n| t0.saturating_add(ms(n));
        // Nothing known about the holder: the policy's window.
        assert_eq!(lose(Reply::Taken, 2), RetryWindow::new(at(100), ms(100)));
        // The holder's key expires before the policy's delay: start when it does.
        let expires_first = Reply::TakenFor { remaining: ms(30) };
        assert_eq!(lose(expires_first, 3), RetryWindow::new(at(30), ms(0)));
        // Inside the window: cut there.
        let expires_within = Reply::TakenFor { remaining: ms(150) };
        assert_eq!(lose(expires_within, 4), RetryWindow::new(at(100), ms(50)));
    }

    #[test]
    fn a_round_that_won_a_node_and_read_no_owner_does_not_wake_on_a_release() {
        let config = LockConfig::new(3).with_retry(RetryPolicy::new(5, ms(100), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Taken), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Taken), t0);
        let Some(AcquireEvent::Retry {
            wake_on_release, ..
        }) = m.poll_outcome()
        else {
            panic!()
        };
        assert!(
            wake_on_release,
            "another owner holds it: its release frees it"
        );
        // The cleanup release of the node that had not answered.
        assert_eq!(drain(&mut m).len(), 1);
        m.retry(Token::from_bytes([2; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Taken), t0);
        m.handle_reply(sets[2].request, Ok(Reply::Taken), t0);
        let Some(AcquireEvent::Retry {
            wake_on_release, ..
        }) = m.poll_outcome()
        else {
            panic!()
        };
        assert!(
            !wake_on_release,
            "won a node, no owner read on a quorum: waits for its jittered start"
        );
    }

    /// The round that lost the usual race of two clients starting together won a node, but
    /// the holders it read show one owner on a quorum: that owner's release frees the
    /// resource, so the round wakes on it. A round whose refusals name no owner with a quorum
    /// (a split vote) keeps to its jittered start.
    #[test]
    fn a_round_that_won_a_node_wakes_on_the_release_of_an_owner_holding_a_quorum() {
        let holder = Token::from_bytes([9; 16]);
        let other = Token::from_bytes([8; 16]);
        let by = |holder| {
            Ok(Reply::TakenBy {
                holder,
                remaining: Some(ms(400)),
            })
        };
        // Three nodes: ours, then the holder's on the other two (a quorum).
        for (replies, wakes) in [
            (vec![Ok(Reply::Acquired), by(holder), by(holder)], true),
            (vec![Ok(Reply::Acquired), by(holder), by(other)], false),
        ] {
            let config = LockConfig::new(3).with_retry(RetryPolicy::new(5, ms(100), ms(0)));
            let t0 = Timestamp::ZERO;
            let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
            let sets = drain(&mut m);
            for (set, reply) in sets.iter().zip(replies) {
                m.handle_reply(set.request, reply, t0);
            }
            let Some(AcquireEvent::Retry {
                wake_on_release, ..
            }) = m.poll_outcome()
            else {
                panic!("expected a retry")
            };
            assert_eq!(wake_on_release, wakes, "one owner on a quorum: {wakes}");
        }
        // Five nodes: two ours, three the holder's (a quorum of five).
        let config = LockConfig::new(5).with_retry(RetryPolicy::new(5, ms(100), ms(0)));
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
        let sets = drain(&mut m);
        m.handle_reply(sets[0].request, Ok(Reply::Acquired), t0);
        m.handle_reply(sets[1].request, Ok(Reply::Acquired), t0);
        for set in &sets[2..] {
            m.handle_reply(set.request, by(holder), t0);
        }
        assert!(matches!(
            m.poll_outcome(),
            Some(AcquireEvent::Retry {
                wake_on_release: true,
                ..
            })
        ));
    }

    proptest::proptest! {
        /// Whatever the nodes answer (won, taken by one of three owners, taken unnamed,
        /// timed out), a lost round wakes on a release exactly when it lost to others and
        /// won no node or read one owner on a quorum; and then that owner's release, heard
        /// from the nodes it held, starts the next round at once.
        #[test]
        fn a_lost_round_wakes_on_the_release_of_an_owner_holding_a_quorum(
            answers in proptest::collection::vec(0..6u8, 1..8),
        ) {
            let config = LockConfig::new(answers.len())
                .with_retry(RetryPolicy::new(5, ms(100), ms(0)));
            let t0 = Timestamp::ZERO;
            let owner = |n: u8| Token::from_bytes([n; 16]);
            let mut m = Acquire::new(&config, key(), Token::from_bytes([100; 16]), t0);
            for (set, &answer) in drain(&mut m).iter().zip(&answers) {
                let reply = match answer {
                    0 => Ok(Reply::Acquired),
                    1..=3 => Ok(Reply::TakenBy { holder: owner(answer), remaining: None }),
                    4 => Ok(Reply::Taken),
                    _ => Err(NodeFailure::TimedOut),
                };
                m.handle_reply(set.request, reply, t0);
            }
            m.handle_timeout(t0.saturating_add(config.node_timeout()));
            let Some(AcquireEvent::Retry { failure, wake_on_release, .. }) = m.poll_outcome() else {
                return Ok(()); // Won.
            };
            let quorum = crate::quorum(answers.len());
            let held = |n: u8| {
                failure.nodes.iter().filter(|s| s.reply().and_then(Reply::holder) == Some(owner(n))).count()
            };
            let owner_with_quorum = (1..=3).find(|&n| held(n) >= quorum);
            let won_any = failure.nodes.iter().any(|s| s.reply() == Some(Reply::Acquired));
            let expected = failure.reason == FailureReason::Contended
                && (!won_any || owner_with_quorum.is_some());
            proptest::prop_assert_eq!(wake_on_release, expected, "{:?}", failure.nodes);
            if let Some(n) = owner_with_quorum {
                let mut waiting = crate::Waiting::new(&config, key());
                waiting.round_lost(&failure, wake_on_release, t0.saturating_add(ms(100)));
                for (index, status) in failure.nodes.iter().enumerate() {
                    if status.reply().and_then(Reply::holder) == Some(owner(n)) {
                        waiting.notified(NodeId::new(index), b"redlock:r", &owner(n).to_hex(), t0);
                    }
                }
                proptest::prop_assert!(waiting.round_due(t0), "the owner's release wakes the waiter");
            }
        }
    }

    #[test]
    fn a_wait_budget_retries_until_its_deadline_whatever_the_count() {
        let config = LockConfig::new(1).with_retry(RetryPolicy::new(1, ms(10), ms(0)));
        let t0 = Timestamp::ZERO;
        let deadline = t0.saturating_add(ms(25));
        let mut m =
            Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0).waiting_until(deadline);
        let mut now = t0;
        let mut starts = vec![now];
        loop {
            let set = drain(&mut m);
            m.handle_reply(set[0].request, Ok(Reply::Taken), now);
            match m.poll_outcome() {
                Some(AcquireEvent::Retry { window, .. }) => {
                    assert!(window.latest() <= deadline);
                    now = window.earliest();
                    starts.push(now);
                    assert!(m.retry(Token::from_bytes([2; 16]), now));
                }
                Some(AcquireEvent::Failed(failure)) => {
                    assert_eq!(failure.attempts, 4);
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        // Three rounds 10 ms apart, then one last at the deadline, then no more: the policy's
        // single retry is not the limit.
        let ms_of = |t: &Timestamp| t.saturating_duration_since(t0).as_millis();
        assert_eq!(
            starts.iter().map(ms_of).collect::<Vec<_>>(),
            [0, 10, 20, 25]
        );
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
