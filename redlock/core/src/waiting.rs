//! The wait between an acquisition's rounds: when a waiter may start a round *before* its
//! retry timer, because the holder it lost to has released.
//!
//! The release scripts `PUBLISH` the released token on the channel named after the lock key.
//! Anyone allowed to publish there can send anything on that channel: another application,
//! a hostile user, or a lease of the same name in *another database* of the same server
//! (Redis Pub/Sub channels are global to a server: `SELECT` does not partition them, so
//! `redis://host/1` and `redis://host/0` share the channel `redlock:report`). If every
//! message woke a waiter into a round, a flood of messages would turn each waiter's few
//! rounds per second into hundreds, each a request per node.
//!
//! So a waiter trusts only what it saw itself: its lost round read, in the same request as
//! each node's `SET NX`, the token the key held there ([`Reply::TakenBy`]). A notification
//! from node `n` frees node `n` only if it carries that node's holder token; the waiter
//! starts an early round once a quorum of nodes is freed, and at most one early round per
//! retry delay whatever arrives. Everything else (junk, tokens nobody holds, a holder whose
//! token the round could not read, such as every holder of a multi-resource round, whose
//! script does not say who holds a key, a notification lost while a subscription was down) leaves
//! the waiter on its timer: the start the driver picked in the retry window, which already
//! ends when the holder's keys expire.
//!
//! A release publishes only where a waiter asked to be told ([`Waiting::marking`]): after a
//! lost round, the waiter marks its interest on each node where it saw a holder (a field in
//! a hash beside the lock key, [`LockKey::wait_key`](super::LockKey::wait_key)), and the
//! release scripts delete that hash with the key and publish only if it was there, so that
//! a release nobody waits for costs the node no `PUBLISH`. A mark serves one release: every
//! waiter marked there is told by it, and one that loses its next round marks again. The
//! mark reads the lock key in the same atomic step: a release that landed between the lost
//! round and the mark, and so announced nothing, is seen there (the key free, or held by
//! another token), and frees that node as its notification would have. On servers before
//! Redis 7.0 the holder read that follows a refusal does the same for the release that
//! lands before it: a key found free there is a freed node from the start of the wait. The
//! waiter removes its marks when its acquisition ends.
//!
//! Nothing here decides anything about the lease: an early round is an ordinary quorum
//! round. A notification (or a mark) that is lost, late, wrong or forged costs time, and at
//! most one round per retry delay, never safety.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::command::RequestKind;
use super::hash_renumbered::{HashRenumbered, hash_permuted};
use super::renumber::{NodePermutation, RenumberNodes};
use super::{
    Command, LockConfig, LockKey, NodeFailure, NodeId, Reply, RequestId, RoundFailure, Target,
    Timestamp, Token, Transmit,
};

/// How many notifications heard while a round runs are kept for when it is decided; older
/// ones are dropped. A genuine release lands within a round trip of the round, so only a
/// flood pushes it out, and then the waiter keeps to its timer.
const HEARD_DURING_A_ROUND: usize = 32;

/// The bit set in the round number of every request a [`Waiting`] sends (its marks): no
/// acquisition, extension or release ever numbers a round that high, so a driver that feeds
/// every reply of an acquisition to one place can tell the marks' apart
/// ([`Waiting::sent`]).
pub(crate) const MARK_ROUNDS: u32 = 1 << 31;

/// The wait between one acquisition's rounds, as a value: fed the lost rounds, the
/// notifications and the time, it says when the next round starts. Pure and deterministic:
/// no clock, no I/O, no randomness (the driver picks the timer in the retry window).
///
/// A driver keeps one per acquisition and calls, in any order the events come:
///
/// - [`round_lost`](Self::round_lost) after each [`AcquireEvent::Retry`](super::AcquireEvent::Retry),
///   with the round's [`RoundFailure`], its `wake_on_release` and the start it picked in the
///   window (the *timer*);
/// - [`notified`](Self::notified) for each message of a node's subscription (the node, the
///   channel, the payload), at any time, including while a round runs;
/// - [`released_here`](Self::released_here) when the driver's own client released a lease
///   on the target (it knows the token: no notification needed);
/// - [`round_started`](Self::round_started) when it starts the next round.
///
/// and asks [`next_round`](Self::next_round) ("when?") or [`round_due`](Self::round_due)
/// ("now?"). Between two calls, waiting until `next_round` is enough: only a call can move
/// it, and only earlier.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let ms = |n| Timestamp::ZERO.saturating_add(Duration::from_millis(n));
/// let config = LockConfig::new(3); // retry delay 100 ms
/// let key = LockKey::new("redlock:", "report")?;
/// let mut waiting = Waiting::new(&config, key.clone());
///
/// // The first round finds the key taken by `holder` on nodes 0 and 1 (lost: node 2 is not
/// // waited for)...
/// let holder = Token::from_bytes([7; 16]);
/// let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), ms(0));
/// for set in std::iter::from_fn(|| acquire.poll_transmit()).collect::<Vec<_>>() {
///     let taken = Reply::TakenBy { holder, remaining: None };
///     acquire.handle_reply(set.request, Ok(taken), ms(1));
/// }
/// let Some(AcquireEvent::Retry { failure, wake_on_release, .. }) = acquire.poll_outcome()
/// else { panic!() };
/// // ...so it waits for its timer, picked in the retry window: 151 ms.
/// waiting.round_lost(&failure, wake_on_release, ms(151));
/// assert_eq!(waiting.next_round(), Some(ms(151)));
///
/// // A message that is not the holder's release changes nothing.
/// waiting.notified(NodeId::new(0), b"redlock:report", b"junk", ms(10));
/// waiting.notified(NodeId::new(1), b"redlock:report", &Token::from_bytes([9; 16]).to_hex(), ms(10));
/// assert!(!waiting.round_due(ms(10)));
///
/// // The holder's release, heard from a quorum of nodes: a round now.
/// waiting.notified(NodeId::new(0), b"redlock:report", &holder.to_hex(), ms(20));
/// assert!(!waiting.round_due(ms(20)));
/// waiting.notified(NodeId::new(1), b"redlock:report", &holder.to_hex(), ms(21));
/// assert!(waiting.round_due(ms(21)));
/// waiting.round_started(ms(21));
/// # Ok::<(), ResourceError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiting {
    target: Target,
    quorum: usize,
    /// The least time between two early rounds: the retry delay, or the jitter when that is
    /// longer (a policy of jitter alone still spaces its early rounds).
    spacing: Duration,
    /// When the latest early round started.
    last_early: Option<Timestamp>,
    state: State,
    /// The waiting marks, when the driver asked for them ([`Self::marking`]).
    marks: Option<Marks>,
}

