//! Requests in flight, kept running until each node has answered or timed out.
//!
//! Two hazards shape this module:
//!
//! - With redis-rs, a request future dropped before its command is written is never sent,
//!   and one dropped after is still executed by the node. A client that decides at a quorum
//!   and drops the stragglers can therefore leak keys, or release before its own `SET`
//!   lands. Requests are never dropped here: when an operation ends (or is cancelled), what
//!   is still in flight moves to a background task that runs it to completion.
//! - A cleanup release must reach a node after the `SET` it cleans up. Each node has a
//!   *lane*: a command starts only once the previous command of the same lease to that node
//!   has finished. The node's connection is ordered, so the node executes them in order too.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::sync::atomic::AtomicBool;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::task::AtomicWaker;

use tokio::sync::Notify;
use tracing::Instrument;

use super::node::Node;
use crate::core::{NodeFailure, Reply, RequestId, Transmit};

/// The client's work still running in the background (stragglers of finished operations,
/// releases of dropped leases), counted so that a process can wait for it before it exits.
#[derive(Clone, Default)]
pub(crate) struct Background(Arc<BackgroundState>);

#[derive(Default)]
struct BackgroundState {
    running: AtomicUsize,
    idle: Notify,
}

/// Counts one background task as finished when dropped: when it completes, and also when
/// the runtime shuts down and drops it unfinished.
struct Running(Background);

impl Drop for Running {
    fn drop(&mut self) {
        let state = &(self.0).0;
        if state.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.idle.notify_waiters();
        }
    }
}

impl Background {
    /// Runs `work` on `runtime`, counted until it finishes.
    pub(crate) fn spawn(
        &self,
        runtime: &tokio::runtime::Handle,
        work: impl Future<Output = ()> + Send + 'static,
    ) {
        self.0.running.fetch_add(1, Ordering::AcqRel);
        let running = Running(self.clone());
        // In the span of the operation that started the work, so that a slow node's
        // failure, logged once the operation has returned, is still attributed to it.
        runtime.spawn(
            async move {
                work.await;
                drop(running);
            }
            .in_current_span(),
        );
    }

    /// Background tasks not finished yet.
    pub(crate) fn running(&self) -> usize {
        self.0.running.load(Ordering::Acquire)
    }

    /// Returns once nothing runs in the background.
    pub(crate) async fn settled(&self) {
        loop {
            // Registered before the count is read, so a task finishing in between still
            // wakes this waiter.
            let idle = self.0.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.running() == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// A finished request.
pub(crate) struct Completion {
    pub(crate) request: RequestId,
    pub(crate) result: Result<Reply, NodeFailure>,
}

/// Opens when a command of a lane has finished (or was dropped unfinished). Only the lane's
/// next command ever waits on it, so one waker slot is enough.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    waiter: AtomicWaker,
}

impl Gate {
    fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    fn poll_open(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_open() {
            return Poll::Ready(());
        }
        // Registered before the second look, so an opening in between still wakes us.
        self.waiter.register(cx.waker());
        if self.is_open() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Opens its gate when dropped: when the command finishes, times out or is cancelled.
struct OpensOnDrop(Arc<Gate>);

impl Drop for OpensOnDrop {
    fn drop(&mut self) {
        self.0.open.store(true, Ordering::Release);
        self.0.waiter.wake();
    }
}

/// For each node, a gate that opens when the lease's last command to that node finished.
#[derive(Clone, Default)]
pub(crate) struct Lanes(Vec<Option<Arc<Gate>>>);

impl Lanes {
    pub(crate) fn new(nodes: usize) -> Self {
        Self(vec![None; nodes])
    }

    /// Installs `gate` as node `index`'s last command; returns the one it follows.
    fn push(&mut self, index: usize, gate: Arc<Gate>) -> Option<Arc<Gate>> {
        if self.0.len() <= index {
            self.0.resize(index + 1, None);
        }
        self.0[index].replace(gate)
    }
}

/// The requests of one operation (acquire, extend or release).
pub(crate) struct Flight {
    nodes: Arc<[Node]>,
    background: Background,
    timeout: Duration,
    lanes: Lanes,
    pending: FuturesUnordered<BoxFuture<'static, Completion>>,
}

impl Flight {
    pub(crate) fn new(
        nodes: Arc<[Node]>,
        background: Background,
        timeout: Duration,
        lanes: Lanes,
    ) -> Self {
        Self {
            nodes,
            background,
            timeout,
            lanes,
            pending: FuturesUnordered::new(),
        }
    }

    /// Starts `transmit` once the previous command to its node has finished, bounded by the
    /// per-node timeout.
    pub(crate) fn send(&mut self, transmit: Transmit) {
        let index = transmit.node.index();
        let gate = Arc::new(Gate::default());
        let done = OpensOnDrop(Arc::clone(&gate));
        // A previous command that has already finished needs no waiting (the common case).
        let previous = self
            .lanes
            .push(index, gate)
            .filter(|previous| !previous.is_open());
        let nodes = Arc::clone(&self.nodes);
        let timeout = self.timeout;
        self.pending.push(Box::pin(async move {
            if let Some(previous) = previous {
                std::future::poll_fn(|cx| previous.poll_open(cx)).await;
            }
            let result = match nodes.get(index) {
                None => Err(NodeFailure::Protocol(format!("no node #{index}"))),
                Some(node) => {
                    let result = tokio::time::timeout(timeout, node.execute(&transmit.command))
                        .await
                        .unwrap_or(Err(NodeFailure::TimedOut));
                    if let Err(failure) = &result {
                        tracing::debug!(node = %node.address(), error = %failure, "node request failed");
                    }
                    result
                }
            };
            // Opens the gate of the next command to this node.
            drop(done);
            Completion {
                request: transmit.request,
                result,
            }
        }));
    }

    /// The next finished request; `None` when nothing is in flight.
    pub(crate) async fn next(&mut self) -> Option<Completion> {
        self.pending.next().await
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
    }

    /// Keeps the requests moving until `deadline` (used while waiting to retry).
    pub(crate) async fn run_until(&mut self, deadline: Instant) {
        let sleep = tokio::time::sleep_until(deadline.into());
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return,
                Some(_) = self.pending.next() => {}
            }
        }
    }

    /// Runs every request to completion (each is bounded by its timeout).
    pub(crate) async fn finish(&mut self) {
        while self.pending.next().await.is_some() {}
    }

    /// The lanes, for the lease's next operation. What is still in flight continues in the
    /// background (see `Drop`).
    pub(crate) fn into_lanes(mut self) -> Lanes {
        std::mem::take(&mut self.lanes)
    }
}

impl Default for Flight {
    /// A flight with no nodes and nothing in it.
    fn default() -> Self {
        Self::new(
            Arc::from(Vec::new()),
            Background::default(),
            Duration::ZERO,
            Lanes::default(),
        )
    }
}

impl Drop for Flight {
    /// Hands the requests still in flight to a background task, so that nothing written to a
    /// node is left half done. Each is bounded by the per-node timeout.
    fn drop(&mut self) {
        let mut pending = std::mem::take(&mut self.pending);
        if pending.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                self.background.spawn(
                    &runtime,
                    async move { while pending.next().await.is_some() {} },
                )
            }
            Err(_) => tracing::warn!(
                requests = pending.len(),
                "no tokio runtime to finish in-flight lock requests; any key they set expires with its TTL"
            ),
        }
    }
}
