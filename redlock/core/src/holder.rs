//! Who holds a resource: a read-only query of every node, judged on a quorum.
//!
//! [`HolderQuery`] sends [`Command::ReadHolder`] (the lock key's value, its remaining time
//! to live and the resource's fence counter, read together and written nowhere) to every
//! node and waits for every answer or the per-node timeout. [`Holder`] judges the answers:
//! a lease holds the resource when a quorum of the configured nodes holds its token, which
//! is the same rule that granted it; nobody holds it when a quorum of nodes answered and
//! no value can have a quorum even if every silent node held it; otherwise nobody can tell.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use super::command::RequestKind;
use super::{
    Command, LockConfig, LockKey, Machine, NodeFailure, NodeId, Reply, RequestId, Timestamp, Token,
    Transmit, quorum,
};

/// What a lock key holds on one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyValue {
    /// A lease's owner token.
    Token(Token),
    /// A value that is not a token of this protocol: a key written by another tool or by
    /// hand. It blocks acquisitions as a lease does.
    Foreign,
}

impl fmt::Display for KeyValue {
    /// A token as its first 8 hex characters, as the client's logs show it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Token(token) => f.write_str(&token.short()),
            Self::Foreign => f.write_str("(not a redlock token)"),
        }
    }
}

/// What one node holds for a resource, read in one atomic step by [`Command::ReadHolder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyReading {
    /// The lock key's value; `None` when there is no key.
    pub value: Option<KeyValue>,
    /// The key's remaining time to live on the node's clock; `None` when there is no key,
    /// or when the key has no expiry (no lease of this protocol writes one).
    pub expires_in: Option<Duration>,
    /// The resource's fence counter ([`LockKey::fence_key`]); `None` when no fenced lease
    /// was ever taken there. It has no TTL: it outlives every lease on purpose.
    pub fence: Option<u64>,
}

impl KeyReading {
    /// A node without the lock key or a fence counter.
    pub const FREE: Self = Self {
        value: None,
        expires_in: None,
        fence: None,
    };
}

/// The judgement of a [`Holder`] query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// A quorum of the configured nodes holds `value`: that lease holds the resource.
    Held {
        /// The value a quorum holds (a [`KeyValue::Foreign`] one blocks acquisitions too).
        value: KeyValue,
        /// How many nodes hold it.
        nodes: usize,
        /// How long until fewer than a quorum of nodes hold it unless the holder extends it:
        /// the quorum-th longest remaining TTL among those nodes, on the nodes' clocks, at
        /// the time of the query. `None` when a quorum of them hold keys without expiry.
        /// The holder's own validity ends earlier (by the drift allowance and the time its
        /// acquisition took).
        expires_in: Option<Duration>,
        /// The fence counter a quorum of those nodes has reached (the quorum-th highest):
        /// the holder's fencing token if it took a fenced lease, else the last fenced
        /// lease's. `None` when fewer than a quorum of them have a counter.
        fence: Option<u64>,
    },
    /// A quorum of nodes answered, no value holds a quorum, and none could even if every
    /// node that did not answer held it. `leftover` is the value on most nodes, if any node holds one: keys of a failed
    /// round or of a holder that lost its quorum, which expire with their TTL.
    Free {
        /// The value on most nodes and on how many, when some node holds a key.
        leftover: Option<(KeyValue, usize)>,
    },
    /// Too few nodes answered to tell: fewer than a quorum, or the silent ones could
    /// complete a quorum for some value.
    Unknown {
        /// Nodes that answered.
        answered: usize,
        /// The value on most of the nodes that answered and on how many, if any.
        strongest: Option<(KeyValue, usize)>,
    },
}

/// Who holds a resource, as every node answered a read-only query, judged on a quorum.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let token = Token::from_bytes([7; 16]);
/// let held = KeyReading {
///     value: Some(KeyValue::Token(token)),
///     expires_in: Some(Duration::from_secs(9)),
///     fence: Some(4),
/// };
/// let holder = Holder::judge(vec![
///     Ok(held),
///     Ok(KeyReading { expires_in: Some(Duration::from_secs(8)), ..held }),
///     Err(NodeFailure::TimedOut),
/// ]);
/// assert_eq!(holder.token(), Some(token));
/// assert_eq!(
///     holder.verdict(),
///     Verdict::Held {
///         value: KeyValue::Token(token),
///         nodes: 2,
///         expires_in: Some(Duration::from_secs(8)),
///         fence: Some(4),
///     }
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    nodes: Vec<Result<KeyReading, NodeFailure>>,
    verdict: Verdict,
}