/// A waiter's marks on the nodes: the release scripts publish only where a mark is (and
/// delete the marks), so a waiter that wants to be told marks every node where it saw a
/// holder, after each lost round.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Marks {
    key: LockKey,
    waiter: Token,
    ttl: Duration,
    /// Counts the lost rounds the marks were sent after: a reply to an older batch is about
    /// holders the waiter no longer waits for, and is ignored.
    batch: u32,
    /// Which nodes were ever marked, by [`NodeId::index`]: those to unmark at the end.
    marked: Vec<bool>,
    /// Commands not yet polled.
    queue: VecDeque<Transmit>,
    /// Once the acquisition ended: no mark is sent again.
    stopped: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum State {
    /// A round runs: what is heard meanwhile is kept until it is decided (a release that
    /// lands during the round must still count).
    Running {
        heard: Vec<Heard>,
        /// When it is an early round: the release that woke it.
        early: Option<EarlyRound>,
    },
    /// Between rounds.
    Between {
        /// The start the driver picked in the retry window.
        timer: Timestamp,
        /// Whether the lost round allows an early round at all
        /// ([`AcquireEvent::Retry::wake_on_release`](super::AcquireEvent::Retry)).
        wake_on_release: bool,
        /// What the lost round saw on each node, by [`NodeId::index`]; empty when it
        /// allows no early round.
        nodes: Vec<Seen>,
        /// The early start, once a quorum of nodes is freed.
        early: Option<Timestamp>,
        /// Every holder the lost round saw, sorted, once each.
        seen: Vec<Token>,
    },
}

/// An early round while it runs: the holders the round before it saw, and the previous
/// early start, which counts again if the round finds the key in new hands (see
/// [`Waiting::round_lost`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EarlyRound {
    seen: Vec<Token>,
    before: Option<Timestamp>,
}

impl Marks {
    /// Queues a mark on every node where the lost round saw a holder (`nodes`), in a new
    /// batch; the marks of an older batch still queued are dropped (the new ones replace
    /// them).
    fn mark(&mut self, nodes: &[Seen]) {
        self.batch = self.batch.wrapping_add(1) & !MARK_ROUNDS;
        self.queue
            .retain(|t| t.request.kind() == RequestKind::Cleanup);
        if self.marked.len() < nodes.len() {
            self.marked.resize(nodes.len(), false);
        }
        for (index, seen) in nodes.iter().enumerate() {
            if !matches!(seen, Seen::Holder(_)) {
                continue;
            }
            let node = NodeId::new(index);
            self.marked[index] = true;
            self.queue.push_back(Transmit {
                request: RequestId::new(MARK_ROUNDS | self.batch, node, RequestKind::Main),
                node,
                command: Command::MarkWaiting {
                    key: self.key.clone(),
                    waiter: self.waiter,
                    ttl: self.ttl,
                },
            });
        }
    }
}

/// What a lost round saw on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Seen {
    /// The key held this token.
    Holder(Token),
    /// The key was taken by a value the round could not read or that is not a token, or
    /// the node did not answer: nothing but this client's own release can free it.
    Unknown,
    /// The holder's release was heard from this node (or seen: a mark or a holder read
    /// found the key free).
    Freed,
}

/// A notification kept while a round runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Heard {
    Notified { node: NodeId, token: Token },
    ReleasedHere { token: Token },
}

impl Waiting {
    /// The wait between the rounds of an acquisition of `target` under `config`: its quorum,
    /// and its retry policy's delay (or jitter, when longer) as the least time between two
    /// early rounds. The first round is taken to be running.
    pub fn new(config: &LockConfig, target: impl Into<Target>) -> Self {
        Self {
            target: target.into(),
            quorum: config.quorum(),
            spacing: config.retry().delay().max(config.retry().jitter()),
            last_early: None,
            state: State::Running {
                heard: Vec::new(),
                early: None,
            },
            marks: None,
        }
    }

