//! The arithmetic Redlock's safety argument rests on: quorum size, drift allowance, validity.
//!
//! Everything here is integer arithmetic on nanoseconds and saturates. Peer clients compute
//! the drift with `f32` (losing precision above ~16.7 million milliseconds) or subtract
//! `usize` milliseconds (panicking when the elapsed time exceeds the TTL); these functions
//! return a result for every input, and the property tests below prove it.

use std::fmt;
use std::time::Duration;

use super::Timestamp;

/// The fixed part of the drift allowance: 1 ms for Redis's expiry precision plus 1 ms of
/// minimum drift for small TTLs, as in the reference implementation.
pub const DRIFT_FLOOR: Duration = Duration::from_millis(2);

const PPM: u128 = 1_000_000;

/// The number of nodes that must agree: a strict majority of the configured nodes.
///
/// It depends only on the configured `nodes`, never on how many are reachable; counting only
/// reachable nodes would let both sides of a partition win.
///
/// ```
/// use redlock_core::quorum;
/// assert_eq!(quorum(1), 1);
/// assert_eq!(quorum(4), 3);
/// assert_eq!(quorum(5), 3);
/// ```
pub const fn quorum(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// How much faster or slower than true time a clock may run, relative to the TTL.
///
/// Stored as parts per million so that the drift allowance is exact integer arithmetic.
/// The default, 0.01 (10,000 ppm), is the reference implementation's `ClockDriftFactor`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriftFactor {
    ppm: u32,
}

impl DriftFactor {
    /// The default factor, 0.01.
    pub const DEFAULT: Self = Self { ppm: 10_000 };

    /// A factor of `ppm` parts per million. Values of one million (a factor of 1) or more are
    /// refused: a lease whose drift allowance is its whole TTL can never be valid.
    pub const fn from_ppm(ppm: u32) -> Option<Self> {
        if ppm < 1_000_000 {
            Some(Self { ppm })
        } else {
            None
        }
    }

    /// A factor given as a fraction such as `0.01`; refused unless finite and in `[0, 1)`.
    /// It is rounded *up* to the next part per million, so the allowance is never smaller than
    /// the one asked for.
    ///
    /// ```
    /// use redlock_core::DriftFactor;
    /// assert_eq!(DriftFactor::from_f64(0.01).unwrap().ppm(), 10_000);
    /// assert_eq!(DriftFactor::from_f64(0.010_000_4).unwrap().ppm(), 10_001);
    /// assert!(DriftFactor::from_f64(f64::NAN).is_none());
    /// ```
    pub fn from_f64(factor: f64) -> Option<Self> {
        if !factor.is_finite() || !(0.0..1.0).contains(&factor) {
            return None;
        }
        // The nearest count first: `0.01 × 1e6` is a hair above 10,000 in binary floating
        // point, and a plain `ceil` would turn it into 10,001. Then one more when the nearest
        // count falls short of the factor itself.
        let nearest = (factor * 1e6).round();
        let ppm = if nearest / 1e6 < factor {
            nearest + 1.0
        } else {
            nearest
        };
        // `0 <= factor < 1`, so `0 <= ppm <= 1e6` and the cast is exact; the rounding can only
        // reach the bound itself, which `from_ppm` refuses.
        Self::from_ppm(ppm as u32)
    }

    /// The factor in parts per million.
    pub const fn ppm(self) -> u32 {
        self.ppm
    }

    /// The factor as a fraction (for display).
    pub fn as_f64(self) -> f64 {
        f64::from(self.ppm) / 1e6
    }
}

impl Default for DriftFactor {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Debug for DriftFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_f64())
    }
}

impl fmt::Display for DriftFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The clock-drift allowance for a lease of `ttl`: `ttl × factor + 2 ms`, rounded up to the
/// nanosecond so the allowance is never smaller than the exact product.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{drift_allowance, DriftFactor};
/// assert_eq!(
///     drift_allowance(Duration::from_secs(10), DriftFactor::DEFAULT),
///     Duration::from_millis(102),
/// );
/// ```
pub fn drift_allowance(ttl: Duration, factor: DriftFactor) -> Duration {
    let proportional = (ttl.as_nanos() * u128::from(factor.ppm)).div_ceil(PPM);
    let proportional = u64::try_from(proportional).unwrap_or(u64::MAX);
    Duration::from_nanos(proportional).saturating_add(DRIFT_FLOOR)
}

