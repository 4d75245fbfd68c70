//! Which nodes may vote: the restart quarantine, duplicates and the identity of connections.
//!
//! A node that restarts without persisting its keys forgets the leases it held, and a node
//! that forgot a key can hand a second client a majority. The Redlock description's answer is
//! a *delayed restart*: a restarted node takes no part for at least a TTL. Operators rarely
//! configure that, so the client applies it instead, from what each connection tells it:
//!
//! - every **new connection** to a node is identified (its `run_id` and uptime, from `INFO`)
//!   before it carries anything but a release; a connection is the unit because a node can
//!   only restart behind a new one;
//! - a node seen for the **first time** whose uptime is below the quarantine is left out
//!   until the quarantine has passed since it started; a client that has never seen the node
//!   cannot know what it held before;
//! - a node seen for the first time by this process but **remembered** from an earlier one
//!   ([`Eligibility::remember`]: the `run_id` a process met behind the name, kept by the
//!   driver between processes) is judged against that memory: another `run_id` is a
//!   change, and waits a whole quarantine as below; the same one whose change an earlier
//!   process saw waits the rest of that quarantine;
//! - a node whose `run_id` **changed** is left out for a whole quarantine from when the
//!   change is seen, whatever uptime it reports: a server that restarted reports a small
//!   uptime anyway, and a large one means another server now answers to the name (a
//!   promoted replica, a DNS name or virtual IP moved), which never held this node's keys
//!   however long it has run;
//! - a node whose identity **cannot be read** (`INFO` refused by an ACL, renamed, a proxy in
//!   front) is counted on the first connection, with a warning, and left out for a whole
//!   quarantine after every reconnection, which may hide a restart;
//! - **releases are never held back**: they are safe on any node and must not wait;
//! - a node with a request that **timed out unanswered** on its connection gets no new lock
//!   write there until a probe answers (the rule and its reason are in the source of
//!   `core/responsive.rs`);
//! - two configured nodes that turn out to be **the same server** (one `run_id` under two
//!   names) would vote twice: the name identified later is refused for good (the one
//!   identified first may already have voted). Names that resolve to a common socket
//!   address (`localhost` and `127.0.0.1`) are the same server too, and this needs no
//!   identity: a driver hands the core each new connection's resolved addresses
//!   ([`Eligibility::resolved`]) before its identity, so it holds for servers whose `INFO`
//!   is refused, which would otherwise be counted under each name;
//! - nodes declared [`Persistent`](RestartPolicy::Persistent) (every write fsynced before it
//!   is acknowledged) lose nothing in a restart and are never quarantined.
//!
//! The quarantine must cover the longest TTL of *any* client of the nodes, not only this
//! one's: a restarted node forgot every client's keys. The default (this client's own TTL)
//! does not know the others', so a lost round that reads another owner's key living longer
//! than the quarantine is reported ([`Eligibility::other_leases`]), once per node.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use super::responsive::{Responsiveness, WriteGate};
use super::{
    Command, ConnectionId, NodeFailure, NodeId, NodeStatus, Reply, RoundFailure, Timestamp,
};

mod renumber;

/// How restarted nodes are treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RestartPolicy {
    /// Leave a node out of quorums until this long after it started.
    Quarantine(Duration),
    /// The nodes acknowledge a write only once it is on disk (`appendfsync always`): a
    /// restart loses no key, so no node is ever left out.
    Persistent,
}

impl RestartPolicy {
    /// The policy when none is set, for leases of `ttl`: a quarantine as long as the TTL.
    ///
    /// A restarted node may have forgotten every key it held, and a key it held lives at most
    /// one TTL: once the node has been up that long, whatever it forgot would have expired
    /// anyway. The TTL is that of this client's leases; a quarantine that must cover other
    /// clients' longer leases has to be set.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{LockConfig, RestartPolicy};
    ///
    /// let config = LockConfig::new(3).with_ttl(Duration::from_secs(30));
    /// let policy = RestartPolicy::default_for(config.ttl());
    /// assert_eq!(policy.quarantine(), Some(Duration::from_secs(30)));
    /// ```
    pub fn default_for(ttl: Duration) -> Self {
        Self::Quarantine(ttl)
    }

    /// How long a restarted node is left out; `None` for [`Persistent`](Self::Persistent).
    pub fn quarantine(self) -> Option<Duration> {
        match self {
            Self::Quarantine(duration) => Some(duration),
            Self::Persistent => None,
        }
    }
}

/// What a new connection says about the server behind it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeIdentity {
    /// The server's `run_id`: a new one after every restart.
    pub run_id: String,
    /// How long the server says it has been running (`uptime_in_seconds`). Redis computes it
    /// as the difference of two readings of its wall clock in whole seconds, so it can exceed
    /// the true uptime by up to a second ([`UPTIME_SLACK`]), and a step of the node's wall
    /// clock moves it.
    pub uptime: Duration,
    /// Its `maxmemory-policy`, when it was read.
    pub maxmemory_policy: Option<String>,
}

/// How much a node's reported uptime can exceed the truth: `uptime_in_seconds` is the
/// difference of two whole-second readings (a server started at 10.9 s and asked at 11.1 s
/// reports 1 s). The restart quarantine counts from the uptime less this.
pub const UPTIME_SLACK: Duration = Duration::from_secs(1);

/// How much longer a server seen for the first time, reporting `uptime`, stays out under a
/// restart quarantine of `quarantine`: counted from the latest moment it can have started
/// (its uptime less [`UPTIME_SLACK`]); zero once that is over. (A known name whose `run_id`
/// changed stays out for the whole quarantine, see [`Eligibility`].)
///
/// ```
/// use std::time::Duration;
/// use redlock_core::quarantine_left;
///
/// let s = Duration::from_secs;
/// assert_eq!(quarantine_left(s(10), s(4)), s(7));
/// assert_eq!(quarantine_left(s(10), s(10)), s(1));
/// assert_eq!(quarantine_left(s(10), s(11)), Duration::ZERO);
/// ```
pub fn quarantine_left(quarantine: Duration, uptime: Duration) -> Duration {
    quarantine.saturating_sub(uptime.saturating_sub(UPTIME_SLACK))
}