    /// Marks this waiter's interest on the nodes ([`Command::MarkWaiting`], field `waiter`,
    /// living at least `ttl`), so that their release scripts announce the releases it waits
    /// for: after each lost round that may wake on a release, on every node where the round
    /// saw a holder's token (a notification can free no other node). Release scripts publish
    /// only where some waiter's mark is. Only for a single key: a multi-resource round never
    /// reads its holders, so no notification could wake it.
    ///
    /// The driver sends what [`poll_transmit`](Self::poll_transmit) yields, hands the
    /// replies to [`handle_reply`](Self::handle_reply), and calls [`stop`](Self::stop) when
    /// the acquisition ends (granted, failed or abandoned) to remove the marks. A mark that
    /// is lost, late or never removed costs a timer's wait or a needless `PUBLISH` until its
    /// expiry, never safety.
    #[must_use]
    pub fn marking(mut self, waiter: Token, ttl: Duration) -> Self {
        if let Target::One(key) = &self.target {
            self.marks = Some(Marks {
                key: key.clone(),
                waiter,
                ttl,
                batch: 0,
                marked: Vec::new(),
                queue: VecDeque::new(),
                stopped: false,
            });
        }
        self
    }

    /// Whether `request` is one a [`Waiting`] sent (a mark or its removal), not one of an
    /// acquisition's rounds: its reply goes to [`handle_reply`](Self::handle_reply).
    pub fn sent(request: RequestId) -> bool {
        (request.round() & MARK_ROUNDS) != 0
    }

