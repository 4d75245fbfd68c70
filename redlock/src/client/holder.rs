//! Who holds a resource: the core's [`HolderQuery`] driven over the nodes.

use tracing::Instrument;

use super::Redlock;
use super::drive::drive;
use crate::error::Error;
use redlock_core::{Holder, HolderQuery, LockKey, Target};

impl Redlock {
    /// Who holds `resource`: asks every node, read-only, for the lock key's value, its
    /// remaining TTL and the resource's fence counter, and judges the answers on a quorum
    /// (see [`Holder`] and [`Verdict`](redlock_core::Verdict)): held by a token on `k` of `N`
    /// nodes, expiring in `d`; free; or unknown when too few nodes answered to tell.
    ///
    /// The query never creates, changes or deletes a key: each node gets one `MULTI` of
    /// `GET` and `PTTL`, then a `GET` of the fence counter (a Cluster member refuses a
    /// transaction across two slots; the user's ACL needs `+get`, `+pttl`, `+multi` and
    /// `+exec`).
    /// It waits for every node's answer or the per-node timeout, whichever comes first,
    /// connecting and identifying the node within that timeout when no connection is open
    /// (call [`connect`](Redlock::connect) first on nodes far away). Nodes in their restart
    /// quarantine are not asked, as they take no part in a quorum either: they may have
    /// forgotten keys (they show as [`NodeFailure::Quarantined`](redlock_core::NodeFailure)).
    ///
    /// What the nodes say is a snapshot: the holder may release or extend the lease a moment
    /// later, and its own validity ends before the TTL the nodes show. Use it to see who is
    /// on a resource, not to decide who may act on it (only a lease does that).
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// use redlock::core::Verdict;
    ///
    /// let holder = redlock.holder("nightly-report").await?;
    /// match holder.verdict() {
    ///     Verdict::Held { value, nodes, expires_in, fence, .. } => {
    ///         println!("held by {value} on {nodes} nodes for {expires_in:?} (fence {fence:?})")
    ///     }
    ///     Verdict::Free { .. } => println!("free"),
    ///     Verdict::Unknown { answered, .. } => println!("unknown: {answered} nodes answered"),
    ///     _ => {}
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Resource`] for an empty or over-long resource name. Nodes that fail are
    /// reported in the [`Holder`], not as an error.
    pub async fn holder(&self, resource: &str) -> Result<Holder, Error> {
        let key = LockKey::new(&self.shared.key_prefix, resource)?;
        let span = tracing::debug_span!("holder", resource = %resource);
        async {
            let config = self.config();
            let clock = self.clock();
            // In the resource's lanes: the query sees the effect of this client's own
            // commands on the resource that are still on their way.
            let lanes = self.shared.lanes.of(&Target::One(key.clone()));
            let mut machine = HolderQuery::new(config, key, clock.now());
            let mut flight = self.flight(config, lanes);
            drive(&mut machine, &mut flight, clock)
                .await
                .ok_or(Error::Internal("the holder query stalled"))
        }
        .instrument(span)
        .await
    }
}