/// How long the restart quarantine keeps a quorum out of reach, from one round's
/// `statuses`: when so many nodes were left out ([`NodeFailure::Quarantined`]) that the
/// others cannot make a quorum, the time until enough of them are counted again for one;
/// `None` when the nodes outside the quarantine could make a quorum (something else failed
/// the round) or when no end of the quarantine would be enough (duplicates).
///
/// This is the wait a fresh fleet imposes: nodes started less than the quarantine ago are
/// left out, although they answer, until the quarantine has passed since they started.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{NodeFailure, NodeStatus, Reply, quarantine_wait};
///
/// let out = |ms| NodeStatus::Failed(NodeFailure::Quarantined { remaining: Duration::from_millis(ms) });
/// // Three nodes, all just started: a quorum of two once the second-soonest is counted.
/// assert_eq!(quarantine_wait([out(900), out(300), out(500)].iter()), Some(Duration::from_millis(500)));
/// // Two nodes outside the quarantine are a quorum: the quarantine is not why a round failed.
/// let taken = NodeStatus::Replied(Reply::Taken);
/// assert_eq!(quarantine_wait([out(900), taken.clone(), taken].iter()), None);
/// ```
pub fn quarantine_wait<'a>(
    statuses: impl ExactSizeIterator<Item = &'a NodeStatus>,
) -> Option<Duration> {
    let quorum = super::quorum(statuses.len());
    let mut left_out = Vec::new();
    let mut voters = 0;
    for status in statuses {
        match status {
            NodeStatus::Failed(NodeFailure::Quarantined { remaining }) => left_out.push(*remaining),
            // A duplicate never votes, however long one waits.
            NodeStatus::Failed(NodeFailure::Duplicate { .. }) => {}
            _ => voters += 1,
        }
    }
    let missing = quorum.checked_sub(voters).filter(|n| *n > 0)?;
    left_out.sort_unstable();
    left_out.get(missing - 1).copied()
}

impl NodeIdentity {
    /// The identity in the text of an `INFO` reply (the default sections), or what is
    /// missing from it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::NodeIdentity;
    ///
    /// let info = "# Server\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n";
    /// let identity = NodeIdentity::from_info(info).unwrap();
    /// assert_eq!(identity.uptime, Duration::from_secs(42));
    /// assert!(NodeIdentity::from_info("uptime_in_seconds:1").is_err());
    /// ```
    pub fn from_info(info: &str) -> Result<Self, String> {
        let run_id = info_field(info, "run_id")
            .filter(|id| !id.is_empty())
            .ok_or_else(|| "INFO has no run_id (a proxy in front of the node?)".to_owned())?;
        let uptime = info_field(info, "uptime_in_seconds")
            .and_then(|s| s.parse().ok())
            .map(Duration::from_secs)
            .ok_or_else(|| "INFO has no uptime_in_seconds".to_owned())?;
        Ok(Self {
            run_id: run_id.to_owned(),
            uptime,
            maxmemory_policy: info_field(info, "maxmemory_policy").map(str::to_owned),
        })
    }
}

/// The value of the field `name` in the text of an `INFO` reply (`name:value` lines).
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Whether a command may go out on a connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Admission {
    /// Send it.
    Send,
    /// Identify the connection first ([`Eligibility::identified`]), then ask again.
    Identify,
    /// Send a probe (`PING`) on the connection first, behind everything already written to
    /// it, and report its fate with [`Eligibility::probed`]: a request there timed out
    /// unanswered ([`Eligibility::unanswered`]). Then ask again.
    Probe,
    /// Do not send it; report this failure for the node instead.
    Refuse(NodeFailure),
}

/// Why a node is left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuarantineReason {
    /// Its `run_id` changed: it restarted, or another server answers to its name.
    Restarted,
    /// First seen with an uptime below the quarantine.
    Young,
    /// Reconnected to a node whose identity cannot be read.
    Reconnected,
}

impl fmt::Display for QuarantineReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Restarted => "its run_id changed (a restart, or another server behind the name)",
            Self::Young => "started less than a quarantine ago",
            Self::Reconnected => "reconnected, and a restart cannot be ruled out",
        })
    }
}

/// Something the driver should report (a log line, a metric).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EligibilityEvent {
    /// The node takes no part until `until`.
    Quarantined {
        /// Which.
        node: NodeId,
        /// Until when, on the client's clock.
        until: Timestamp,
        /// Why.
        reason: QuarantineReason,
    },
    /// The node's identity cannot be read; restarts are handled as described in the module
    /// documentation. Reported once per node.
    Unidentifiable {
        /// Which.
        node: NodeId,
        /// What the node answered.
        why: String,
    },
    /// The node may evict keys (`maxmemory-policy` other than `noeviction`): an evicted lock
    /// key or fence counter is a forgotten one. Reported once per node.
    Evicting {
        /// Which.
        node: NodeId,
        /// Its policy.
        policy: String,
    },
    /// The node is the same server as an earlier one in the list; it is refused for good.
    Duplicate {
        /// Which.
        node: NodeId,
        /// The node it duplicates.
        of: NodeId,
    },
    /// Another owner's lock key on the node has `remaining` to live, more than this client's
    /// restart quarantine: that owner's TTL is longer than the quarantine. After a restart
    /// without persistence this client counts the node again while such a lease may still
    /// be valid, and can be granted what that owner holds: the quarantine must cover the
    /// longest TTL of every client of the nodes. Reported once per node.
    OutlivesQuarantine {
        /// Which.
        node: NodeId,
        /// What the key had left when it was read (at most its owner's TTL).
        remaining: Duration,
        /// This client's restart quarantine.
        quarantine: Duration,
    },
}

/// The server an earlier process met behind a node's name, as a driver remembers it
/// between processes ([`Eligibility::remember`], [`Eligibility::met`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RememberedServer {
    /// The `run_id` it read.
    pub run_id: String,
    /// How long ago a process saw the name's `run_id` change to this one (a restart, or
    /// another server behind the name), if one did: the quarantine that change began is
    /// not over until a whole quarantine after it, for any later process too.
    pub changed_ago: Option<Duration>,
}

/// A change of a name's `run_id`: `ago` before `seen_at`. (A change an earlier process saw
/// may predate this process's clock, whose timestamps start near zero: it is kept as an age
/// at a moment of this clock rather than as a timestamp.)
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Change {
    seen_at: Timestamp,
    ago: Duration,
}

impl Change {
    /// How long ago, at `now`, the change happened.
    fn age(self, now: Timestamp) -> Duration {
        self.ago
            .saturating_add(now.saturating_duration_since(self.seen_at))
    }
}

/// When and from what a node's quarantine was decided, so that a longer quarantine
/// ([`Eligibility::cover`]) can lengthen it later.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Dating {
    /// When the identification was read.
    at: Timestamp,
    /// The uptime it reported, when the quarantine counts from the server's start (first
    /// sight); `None` when it is a whole quarantine from `at` (a changed `run_id`, a
    /// reconnection to a node whose identity cannot be read).
    uptime: Option<Duration>,
}