/// The validity left to a lease of `ttl` whose round took `elapsed`: `ttl − elapsed − drift`,
/// or zero when nothing is left (never a negative number, never a panic).
///
/// ```
/// use std::time::Duration;
/// use redlock_core::validity;
/// let ms = Duration::from_millis;
/// assert_eq!(validity(ms(10_000), ms(3), ms(102)), ms(9_895));
/// assert_eq!(validity(ms(1), ms(50), ms(2)), Duration::ZERO);
/// ```
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Duration {
    ttl.saturating_sub(elapsed).saturating_sub(drift)
}

/// The instant, on the client's clock, at which a lease whose round started at `start` stops
/// being valid: `start + ttl − drift`.
///
/// The round's own duration is already inside this bound: a round decided at `now` has
/// `validity(ttl, now − start, drift)` left, which is exactly `deadline − now`.
pub fn validity_deadline(start: Timestamp, ttl: Duration, drift: Duration) -> Timestamp {
    start.saturating_add(ttl.saturating_sub(drift))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reference_values() {
        let ms = Duration::from_millis;
        assert_eq!(drift_allowance(ms(10_000), DriftFactor::DEFAULT), ms(102));
        assert_eq!(
            drift_allowance(ms(1), DriftFactor::DEFAULT),
            Duration::from_micros(2_010)
        );
        assert_eq!(drift_allowance(ms(0), DriftFactor::DEFAULT), ms(2));
        // f32 arithmetic (a peer's) would round this TTL; integers do not.
        let big = ms(16_777_217);
        assert_eq!(
            drift_allowance(big, DriftFactor::DEFAULT),
            Duration::from_micros(167_772_170) + ms(2)
        );
    }

    #[test]
    fn quorum_is_a_strict_majority() {
        for n in 1..=9 {
            let q = quorum(n);
            assert!(2 * q > n, "quorum({n}) = {q} is not a majority");
            assert!(2 * (q - 1) <= n, "quorum({n}) = {q} is larger than needed");
        }
    }

    #[test]
    fn drift_factor_bounds() {
        assert!(DriftFactor::from_f64(f64::NAN).is_none());
        assert!(DriftFactor::from_f64(-0.1).is_none());
        assert!(DriftFactor::from_f64(1.0).is_none());
        assert!(
            DriftFactor::from_f64(0.9999999).is_none(),
            "rounds up to a factor of 1"
        );
        assert_eq!(DriftFactor::from_f64(0.01), Some(DriftFactor::DEFAULT));
        assert_eq!(DriftFactor::from_f64(0.0).map(DriftFactor::ppm), Some(0));
        assert!(DriftFactor::from_ppm(1_000_000).is_none());
    }

    proptest! {
        #[test]
        fn a_fractional_factor_is_never_rounded_down(factor in 0.0f64..0.999_999) {
            let ppm = DriftFactor::from_f64(factor).expect("in range").ppm();
            prop_assert!(f64::from(ppm) / 1e6 >= factor, "{factor} became {ppm} ppm");
            prop_assert!(f64::from(ppm) <= (factor * 1e6).ceil() + 1.0);
        }

        #[test]
        fn validity_never_exceeds_ttl_minus_drift(
            ttl_ns in any::<u64>(),
            elapsed_ns in any::<u64>(),
            ppm in 0u32..1_000_000,
        ) {
            let ttl = Duration::from_nanos(ttl_ns);
            let elapsed = Duration::from_nanos(elapsed_ns);
            let factor = DriftFactor::from_ppm(ppm).unwrap();
            let drift = drift_allowance(ttl, factor);
            let left = validity(ttl, elapsed, drift);
            prop_assert!(left <= ttl.saturating_sub(drift));
            prop_assert!(left <= ttl.saturating_sub(elapsed));
            prop_assert!(drift >= DRIFT_FLOOR);
            // The allowance is at least the exact product ttl × factor.
            prop_assert!(drift.as_nanos() * 1_000_000 >= ttl.as_nanos() * u128::from(ppm));
        }

        #[test]
        fn validity_is_deadline_minus_now(
            start in 0u64..1 << 62,
            ttl_ms in 0u64..100_000_000,
            elapsed_ns in 0u64..1 << 40,
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let drift = drift_allowance(ttl, DriftFactor::DEFAULT);
            let start = Timestamp::from_nanos(start);
            let now = start.saturating_add(Duration::from_nanos(elapsed_ns));
            let deadline = validity_deadline(start, ttl, drift);
            prop_assert_eq!(
                validity(ttl, now.saturating_duration_since(start), drift),
                deadline.saturating_duration_since(now)
            );
        }
    }
}
