//! The client's errors: what went wrong, on which node, and whether trying again can help.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redlock_core::{
    ConfigError, FailureReason, LeaseLost, NodeFailure, NodeStatus, Readable, ResourceError,
    RoundFailure, quarantine_wait,
};

/// Everything the client can fail with.
///
/// Node addresses appear without credentials: a password never reaches `Debug`, `Display`
/// or a log line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is refused; the error names the field and the reason.
    #[error(transparent)]
    Config(#[from] ConfigError),

    /// The resource name cannot name a lock.
    #[error("invalid resource name: {0}")]
    Resource(#[from] ResourceError),

    /// Another owner holds the resource: the last round met a lease of someone else on at
    /// least one node and could not reach a quorum.
    ///
    /// When a node read the token of a lease of this same client, the message says so:
    /// leases are not re-entrant, so a second acquisition of a resource by the client that
    /// holds it loses like anyone else's ([`NodeReport::held_by_this_client`]). Servers
    /// before Redis 7.0 do not name the holder in a refusal, and a last round reads none, so
    /// there the message says another owner.
    #[error("{}", taken_message(resource, *attempts, nodes))]
    Taken {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// What each node did in the last round.
        nodes: NodeReport,
    },

    /// Too few nodes were counted for a quorum. The causes:
    ///
    /// - nodes that did not answer: down, unreachable, paused, slow past the per-node
    ///   timeout, or failing with a server error;
    /// - nodes left out by the **restart quarantine**: nodes that answer, but started or
    ///   restarted less than the quarantine ago (by default as long as the TTL) and may have
    ///   lost the keys they held, so they are not counted until the quarantine has passed
    ///   since they started ([`RedlockBuilder::restart_quarantine`](crate::RedlockBuilder::restart_quarantine)).
    ///   A fleet started less than one TTL ago gives no lease until then. `quarantine_wait`
    ///   says how long is left, and the message names the nodes; when every node persists
    ///   each write before acknowledging it (`appendfsync always`), declare it with
    ///   [`RedlockBuilder::nodes_persist_every_write`](crate::RedlockBuilder::nodes_persist_every_write)
    ///   and no node is left out (the operations guide, `docs/operations.md`, "Persistence
    ///   and restarts", says how to decide).
    #[error("{}", no_quorum_message(resource, *attempts, nodes, *quarantine_wait))]
    NoQuorum {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// What each node did in the last round.
        nodes: NodeReport,
        /// When the restart quarantine left out so many nodes that the others could not
        /// make a quorum: how long, as of the last round, until enough of them are counted
        /// again for one. `None` when the quarantine is not why the round failed.
        quarantine_wait: Option<Duration>,
    },

    /// The nodes refused this client (a wrong or missing password, or an ACL that forbids a
    /// command the client needs), or answered what no Redis would (another server on the
    /// port, a proxy in the way), on so many nodes that no quorum is possible without them.
    /// Trying again cannot help; the configuration must change.
    #[error("{}", denied_message(resource, *attempts, nodes))]
    Denied {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// What each node did in the last round.
        nodes: NodeReport,
    },

    /// A quorum agreed, but so slowly that no validity was left (the nodes are too slow
    /// for this TTL).
    #[error(
        "`{resource}`: a quorum agreed only after {}, leaving no validity ({attempts} attempt(s); last round: {nodes})",
        Readable(*elapsed)
    )]
    ValidityExhausted {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// How long the last round took.
        elapsed: Duration,
        /// What each node did in the last round.
        nodes: NodeReport,
    },

    /// The lease's validity has ended: it can no longer be extended and another owner may
    /// hold the resource.
    #[error("the lease on `{resource}` has expired")]
    LeaseExpired {
        /// The resource.
        resource: String,
    },

    /// The lease has been held for as long as allowed
    /// ([`max_hold`](crate::RedlockBuilder::max_hold)); it can no longer be extended.
    #[error(
        "the lease on `{resource}` reached its longest hold ({})",
        Readable(*max_hold)
    )]
    HoldLimit {
        /// The resource.
        resource: String,
        /// The configured longest hold.
        max_hold: Duration,
    },

    /// An extension did not reach a quorum in time. The lease is unchanged (valid until its
    /// old deadline) and no key was deleted, so another extension may still succeed.
    #[error("extending the lease on `{resource}` failed: {reason} ({nodes})")]
    ExtendFailed {
        /// The resource.
        resource: String,
        /// Why the round failed.
        reason: FailureReason,
        /// What each node did.
        nodes: NodeReport,
    },

    /// A kept-alive lease was lost while its work ran; the work was cancelled (with
    /// [`Redlock::with_lock`](crate::Redlock::with_lock)) and the lease released.
    #[error("the lease on `{resource}` was lost: {reason}")]
    LeaseLost {
        /// The resource.
        resource: String,
        /// Why.
        reason: LeaseLost,
    },

    /// The fencing-token source failed or did not answer within the lease's validity; the
    /// lease was released.
    #[error("minting a fencing token for `{resource}` failed: {reason}")]
    Fence {
        /// The resource.
        resource: String,
        /// What went wrong.
        reason: String,
    },

    /// The operating system's random number generator failed to produce a token.
    #[error("the operating system's random number generator failed: {0}")]
    Entropy(String),

    /// A method of the [blocking facade](crate::blocking) was called from inside an async
    /// runtime, where blocking the thread would stall (or deadlock) the runtime. Use the
    /// async [`Redlock`](crate::Redlock) there.
    #[error(
        "redlock::blocking::{call} was called from inside an async runtime, where blocking would stall it; use the async redlock::Redlock there"
    )]
    InsideAsyncRuntime {
        /// The method called, e.g. `Redlock::acquire`.
        call: &'static str,
    },

    /// The client's internal driver stopped without a result; this is a bug.
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl Error {
    /// Whether trying again later may succeed (the resource was busy or nodes were
    /// unavailable), as opposed to a permanent problem with the request or configuration
    /// (including [`Error::Denied`]: wrong credentials or permissions on a quorum of nodes).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Taken { .. } | Self::NoQuorum { .. } | Self::ValidityExhausted { .. } => true,
            Self::ExtendFailed { nodes, .. } => !nodes.denies_quorum(),
            _ => false,
        }
    }

    /// How many rounds an acquisition ran before it failed, when the error comes from one.
    pub fn attempts(&self) -> Option<u32> {
        match self {
            Self::Taken { attempts, .. }
            | Self::NoQuorum { attempts, .. }
            | Self::Denied { attempts, .. }
            | Self::ValidityExhausted { attempts, .. } => Some(*attempts),
            _ => None,
        }
    }

    /// The per-node outcomes of the last round, when the error comes from one.
    pub fn nodes(&self) -> Option<&NodeReport> {
        match self {
            Self::Taken { nodes, .. }
            | Self::NoQuorum { nodes, .. }
            | Self::Denied { nodes, .. }
            | Self::ValidityExhausted { nodes, .. }
            | Self::ExtendFailed { nodes, .. } => Some(nodes),
            _ => None,
        }
    }

    pub(crate) fn from_round(
        resource: &str,
        attempts: u32,
        round: RoundFailure,
        addresses: &[Arc<str>],
    ) -> Self {
        let resource = resource.to_owned();
        let elapsed = round.decided_at.saturating_duration_since(round.started_at);
        let denied = round.is_denied();
        let nodes = NodeReport::new(addresses, round.nodes);
        // Refusals on so many nodes that the others can never make a quorum are not a
        // passing condition, whatever else happened in the round.
        if denied {
            return Self::Denied {
                resource,
                attempts,
                nodes,
            };
        }
        match round.reason {
            FailureReason::Contended => Self::Taken {
                resource,
                attempts,
                nodes,
            },
            FailureReason::ValidityExhausted => Self::ValidityExhausted {
                resource,
                attempts,
                elapsed,
                nodes,
            },
            // `NotHeld` cannot come from an acquisition round; treat it like unavailability.
            _ => Self::NoQuorum {
                resource,
                attempts,
                quarantine_wait: quarantine_wait(nodes.0.iter().map(|n| &n.status)),
                nodes,
            },
        }
    }
}