impl Dating {
    /// Until when a quarantine of `quarantine` keeps the node out.
    fn until(self, quarantine: Duration) -> Timestamp {
        let left = match self.uptime {
            Some(uptime) => quarantine_left(quarantine, uptime),
            None => quarantine,
        };
        self.at.saturating_add(left)
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
struct NodeState {
    run_id: Option<String>,
    /// What an earlier process met behind the name, until this process identifies it.
    remembered: Option<String>,
    /// When the name's `run_id` was seen to change to the current one (by this process, or
    /// by an earlier one and remembered).
    changed: Option<Change>,
    quarantined_until: Option<Timestamp>,
    /// The last identification that decided a quarantine (whether or not any was left).
    dated: Option<Dating>,
    /// The connection whose identity is known (or was tried and refused); `None` until the
    /// first identification, whatever its outcome.
    identified: Option<ConnectionId>,
    unidentifiable_reported: bool,
    eviction_reported: bool,
    outlives_reported: bool,
    duplicate_of: Option<NodeId>,
    /// The socket addresses the node's name resolved to for its latest connection.
    addresses: Vec<SocketAddr>,
    responsive: Responsiveness,
}

/// The eligibility of every configured node (the rules are described in the source of the
/// module, `core/src/eligibility/mod.rs`).
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let quarantine = Duration::from_secs(10);
/// let mut nodes = Eligibility::new(3, RestartPolicy::Quarantine(quarantine));
/// let key = LockKey::new(DEFAULT_KEY_PREFIX, "report").unwrap();
/// let set = Command::SetIfAbsent { key, token: Token::from_bytes([1; 16]), ttl: quarantine };
/// let now = Timestamp::ZERO;
/// let node = NodeId::new(0);
/// let conn = ConnectionId(1);
///
/// // A new connection is identified before it carries a SET.
/// assert_eq!(nodes.admit(node, conn, &set, now), Admission::Identify);
/// // The node says it started 4 s ago (so at least 3 s ago, whole seconds): this client
/// // cannot know what it held before.
/// let identity = NodeIdentity { run_id: "a".repeat(40), uptime: Duration::from_secs(4), maxmemory_policy: None };
/// nodes.identified(node, conn, Ok(identity), now);
/// assert!(matches!(nodes.admit(node, conn, &set, now), Admission::Refuse(_)));
/// let later = now.saturating_add(Duration::from_secs(7));
/// assert_eq!(nodes.admit(node, conn, &set, later), Admission::Send);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Eligibility {
    policy: RestartPolicy,
    nodes: Vec<NodeState>,
}

impl Eligibility {
    /// The eligibility of `nodes` nodes, none seen yet.
    pub fn new(nodes: usize, policy: RestartPolicy) -> Self {
        Self {
            policy,
            nodes: (0..nodes).map(|_| NodeState::default()).collect(),
        }
    }

    /// The policy in force.
    pub fn policy(&self) -> RestartPolicy {
        self.policy
    }

    /// Raises the quarantine to at least `duration` (a handle with a longer TTL joined), for
    /// the nodes identified later and for those already identified: a node that restarted
    /// (or was first seen young) before is left out until `duration` has passed since, as if
    /// the longer quarantine had been in force when it was identified. A lease of the new
    /// length that it forgot may still be valid until then.
    pub fn cover(&mut self, duration: Duration) {
        let RestartPolicy::Quarantine(current) = &mut self.policy else {
            return;
        };
        if duration <= *current {
            return;
        }
        *current = duration;
        for state in &mut self.nodes {
            let Some(dating) = state.dated else {
                continue;
            };
            let until = dating.until(duration);
            if state.quarantined_until.is_none_or(|known| known < until) && dating.at < until {
                state.quarantined_until = Some(until);
            }
        }
    }

    /// Whether `command` may go out to `node` on `connection` at `now`.
    pub fn admit(
        &mut self,
        node: NodeId,
        connection: ConnectionId,
        command: &Command,
        now: Timestamp,
    ) -> Admission {
        let Some(state) = self.nodes.get_mut(node.index()) else {
            return Admission::Refuse(NodeFailure::Protocol(format!("no {node}")));
        };
        // A duplicate never votes, not even in a release's count.
        if let Some(of) = state.duplicate_of {
            return Admission::Refuse(NodeFailure::Duplicate { of });
        }
        if command.is_release() {
            return Admission::Send;
        }
        if state.identified != Some(connection) {
            return Admission::Identify;
        }
        match state.quarantined_until {
            Some(until) if now < until => {
                return Admission::Refuse(NodeFailure::Quarantined {
                    remaining: until.saturating_duration_since(now),
                });
            }
            _ => {}
        }
        if !command.creates_key() {
            return Admission::Send;
        }
        match state.responsive.write(connection) {
            WriteGate::Open => Admission::Send,
            WriteGate::Probe => Admission::Probe,
            WriteGate::Closed => Admission::Refuse(NodeFailure::Unresponsive),
        }
    }

    /// A request on `connection` to `node` timed out without an answer: until a probe on that
    /// connection answers, no command that could create a key goes out on it.
    pub fn unanswered(&mut self, node: NodeId, connection: ConnectionId) {
        if let Some(state) = self.nodes.get_mut(node.index()) {
            state.responsive.unanswered(connection);
        }
    }

    /// The probe handed out by [`Admission::Probe`] on `connection` answered (`true`), or was
    /// given up (`false`: timed out, or the connection failed; the next write sends another).
    pub fn probed(&mut self, node: NodeId, connection: ConnectionId, answered: bool) {
        if let Some(state) = self.nodes.get_mut(node.index()) {
            state.responsive.probed(connection, answered);
        }
    }

    /// Records the socket addresses `node`'s name resolved to for a new connection, and
    /// refuses it for good when one of them is an address of another node met before: one
    /// server under two names (`localhost` and `127.0.0.1`, or two DNS names of one host)
    /// must not vote twice. A driver calls it before the connection's
    /// [`identified`](Self::identified), which every lock write waits for, so the name
    /// resolved first keeps the vote and the other has sent nothing yet. It needs no
    /// identity, so it also holds for servers that refuse `INFO`. Returns the
    /// [`EligibilityEvent::Duplicate`] when it refuses.
    ///
    /// ```
    /// use redlock_core::*;
    ///
    /// let mut nodes = Eligibility::new(2, RestartPolicy::Persistent);
    /// let loopback = "127.0.0.1:6379".parse().unwrap();
    /// nodes.resolved(NodeId::new(0), &[loopback]);
    /// // `localhost` resolves to the IPv6 and the IPv4 loopback: one is node 0's.
    /// let events = nodes.resolved(NodeId::new(1), &["[::1]:6379".parse().unwrap(), loopback]);
    /// assert_eq!(events, [EligibilityEvent::Duplicate { node: NodeId::new(1), of: NodeId::new(0) }]);
    /// assert_eq!(nodes.duplicate_of(NodeId::new(1)), Some(NodeId::new(0)));
    /// ```
    pub fn resolved(&mut self, node: NodeId, addresses: &[SocketAddr]) -> Vec<EligibilityEvent> {
        let shared = self.counted_twin(node, |other| {
            other.addresses.iter().any(|a| addresses.contains(a))
        });
        let Some(state) = self.nodes.get_mut(node.index()) else {
            return Vec::new();
        };
        state.addresses = addresses.to_vec();
        shared
            .and_then(|of| self.refuse_as_duplicate(node, of))
            .into_iter()
            .collect()
    }

