//! A held lease: what it holds, until when, and the machines that extend and release it.
//!
//! Every driver keeps its leases as a [`Held`], so "is it still valid", "may it be extended"
//! and "what does an extension change" are answered once, here.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::hash_renumbered::{HashRenumbered, hash_per_node};
use super::renumber::{NodePermutation, RenumberNodes, renumber_per_node};
use super::{
    Extend, Extension, Grant, LockConfig, NodeStatus, Release, Reply, Target, Timestamp, Token,
};

/// A lease won by an [`Acquire`](super::Acquire): its keys, its token, its fencing token and
/// its deadline on the holder's clock.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new(DEFAULT_KEY_PREFIX, "report").unwrap();
/// let t0 = Timestamp::ZERO;
/// let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), t0);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
/// acquire.handle_reply(sent[0].request, Ok(Reply::Acquired), t0);
/// acquire.handle_reply(sent[1].request, Ok(Reply::Acquired), t0);
/// let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else { panic!() };
///
/// let held = Held::new(grant);
/// assert!(held.is_valid(t0));
/// assert_eq!(held.remaining(t0), Duration::from_millis(9_898));
/// let later = t0.saturating_add(Duration::from_secs(10));
/// assert!(!held.is_valid(later));
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Held {
    target: Target,
    token: Token,
    fence: Option<u64>,
    acquired_at: Timestamp,
    valid_until: Timestamp,
    attempts: u32,
    extensions: u32,
    /// Per node where the grant showed that the lease's `SET` wrote nothing (see
    /// [`NodeStatus::wrote_nothing`]), what its release reports instead of asking it.
    spared: Vec<Option<NodeStatus>>,
}

/// A fencing token that arrived after the lease's validity had ended: the lease must not be
/// used with it (release it instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, Hash)]
#[error(
    "the fencing token arrived {} after the lease's validity ended",
    super::Readable(*.late_by)
)]
pub struct FenceTooLate {
    /// How late.
    pub late_by: Duration,
}

impl Held {
    /// The lease a grant describes.
    pub fn new(grant: Grant) -> Self {
        Self {
            target: grant.target,
            token: grant.token,
            fence: grant.fence,
            acquired_at: grant.started_at,
            valid_until: grant.valid_until,
            attempts: grant.attempts,
            extensions: 0,
            spared: grant.nodes.iter().map(spared_in_release).collect(),
        }
    }

    /// What the lease holds.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The owner token stored under the lease's keys.
    pub fn token(&self) -> Token {
        self.token
    }

    /// The fencing token, when the lease has one.
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    /// The start of the winning round: [`LockConfig::max_hold`] counts from here.
    pub fn acquired_at(&self) -> Timestamp {
        self.acquired_at
    }

    /// The end of validity on the holder's clock, after the last extension.
    pub fn valid_until(&self) -> Timestamp {
        self.valid_until
    }

    /// How many rounds the acquisition took.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How many times the lease was extended.
    pub fn extensions(&self) -> u32 {
        self.extensions
    }

    /// Whether the validity has not ended at `now`.
    pub fn is_valid(&self, now: Timestamp) -> bool {
        now < self.valid_until
    }

    /// The validity left at `now`; zero once it has ended.
    pub fn remaining(&self, now: Timestamp) -> Duration {
        self.valid_until.saturating_duration_since(now)
    }

    /// From when on no extension is allowed: `acquired_at + max_hold`.
    pub fn hold_limit(&self, config: &LockConfig) -> Timestamp {
        self.acquired_at.saturating_add(config.max_hold())
    }

    /// An extension of this lease starting at `now` (refused without sending anything when
    /// the lease has expired or reached its longest hold).
    pub fn extend(&self, config: &LockConfig, now: Timestamp) -> Extend {
        self.extend_numbered(config, now, 1)
    }

    /// As [`Held::extend`], with the requests numbered `round` (see [`Extend::numbered`]).
    pub(crate) fn extend_numbered(
        &self,
        config: &LockConfig,
        now: Timestamp,
        round: u32,
    ) -> Extend {
        Extend::numbered(
            config,
            self.target.clone(),
            self.token,
            self.valid_until,
            self.acquired_at,
            now,
            round,
        )
    }