/// The text of [`Error::NoQuorum`]: when the restart quarantine is why, it says so first,
/// with the nodes it left out, the time left and the way out, since those nodes answered and
/// "too few nodes answered" alone would send the reader looking for a network fault.
fn no_quorum_message(
    resource: &str,
    attempts: u32,
    nodes: &NodeReport,
    quarantine_wait: Option<Duration>,
) -> String {
    let left_out: Vec<String> = nodes
        .quarantined()
        .map(|(address, remaining)| format!("{address} for another {}", Readable(remaining)))
        .collect();
    let Some(wait) = quarantine_wait else {
        let also = if left_out.is_empty() {
            String::new()
        } else {
            format!(
                ", and the restart quarantine left out {} of {}",
                left_out.len(),
                nodes.0.len()
            )
        };
        return format!(
            "no quorum for `{resource}`: too few nodes answered{also} ({attempts} attempt(s); \
             last round: {nodes})"
        );
    };
    let others: Vec<String> = nodes
        .0
        .iter()
        .filter(|n| {
            !matches!(
                n.status,
                NodeStatus::Failed(NodeFailure::Quarantined { .. })
            )
        })
        .map(|n| format!("{} {}", n.address, n.status))
        .collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!("; the other nodes: {}", others.join(", "))
    };
    format!(
        "no quorum for `{resource}`: the restart quarantine leaves out {count} of {total} nodes, \
         which started or restarted less than the quarantine ago and may have lost their keys \
         ({list}); a quorum can form in {wait} at the earliest. Wait for it, or, if every node \
         persists each write before acknowledging it (appendfsync always), declare that \
         (RedlockBuilder::nodes_persist_every_write) and no node is left out; see \
         \"Persistence and restarts\" in docs/operations.md ({attempts} attempt(s){others})",
        count = left_out.len(),
        total = nodes.0.len(),
        list = left_out.join(", "),
        wait = Readable(wait),
    )
}