    /// Another node, not itself refused as a duplicate, that `same_server` says reaches the
    /// server `node` reaches.
    fn counted_twin(
        &self,
        node: NodeId,
        same_server: impl Fn(&NodeState) -> bool,
    ) -> Option<NodeId> {
        self.nodes
            .iter()
            .enumerate()
            .find(|(index, other)| {
                *index != node.index() && other.duplicate_of.is_none() && same_server(other)
            })
            .map(|(index, _)| NodeId::new(index))
    }

    /// Refuses `node` for good as another name of `of`, unless it already is one; the event
    /// to report when it is refused now.
    fn refuse_as_duplicate(&mut self, node: NodeId, of: NodeId) -> Option<EligibilityEvent> {
        let state = self.nodes.get_mut(node.index())?;
        if state.duplicate_of.is_some() {
            return None;
        }
        state.duplicate_of = Some(of);
        Some(EligibilityEvent::Duplicate { node, of })
    }

    /// Records what `connection` to `node` said about its server at `now`: its identity, or
    /// why it could not be read. Returns what is worth reporting.
    ///
    /// An identification of a connection older than the one on record (a lower
    /// [`ConnectionId`]) is ignored: its answer can arrive after the connection was replaced
    /// and the new one identified, and what it says is older than what the new one said.
    pub fn identified(
        &mut self,
        node: NodeId,
        connection: ConnectionId,
        identity: Result<NodeIdentity, String>,
        now: Timestamp,
    ) -> Vec<EligibilityEvent> {
        // Recording it would send every command on the current connection back to an
        // identification that connection already had (a driver identifies a connection
        // once), and the node would take nothing but releases from this client until the
        // current connection breaks.
        if self
            .nodes
            .get(node.index())
            .and_then(|state| state.identified)
            .is_some_and(|current| connection < current)
        {
            return Vec::new();
        }
        let mut events = Vec::new();
        // Another name of the same server, identified before and counted.
        let kept = identity.as_ref().ok().and_then(|identity| {
            self.counted_twin(node, |other| {
                other.run_id.as_deref() == Some(&identity.run_id)
            })
        });
        // The name identified first keeps the vote: its SETs may have counted already,
        // while this one's have not gone out (a SET waits for its connection's identity).
        // Refusing the first instead could let one round count the server twice.
        events.extend(kept.and_then(|kept| self.refuse_as_duplicate(node, kept)));
        let policy = self.policy;
        let Some(state) = self.nodes.get_mut(node.index()) else {
            return events;
        };
        let first_sight = state.identified.is_none();
        state.identified = Some(connection);
        match identity {
            Ok(identity) => {
                if let Some(policy_name) = identity
                    .maxmemory_policy
                    .as_deref()
                    .filter(|p| *p != "noeviction")
                    && !state.eviction_reported
                {
                    state.eviction_reported = true;
                    events.push(EligibilityEvent::Evicting {
                        node,
                        policy: policy_name.to_owned(),
                    });
                }
                if let Some((left, reason)) =
                    identity_quarantine(state, identity, first_sight, policy, now)
                    && !left.is_zero()
                {
                    events.push(quarantine_until(state, node, now, left, reason));
                }
            }
            Err(why) => {
                if !state.unidentifiable_reported {
                    state.unidentifiable_reported = true;
                    events.push(EligibilityEvent::Unidentifiable { node, why });
                }
                if !first_sight {
                    state.dated = Some(Dating {
                        at: now,
                        uptime: None,
                    });
                }
                if let (false, RestartPolicy::Quarantine(quarantine)) = (first_sight, policy) {
                    events.push(quarantine_until(
                        state,
                        node,
                        now,
                        quarantine,
                        QuarantineReason::Reconnected,
                    ));
                }
            }
        }
        events
    }

    /// Checks what a lost round read about other owners' keys ([`Reply::TakenFor`]) against
    /// the restart quarantine: a key with more time left than the quarantine belongs to a
    /// client whose TTL is longer than it, which the quarantine does not cover. Returns an
    /// [`EligibilityEvent::OutlivesQuarantine`] for each node where that is seen, once per
    /// node for the life of this value.
    ///
    /// A key without expiry is not a lease of this protocol and is not reported; nor is
    /// anything when the nodes are declared persistent (no quarantine to cover).
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::*;
    ///
    /// let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(Duration::from_secs(10)));
    /// let config = LockConfig::new(1).with_retry(RetryPolicy::no_retry());
    /// let key = LockKey::new("", "r").unwrap();
    /// let mut round = Acquire::new(&config, key, Token::from_bytes([1; 16]), Timestamp::ZERO);
    /// let sent = round.poll_transmit().unwrap();
    /// let held_for = Reply::TakenFor { remaining: Duration::from_secs(60) };
    /// round.handle_reply(sent.request, Ok(held_for), Timestamp::ZERO);
    /// let Some(AcquireEvent::Failed(failure)) = round.poll_outcome() else { panic!() };
    /// assert!(matches!(
    ///     nodes.other_leases(&failure.last_round)[..],
    ///     [EligibilityEvent::OutlivesQuarantine { .. }]
    /// ));
    /// // Once per node.
    /// assert!(nodes.other_leases(&failure.last_round).is_empty());
    /// ```
    pub fn other_leases(&mut self, failure: &RoundFailure) -> Vec<EligibilityEvent> {
        let RestartPolicy::Quarantine(quarantine) = self.policy else {
            return Vec::new();
        };
        let mut events = Vec::new();
        for (index, (state, status)) in self.nodes.iter_mut().zip(&failure.nodes).enumerate() {
            let Some(Reply::TakenFor { remaining }) = status.reply() else {
                continue;
            };
            // `Duration::MAX` stands for a key without expiry: not a lease.
            if remaining > quarantine && remaining != Duration::MAX && !state.outlives_reported {
                state.outlives_reported = true;
                events.push(EligibilityEvent::OutlivesQuarantine {
                    node: NodeId::new(index),
                    remaining,
                    quarantine,
                });
            }
        }
        events
    }