    /// The next mark (or unmark) to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.marks.as_mut()?.queue.pop_front()
    }

    /// The reply to the mark `request`, received at `now`. A mark that found the key
    /// free, or held by another token than the holder the lost round saw there, means that
    /// holder released (or its key expired) before the mark was in place, when its release
    /// announced nothing: the node counts as freed, as if its notification had come.
    /// Anything else (a failure, the same holder, a reply to an older batch) changes nothing.
    pub fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        let Some(marks) = &self.marks else {
            return;
        };
        if request.round() != (MARK_ROUNDS | marks.batch) || request.kind() != RequestKind::Main {
            return;
        }
        let Ok(reply) = reply else {
            return;
        };
        let node = request.node();
        let State::Between { nodes, .. } = &self.state else {
            return;
        };
        let Some(Seen::Holder(seen)) = nodes.get(node.index()).copied() else {
            return;
        };
        let gone = match reply {
            Reply::NotHeld | Reply::Taken => true,
            Reply::TakenBy { holder, .. } => holder != seen,
            _ => false,
        };
        if gone {
            self.free(Some(node), seen, now);
        }
    }

    /// The acquisition ends (granted, failed or abandoned): queues the removal of its
    /// marks ([`Command::UnmarkWaiting`]) on every node it marked, and sends no mark again.
    pub fn stop(&mut self) {
        let Some(marks) = self.marks.as_mut().filter(|marks| !marks.stopped) else {
            return;
        };
        marks.queue.clear();
        marks.batch = marks.batch.wrapping_add(1) & !MARK_ROUNDS;
        let marked = std::mem::take(&mut marks.marked);
        for (index, _) in marked.iter().enumerate().filter(|(_, marked)| **marked) {
            let node = NodeId::new(index);
            marks.queue.push_back(Transmit {
                request: RequestId::new(MARK_ROUNDS | marks.batch, node, RequestKind::Cleanup),
                node,
                command: Command::UnmarkWaiting {
                    key: marks.key.clone(),
                    waiter: marks.waiter,
                },
            });
        }
        marks.stopped = true;
    }

    /// The round that was running is lost ([`AcquireEvent::Retry`](super::AcquireEvent::Retry)):
    /// the next one starts at `timer` (the start the driver picked in the event's window), or
    /// earlier once the holders `failure` saw have released a quorum of nodes, if
    /// `wake_on_release`. Notifications heard while the round ran count now.
    ///
    /// An early round lost because the key is in new hands on a quorum of nodes (tokens the
    /// round before it never saw) does not hold the next early round back:
    /// the release it woke for was real, and the lease went to a waiter quicker than this
    /// one (most often another process's next in line, which starts without the nodes'
    /// notification). Held back a retry delay, this waiter would run its next round at a
    /// moment unrelated to any release, and lose it to whoever holds the key then. A forged
    /// or replayed release of a holder that still holds finds the same hands, and the spacing
    /// stands: only a real change of hands, one per release, lets a round through early.
    pub fn round_lost(&mut self, failure: &RoundFailure, wake_on_release: bool, timer: Timestamp) {
        let (heard, early_round) = match &mut self.state {
            State::Running { heard, early } => (std::mem::take(heard), early.take()),
            State::Between { .. } => (Vec::new(), None),
        };
        let nodes: Vec<Seen> = failure
            .nodes
            .iter()
            .map(|status| match status.reply() {
                Some(reply) if reply.is_read_free() => Seen::Freed,
                reply => reply
                    .and_then(Reply::holder)
                    .map_or(Seen::Unknown, Seen::Holder),
            })
            .collect();
        if let Some(marks) = &mut self.marks
            && wake_on_release
            && !marks.stopped
        {
            marks.mark(&nodes);
        }
        if let Some(early_round) = early_round
            && in_new_hands(&nodes, &early_round.seen, self.quorum)
        {
            self.last_early = early_round.before;
        }
        let mut seen: Vec<Token> = nodes
            .iter()
            .filter_map(|seen| match seen {
                Seen::Holder(holder) => Some(*holder),
                _ => None,
            })
            .collect();
        seen.sort_unstable();
        seen.dedup();
        self.state = State::Between {
            timer,
            wake_on_release,
            // Without an early round nothing reads it again: kept, it would only tell apart
            // waits that behave alike.
            nodes: if wake_on_release { nodes } else { Vec::new() },
            early: None,
            seen,
        };
        // Nodes whose holder read found the key free are freed already.
        self.wake_if_a_quorum_is_freed(failure.decided_at);
        // Heard before the round was decided: the earliest instant it can count is now,
        // which `decided_at` is.
        for heard in heard {
            match heard {
                Heard::Notified { node, token } => self.free(Some(node), token, failure.decided_at),
                Heard::ReleasedHere { token } => self.free(None, token, failure.decided_at),
            }
        }
    }

    /// Node `node` published `payload` on `channel` at `now`. Counts only as the release of
    /// the token the lost round saw holding the key there, on one of the target's keys; any
    /// other message (not a token, another channel, another token) is ignored.
    pub fn notified(&mut self, node: NodeId, channel: &[u8], payload: &[u8], now: Timestamp) {
        let ours = self
            .target
            .keys()
            .iter()
            .any(|key| key.as_str().as_bytes() == channel);
        let Some(token) = Token::from_hex(payload).filter(|_| ours) else {
            return;
        };
        self.hear(Heard::Notified { node, token }, now);
    }

    /// The driver's own client released its lease with `token` on (some of) the target's
    /// keys at `now`. Trusted, as the client knows what it released: frees every node whose
    /// holder was `token`, and every node whose holder the round could not read.
    pub fn released_here(&mut self, token: Token, now: Timestamp) {
        self.hear(Heard::ReleasedHere { token }, now);
    }

    /// The next round starts at `now`; an early one (before the timer) is remembered, so
    /// that the next early round is at least a retry delay later.
    pub fn round_started(&mut self, now: Timestamp) {
        let mut early = None;
        if let State::Between { timer, seen, .. } = &mut self.state
            && now < *timer
        {
            early = Some(EarlyRound {
                seen: std::mem::take(seen),
                before: self.last_early,
            });
            self.last_early = Some(now);
        }
        self.state = State::Running {
            heard: Vec::new(),
            early,
        };
    }

    /// When the next round starts: the timer, or the early start once the holders' release
    /// was heard from a quorum of nodes. `None` while a round runs.
    pub fn next_round(&self) -> Option<Timestamp> {
        match &self.state {
            State::Running { .. } => None,
            State::Between { timer, early, .. } => {
                Some(early.map_or(*timer, |early| early.min(*timer)))
            }
        }
    }

    /// Whether the next round is due at `now`.
    pub fn round_due(&self, now: Timestamp) -> bool {
        self.next_round().is_some_and(|at| now >= at)
    }

    /// Whether the next round, if it started at `now`, would be an early one.
    pub fn is_early(&self, now: Timestamp) -> bool {
        matches!(self.state, State::Between { timer, .. } if now < timer)
    }

    fn hear(&mut self, heard: Heard, now: Timestamp) {
        match (&mut self.state, heard) {
            (State::Running { heard: kept, .. }, _) => {
                if kept.len() == HEARD_DURING_A_ROUND {
                    kept.remove(0);
                }
                kept.push(heard);
            }
            (State::Between { .. }, Heard::Notified { node, token }) => {
                self.free(Some(node), token, now);
            }
            (State::Between { .. }, Heard::ReleasedHere { token }) => self.free(None, token, now),
        }
    }

    /// Frees the nodes where `token` was seen holding the key (`node`, or every node for
    /// this client's own release, which also frees those whose holder is unknown), and sets
    /// the early start once a quorum is freed.
    fn free(&mut self, node: Option<NodeId>, token: Token, now: Timestamp) {
        let State::Between { nodes, .. } = &mut self.state else {
            return;
        };
        match node {
            Some(node) => {
                if let Some(seen) = nodes.get_mut(node.index())
                    && *seen == Seen::Holder(token)
                {
                    *seen = Seen::Freed;
                }
            }
            None => {
                for seen in nodes.iter_mut() {
                    if matches!(*seen, Seen::Unknown) || *seen == Seen::Holder(token) {
                        *seen = Seen::Freed;
                    }
                }
            }
        }
        self.wake_if_a_quorum_is_freed(now);
    }

    /// Sets the early start at `now` (or a retry delay after the last early one) once a
    /// quorum of nodes is freed, if the lost round allows it.
    fn wake_if_a_quorum_is_freed(&mut self, now: Timestamp) {
        let State::Between {
            timer,
            wake_on_release,
            nodes,
            early,
            ..
        } = &mut self.state
        else {
            return;
        };
        let freed = nodes.iter().filter(|seen| **seen == Seen::Freed).count();
        if !*wake_on_release || early.is_some() || freed < self.quorum {
            return;
        }
        // Once per retry delay at most, whatever is heard: a replayed or forged release of
        // the right token (anyone may PUBLISH it) costs a round per delay, no more.
        let allowed = self
            .last_early
            .map_or(now, |last| last.saturating_add(self.spacing).max(now));
        if allowed < *timer {
            *early = Some(allowed);
        }
    }
}

