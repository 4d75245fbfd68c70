//! A lease a simulated client holds, with the core machines that run while it does (the
//! keep-alive, the supervisor, a manual extension): the state alone, which the lease side
//! (`lock`) stores and the holding side (`hold`) drives.

use redlock_core::{
    Extend, Held, Keeper, Machine, NodeFailure, Reply, RequestId, Supervisor, Timestamp,
};

/// A lease the client holds, and what runs while it does.
#[derive(Debug)]
pub(super) struct Holding {
    /// Its record in the history.
    pub(super) record: usize,
    pub(super) epoch: u64,
    pub(super) held: Held,
    pub(super) keeper: Option<Keeper>,
    pub(super) supervisor: Option<Supervisor>,
    /// A manual extension (an `extend` step) in progress.
    pub(super) extending: Option<Extend>,
    /// The owner dropped the handle (a `drop-handle` step): nobody tells the keeper when the
    /// work stops.
    pub(super) handle_dropped: bool,
}

impl Holding {
    /// Its machines' timers may have fired.
    pub(super) fn handle_timeout(&mut self, now: Timestamp) {
        if let Some(keeper) = &mut self.keeper {
            keeper.handle_timeout(now);
        }
        if let Some(extend) = &mut self.extending {
            extend.handle_timeout(now);
        }
        if let Some(supervisor) = &mut self.supervisor {
            supervisor.handle_timeout(now);
        }
    }

    /// A reply for the running extension (manual, or the keep-alive's).
    pub(super) fn handle_reply(
        &mut self,
        request: RequestId,
        result: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        if let Some(extend) = &mut self.extending {
            extend.handle_reply(request, result, now);
        } else if let Some(keeper) = &mut self.keeper {
            keeper.handle_reply(request, result, now);
        }
    }

    /// Whether the work may still act under the lease at `now`: before the keep-alive's loss
    /// deadline when one runs, else before the end of validity.
    pub(super) fn is_valid(&self, now: Timestamp) -> bool {
        match &self.keeper {
            Some(keeper) => keeper.is_valid(now),
            None => self.held.is_valid(now),
        }
    }
}
