//! The client's work that outlives the operation that started it: requests still in
//! flight when an operation decided or was cancelled, and releases of dropped leases. It is
//! counted so that a process can wait for it before it exits
//! ([`Redlock::settle`](crate::Redlock::settle)).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use tracing::Instrument;

/// The client's work still running in the background (stragglers of finished operations,
/// releases of dropped leases), counted so that a process can wait for it before it exits.
#[derive(Clone, Debug, Default)]
pub(crate) struct Background(Arc<BackgroundState>);

#[derive(Debug, Default)]
struct BackgroundState {
    running: AtomicUsize,
    idle: Notify,
}

/// Counts one piece of background work as finished when dropped: when it completes, and
/// also when the runtime shuts down and drops it unfinished.
#[derive(Debug)]
pub(crate) struct Running(Background);

impl Drop for Running {
    fn drop(&mut self) {
        let state = &(self.0).0;
        if state.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.idle.notify_waiters();
        }
    }
}

impl Background {
    /// Counts a piece of background work that runs elsewhere (the keeper's release, in the
    /// keeper's own task) from now until the returned guard is dropped.
    pub(crate) fn hold(&self) -> Running {
        self.0.running.fetch_add(1, Ordering::AcqRel);
        Running(self.clone())
    }

    /// Runs `work` on `runtime`, counted until it finishes.
    pub(crate) fn spawn(
        &self,
        runtime: &tokio::runtime::Handle,
        work: impl Future<Output = ()> + Send + 'static,
    ) {
        let running = self.hold();
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
        super::wait_for(&self.0.idle, || self.running() == 0).await;
    }
}
