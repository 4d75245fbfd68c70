//! The core's notion of time: readings of the driver's own monotonic clock.
//!
//! The core never reads a clock. Every input that depends on time carries a [`Timestamp`]
//! that the driver read from *its* clock just before calling in. The tokio client reads
//! [`std::time::Instant`]; the simulator reads each simulated process's drifting clock. A
//! `Timestamp` is therefore only comparable with other readings of the same clock.

use std::fmt;
use std::time::Duration;

/// A reading of the driver's monotonic clock, in nanoseconds since an origin the driver chose.
///
/// All arithmetic saturates: time never wraps around and never panics, whatever the inputs.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Timestamp;
///
/// let start = Timestamp::from_nanos(1_000);
/// let later = start.saturating_add(Duration::from_micros(2));
/// assert_eq!(later.saturating_duration_since(start), Duration::from_micros(2));
/// // Asking for time "since" a later reading is zero, not a panic.
/// assert_eq!(start.saturating_duration_since(later), Duration::ZERO);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The clock's origin.
    pub const ZERO: Self = Self(0);
    /// The latest representable reading (about 584 years after the origin).
    pub const MAX: Self = Self(u64::MAX);

    /// A reading `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// A reading `elapsed` after the origin, saturating at [`Timestamp::MAX`].
    pub fn from_duration(elapsed: Duration) -> Self {
        Self(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time since the origin.
    pub const fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self + duration`, saturating at [`Timestamp::MAX`].
    pub fn saturating_add(self, duration: Duration) -> Self {
        let add = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_add(add))
    }

    /// `self - duration`, saturating at [`Timestamp::ZERO`].
    pub fn saturating_sub(self, duration: Duration) -> Self {
        let sub = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        Self(self.0.saturating_sub(sub))
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is not earlier.
    pub const fn saturating_duration_since(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Milliseconds with microsecond precision: the scale at which lock decisions happen.
        let micros = self.0 / 1_000;
        write!(f, "t+{}.{:03}ms", micros / 1_000, micros % 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        assert_eq!(Timestamp::MAX.saturating_add(Duration::MAX), Timestamp::MAX);
        assert_eq!(
            Timestamp::ZERO.saturating_sub(Duration::from_secs(1)),
            Timestamp::ZERO
        );
        assert_eq!(Timestamp::from_duration(Duration::MAX), Timestamp::MAX);
        assert_eq!(
            Timestamp::ZERO.saturating_duration_since(Timestamp::MAX),
            Duration::ZERO
        );
    }

    #[test]
    fn displays_milliseconds() {
        assert_eq!(Timestamp::from_nanos(12_345_678).to_string(), "t+12.345ms");
    }
}
