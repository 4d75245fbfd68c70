//! Where a simulated lease's fencing token comes from.
//!
//! - **Linearizable**: an idealized counter (a consensus system) that numbers leases in
//!   grant order; minted at the grant, and attached under the core's rule
//!   ([`Held::set_fence`](redlock_core::Held::set_fence)).
//! - **Quorum-minted**: the core's own two-phase fenced acquisition; the grant carries it.
//! - **Redis-counter**: a strawman of peer clients, modelled here and nowhere else: after the
//!   grant, `INCR` on every node, the largest value of a quorum of answers. It is as
//!   forgetful as the nodes (RL-16).

use redlock_core::{Grant, Timestamp, quorum};

use crate::time::Nanos;

/// A Redis-counter token being minted after the grant.
#[derive(Debug)]
pub(super) struct Minting {
    /// The grant, as the client believes it.
    pub(super) grant: Grant,
    pub(super) epoch: u64,
    pub(super) granted_at: Nanos,
    counters: Vec<Option<i64>>,
    /// When the client gives up waiting for a quorum of counters (its clock).
    pub(super) deadline: Timestamp,
}

impl Minting {
    pub(super) fn new(
        grant: Grant,
        epoch: u64,
        granted_at: Nanos,
        nodes: usize,
        deadline: Timestamp,
    ) -> Self {
        Self {
            grant,
            epoch,
            granted_at,
            counters: vec![None; nodes],
            deadline,
        }
    }

    /// Records node `slot`'s counter; returns whether a quorum of counters is in.
    pub(super) fn counted(&mut self, slot: usize, value: i64) -> bool {
        if let Some(entry) = self.counters.get_mut(slot)
            && entry.is_none()
        {
            *entry = Some(value);
        }
        let answered = self.counters.iter().flatten().count();
        answered >= quorum(self.counters.len())
    }

    /// The token: the largest counter read (0 when none was).
    pub(super) fn fence(&self) -> u64 {
        let largest = self.counters.iter().flatten().copied().max().unwrap_or(0);
        u64::try_from(largest).unwrap_or(0)
    }
}