impl Holder {
    /// Judges the answers of every configured node, indexed by [`NodeId::index`]: what it
    /// holds, or why it did not answer.
    pub fn judge(nodes: Vec<Result<KeyReading, NodeFailure>>) -> Self {
        let verdict = verdict(&nodes);
        Self { nodes, verdict }
    }

    /// The judgement.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Each node's answer, indexed by [`NodeId::index`].
    pub fn nodes(&self) -> &[Result<KeyReading, NodeFailure>] {
        &self.nodes
    }

    /// The token of the lease that holds the resource on a quorum, if one does.
    pub fn token(&self) -> Option<Token> {
        match self.verdict {
            Verdict::Held {
                value: KeyValue::Token(token),
                ..
            } => Some(token),
            _ => None,
        }
    }

    /// Whether a quorum holds the resource (a lease of this protocol or a foreign value).
    pub fn is_held(&self) -> bool {
        matches!(self.verdict, Verdict::Held { .. })
    }

    /// Whether it is certain that no value holds the resource on a quorum.
    pub fn is_free(&self) -> bool {
        matches!(self.verdict, Verdict::Free { .. })
    }

    /// Nodes that answered.
    pub fn answered(&self) -> usize {
        self.nodes.iter().filter(|n| n.is_ok()).count()
    }

    /// The quorum of the configured nodes.
    pub fn quorum(&self) -> usize {
        quorum(self.nodes.len())
    }

    /// Whether the lease whose owner token is `owner` (a [`Token`], or a client's lease)
    /// holds the resource on a quorum.
    pub fn is_held_by(&self, owner: impl Into<Token>) -> bool {
        self.token() == Some(owner.into())
    }
}

/// One line, as a status display shows it: `held by 0707…07 on 2 of 3 nodes, expiring in
/// 8000 ms, fence 4`; `free (3 of 3 nodes answered)`; `unknown (1 of 3 nodes answered, 2
/// needed)`. A token shows as its first 8 hex characters, as [`KeyValue`] shows it.
impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let configured = self.nodes.len();
        match self.verdict {
            Verdict::Held {
                value,
                nodes,
                expires_in,
                fence,
            } => {
                write!(f, "held by {value} on {nodes} of {configured} nodes")?;
                match expires_in {
                    Some(left) => write!(f, ", expiring in {} ms", left.as_millis())?,
                    None => f.write_str(", without expiry")?,
                }
                match fence {
                    Some(fence) => write!(f, ", fence {fence}"),
                    None => Ok(()),
                }
            }
            Verdict::Free { leftover } => {
                write!(
                    f,
                    "free ({} of {configured} nodes answered",
                    self.answered()
                )?;
                if let Some((value, count)) = leftover {
                    write!(f, "; {value} left on {count}")?;
                }
                f.write_str(")")
            }
            Verdict::Unknown { answered, .. } => write!(
                f,
                "unknown ({answered} of {configured} nodes answered, {} needed)",
                self.quorum()
            ),
        }
    }
}

/// The pure rule behind [`Holder::judge`].
fn verdict(nodes: &[Result<KeyReading, NodeFailure>]) -> Verdict {
    let quorum = quorum(nodes.len());
    let readings: Vec<&KeyReading> = nodes.iter().filter_map(|n| n.as_ref().ok()).collect();
    let silent = nodes.len() - readings.len();
    // Values by how many nodes hold them; the first seen wins a tie, so the verdict
    // depends on the answers alone.
    let mut counts: Vec<(KeyValue, usize)> = Vec::new();
    for value in readings.iter().filter_map(|r| r.value) {
        match counts.iter_mut().find(|(v, _)| *v == value) {
            Some((_, count)) => *count += 1,
            None => counts.push((value, 1)),
        }
    }
    let strongest = counts
        .iter()
        .copied()
        .fold(None, |best, (v, c)| match best {
            Some((_, best_count)) if best_count >= c => best,
            _ => Some((v, c)),
        });
    match strongest {
        Some((value, count)) if count >= quorum => {
            let holding: Vec<&&KeyReading> =
                readings.iter().filter(|r| r.value == Some(value)).collect();
            // A key without expiry counts as the longest-lived.
            let mut expiries: Vec<Duration> = holding
                .iter()
                .map(|r| r.expires_in.unwrap_or(Duration::MAX))
                .collect();
            expiries.sort_unstable_by(|a, b| b.cmp(a));
            let expires_in = expiries
                .get(quorum - 1)
                .copied()
                .filter(|d| *d != Duration::MAX);
            let mut fences: Vec<u64> = holding.iter().filter_map(|r| r.fence).collect();
            fences.sort_unstable_by(|a, b| b.cmp(a));
            Verdict::Held {
                value,
                nodes: count,
                expires_in,
                fence: fences.get(quorum - 1).copied(),
            }
        }
        // Too few answers say nothing even when no value could reach a quorum: a free
        // verdict rests on a quorum of answers, as a grant does.
        _ if readings.len() < quorum || strongest.map_or(0, |(_, c)| c) + silent >= quorum => {
            Verdict::Unknown {
                answered: readings.len(),
                strongest,
            }
        }
        _ => Verdict::Free {
            leftover: strongest,
        },
    }
}

