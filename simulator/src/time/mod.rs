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

/// A duration as prose shows it: three significant digits in the largest unit it reaches
/// (`850 ns`, `12.3 µs`, `1.86 ms`, `506 ms`, `15.0 s`; `1500 s` keeps its whole seconds).
/// Every sentence that states a duration (the verdict in words, notes of faults, the
/// pictures' labels) writes it with this function.
pub fn fmt_duration(t: Nanos) -> String {
    const UNITS: [(Nanos, &str); 4] = [(1, "ns"), (1_000, "µs"), (MS, "ms"), (1_000 * MS, "s")];
    let mut unit = UNITS.iter().rposition(|&(size, _)| t >= size).unwrap_or(0);
    loop {
        let (size, name) = UNITS[unit];
        let value = t as f64 / size as f64;
        let decimals = if unit == 0 || value >= 99.95 {
            0
        } else if value >= 9.995 {
            1
        } else {
            2
        };
        let text = format!("{value:.decimals$}");
        // 999.7 µs rounds to 1000 µs: that is 1.00 ms.
        if text == "1000" && unit + 1 < UNITS.len() {
            unit += 1;
            continue;
        }
        return format!("{text} {name}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(from_ms(1.5), 1_500_000);
        assert_eq!(fmt_ms(12_345_678), "12.345678");
    }

    #[test]
    fn durations_have_three_significant_digits() {
        let cases = [
            (0, "0 ns"),
            (850, "850 ns"),
            (12_345, "12.3 µs"),
            (999_700, "1.00 ms"),
            (1_860_000, "1.86 ms"),
            (9_996_000, "10.0 ms"),
            (505_796_849, "506 ms"),
            (999_999_999, "1.00 s"),
            (15_000 * MS, "15.0 s"),
            (99_960 * MS, "100 s"),
            (1_500_000 * MS, "1500 s"),
        ];
        for (t, text) in cases {
            assert_eq!(fmt_duration(t), text, "{t} ns");
        }
    }
}