/// The text of [`Error::Denied`], naming which of the two causes it met.
fn denied_message(resource: &str, attempts: u32, nodes: &NodeReport) -> String {
    let failed = |wanted: fn(&NodeFailure) -> bool| {
        nodes
            .nodes()
            .iter()
            .any(|n| matches!(&n.status, NodeStatus::Failed(f) if wanted(f)))
    };
    let refused = failed(|f| matches!(f, NodeFailure::Denied(_)));
    let not_redis = failed(|f| matches!(f, NodeFailure::Protocol(_)));
    let what = match (refused, not_redis) {
        (true, true) => "the nodes refused this client or are not Redis servers",
        (false, true) => "the nodes are not Redis servers (check their addresses and ports)",
        _ => "the nodes refused this client",
    };
    format!("`{resource}`: {what} ({attempts} attempt(s); last round: {nodes})")
}

/// The text of [`Error::Taken`].
fn taken_message(resource: &str, attempts: u32, nodes: &NodeReport) -> String {
    let holder = if nodes.held_by_this_client() {
        "a lease of this same client (leases are not re-entrant: use the lease it holds, or \
         release it first)"
    } else {
        "another owner"
    };
    format!("`{resource}` is held by {holder} ({attempts} attempt(s); last round: {nodes})")
}

/// What each node did in one round, with the node's address (never its credentials), and
/// whether a node read the token of one of this client's own leases as the holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport(Vec<NodeOutcome>, bool);

/// What one node did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeOutcome {
    /// The node's address (`host:port` or a socket path), without credentials.
    pub address: Arc<str>,
    /// What it did.
    pub status: NodeStatus,
}

impl NodeReport {
    pub(crate) fn new(addresses: &[Arc<str>], statuses: Vec<NodeStatus>) -> Self {
        Self(
            addresses
                .iter()
                .cloned()
                .zip(statuses)
                .map(|(address, status)| NodeOutcome { address, status })
                .collect(),
            false,
        )
    }

    /// Marks the round as lost to a lease of this same client.
    pub(crate) fn held_here(&mut self) {
        self.1 = true;
    }

    /// Whether a node of the round read the token of a lease of this same client (a handle
    /// of the same [`Redlock`](crate::Redlock) client, still in memory) as the key's holder.
    pub fn held_by_this_client(&self) -> bool {
        self.1
    }

    /// Each node's outcome, in configuration order.
    pub fn nodes(&self) -> &[NodeOutcome] {
        &self.0
    }

    /// Whether so many nodes refused this client that no quorum can form without them.
    fn denies_quorum(&self) -> bool {
        redlock_core::denies_quorum(self.0.iter().map(|n| &n.status))
    }

    /// The nodes the restart quarantine left out, each with how long it has left
    /// ([`NodeFailure::Quarantined`]), in configuration order.
    pub fn quarantined(&self) -> impl Iterator<Item = (&str, Duration)> {
        self.0.iter().filter_map(|node| match node.status {
            NodeStatus::Failed(NodeFailure::Quarantined { remaining }) => {
                Some((&*node.address, remaining))
            }
            _ => None,
        })
    }

    /// How many nodes have a status matching `predicate`.
    pub fn count(&self, predicate: impl Fn(&NodeStatus) -> bool) -> usize {
        self.0.iter().filter(|n| predicate(&n.status)).count()
    }
}

