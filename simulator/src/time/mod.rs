//! True time: integer nanoseconds since the start of the run; and each process's view of
//! it, its clock ([`clock`]: offset, rate error, steps and freezes).

pub mod clock;

/// Nanoseconds of true time since the run began. Only the world and the judge see it;
/// every process sees its own clock instead.
pub type Nanos = u64;

/// One millisecond in nanoseconds.
pub const MS: Nanos = 1_000_000;

/// `ms` milliseconds (fractional allowed) in nanoseconds, rounded to the nearest nanosecond.
pub fn from_ms(ms: f64) -> Nanos {
    // Callers validate `ms` as finite and non-negative; the cast saturates otherwise.
    (ms * MS as f64).round() as Nanos
}

/// Formats true time as milliseconds with microsecond precision: `12.345678ms` style.
pub fn fmt_ms(t: Nanos) -> String {
    format!("{}.{:06}", t / MS, t % MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(from_ms(1.5), 1_500_000);
        assert_eq!(fmt_ms(12_345_678), "12.345678");
    }
}