    /// Records a successful extension: the lease is valid until the later of its old and its
    /// new deadline (both are sound: the extension reset the keys' expiry after the old one
    /// was computed).
    pub fn apply(&mut self, extension: &Extension) {
        self.valid_until = self.valid_until.max(extension.valid_until);
        self.extensions = self.extensions.saturating_add(1);
    }

    /// Attaches a fencing token minted outside the nodes (a `FenceSource`), received at
    /// `now`. A token that arrives after the validity ended is refused: the caller must
    /// release the lease and report the acquisition as failed, never hand out a lease that
    /// is already over.
    ///
    /// # Errors
    ///
    /// [`FenceTooLate`] when `now` is not before the end of validity.
    pub fn set_fence(&mut self, fence: u64, now: Timestamp) -> Result<(), FenceTooLate> {
        if !self.is_valid(now) {
            return Err(FenceTooLate {
                late_by: now.saturating_duration_since(self.valid_until),
            });
        }
        self.fence = Some(fence);
        Ok(())
    }

    /// The release of this lease, starting at `now`.
    ///
    /// Nodes where the grant showed that the lease's `SET` wrote nothing get no release: one
    /// that found another owner's key counts as not holding ours, one whose `SET` was never
    /// sent keeps the grant's failure (a duplicate of another node must not count twice).
    pub fn release(&self, config: &LockConfig, now: Timestamp) -> Release {
        Release::new(config, self.target.clone(), self.token, now)
            .sparing(|node| self.spared.get(node.index()).cloned().flatten())
    }
}

/// What a release reports for a node without asking it, given the node's status at the
/// grant: `None` when the node may hold the key and must be asked.
fn spared_in_release(status: &NodeStatus) -> Option<NodeStatus> {
    status.wrote_nothing().then(|| match status {
        // Another owner's key: ours is not there.
        NodeStatus::Replied(_) => NodeStatus::Replied(Reply::NotHeld),
        // Never sent: the failure stands for the release too.
        other => other.clone(),
    })
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("target", &self.target)
            .field("token", &self.token.short())
            .field("fence", &self.fence)
            .field("acquired_at", &self.acquired_at)
            .field("valid_until", &self.valid_until)
            .field("extensions", &self.extensions)
            .finish()
    }
}

impl RenumberNodes for Held {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        renumber_per_node(&mut self.spared, perm);
    }
}

impl HashRenumbered for Held {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the lease must be added here.
        let Self {
            target,
            token,
            fence,
            acquired_at,
            valid_until,
            attempts,
            extensions,
            spared,
        } = self;
        (
            target,
            token,
            fence,
            acquired_at,
            valid_until,
            attempts,
            extensions,
        )
            .hash(state);
        hash_per_node(spared, perm, state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LockKey, NodeStatus};

    fn held(valid_until: Timestamp) -> Held {
        Held::new(Grant {
            target: LockKey::new("", "r").unwrap().into(),
            token: Token::from_bytes([1; 16]),
            started_at: Timestamp::ZERO,
            decided_at: Timestamp::ZERO,
            valid_until,
            attempts: 1,
            nodes: vec![NodeStatus::Pending; 3],
            fence: None,
        })
    }

    #[test]
    fn a_fence_after_the_validity_is_refused() {
        let end = Timestamp::from_nanos(1_000);
        let mut lease = held(end);
        assert_eq!(
            lease.set_fence(7, end),
            Err(FenceTooLate {
                late_by: Duration::ZERO
            })
        );
        assert_eq!(lease.fence(), None);
        assert_eq!(lease.set_fence(7, Timestamp::from_nanos(999)), Ok(()));
        assert_eq!(lease.fence(), Some(7));
    }

    #[test]
    fn an_extension_never_shortens_the_lease() {
        let mut lease = held(Timestamp::from_nanos(5_000));
        lease.apply(&Extension {
            started_at: Timestamp::ZERO,
            decided_at: Timestamp::ZERO,
            valid_until: Timestamp::from_nanos(4_000),
            nodes: Vec::new(),
        });
        assert_eq!(lease.valid_until(), Timestamp::from_nanos(5_000));
        assert_eq!(lease.extensions(), 1);
    }
}