impl fmt::Display for NodeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, node) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", node.address, node.status)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redlock_core::Reply;

    fn report(statuses: Vec<NodeStatus>) -> NodeReport {
        let addresses: Vec<Arc<str>> = (1..=statuses.len())
            .map(|i| Arc::from(format!("10.0.0.{i}:6379")))
            .collect();
        NodeReport::new(&addresses, statuses)
    }

    fn out(millis: u64) -> NodeStatus {
        NodeStatus::Failed(NodeFailure::Quarantined {
            remaining: Duration::from_millis(millis),
        })
    }

    fn no_quorum(statuses: Vec<NodeStatus>) -> Error {
        let nodes = report(statuses);
        Error::NoQuorum {
            resource: "job".into(),
            attempts: 1,
            quarantine_wait: quarantine_wait(nodes.0.iter().map(|n| &n.status)),
            nodes,
        }
    }

    #[test]
    fn a_quorum_held_back_by_the_quarantine_says_so_with_the_nodes_and_the_time_left() {
        let err = no_quorum(vec![
            NodeStatus::Failed(NodeFailure::Quarantined {
                remaining: Duration::from_nanos(29_511_217_237),
            }),
            out(28_000),
            NodeStatus::Pending,
        ]);
        let Error::NoQuorum {
            quarantine_wait, ..
        } = &err
        else {
            unreachable!()
        };
        assert_eq!(*quarantine_wait, Some(Duration::from_millis(28_000)));
        assert_eq!(
            err.to_string(),
            "no quorum for `job`: the restart quarantine leaves out 2 of 3 nodes, which started \
             or restarted less than the quarantine ago and may have lost their keys \
             (10.0.0.1:6379 for another 29.511s, 10.0.0.2:6379 for another 28s); a quorum can \
             form in 28s at the earliest. Wait for it, or, if every node persists each write \
             before acknowledging it (appendfsync always), declare that \
             (RedlockBuilder::nodes_persist_every_write) and no node is left out; see \
             \"Persistence and restarts\" in docs/operations.md (1 attempt(s); the other \
             nodes: 10.0.0.3:6379 no answer yet)"
        );
        assert!(err.is_retryable());
        let left: Vec<_> = err.nodes().unwrap().quarantined().map(|(a, _)| a).collect();
        assert_eq!(left, ["10.0.0.1:6379", "10.0.0.2:6379"]);
    }

    #[test]
    fn nodes_that_did_not_answer_are_the_cause_when_the_others_make_a_quorum() {
        let timed_out = NodeStatus::Failed(NodeFailure::TimedOut);
        let err = no_quorum(vec![out(5_000), timed_out.clone(), timed_out]);
        assert!(
            matches!(
                err,
                Error::NoQuorum {
                    quarantine_wait: None,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with(
                "no quorum for `job`: too few nodes answered, and the restart quarantine left \
                 out 1 of 3 (1 attempt(s); last round: 10.0.0.1:6379 started or restarted"
            ),
            "{text}"
        );
        assert!(text.contains("not counted for another 5s"), "{text}");
        let plain = no_quorum(vec![
            NodeStatus::Failed(NodeFailure::Refused),
            NodeStatus::Failed(NodeFailure::Refused),
            NodeStatus::Replied(Reply::Acquired),
        ]);
        assert_eq!(
            plain.to_string(),
            "no quorum for `job`: too few nodes answered (1 attempt(s); last round: \
             10.0.0.1:6379 connection refused, 10.0.0.2:6379 connection refused, \
             10.0.0.3:6379 acquired)"
        );
    }

    #[test]
    fn durations_in_messages_have_at_most_three_decimals() {
        let exhausted = Error::ValidityExhausted {
            resource: "job".into(),
            attempts: 1,
            elapsed: Duration::from_nanos(29_511_217_237),
            nodes: report(vec![NodeStatus::Replied(Reply::TakenFor {
                remaining: Duration::from_nanos(1_234_567_891),
            })]),
        };
        assert_eq!(
            exhausted.to_string(),
            "`job`: a quorum agreed only after 29.511s, leaving no validity (1 attempt(s); last \
             round: 10.0.0.1:6379 taken by another owner for 1.235s)"
        );
        let held = Error::HoldLimit {
            resource: "job".into(),
            max_hold: Duration::from_nanos(3_600_000_400_000),
        };
        assert_eq!(
            held.to_string(),
            "the lease on `job` reached its longest hold (3600s)"
        );
    }
}