/// The query machine: [`Command::ReadHolder`] to every node; the outcome once every node
/// has answered or at the per-node timeout.
///
/// ```
/// use redlock_core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new(DEFAULT_KEY_PREFIX, "nightly-report").unwrap();
/// let t0 = Timestamp::ZERO;
/// let mut query = HolderQuery::new(&config, key, t0);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| query.poll_transmit()).collect();
/// assert!(sent.iter().all(|t| !t.command.creates_key() && t.command.is_read_only()));
/// for transmit in &sent[..2] {
///     query.handle_reply(transmit.request, Ok(Reply::Read(KeyReading::FREE)), t0);
/// }
/// assert!(query.poll_outcome().is_none()); // node 2 may still answer
/// query.handle_timeout(query.poll_timeout().unwrap());
/// let holder = query.poll_outcome().unwrap();
/// assert_eq!(holder.verdict(), Verdict::Free { leftover: None });
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct HolderQuery {
    timeout_at: Timestamp,
    nodes: Vec<Option<Result<KeyReading, NodeFailure>>>,
    transmits: VecDeque<Transmit>,
    outcome: Option<Holder>,
    done: bool,
}

const ROUND: u32 = 1;

impl HolderQuery {
    /// Starts asking every node of `config` what `key` holds, at `now`.
    pub fn new(config: &LockConfig, key: LockKey, now: Timestamp) -> Self {
        let transmits = (0..config.nodes())
            .map(|index| {
                let node = NodeId::new(index);
                Transmit {
                    request: RequestId::new(ROUND, node, RequestKind::Main),
                    node,
                    command: Command::ReadHolder { key: key.clone() },
                }
            })
            .collect();
        let mut query = Self {
            timeout_at: now.saturating_add(config.node_timeout()),
            nodes: vec![None; config.nodes()],
            transmits,
            outcome: None,
            done: false,
        };
        query.decide();
        query
    }

    fn decide(&mut self) {
        if self.done || self.nodes.iter().any(Option::is_none) {
            return;
        }
        self.done = true;
        let nodes = self.nodes.iter_mut().filter_map(Option::take).collect();
        self.outcome = Some(Holder::judge(nodes));
    }
}