/// Whether a quorum of `nodes` shows the key held by tokens not in `before` (sorted).
fn in_new_hands(nodes: &[Seen], before: &[Token], quorum: usize) -> bool {
    nodes
        .iter()
        .filter(
            |seen| matches!(seen, Seen::Holder(holder) if before.binary_search(holder).is_err()),
        )
        .count()
        >= quorum
}

impl RenumberNodes for Waiting {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match &mut self.state {
            State::Running { heard, .. } => {
                for heard in heard {
                    if let Heard::Notified { node, .. } = heard {
                        node.renumber_nodes(perm);
                    }
                }
            }
            State::Between { nodes, .. } => perm.permute(nodes),
        }
        if let Some(marks) = &mut self.marks {
            // Empty until the first mark, then one entry per node.
            perm.permute(&mut marks.marked);
            for transmit in &mut marks.queue {
                transmit.renumber_nodes(perm);
            }
        }
    }
}

impl HashRenumbered for Waiting {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        self.hash_parts(Some(perm), true, state);
    }
}

impl Waiting {
    /// Its two sets of holders' tokens, each sorted: the holders the last lost round saw,
    /// and those the early round running now was started on (either may be empty).
    pub fn holder_sets(&self) -> [&[Token]; 2] {
        match &self.state {
            State::Running { early, .. } => [&[], early.as_ref().map_or(&[], |e| &e.seen)],
            State::Between { seen, .. } => [seen, &[]],
        }
    }

    /// Feeds `state` what its hash renumbered by `perm` (as it is for `None`) would, but
    /// each of its [`holder_sets`](Self::holder_sets) as its length alone.
    ///
    /// The sets are kept sorted by their tokens, so renaming the tokens' owners (a model
    /// checker's symmetry between clients) can change their order: a caller that hashes
    /// tokens renamed hashes this and the sets renamed and sorted again beside it, and the
    /// two together tell waits apart as the hash of the renamed wait does.
    pub fn hash_without_holder_sets<H: Hasher>(
        &self,
        perm: Option<&NodePermutation>,
        state: &mut H,
    ) {
        self.hash_parts(perm, false, state);
    }

    /// The words of the derived `Hash` of the wait renumbered by `perm` (as it is for
    /// `None`), each set of holders in full (`sets`) or as its length.
    fn hash_parts<H: Hasher>(&self, perm: Option<&NodePermutation>, sets: bool, state: &mut H) {
        let hash_set = |set: &Vec<Token>, state: &mut H| {
            if sets {
                set.hash(state);
            } else {
                state.write_usize(set.len());
            }
        };
        // Every field, so that a field added to the wait must be added here.
        let Self {
            target,
            quorum,
            spacing,
            last_early,
            state: between,
            marks,
        } = self;
        (target, quorum, spacing, last_early).hash(state);
        std::mem::discriminant(between).hash(state);
        match between {
            State::Running { heard, early } => {
                // As a vector hashes: its length, then each notification, its node renamed.
                state.write_usize(heard.len());
                for heard in heard {
                    match (*heard, perm) {
                        (Heard::Notified { node, token }, Some(perm)) => Heard::Notified {
                            node: perm.node(node),
                            token,
                        }
                        .hash(state),
                        _ => heard.hash(state),
                    }
                }
                // As an option of the early round hashes: its discriminant, then its fields.
                std::mem::discriminant(early).hash(state);
                if let Some(EarlyRound { seen, before }) = early {
                    hash_set(seen, state);
                    before.hash(state);
                }
            }
            State::Between {
                timer,
                wake_on_release,
                nodes,
                early,
                seen,
            } => {
                (timer, wake_on_release).hash(state);
                match perm {
                    Some(perm) => hash_permuted(nodes, perm, state),
                    None => nodes.hash(state),
                }
                early.hash(state);
                hash_set(seen, state);
            }
        }
        std::mem::discriminant(marks).hash(state);
        match (marks, perm) {
            (Some(marks), Some(perm)) => marks.hash_renumbered(perm, state),
            (Some(marks), None) => marks.hash(state),
            (None, _) => {}
        }
    }
}

