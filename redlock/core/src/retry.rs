//! When to try again after a failed round, with the randomness supplied by the caller.

use std::time::Duration;

use rand::{Rng, RngExt};

use super::Timestamp;

/// How a failed acquisition round is retried.
///
/// After a failed round the next one starts `delay` plus a uniformly random part of `jitter`
/// later, so that clients that collided do not collide again in lock-step. Zero delay and zero
/// jitter are both valid (retry at once).
///
/// ```
/// use std::time::Duration;
/// use redlock_core::RetryPolicy;
///
/// let policy = RetryPolicy::new(3, Duration::from_millis(100), Duration::from_millis(100));
/// assert_eq!(policy.retries(), 3);
/// assert_eq!(policy.attempts(), 4);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    pub(crate) retries: u32,
    pub(crate) delay: Duration,
    pub(crate) jitter: Duration,
}

impl RetryPolicy {
    /// Retries up to `retries` times after the first round, each after `delay` plus up to
    /// `jitter`.
    pub const fn new(retries: u32, delay: Duration, jitter: Duration) -> Self {
        Self {
            retries,
            delay,
            jitter,
        }
    }

    /// A single round, no retry.
    pub const fn no_retry() -> Self {
        Self::new(0, Duration::ZERO, Duration::ZERO)
    }

    /// How many rounds may follow the first one.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The total number of rounds an acquisition may run.
    pub const fn attempts(&self) -> u32 {
        self.retries.saturating_add(1)
    }

    /// The fixed part of the delay between rounds.
    pub const fn delay(&self) -> Duration {
        self.delay
    }

    /// The random part of the delay between rounds: uniform in `[0, jitter)`.
    pub const fn jitter(&self) -> Duration {
        self.jitter
    }

    /// The longest an acquisition can spend between its rounds: every retry after the
    /// whole delay and jitter. The client lets a waiter stand this long in line behind its
    /// other waiters for the same resource.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::RetryPolicy;
    ///
    /// assert_eq!(RetryPolicy::default().max_wait(), Duration::from_millis(600));
    /// ```
    pub fn max_wait(&self) -> Duration {
        self.delay
            .saturating_add(self.jitter)
            .saturating_mul(self.retries)
    }

    /// The window in which the round after a failure at `failed_at` may start.
    pub fn window_after(&self, failed_at: Timestamp) -> RetryWindow {
        RetryWindow {
            earliest: failed_at.saturating_add(self.delay),
            spread: self.jitter,
        }
    }
}

impl Default for RetryPolicy {
    /// Three retries, 100 ms apart plus up to 100 ms of jitter.
    fn default() -> Self {
        Self::new(3, Duration::from_millis(100), Duration::from_millis(100))
    }
}

/// When the next round may start: at `earliest` plus a random part of `spread`.
///
/// The core has no random number generator of its own: the driver picks the start with
/// [`RetryWindow::pick`] and its own generator (the client its thread-local one, the
/// simulator its seeded one).
///
/// ```
/// use std::time::Duration;
/// use rand::SeedableRng;
/// use redlock_core::{RetryWindow, Timestamp};
///
/// let window = RetryWindow::new(Timestamp::from_nanos(1_000), Duration::from_nanos(500));
/// let at = window.pick(&mut rand::rngs::StdRng::seed_from_u64(7));
/// assert!(at >= window.earliest() && at < window.latest());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryWindow {
    earliest: Timestamp,
    spread: Duration,
}

impl RetryWindow {
    /// A window starting at `earliest` and `spread` wide.
    pub const fn new(earliest: Timestamp, spread: Duration) -> Self {
        Self { earliest, spread }
    }

    /// The earliest start.
    pub const fn earliest(&self) -> Timestamp {
        self.earliest
    }

    /// The end of the window (exclusive, unless the window is empty).
    pub fn latest(&self) -> Timestamp {
        self.earliest.saturating_add(self.spread)
    }

    /// This window, ending no later than `at`: cut at `at`, or the instant `at` itself when
    /// the window starts after it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{RetryWindow, Timestamp};
    ///
    /// let at = |n| Timestamp::from_nanos(n);
    /// let window = RetryWindow::new(at(100), Duration::from_nanos(50));
    /// assert_eq!(window.ending_by(at(120)).latest(), at(120));
    /// assert_eq!(window.ending_by(at(60)), RetryWindow::new(at(60), Duration::ZERO));
    /// assert_eq!(window.ending_by(at(500)), window);
    /// ```
    #[must_use]
    pub fn ending_by(self, at: Timestamp) -> Self {
        if at <= self.earliest {
            Self::new(at, Duration::ZERO)
        } else {
            let spread = self.spread.min(at.saturating_duration_since(self.earliest));
            Self::new(self.earliest, spread)
        }
    }

    /// A start drawn uniformly from the window with the caller's generator.
    pub fn pick<R: Rng + ?Sized>(&self, rng: &mut R) -> Timestamp {
        let spread = u64::try_from(self.spread.as_nanos()).unwrap_or(u64::MAX);
        if spread == 0 {
            return self.earliest;
        }
        let offset = rng.random_range(0..spread);
        self.earliest.saturating_add(Duration::from_nanos(offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn empty_window_is_its_start() {
        let window = RetryPolicy::no_retry().window_after(Timestamp::from_nanos(42));
        assert_eq!(
            window.pick(&mut StdRng::seed_from_u64(1)),
            Timestamp::from_nanos(42)
        );
    }

    proptest! {
        #[test]
        fn picks_stay_inside_the_window(start in any::<u64>(), delay in any::<u64>(), jitter in any::<u64>(), seed in any::<u64>()) {
            let policy = RetryPolicy::new(1, Duration::from_nanos(delay), Duration::from_nanos(jitter));
            let window = policy.window_after(Timestamp::from_nanos(start));
            let at = window.pick(&mut StdRng::seed_from_u64(seed));
            prop_assert!(at >= window.earliest());
            prop_assert!(at <= window.latest());
            prop_assert!(at < window.latest() || window.earliest() == window.latest() || window.latest() == Timestamp::MAX);
        }

        #[test]
        fn a_window_ending_by_an_instant_never_ends_after_it(start in any::<u64>(), spread in any::<u64>(), by in any::<u64>(), seed in any::<u64>()) {
            let window = RetryWindow::new(Timestamp::from_nanos(start), Duration::from_nanos(spread));
            let by = Timestamp::from_nanos(by);
            let cut = window.ending_by(by);
            let at = cut.pick(&mut StdRng::seed_from_u64(seed));
            prop_assert!(at <= by);
            prop_assert!(cut.latest() <= window.latest());
            // Never earlier than needed: the original start, unless `by` comes first.
            prop_assert_eq!(cut.earliest(), window.earliest().min(by));
        }
    }
}