    /// Until when `node` is left out, if it is at `now`.
    pub fn quarantined_until(&self, node: NodeId, now: Timestamp) -> Option<Timestamp> {
        self.nodes
            .get(node.index())
            .and_then(|state| state.quarantined_until)
            .filter(|until| now < *until)
    }

    /// The node `node` turned out to duplicate (identified before it), if it did.
    pub fn duplicate_of(&self, node: NodeId) -> Option<NodeId> {
        self.nodes
            .get(node.index())
            .and_then(|state| state.duplicate_of)
    }

    /// The `run_id` last read from `node`.
    pub fn run_id(&self, node: NodeId) -> Option<&str> {
        self.nodes
            .get(node.index())
            .and_then(|state| state.run_id.as_deref())
    }

    /// Gives `node` the memory of an earlier process, read at `now`: the server it met behind
    /// the name. Until this process identifies the node, its first identification is then
    /// no first sight: a `run_id` other than `server`'s is a change (a whole quarantine,
    /// whatever the uptime), and the same one waits at least the rest of the quarantine of
    /// a change the earlier process saw. Without a memory, a server met for the first time
    /// is dated by its uptime alone, and another long-running server behind a known name
    /// (a promoted replica, a moved DNS name) votes at once.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::*;
    ///
    /// let quarantine = Duration::from_secs(30);
    /// let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(quarantine));
    /// let (node, now) = (NodeId::new(0), Timestamp::ZERO);
    /// let earlier = RememberedServer { run_id: "a".repeat(40), changed_ago: None };
    /// nodes.remember(node, earlier, now);
    /// // Another server, up for a day, answers to the name: left out for the whole quarantine.
    /// let day = Duration::from_secs(86_400);
    /// let other = NodeIdentity { run_id: "b".repeat(40), uptime: day, maxmemory_policy: None };
    /// nodes.identified(node, ConnectionId(1), Ok(other), now);
    /// assert_eq!(nodes.quarantined_until(node, now), Some(now.saturating_add(quarantine)));
    /// // What to remember for the next process: the new server, changed just now.
    /// let met = nodes.met(node, now).unwrap();
    /// assert_eq!((met.run_id.as_str(), met.changed_ago), ("b".repeat(40).as_str(), Some(Duration::ZERO)));
    /// ```
    pub fn remember(&mut self, node: NodeId, server: RememberedServer, now: Timestamp) {
        let Some(state) = self.nodes.get_mut(node.index()) else {
            return;
        };
        if state.identified.is_some() {
            // This process has met the node itself: what it saw is newer.
            return;
        }
        state.changed = server.changed_ago.map(|ago| Change { seen_at: now, ago });
        state.remembered = Some(server.run_id);
    }