impl Machine for HolderQuery {
    type Outcome = Holder;

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
        let Some(slot) = self.nodes.get_mut(request.node().index()) else {
            return;
        };
        if slot.is_some() {
            return;
        }
        *slot = Some(match reply {
            Ok(Reply::Read(reading)) => Ok(reading),
            Ok(other) => Err(NodeFailure::Protocol(format!(
                "unexpected reply {other:?} to a holder query"
            ))),
            Err(failure) => Err(failure),
        });
        self.decide();
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        if self.done || now < self.timeout_at {
            return;
        }
        for slot in &mut self.nodes {
            slot.get_or_insert(Err(NodeFailure::TimedOut));
        }
        self.decide();
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        (!self.done).then_some(self.timeout_at)
    }

    fn poll_outcome(&mut self) -> Option<Holder> {
        self.outcome.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(byte: u8) -> Token {
        Token::from_bytes([byte; 16])
    }

    fn held(byte: u8, ms: u64, fence: Option<u64>) -> Result<KeyReading, NodeFailure> {
        Ok(KeyReading {
            value: Some(KeyValue::Token(token(byte))),
            expires_in: Some(Duration::from_millis(ms)),
            fence,
        })
    }

    fn free() -> Result<KeyReading, NodeFailure> {
        Ok(KeyReading::FREE)
    }

    fn silent() -> Result<KeyReading, NodeFailure> {
        Err(NodeFailure::TimedOut)
    }

    #[test]
    fn a_holder_is_held_by_the_quorum_token_only_and_shows_on_one_line() {
        let holder = Holder::judge(vec![
            held(1, 9_000, Some(3)),
            held(1, 8_000, Some(3)),
            silent(),
        ]);
        assert!(holder.is_held_by(token(1)));
        assert!(!holder.is_held_by(token(2)));
        assert_eq!(
            holder.to_string(),
            format!(
                "held by {} on 2 of 3 nodes, expiring in 8000 ms, fence 3",
                KeyValue::Token(token(1))
            )
        );
        let minority = Holder::judge(vec![held(1, 9_000, None), free(), free()]);
        assert!(
            !minority.is_held_by(token(1)),
            "one node of three is no quorum"
        );
        assert_eq!(
            minority.to_string(),
            format!(
                "free (3 of 3 nodes answered; {} left on 1)",
                KeyValue::Token(token(1))
            )
        );
        let unknown = Holder::judge(vec![free(), silent(), silent()]);
        assert!(!unknown.is_held_by(token(1)));
        assert_eq!(
            unknown.to_string(),
            "unknown (1 of 3 nodes answered, 2 needed)"
        );
    }

    #[test]
    fn a_quorum_of_one_token_holds_it_until_its_quorum_th_longest_ttl() {
        let holder = Holder::judge(vec![
            held(1, 9_000, Some(3)),
            held(1, 7_000, Some(3)),
            held(1, 8_000, Some(2)),
            free(),
            silent(),
        ]);
        assert_eq!(
            holder.verdict(),
            Verdict::Held {
                value: KeyValue::Token(token(1)),
                nodes: 3,
                // Three of five must hold it: after 7 s only two would.
                expires_in: Some(Duration::from_millis(7_000)),
                // The counter a quorum of the holder's nodes reached.
                fence: Some(2),
            }
        );
        assert_eq!(holder.token(), Some(token(1)));
        assert!(holder.is_held() && !holder.is_free());
        assert_eq!((holder.answered(), holder.quorum()), (4, 3));
    }

    #[test]
    fn the_expiry_is_the_quorum_th_longest_and_keys_without_expiry_are_longest() {
        let forever = Ok(KeyReading {
            expires_in: None,
            ..held(1, 0, None).unwrap()
        });
        let holder = Holder::judge(vec![forever.clone(), held(1, 5_000, None), free()]);
        let Verdict::Held {
            expires_in, fence, ..
        } = holder.verdict()
        else {
            panic!("{holder:?}")
        };
        assert_eq!(expires_in, Some(Duration::from_millis(5_000)));
        assert_eq!(fence, None);
        let holder = Holder::judge(vec![forever.clone(), forever, free()]);
        assert!(matches!(
            holder.verdict(),
            Verdict::Held {
                expires_in: None,
                ..
            }
        ));
    }

    #[test]
    fn nobody_holds_it_when_no_value_can_reach_a_quorum() {
        let all_free = Holder::judge(vec![free(), free(), free()]);
        assert_eq!(all_free.verdict(), Verdict::Free { leftover: None });
        assert!(all_free.is_free());
        assert_eq!(all_free.token(), None);
        // One leftover key, and the silent node could not make it a quorum.
        let leftover = Holder::judge(vec![held(2, 100, None), free(), free(), free(), silent()]);
        assert_eq!(
            leftover.verdict(),
            Verdict::Free {
                leftover: Some((KeyValue::Token(token(2)), 1))
            }
        );
        // Three of four answered free: the silent node cannot make a quorum of three.
        let most = Holder::judge(vec![free(), free(), free(), silent()]);
        assert_eq!(most.verdict(), Verdict::Free { leftover: None });
    }

    #[test]
    fn unknown_when_the_silent_nodes_could_complete_a_quorum() {
        let few = Holder::judge(vec![free(), free(), silent(), silent(), silent()]);
        assert_eq!(
            few.verdict(),
            Verdict::Unknown {
                answered: 2,
                strongest: None
            }
        );
        // Two of five hold a token and one node is silent: it may hold it too.
        let maybe = Holder::judge(vec![
            held(1, 100, None),
            held(1, 100, None),
            free(),
            free(),
            silent(),
        ]);
        assert_eq!(
            maybe.verdict(),
            Verdict::Unknown {
                answered: 4,
                strongest: Some((KeyValue::Token(token(1)), 2))
            }
        );
        assert!(!maybe.is_held() && !maybe.is_free());
        // Two of four answered free: no value can reach three, but two answers are not a
        // quorum of answers.
        let half = Holder::judge(vec![free(), free(), silent(), silent()]);
        assert!(matches!(
            half.verdict(),
            Verdict::Unknown { answered: 2, .. }
        ));
        let none = Holder::judge(Vec::new());
        assert!(matches!(
            none.verdict(),
            Verdict::Unknown { answered: 0, .. }
        ));
    }

    #[test]
    fn a_split_is_not_a_holder_and_a_foreign_value_can_be() {
        let split = Holder::judge(vec![held(1, 100, None), held(2, 100, None), free()]);
        assert_eq!(
            split.verdict(),
            Verdict::Free {
                leftover: Some((KeyValue::Token(token(1)), 1))
            }
        );
        let foreign = KeyReading {
            value: Some(KeyValue::Foreign),
            expires_in: Some(Duration::from_secs(1)),
            fence: None,
        };
        let blocked = Holder::judge(vec![Ok(foreign), Ok(foreign), free()]);
        assert!(matches!(
            blocked.verdict(),
            Verdict::Held {
                value: KeyValue::Foreign,
                nodes: 2,
                ..
            }
        ));
        assert_eq!(blocked.token(), None);
        assert_eq!(KeyValue::Foreign.to_string(), "(not a redlock token)");
        assert_eq!(KeyValue::Token(token(0xab)).to_string(), "abababab");
    }

    #[test]
    fn the_query_asks_every_node_and_waits_for_all_or_the_timeout() {
        let config = LockConfig::new(3);
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::ZERO;
        let mut query = HolderQuery::new(&config, key.clone(), t0);
        let sent: Vec<Transmit> = std::iter::from_fn(|| query.poll_transmit()).collect();
        assert_eq!(sent.len(), 3);
        for (index, transmit) in sent.iter().enumerate() {
            assert_eq!(transmit.node, NodeId::new(index));
            assert_eq!(transmit.command, Command::ReadHolder { key: key.clone() });
            assert!(transmit.command.is_read_only());
            assert!(!transmit.command.creates_key() && !transmit.command.is_release());
            assert_eq!(transmit.command.token(), None);
            assert_eq!(transmit.command.keys(), std::slice::from_ref(&key));
        }
        let reading = held(1, 500, None).unwrap();
        query.handle_reply(sent[0].request, Ok(Reply::Read(reading)), t0);
        query.handle_reply(sent[1].request, Ok(Reply::Acquired), t0);
        // A duplicate answer changes nothing.
        query.handle_reply(sent[1].request, Ok(Reply::Read(reading)), t0);
        assert_eq!(query.poll_outcome(), None);
        // Early timer calls are harmless.
        query.handle_timeout(t0);
        assert_eq!(query.poll_outcome(), None);
        let deadline = query.poll_timeout().unwrap();
        assert_eq!(deadline, t0.saturating_add(config.node_timeout()));
        query.handle_timeout(deadline);
        let holder = query.poll_outcome().unwrap();
        assert_eq!(holder.nodes()[0], Ok(reading));
        assert!(matches!(holder.nodes()[1], Err(NodeFailure::Protocol(_))));
        assert_eq!(holder.nodes()[2], Err(NodeFailure::TimedOut));
        assert_eq!(query.poll_timeout(), None);
        assert_eq!(query.poll_outcome(), None);
        // Late replies after the decision are ignored.
        query.handle_reply(sent[2].request, Ok(Reply::Read(reading)), deadline);
        assert_eq!(query.poll_outcome(), None);
    }

    #[test]
    fn the_query_ends_as_soon_as_every_node_answered() {
        let config = LockConfig::new(2);
        let t0 = Timestamp::ZERO;
        let mut query = HolderQuery::new(&config, LockKey::new("", "r").unwrap(), t0);
        let sent: Vec<Transmit> = std::iter::from_fn(|| query.poll_transmit()).collect();
        for transmit in &sent {
            query.handle_reply(transmit.request, Ok(Reply::Read(KeyReading::FREE)), t0);
        }
        assert_eq!(
            query.poll_outcome().map(|h| h.verdict()),
            Some(Verdict::Free { leftover: None })
        );
        let empty = HolderQuery::new(&LockConfig::new(0), LockKey::new("", "r").unwrap(), t0)
            .poll_outcome()
            .map(|h| h.verdict());
        assert!(matches!(empty, Some(Verdict::Unknown { answered: 0, .. })));
    }
}
