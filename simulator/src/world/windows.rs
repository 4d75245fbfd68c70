//! Each lease's windows, computed when the run ends: the true-time intervals during which
//! its holder believed it held it ([`History::windows`](crate::judge::history::History::windows)),
//! and when its holder's clock first read its deadline. The checker judges mutual exclusion
//! from them; the timeline and the diagram show them.

use super::World;
use crate::time::Nanos;

impl World<'_> {
    /// Sets `windows`, `deadlines_reached` and each lease's `window_end` in the history.
    pub(super) fn close_windows(&mut self) {
        // A lease's windows: while its holder's clock reads before the lease's deadline (the
        // last extension's, for the whole lease), from the grant until its holder crashed,
        // or both released it and its work stopped (a work told to stop finishes its step,
        // and acts under the lease until then). A clock that steps back past the deadline (a
        // client that reads the wall clock) opens another window.
        let mut windows = Vec::with_capacity(self.history.leases.len());
        let mut deadlines = Vec::with_capacity(self.history.leases.len());
        for lease in &mut self.history.leases {
            let clock = &self.clients[lease.client].clock;
            deadlines.push(clock.when(lease.valid_until_local, lease.granted_at));
            let work_stopped = match (lease.work_started, lease.work_stopped_at) {
                (true, None) => Some(Nanos::MAX),
                (true, stopped) => stopped,
                (false, _) => None,
            };
            let let_go = lease.released_at.map_or(Nanos::MAX, |released| {
                released.max(work_stopped.unwrap_or(0))
            });
            let stop = lease
                .crashed_at
                .map_or(let_go, |crashed| crashed.min(let_go));
            let intervals = clock.intervals_below(lease.valid_until_local, lease.granted_at, stop);
            lease.window_end = intervals
                .last()
                .map_or(lease.granted_at, |&(_, until)| until);
            windows.push(intervals);
        }
        self.history.windows = windows;
        self.history.deadlines_reached = deadlines;
    }
}