    /// What this process met behind `node`'s name, to remember for the next one at `now`:
    /// the `run_id` it read, and how long ago a change to it was seen (by this process, or
    /// remembered from an earlier one). `None` until the node has told its `run_id`.
    pub fn met(&self, node: NodeId, now: Timestamp) -> Option<RememberedServer> {
        let state = self.nodes.get(node.index())?;
        Some(RememberedServer {
            run_id: state.run_id.clone()?,
            changed_ago: state.changed.map(|change| change.age(now)),
        })
    }
}

/// How long the server a connection identified as `identity` is left out, and why, or `None`
/// when it may vote at once; records its `run_id` (and, for a change, when it was seen).
fn identity_quarantine(
    state: &mut NodeState,
    identity: NodeIdentity,
    first_sight: bool,
    policy: RestartPolicy,
    now: Timestamp,
) -> Option<(Duration, QuarantineReason)> {
    let remembered = state.remembered.take();
    let reason = match (&state.run_id, remembered) {
        (Some(known), _) if *known == identity.run_id => None,
        (Some(_), _) => Some(QuarantineReason::Restarted),
        // An earlier process met another server behind the name.
        (None, Some(earlier)) if first_sight && earlier != identity.run_id => {
            Some(QuarantineReason::Restarted)
        }
        (None, _) if first_sight => Some(QuarantineReason::Young),
        // Identified before only without a run_id: treat as a restart.
        (None, _) => Some(QuarantineReason::Restarted),
    };
    if reason == Some(QuarantineReason::Restarted) {
        state.changed = Some(Change {
            seen_at: now,
            ago: Duration::ZERO,
        });
    }
    if let Some(reason) = reason {
        // A first sight counts from the server's start, or from a remembered change of the
        // name's server when that is more recent: a longer quarantine (`cover`) then counts
        // from the same moment.
        let since = state.changed.map_or(identity.uptime, |change| {
            change.age(now).min(identity.uptime)
        });
        state.dated = Some(Dating {
            at: now,
            uptime: (reason == QuarantineReason::Young).then_some(since),
        });
    }
    state.run_id = Some(identity.run_id);
    let (Some(reason), RestartPolicy::Quarantine(quarantine)) = (reason, policy) else {
        return None;
    };
    Some(match reason {
        // The uptime dates the server behind the name, not the moment the name lost its
        // keys: a replica promoted, or a DNS name or virtual IP moved to another master, has
        // run for long and still holds none of the keys the old server held. (A server that
        // restarted shows a small uptime, so this costs it at most that much more.)
        // (`Reconnected` is only given to an identity that cannot be read.)
        QuarantineReason::Restarted | QuarantineReason::Reconnected => (quarantine, reason),
        // Never seen before: there is nothing to compare with, and the uptime is all there
        // is (a server that has run longer than the quarantine lost nothing in that time,
        // unless it is not the server other clients knew under this name). Unless an earlier
        // process saw this server take the name: the rest of the quarantine that change
        // began, when that is longer.
        QuarantineReason::Young => {
            let young = quarantine_left(quarantine, identity.uptime);
            let rest = state.changed.map_or(Duration::ZERO, |change| {
                quarantine.saturating_sub(change.age(now))
            });
            if rest > young {
                (rest, QuarantineReason::Restarted)
            } else {
                (young, reason)
            }
        }
    })
}

fn quarantine_until(
    state: &mut NodeState,
    node: NodeId,
    now: Timestamp,
    left: Duration,
    reason: QuarantineReason,
) -> EligibilityEvent {
    let until = now.saturating_add(left);
    // A quarantine only ever grows: an earlier, longer one stays.
    let until = state
        .quarantined_until
        .map_or(until, |known| known.max(until));
    state.quarantined_until = Some(until);
    EligibilityEvent::Quarantined {
        node,
        until,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quarantine_wait_is_until_enough_nodes_are_counted_for_a_quorum() {
        let out = |ms| {
            NodeStatus::Failed(NodeFailure::Quarantined {
                remaining: Duration::from_millis(ms),
            })
        };
        let wait = |statuses: &[NodeStatus]| quarantine_wait(statuses.iter());
        let timed_out = NodeStatus::Failed(NodeFailure::TimedOut);
        let duplicate = NodeStatus::Failed(NodeFailure::Duplicate { of: NodeId::new(0) });
        // Five fresh nodes: a quorum of three once the third-soonest is counted.
        assert_eq!(
            wait(&[out(50), out(10), out(40), out(20), out(30)]),
            Some(Duration::from_millis(30))
        );
        // One node counted already (even one that timed out: it may answer next time).
        assert_eq!(
            wait(&[out(50), timed_out.clone(), out(40)]),
            Some(Duration::from_millis(40))
        );
        // A quorum outside the quarantine: something else failed the round.
        assert_eq!(wait(&[out(50), timed_out.clone(), timed_out]), None);
        assert_eq!(wait(&[NodeStatus::Pending, NodeStatus::Pending]), None);
        // A duplicate never votes: with it, the quarantine is not enough for a quorum.
        assert_eq!(wait(&[out(50), duplicate.clone(), duplicate]), None);
        assert_eq!(wait(&[]), None);
    }

    #[test]
    fn the_default_quarantine_is_the_ttl() {
        let ttl = Duration::from_millis(2_500);
        assert_eq!(
            RestartPolicy::default_for(ttl),
            RestartPolicy::Quarantine(ttl)
        );
        assert_eq!(RestartPolicy::default_for(ttl).quarantine(), Some(ttl));
        assert_eq!(RestartPolicy::Persistent.quarantine(), None);
    }

    use crate::{LockKey, Token};

    #[test]
    fn reads_the_fields_of_an_info_reply() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\n\
                    # Memory\r\nmaxmemory_policy:allkeys-lru\r\n";
        assert_eq!(
            NodeIdentity::from_info(info),
            Ok(NodeIdentity {
                run_id: "abc123".into(),
                uptime: Duration::from_secs(42),
                maxmemory_policy: Some("allkeys-lru".into()),
            })
        );
        assert!(NodeIdentity::from_info("# Server\r\nuptime_in_seconds:1\r\n").is_err());
        assert!(NodeIdentity::from_info("run_id:x\r\nuptime_in_seconds:soon\r\n").is_err());
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn set() -> Command {
        Command::SetIfAbsent {
            key: LockKey::new("", "r").unwrap(),
            token: Token::from_bytes([1; 16]),
            ttl: secs(10),
        }
    }

    fn release() -> Command {
        Command::ReleaseIfOwner {
            key: LockKey::new("", "r").unwrap(),
            token: Token::from_bytes([1; 16]),
        }
    }

    fn identity(run_id: &str, uptime: u64) -> Result<NodeIdentity, String> {
        Ok(NodeIdentity {
            run_id: run_id.into(),
            uptime: secs(uptime),
            maxmemory_policy: Some("noeviction".into()),
        })
    }

    fn at(s: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(secs(s))
    }

    fn n0() -> NodeId {
        NodeId::new(0)
    }

    /// A longer TTL covers quarantines already decided (the review's recipe): a node that
    /// started 1 s before it was first seen, under a 10 s quarantine, stays out until 59 s
    /// once the quarantine is raised to 60 s; a restarted one (a changed `run_id`) stays out
    /// 60 s from when the change was seen; one that had run long enough stays counted.
    #[test]
    fn a_raised_quarantine_lengthens_the_quarantines_already_decided() {
        let c1 = ConnectionId(1);
        let mut nodes = Eligibility::new(3, RestartPolicy::Quarantine(secs(10)));
        let (young, restarted, old) = (n0(), NodeId::new(1), NodeId::new(2));
        nodes.identified(young, c1, identity("a", 1), at(0));
        nodes.identified(restarted, c1, identity("b", 3_600), at(0));
        nodes.identified(restarted, ConnectionId(2), identity("c", 0), at(5));
        nodes.identified(old, c1, identity("d", 61), at(0));
        assert_eq!(nodes.quarantined_until(young, at(0)), Some(at(10)));
        assert_eq!(nodes.quarantined_until(restarted, at(5)), Some(at(15)));
        nodes.cover(secs(60));
        assert_eq!(
            nodes.admit(young, c1, &set(), at(11)),
            Admission::Refuse(NodeFailure::Quarantined {
                remaining: secs(49)
            })
        );
        assert_eq!(nodes.quarantined_until(young, at(11)), Some(at(60)));
        assert_eq!(
            nodes.quarantined_until(restarted, at(16)),
            Some(at(65)),
            "a whole quarantine from the change"
        );
        assert_eq!(nodes.admit(young, c1, &set(), at(60)), Admission::Send);
        assert_eq!(nodes.admit(old, c1, &set(), at(1)), Admission::Send);
        // A shorter cover changes nothing.
        nodes.cover(secs(5));
        assert_eq!(nodes.quarantined_until(young, at(11)), Some(at(60)));
    }

    #[test]
    fn a_node_that_left_a_request_unanswered_gets_no_set_until_a_probe_answers() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Persistent);
        let c1 = ConnectionId(1);
        nodes.identified(n0(), c1, identity("a", 3_600), at(0));
        nodes.unanswered(n0(), c1);
        assert_eq!(nodes.admit(n0(), c1, &set(), at(0)), Admission::Probe);
        assert_eq!(
            nodes.admit(n0(), c1, &set(), at(0)),
            Admission::Refuse(NodeFailure::Unresponsive)
        );
        // Releases are never held back.
        assert_eq!(nodes.admit(n0(), c1, &release(), at(0)), Admission::Send);
        nodes.probed(n0(), c1, true);
        assert_eq!(nodes.admit(n0(), c1, &set(), at(0)), Admission::Send);
    }

