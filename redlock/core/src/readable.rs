//! Durations in messages, to a precision a person reads.
//!
//! `Duration`'s `Debug` prints every nanosecond (`29.511217237s`); a message about a
//! quarantine or a validity needs milliseconds at most, so every message of the library
//! shows durations through [`Readable`].

use std::fmt;
use std::time::Duration;

/// A duration shown in the unit `Debug` would choose (`s`, `ms`, `µs`, `ns`) with at most
/// three decimals, rounded to the nearest, trailing zeros dropped.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::Readable;
///
/// assert_eq!(Readable(Duration::from_nanos(29_511_217_237)).to_string(), "29.511s");
/// assert_eq!(Readable(Duration::from_secs(30)).to_string(), "30s");
/// assert_eq!(Readable(Duration::from_micros(2_500)).to_string(), "2.5ms");
/// assert_eq!(Readable(Duration::from_nanos(999_999_700)).to_string(), "1s");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Readable(pub Duration);

impl fmt::Display for Readable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        for (unit, suffix) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "µs")] {
            // Round to a thousandth of the unit first, so that 999.9996 ms shows as `1s`
            // rather than `1000ms`.
            let step = unit / 1_000;
            let thousandths = (nanos + step / 2) / step;
            if thousandths >= 1_000 {
                let whole = thousandths / 1_000;
                let fraction = thousandths % 1_000;
                return if fraction == 0 {
                    write!(f, "{whole}{suffix}")
                } else {
                    let digits = format!("{fraction:03}");
                    write!(f, "{whole}.{}{suffix}", digits.trim_end_matches('0'))
                };
            }
        }
        write!(f, "{nanos}ns")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Readable;

    fn show(duration: Duration) -> String {
        Readable(duration).to_string()
    }

    #[test]
    fn at_most_three_decimals_in_the_debug_unit() {
        assert_eq!(show(Duration::from_nanos(29_511_217_237)), "29.511s");
        assert_eq!(show(Duration::from_nanos(29_511_717_237)), "29.512s");
        assert_eq!(show(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(show(Duration::from_secs(3_600)), "3600s");
        assert_eq!(show(Duration::from_millis(426)), "426ms");
        assert_eq!(show(Duration::from_nanos(426_123_456)), "426.123ms");
        assert_eq!(show(Duration::from_nanos(1_234_567)), "1.235ms");
        assert_eq!(show(Duration::from_nanos(999_400)), "999.4µs");
        assert_eq!(show(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(show(Duration::from_nanos(999)), "999ns");
        assert_eq!(show(Duration::ZERO), "0ns");
    }

    #[test]
    fn rounding_up_moves_to_the_larger_unit() {
        assert_eq!(show(Duration::from_nanos(999_999_600)), "1s");
        assert_eq!(show(Duration::from_nanos(999_499_000)), "999.499ms");
        assert_eq!(show(Duration::from_nanos(999_600)), "1ms");
        assert_eq!(show(Duration::from_nanos(9_999_600)), "10ms");
        assert_eq!(show(Duration::from_nanos(9_999)), "9.999µs");
        assert_eq!(show(Duration::from_nanos(1_999_999_999)), "2s");
    }

    #[test]
    fn whole_values_read_as_debug_does() {
        for duration in [
            Duration::from_secs(30),
            Duration::from_millis(50),
            Duration::from_micros(7),
            Duration::from_nanos(3),
        ] {
            assert_eq!(show(duration), format!("{duration:?}"));
        }
    }

    #[test]
    fn the_longest_duration_does_not_overflow() {
        assert_eq!(show(Duration::MAX), "18446744073709551616s");
    }
}
