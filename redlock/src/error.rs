//! The client's errors: what went wrong, on which node, and whether trying again can help.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::core::{ConfigError, FailureReason, LeaseLost, NodeStatus, ResourceError, RoundFailure};

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
    #[error("`{resource}` is held by another owner ({attempts} attempt(s); last round: {nodes})")]
    Taken {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// What each node did in the last round.
        nodes: NodeReport,
    },

    /// Too few nodes answered for a quorum: they are down, unreachable, paused or failing.
    #[error(
        "no quorum for `{resource}`: too few nodes answered ({attempts} attempt(s); last round: {nodes})"
    )]
    NoQuorum {
        /// The resource.
        resource: String,
        /// How many rounds ran.
        attempts: u32,
        /// What each node did in the last round.
        nodes: NodeReport,
    },

    /// The nodes refused this client: a wrong or missing password, or an ACL that forbids a
    /// command the client needs, on so many nodes that no quorum is possible without them.
    /// Trying again cannot help; the configuration must change.
    #[error(
        "`{resource}`: the nodes refused this client ({attempts} attempt(s); last round: {nodes})"
    )]
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
        "`{resource}`: a quorum agreed only after {elapsed:?}, leaving no validity ({attempts} attempt(s); last round: {nodes})"
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
    #[error("the lease on `{resource}` reached its longest hold ({max_hold:?})")]
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
                nodes,
            },
        }
    }
}

/// What each node did in one round, with the node's address (never its credentials).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeReport(Vec<NodeOutcome>);

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
        )
    }

    /// Each node's outcome, in configuration order.
    pub fn nodes(&self) -> &[NodeOutcome] {
        &self.0
    }

    /// Whether so many nodes refused this client that no quorum can form without them.
    fn denies_quorum(&self) -> bool {
        crate::core::denies_quorum(self.0.iter().map(|n| &n.status))
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
