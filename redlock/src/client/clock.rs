//! The client's monotonic clock, translated to and from the core's [`Timestamp`]s.

use std::time::{Duration, Instant};

use crate::core::Timestamp;

/// Readings of [`Instant`] relative to an origin taken when the client was built.
///
/// `Instant` is monotonic: a wall-clock step (NTP, an administrator) cannot stretch or shrink
/// a lease. Peer clients that measure elapsed time with the wall clock let a backward step
/// extend a lease past its real end.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }

    pub(crate) fn now(&self) -> Timestamp {
        Timestamp::from_duration(self.origin.elapsed())
    }

    /// The `Instant` of a reading, saturating far in the future.
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        self.origin
            .checked_add(at.as_duration())
            .unwrap_or_else(|| self.origin + Duration::from_secs(100 * 365 * 24 * 3600))
    }
}
