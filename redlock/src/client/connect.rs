//! Opening the connections ahead of the first lease, and waiting for background work.

use std::fmt;
use std::sync::Arc;

use futures::future::join_all;

use super::Redlock;
use redlock_core::{NodeFailure, quorum};

/// What [`Redlock::connect`] found on each node.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectReport {
    /// Per node, in configuration order: its address (without credentials) and whether a
    /// connection is open.
    pub nodes: Vec<(Arc<str>, Result<(), NodeFailure>)>,
}

impl ConnectReport {
    /// Nodes with an open connection.
    pub fn connected(&self) -> usize {
        self.nodes
            .iter()
            .filter(|(_, status)| status.is_ok())
            .count()
    }

    /// Whether enough nodes are connected to grant a lease.
    pub fn has_quorum(&self) -> bool {
        self.connected() >= quorum(self.nodes.len())
    }
}

impl fmt::Display for ConnectReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} nodes connected",
            self.connected(),
            self.nodes.len()
        )?;
        let mut failed = self.nodes.iter().filter_map(|(address, status)| {
            status.as_ref().err().map(|failure| (address, failure))
        });
        if let Some((address, failure)) = failed.next() {
            write!(f, " ({address} {failure}")?;
            for (address, failure) in failed {
                write!(f, ", {address} {failure}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl Redlock {
    /// Opens the connection to every node now, instead of on the first request.
    ///
    /// Connections open lazily, so the first acquisition of a new client also pays for the
    /// TCP handshake and the identification of the connection (`INFO`, see
    /// [`redlock_core::Eligibility`]), within the per-node timeout: on a busy machine
    /// a fresh process's single [`try_acquire`](Redlock::try_acquire) can miss its quorum
    /// for that reason alone. Calling `connect` first moves that cost out of the lease's
    /// budget. Each node gets the connect timeout plus the per-node timeout; nodes that fail
    /// are simply tried again by the next request. A node found to be the same server as an
    /// earlier one (the same `run_id` under another name) is reported as
    /// [`NodeFailure::Duplicate`] and never votes.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), redlock::Error> {
    /// let redlock = redlock::Redlock::builder()
    ///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .build()?;
    /// let report = redlock.connect().await;
    /// if !report.has_quorum() {
    ///     eprintln!("not enough lock nodes yet: {report}");
    /// }
    /// let lease = redlock.try_acquire("nightly-report").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(&self) -> ConnectReport {
        let budget = self
            .shared
            .connect_timeout
            .saturating_add(self.config.node_timeout());
        let nodes = &self.shared.nodes;
        let statuses = join_all((0..nodes.len()).map(|index| async move {
            tokio::time::timeout(budget, nodes.connect(index))
                .await
                .unwrap_or(Err(NodeFailure::TimedOut))
        }))
        .await;
        ConnectReport {
            nodes: self
                .shared
                .addresses
                .iter()
                .cloned()
                .zip(statuses)
                .collect(),
        }
    }

    /// The nodes the restart quarantine leaves out now, by address, each with how long it
    /// has left, in configuration order. A round's [`NodeReport`](crate::client::NodeReport)
    /// names only the nodes it asked; this names every node identified so far.
    pub fn quarantined(&self) -> Vec<(String, std::time::Duration)> {
        let nodes = &self.shared.nodes;
        self.shared
            .addresses
            .iter()
            .enumerate()
            .filter_map(|(index, address)| Some((address.to_string(), nodes.quarantined(index)?)))
            .collect()
    }

    /// What this client met behind each node's name, by address, to hand to the next
    /// process's [`RedlockBuilder::remembered_servers`](crate::RedlockBuilder::remembered_servers):
    /// the `run_id` each node told (nodes that have not told one yet are left out) and how
    /// long ago a change to it was seen. Read it after [`connect`](Self::connect), and again
    /// before the process ends (a node may have been replaced meanwhile).
    pub fn servers_met(&self) -> Vec<(String, redlock_core::RememberedServer)> {
        let nodes = &self.shared.nodes;
        self.shared
            .addresses
            .iter()
            .enumerate()
            .filter_map(|(index, address)| Some((address.to_string(), nodes.met(index)?)))
            .collect()
    }

    /// Waits until nothing this client started runs in the background any more.
    ///
    /// Operations return as soon as the outcome is decided: a release at a quorum, an
    /// acquisition at its quorum or its failure. Requests to the slower nodes keep running
    /// in background tasks, each bounded by the per-node timeout, as do the releases of
    /// leases dropped without [`release`](super::Lease::release). A process about to exit
    /// (a cron job, a CLI) calls `settle` so that those requests are not cut off with the
    /// runtime, which would leave their keys until the TTL. Keep-alive tasks are not
    /// background work in this sense: stop or release those leases first.
    ///
    /// ```no_run
    /// # async fn run(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// let lease = redlock.acquire("nightly-report").await?;
    /// // ... the job ...
    /// lease.release().await;
    /// redlock.settle().await; // every node has answered or timed out
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self) {
        self.shared.background.settled().await;
    }
}