impl Marks {
    /// Hashes the marks as `Waiting::renumber_nodes` leaves them: the nodes ever marked at
    /// their new places, the queued marks renamed.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            key,
            waiter,
            ttl,
            batch,
            marked,
            queue,
            stopped,
        } = self;
        (key, waiter, ttl, batch).hash(state);
        hash_permuted(marked, perm, state);
        queue.hash_renumbered(perm, state);
        stopped.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FailureReason, LockKey, NodeStatus, Reply, RetryPolicy};
    use proptest::prelude::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_millis(ms))
    }

    fn key() -> LockKey {
        LockKey::new("redlock:", "r").unwrap()
    }

    fn token(n: u8) -> Token {
        Token::from_bytes([n; 16])
    }

    const CHANNEL: &[u8] = b"redlock:r";

    fn config(nodes: usize) -> LockConfig {
        LockConfig::new(nodes).with_retry(RetryPolicy::new(
            3,
            Duration::from_millis(100),
            Duration::ZERO,
        ))
    }

    fn lost(nodes: Vec<NodeStatus>, decided_at: Timestamp) -> RoundFailure {
        RoundFailure {
            reason: FailureReason::Contended,
            nodes,
            started_at: decided_at,
            decided_at,
        }
    }

    fn held_by(holder: Token) -> NodeStatus {
        NodeStatus::Replied(Reply::TakenBy {
            holder,
            remaining: Some(Duration::from_secs(5)),
        })
    }

    #[test]
    fn only_the_holders_release_from_a_quorum_of_its_nodes_wakes_early() {
        let mut w = Waiting::new(&config(3), key());
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        // The right token on the wrong channel, junk, another token: nothing.
        w.notified(NodeId::new(0), b"redlock:other", &token(7).to_hex(), at(1));
        w.notified(NodeId::new(0), CHANNEL, b"junk", at(1));
        w.notified(NodeId::new(1), CHANNEL, &token(8).to_hex(), at(1));
        // The same node twice is still one node.
        w.notified(NodeId::new(0), CHANNEL, &token(7).to_hex(), at(2));
        w.notified(NodeId::new(0), CHANNEL, &token(7).to_hex(), at(3));
        // A node the round does not know.
        w.notified(NodeId::new(9), CHANNEL, &token(7).to_hex(), at(3));
        assert_eq!(w.next_round(), Some(at(100)));
        w.notified(NodeId::new(2), CHANNEL, &token(7).to_hex(), at(4));
        assert_eq!(w.next_round(), Some(at(4)));
        assert!(w.round_due(at(4)) && w.is_early(at(4)));
    }

    #[test]
    fn a_split_vote_or_an_unknown_holder_keeps_to_the_timer() {
        let mut split = Waiting::new(&config(3), key());
        split.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), false, at(100));
        for node in 0..3 {
            split.notified(NodeId::new(node), CHANNEL, &token(7).to_hex(), at(1));
        }
        assert_eq!(split.next_round(), Some(at(100)));

        let unknown = NodeStatus::Replied(Reply::TakenFor {
            remaining: Duration::from_secs(1),
        });
        let mut w = Waiting::new(&config(3), key());
        w.round_lost(
            &lost(vec![held_by(token(7)), unknown.clone(), unknown], at(0)),
            true,
            at(100),
        );
        w.notified(NodeId::new(0), CHANNEL, &token(7).to_hex(), at(1));
        assert_eq!(w.next_round(), Some(at(100)));
        // This client's own release is trusted for the nodes whose holder is unknown.
        w.released_here(token(3), at(2));
        assert_eq!(w.next_round(), Some(at(2)));
    }

    /// A lost round that allows no early round keeps nothing of what each node saw: what is
    /// heard after it cannot move the next round, so two waits that heard different things
    /// are the same wait (a model checker counts them once).
    #[test]
    fn a_wait_that_cannot_wake_early_is_the_same_whatever_it_hears() {
        let failure = lost(vec![held_by(token(7)); 3], at(0));
        let mut quiet = Waiting::new(&config(3), key());
        quiet.round_lost(&failure, false, at(100));
        let mut heard = quiet.clone();
        heard.notified(NodeId::new(0), CHANNEL, &token(7).to_hex(), at(1));
        heard.released_here(token(7), at(2));
        assert_eq!(heard, quiet);
        assert_eq!(heard.next_round(), Some(at(100)));
        // Heard while the round ran, it counts for nothing either.
        let mut during = Waiting::new(&config(3), key());
        during.notified(NodeId::new(1), CHANNEL, &token(7).to_hex(), at(0));
        during.round_lost(&failure, false, at(100));
        assert_eq!(during, quiet);
    }

    #[test]
    fn a_release_heard_during_the_round_counts_when_it_is_lost() {
        let mut w = Waiting::new(&config(3), key());
        for node in 0..2 {
            w.notified(NodeId::new(node), CHANNEL, &token(7).to_hex(), at(1));
        }
        assert_eq!(w.next_round(), None, "a round runs");
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(2)), true, at(100));
        assert_eq!(w.next_round(), Some(at(2)));
    }

    #[test]
    fn early_rounds_are_a_retry_delay_apart() {
        let mut w = Waiting::new(&config(3), key());
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        w.notified(NodeId::new(0), CHANNEL, &token(7).to_hex(), at(10));
        w.notified(NodeId::new(1), CHANNEL, &token(7).to_hex(), at(10));
        w.round_started(at(10));
        // The release was forged: the next round finds the same holder, whose release
        // (forged again, or real) wakes no round before 110.
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(12)), true, at(112));
        w.released_here(token(7), at(20));
        assert_eq!(w.next_round(), Some(at(110)));
        w.round_started(at(110));
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(111)), true, at(211));
        w.released_here(token(7), at(115));
        assert_eq!(w.next_round(), Some(at(210)));

        // A round started by its timer is not early: it does not push the next one back.
        let mut w = Waiting::new(&config(3), key());
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        assert!(!w.is_early(at(100)));
        w.round_started(at(100));
        w.round_lost(&lost(vec![held_by(token(8)); 3], at(101)), true, at(201));
        w.released_here(token(8), at(105));
        assert_eq!(w.next_round(), Some(at(105)));
    }

    /// An early round that finds the key in new hands (the release it woke for was real,
    /// and a quicker waiter took the key) does not hold the next one back: the next
    /// release of the new holder wakes a round at once, and so on at every hand-off.
    #[test]
    fn an_early_round_lost_to_new_hands_does_not_hold_the_next_back() {
        let mut w = Waiting::new(&config(3), key());
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        for (holder, t) in [(7, 10), (8, 20), (9, 30)] {
            w.notified(NodeId::new(0), CHANNEL, &token(holder).to_hex(), at(t));
            w.notified(NodeId::new(1), CHANNEL, &token(holder).to_hex(), at(t));
            assert_eq!(w.next_round(), Some(at(t)), "woken by {holder}'s release");
            w.round_started(at(t));
            w.round_lost(
                &lost(vec![held_by(token(holder + 1)); 3], at(t + 2)),
                true,
                at(t + 102),
            );
        }
        // The same hands on only a minority of nodes: the spacing stands.
        w.notified(NodeId::new(0), CHANNEL, &token(10).to_hex(), at(40));
        w.notified(NodeId::new(1), CHANNEL, &token(10).to_hex(), at(40));
        w.round_started(at(40));
        let mixed = vec![held_by(token(10)), held_by(token(10)), held_by(token(11))];
        w.round_lost(&lost(mixed, at(42)), true, at(142));
        w.notified(NodeId::new(0), CHANNEL, &token(10).to_hex(), at(50));
        w.notified(NodeId::new(1), CHANNEL, &token(10).to_hex(), at(50));
        assert_eq!(w.next_round(), Some(at(140)));
    }

    fn marking(nodes: usize) -> Waiting {
        Waiting::new(&config(nodes), key()).marking(token(42), Duration::from_secs(10))
    }

    fn drain(w: &mut Waiting) -> Vec<Transmit> {
        std::iter::from_fn(|| w.poll_transmit()).collect()
    }

    #[test]
    fn a_lost_round_marks_the_nodes_where_it_saw_a_holder() {
        let mut w = marking(3);
        assert!(drain(&mut w).is_empty(), "nothing before a lost round");
        let unknown = NodeStatus::Replied(Reply::TakenFor {
            remaining: Duration::from_secs(1),
        });
        w.round_lost(
            &lost(vec![held_by(token(7)), unknown, held_by(token(7))], at(0)),
            true,
            at(100),
        );
        let sent = drain(&mut w);
        let nodes: Vec<usize> = sent.iter().map(|t| t.node.index()).collect();
        assert_eq!(nodes, [0, 2]);
        assert!(sent.iter().all(|t| t.command
            == Command::MarkWaiting {
                key: key(),
                waiter: token(42),
                ttl: Duration::from_secs(10),
            }));
        // A split vote never wakes early: no marks for it.
        w.round_started(at(100));
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(101)), false, at(200));
        assert!(drain(&mut w).is_empty());
        // Stopping unmarks every node ever marked, once, and marks nothing again.
        w.stop();
        let unmarks = drain(&mut w);
        assert_eq!(unmarks.len(), 2);
        assert!(unmarks.iter().all(|t| matches!(
            &t.command,
            Command::UnmarkWaiting { waiter, .. } if *waiter == token(42)
        )));
        w.round_started(at(200));
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(201)), true, at(300));
        assert!(drain(&mut w).is_empty());
        // A multi-resource waiter never marks.
        let many = Target::Many(vec![key(), LockKey::new("redlock:", "s").unwrap()].into());
        let mut w = Waiting::new(&config(3), many).marking(token(42), Duration::from_secs(10));
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        assert!(drain(&mut w).is_empty());
    }

    #[test]
    fn a_mark_that_finds_the_holder_gone_frees_its_node() {
        let mut w = marking(3);
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        let sent = drain(&mut w);
        // Node 0: still the holder (its release will be announced); node 1: free (released
        // before the mark, unannounced); node 2: another token took it after a release.
        w.handle_reply(sent[0].request, Ok(held_by_reply(token(7))), at(1));
        w.handle_reply(sent[1].request, Ok(Reply::NotHeld), at(2));
        assert_eq!(w.next_round(), Some(at(100)));
        w.handle_reply(sent[2].request, Ok(held_by_reply(token(8))), at(3));
        assert_eq!(w.next_round(), Some(at(3)));

        // A reply to the marks of an older lost round counts for nothing.
        let mut w = marking(3);
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(0)), true, at(100));
        let old = drain(&mut w);
        w.round_started(at(100));
        w.round_lost(&lost(vec![held_by(token(7)); 3], at(101)), true, at(201));
        let new = drain(&mut w);
        for t in &old {
            w.handle_reply(t.request, Ok(Reply::NotHeld), at(102));
        }
        assert_eq!(w.next_round(), Some(at(201)));
        // Failures count for nothing either.
        for t in &new {
            w.handle_reply(t.request, Err(NodeFailure::TimedOut), at(102));
        }
        assert_eq!(w.next_round(), Some(at(201)));
        w.handle_reply(new[0].request, Ok(Reply::NotHeld), at(103));
        w.handle_reply(new[1].request, Ok(Reply::NotHeld), at(103));
        assert_eq!(w.next_round(), Some(at(103)));
    }

    fn held_by_reply(holder: Token) -> Reply {
        Reply::TakenBy {
            holder,
            remaining: None,
        }
    }

    /// What a driver can be told, in the proptest.
    #[derive(Clone, Debug)]
    enum Event {
        /// A message from `node` carrying token `token` (0 = junk), `gap` ms later.
        Notified {
            node: usize,
            token: u8,
            gap: u64,
        },
        ReleasedHere {
            token: u8,
            gap: u64,
        },
        /// Time passes.
        Idle {
            gap: u64,
        },
    }

    fn events() -> impl Strategy<Value = Vec<Event>> {
        let event = prop_oneof![
            6 => (0..6usize, 0..4u8, 0..30u64).prop_map(|(node, token, gap)| Event::Notified { node, token, gap }),
            1 => (0..4u8, 0..30u64).prop_map(|(token, gap)| Event::ReleasedHere { token, gap }),
            2 => (0..200u64).prop_map(|gap| Event::Idle { gap }),
        ];
        proptest::collection::vec(event, 0..300)
    }

    proptest! {
        /// Whatever the notifications, a driver that starts a round whenever one is due, and
        /// loses every round: rounds never start after their timer, early rounds are at least
        /// a retry delay apart, and only a release of a token the lost round saw starts one.
        #[test]
        fn never_more_than_one_early_round_per_retry_delay(
            nodes in 1..6usize,
            holders in proptest::collection::vec(0..4u8, 6),
            wake in any::<bool>(),
            events in events(),
            round_ms in 1..20u64,
        ) {
            let delay = 100;
            let mut w = Waiting::new(&config(nodes), key());
            let statuses: Vec<NodeStatus> = holders[..nodes]
                .iter()
                .map(|&n| if n == 0 { NodeStatus::Pending } else { held_by(token(n)) })
                .collect();
            let mut now = 0;
            let mut timer = delay;
            let mut last_early: Option<u64> = None;
            // The round in flight and when it is lost.
            let mut running_until: Option<u64> = None;
            let lose = |w: &mut Waiting, now: u64| {
                w.round_lost(&lost(statuses.clone(), at(now)), wake, at(now + delay));
            };
            lose(&mut w, now);
            // Whether a release of a seen holder was heard since the latest round started
            // (during the round, or after it was lost).
            let mut relevant = false;
            for event in events {
                let (gap, heard) = match event {
                    Event::Notified { node, token: n, gap } => (gap, Some((Some(node), n))),
                    Event::ReleasedHere { token: n, gap } => (gap, Some((None, n))),
                    Event::Idle { gap } => (gap, None),
                };
                let until = now + gap;
                // Rounds lost and started before the event, in time order.
                loop {
                    if let Some(end) = running_until {
                        if end > until {
                            break;
                        }
                        now = end;
                        lose(&mut w, now);
                        timer = now + delay;
                        running_until = None;
                        continue;
                    }
                    let Some(due) = w.next_round() else { break };
                    let start = (due.saturating_duration_since(Timestamp::ZERO).as_millis() as u64).max(now);
                    if start > until {
                        break;
                    }
                    prop_assert!(due <= at(timer), "a round due after its timer");
                    if w.is_early(at(start)) {
                        prop_assert!(wake && relevant, "an early round without a release of a seen holder");
                        if let Some(last) = last_early {
                            prop_assert!(start >= last + delay, "early rounds at {last} and {start}");
                        }
                        last_early = Some(start);
                    }
                    w.round_started(at(start));
                    prop_assert_eq!(w.next_round(), None);
                    now = start;
                    running_until = Some(start + round_ms);
                    relevant = false;
                }
                now = until;
                if let Some((node, n)) = heard {
                    let payload = if n == 0 { b"junk".to_vec() } else { token(n).to_hex().to_vec() };
                    match node {
                        Some(node) => {
                            relevant |= n != 0 && node < nodes && holders[node] == n;
                            w.notified(NodeId::new(node), CHANNEL, &payload, at(now));
                        }
                        None => {
                            // Trusted: frees the nodes whose holder is unknown too.
                            relevant = true;
                            w.released_here(token(n.max(1)), at(now));
                        }
                    }
                }
            }
        }

        /// Junk never moves a round: a driver fed only messages that are not a seen holder's
        /// release starts every round at its timer.
        #[test]
        fn junk_never_moves_a_round(
            payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..50),
            nodes in 1..6usize,
        ) {
            let mut w = Waiting::new(&config(nodes), key());
            w.round_lost(&lost(vec![held_by(token(7)); nodes], at(0)), true, at(100));
            for (i, payload) in payloads.iter().enumerate() {
                if Token::from_hex(payload) == Some(token(7)) {
                    continue;
                }
                w.notified(NodeId::new(i % nodes), CHANNEL, payload, at(i as u64));
            }
            prop_assert_eq!(w.next_round(), Some(at(100)));
        }
    }
}