    #[test]
    fn an_old_node_seen_first_is_counted_and_a_restart_is_not() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(secs(10)));
        nodes.identified(n0(), ConnectionId(1), identity("a", 3_600), at(0));
        assert_eq!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        // A new connection must be identified again, even to the same node.
        assert_eq!(
            nodes.admit(n0(), ConnectionId(2), &set(), at(1)),
            Admission::Identify
        );
        // A new run_id: left out for the whole quarantine from when it is seen.
        let events = nodes.identified(n0(), ConnectionId(2), identity("b", 2), at(1));
        assert_eq!(
            events,
            [EligibilityEvent::Quarantined {
                node: n0(),
                until: at(11),
                reason: QuarantineReason::Restarted
            }]
        );
        assert!(matches!(
            nodes.admit(n0(), ConnectionId(2), &set(), at(10)),
            Admission::Refuse(NodeFailure::Quarantined { .. })
        ));
        // Releases never wait, not even for an identification.
        assert_eq!(
            nodes.admit(n0(), ConnectionId(3), &release(), at(10)),
            Admission::Send
        );
        assert_eq!(
            nodes.admit(n0(), ConnectionId(2), &set(), at(11)),
            Admission::Send
        );
    }

    #[test]
    fn another_long_running_server_behind_a_known_name_waits_a_whole_quarantine() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(secs(10)));
        nodes.identified(n0(), ConnectionId(1), identity("a", 3_600), at(0));
        // A promoted replica, or the name moved to another master: up for a day, and still
        // without the keys the old server held.
        let events = nodes.identified(n0(), ConnectionId(2), identity("b", 86_400), at(5));
        assert_eq!(
            events,
            [EligibilityEvent::Quarantined {
                node: n0(),
                until: at(15),
                reason: QuarantineReason::Restarted
            }]
        );
        assert!(matches!(
            nodes.admit(n0(), ConnectionId(2), &set(), at(14)),
            Admission::Refuse(NodeFailure::Quarantined { .. })
        ));
        assert_eq!(
            nodes.admit(n0(), ConnectionId(2), &set(), at(15)),
            Admission::Send
        );
        // A client that meets that server first has only its uptime to go by.
        let mut newcomer = Eligibility::new(1, RestartPolicy::Quarantine(secs(10)));
        assert!(
            newcomer
                .identified(n0(), ConnectionId(1), identity("b", 86_400), at(5))
                .is_empty()
        );
    }

    fn remembered(run_id: &str, changed_ago: Option<u64>) -> RememberedServer {
        RememberedServer {
            run_id: run_id.into(),
            changed_ago: changed_ago.map(secs),
        }
    }

    #[test]
    fn a_process_that_remembers_another_server_behind_the_name_waits_a_whole_quarantine() {
        let quarantine = RestartPolicy::Quarantine(secs(10));
        // The control: a process without memory counts a long-running server at once.
        let mut forgetful = Eligibility::new(1, quarantine);
        assert!(
            forgetful
                .identified(n0(), ConnectionId(1), identity("b", 86_400), at(5))
                .is_empty()
        );
        // An earlier process met "a" behind the name; this one, on its first sight, meets
        // "b", up for a day: a change, left out for the whole quarantine.
        let mut nodes = Eligibility::new(1, quarantine);
        nodes.remember(n0(), remembered("a", None), at(5));
        let events = nodes.identified(n0(), ConnectionId(1), identity("b", 86_400), at(5));
        assert_eq!(
            events,
            [EligibilityEvent::Quarantined {
                node: n0(),
                until: at(15),
                reason: QuarantineReason::Restarted
            }]
        );
        assert!(matches!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(14)),
            Admission::Refuse(NodeFailure::Quarantined { .. })
        ));
        // What this process leaves to the next: "b", changed when it was seen.
        assert_eq!(nodes.met(n0(), at(7)), Some(remembered("b", Some(2))));

        // The next process, 3 s after the change, meets "b" again: the rest of the change's
        // quarantine, not nothing (its uptime alone would let it vote).
        // (Its clock starts near zero: the change predates it.)
        let mut next = Eligibility::new(1, quarantine);
        next.remember(n0(), remembered("b", Some(3)), at(0));
        let events = next.identified(n0(), ConnectionId(1), identity("b", 86_400), at(0));
        assert_eq!(
            events,
            [EligibilityEvent::Quarantined {
                node: n0(),
                until: at(7),
                reason: QuarantineReason::Restarted
            }]
        );
        assert_eq!(next.met(n0(), at(1)), Some(remembered("b", Some(4))));

        // The same server as remembered, with no change seen: its uptime, as before.
        let mut same = Eligibility::new(1, quarantine);
        same.remember(n0(), remembered("b", None), at(0));
        assert!(
            same.identified(n0(), ConnectionId(1), identity("b", 86_400), at(0))
                .is_empty()
        );
        assert_eq!(same.met(n0(), at(0)), Some(remembered("b", None)));
        // A memory given after this process met the node itself changes nothing.
        same.remember(n0(), remembered("z", None), at(1));
        assert!(
            same.identified(n0(), ConnectionId(2), identity("b", 86_400), at(1))
                .is_empty()
        );
    }

    #[test]
    fn a_late_identification_of_a_replaced_connection_leaves_the_current_one_admitted() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(secs(10)));
        let (c1, c2) = (ConnectionId(1), ConnectionId(2));
        // C1's INFO was answered, but the task reading it was not polled before C1 broke;
        // C2 was opened and identified meanwhile.
        nodes.identified(n0(), c2, identity("a", 3_600), at(1));
        assert_eq!(nodes.admit(n0(), c2, &set(), at(1)), Admission::Send);
        // Then C1's reader runs: what it read is older than what C2 said, and C1 carries
        // nothing any more. Recording it would send every SET on C2 back to an
        // identification that C2 (identified once) never repeats.
        let events = nodes.identified(n0(), c1, identity("a", 3_600), at(2));
        assert!(events.is_empty(), "{events:?}");
        assert_eq!(nodes.admit(n0(), c2, &set(), at(2)), Admission::Send);
        // The late connection itself is not admitted.
        assert_eq!(nodes.admit(n0(), c1, &set(), at(2)), Admission::Identify);
        // Not even when what it read differs (a restart it saw before C2 was opened is
        // already in what C2 said).
        nodes.identified(n0(), c1, identity("old", 1), at(3));
        assert_eq!(nodes.admit(n0(), c2, &set(), at(3)), Admission::Send);
        assert_eq!(nodes.run_id(n0()), Some("a"));
    }

    #[test]
    fn a_node_that_cannot_be_identified_is_counted_once_then_quarantined_on_reconnect() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Quarantine(secs(10)));
        let refused = || Err("NOPERM".to_owned());
        let events = nodes.identified(n0(), ConnectionId(1), refused(), at(0));
        assert!(matches!(
            events[..],
            [EligibilityEvent::Unidentifiable { .. }]
        ));
        assert_eq!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        let events = nodes.identified(n0(), ConnectionId(2), refused(), at(5));
        assert!(matches!(
            events[..],
            [EligibilityEvent::Quarantined {
                reason: QuarantineReason::Reconnected,
                ..
            }]
        ));
        assert_eq!(nodes.quarantined_until(n0(), at(5)), Some(at(15)));
    }

    #[test]
    fn the_same_server_under_two_names_votes_once() {
        let mut nodes = Eligibility::new(2, RestartPolicy::Persistent);
        let n1 = NodeId::new(1);
        nodes.identified(n0(), ConnectionId(1), identity("same", 100), at(0));
        let events = nodes.identified(n1, ConnectionId(1), identity("same", 100), at(0));
        assert_eq!(events, [EligibilityEvent::Duplicate { node: n1, of: n0() }]);
        assert_eq!(
            nodes.admit(n1, ConnectionId(1), &set(), at(0)),
            Admission::Refuse(NodeFailure::Duplicate { of: n0() })
        );
        assert_eq!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
    }

    #[test]
    fn names_that_resolve_to_one_address_vote_once_without_an_identity() {
        let mut nodes = Eligibility::new(3, RestartPolicy::Persistent);
        let (n1, n2) = (NodeId::new(1), NodeId::new(2));
        let address = |text: &str| text.parse::<SocketAddr>().unwrap();
        assert!(
            nodes
                .resolved(n0(), &[address("127.0.0.1:7000")])
                .is_empty()
        );
        // Another port of the same host is another server.
        assert!(nodes.resolved(n2, &[address("127.0.0.1:7001")]).is_empty());
        let events = nodes.resolved(n1, &[address("[::1]:7000"), address("127.0.0.1:7000")]);
        assert_eq!(events, [EligibilityEvent::Duplicate { node: n1, of: n0() }]);
        // Neither server can say who it is (INFO refused): the addresses alone decide.
        for node in [n0(), n1, n2] {
            nodes.identified(node, ConnectionId(1), Err("NOPERM".to_owned()), at(0));
        }
        assert_eq!(
            nodes.admit(n1, ConnectionId(1), &set(), at(0)),
            Admission::Refuse(NodeFailure::Duplicate { of: n0() })
        );
        assert_eq!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        assert_eq!(
            nodes.admit(n2, ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        // A duplicate is refused for good: resolving again does not bring it back, and a
        // later name of the same address is refused as the duplicate of the one that votes.
        assert!(nodes.resolved(n1, &[address("127.0.0.1:7000")]).is_empty());
        assert_eq!(nodes.duplicate_of(n1), Some(n0()));
    }

    #[test]
    fn the_name_identified_first_keeps_the_vote() {
        let mut nodes = Eligibility::new(2, RestartPolicy::Persistent);
        let n1 = NodeId::new(1);
        // n1 answers first and is admitted: its SET may count in the running round.
        nodes.identified(n1, ConnectionId(1), identity("same", 100), at(0));
        assert_eq!(
            nodes.admit(n1, ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        // n0 turns out to be the same server: it, not n1, is refused, so the round cannot
        // count the server twice.
        let events = nodes.identified(n0(), ConnectionId(1), identity("same", 100), at(0));
        assert_eq!(events, [EligibilityEvent::Duplicate { node: n0(), of: n1 }]);
        assert_eq!(nodes.duplicate_of(n0()), Some(n1));
        assert_eq!(nodes.duplicate_of(n1), None);
        assert!(matches!(
            nodes.admit(n0(), ConnectionId(1), &release(), at(0)),
            Admission::Refuse(NodeFailure::Duplicate { .. })
        ));
        // A reconnection of either changes nothing.
        nodes.identified(n1, ConnectionId(2), identity("same", 100), at(1));
        nodes.identified(n0(), ConnectionId(2), identity("same", 100), at(1));
        assert_eq!(nodes.duplicate_of(n1), None);
        assert_eq!(nodes.duplicate_of(n0()), Some(n1));
    }

    #[test]
    fn another_owners_key_that_outlives_the_quarantine_is_reported_once_per_node() {
        use crate::{FailureReason, NodeStatus};

        let taken = |s: u64| NodeStatus::Replied(Reply::TakenFor { remaining: secs(s) });
        let failure = |nodes: Vec<NodeStatus>| RoundFailure {
            reason: FailureReason::Contended,
            nodes,
            started_at: at(0),
            decided_at: at(0),
        };
        let round = failure(vec![
            // Longer than the quarantine: reported.
            taken(30),
            // Within it: covered.
            taken(10),
            // No expiry: not a lease.
            NodeStatus::Replied(Reply::TakenFor {
                remaining: Duration::MAX,
            }),
            NodeStatus::Replied(Reply::Taken),
            NodeStatus::Pending,
        ]);
        let mut nodes = Eligibility::new(5, RestartPolicy::Quarantine(secs(10)));
        assert_eq!(
            nodes.other_leases(&round),
            [EligibilityEvent::OutlivesQuarantine {
                node: n0(),
                remaining: secs(30),
                quarantine: secs(10),
            }]
        );
        // Once per node: the same round again, and a longer key on node 0, say nothing new;
        // another node is reported on its own.
        assert!(nodes.other_leases(&round).is_empty());
        let later = failure(vec![
            taken(50),
            taken(20),
            NodeStatus::Failed(NodeFailure::TimedOut),
            NodeStatus::Pending,
            NodeStatus::Pending,
        ]);
        assert_eq!(
            nodes.other_leases(&later),
            [EligibilityEvent::OutlivesQuarantine {
                node: NodeId::new(1),
                remaining: secs(20),
                quarantine: secs(10),
            }]
        );
        // A raised quarantine covers what it covers.
        let mut covered = Eligibility::new(5, RestartPolicy::Quarantine(secs(10)));
        covered.cover(secs(30));
        assert!(covered.other_leases(&round).is_empty());
        // Persistent nodes have no quarantine to cover.
        let mut persistent = Eligibility::new(5, RestartPolicy::Persistent);
        assert!(persistent.other_leases(&round).is_empty());
        // A round with fewer statuses than nodes (a foreign record) is read as far as it goes.
        assert!(nodes.other_leases(&failure(vec![taken(99)])).is_empty());
    }

    #[test]
    fn persistent_nodes_are_never_left_out_and_evicting_ones_are_reported_once() {
        let mut nodes = Eligibility::new(1, RestartPolicy::Persistent);
        let lru = || {
            Ok(NodeIdentity {
                run_id: "a".into(),
                uptime: secs(0),
                maxmemory_policy: Some("allkeys-lru".into()),
            })
        };
        let events = nodes.identified(n0(), ConnectionId(1), lru(), at(0));
        assert_eq!(
            events,
            [EligibilityEvent::Evicting {
                node: n0(),
                policy: "allkeys-lru".into()
            }]
        );
        assert_eq!(
            nodes.admit(n0(), ConnectionId(1), &set(), at(0)),
            Admission::Send
        );
        assert!(
            nodes
                .identified(n0(), ConnectionId(2), lru(), at(1))
                .is_empty()
        );
    }
}
