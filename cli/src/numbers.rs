//! Measured numbers as the doctor prints them: milliseconds, microseconds and fractions, with
//! a sign where a direction matters. Durations that are settings, not measurements, are
//! [`crate::duration`]'s.
//!
//! A measurement is shown with a precision that follows its size, so a table stays readable
//! from sub-millisecond round trips to second-long clock offsets.

/// Milliseconds as people read them: `0.21ms`, `12.5ms`, `340ms`.
pub(crate) fn ms(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.2}ms")
    } else if value < 100.0 {
        format!("{value:.1}ms")
    } else {
        format!("{value:.0}ms")
    }
}

/// Microseconds, in milliseconds below a second (`0.25ms`) and in seconds above (`1.500s`).
pub(crate) fn us(value: f64) -> String {
    if value.abs() >= 1e6 {
        format!("{:.3}s", value / 1e6)
    } else {
        ms(value / 1e3)
    }
}

/// [`us`] with a sign: `+0.25ms`, `-1.500s`.
pub(crate) fn signed_us(value: f64) -> String {
    signed(value, us(value.abs()))
}

/// `shown` (the magnitude, formatted) with the sign of `value`, unless it shows as zero.
fn signed(value: f64, shown: String) -> String {
    let zero = !shown.chars().any(|c| c.is_ascii_digit() && c != '0');
    let sign = if value < 0.0 && !zero { '-' } else { '+' };
    format!("{sign}{shown}")
}

/// A fraction as a percentage: `0.0123` → `1.23%`, `0.0001` → `0.010%`.
pub(crate) fn pct(value: f64) -> String {
    let value = value * 100.0;
    if value.abs() >= 0.1 {
        format!("{value:.2}%")
    } else {
        format!("{value:.3}%")
    }
}

/// [`pct`] with a sign: `+1.23%`, `-0.010%`.
pub(crate) fn signed_pct(value: f64) -> String {
    signed(value, pct(value.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_follows_the_size_and_a_zero_has_no_minus() {
        assert_eq!(
            [ms(0.214), ms(12.54), ms(340.4)],
            ["0.21ms", "12.5ms", "340ms"]
        );
        assert_eq!([us(250.0), us(1_500_000.0)], ["0.25ms", "1.500s"]);
        assert_eq!([signed_us(-250.0), signed_us(-0.1)], ["-0.25ms", "+0.00ms"]);
        assert_eq!([pct(0.0123), pct(0.0001)], ["1.23%", "0.010%"]);
        assert_eq!(
            [signed_pct(-0.0123), signed_pct(-0.000_000_1)],
            ["-1.23%", "+0.000%"]
        );
    }
}
