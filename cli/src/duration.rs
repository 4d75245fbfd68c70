//! Durations as people write them: `30s`, `500ms`, `2m`, `1h 30m`.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

/// Parses a duration written as `30s`, `500ms`, `2m`, `1h30m`, …; used for every duration
/// flag and config field.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.chars().all(|c| c.is_ascii_digit()) && !trimmed.is_empty() && trimmed != "0" {
        // A bare number is ambiguous (seconds? milliseconds?): ask for a unit.
        return Err(format!(
            "`{text}` has no unit; write `{trimmed}s` or `{trimmed}ms`"
        ));
    }
    humantime::parse_duration(trimmed)
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 30s, 500ms, 2m, 1h30m"))
}

/// Shows a duration the way it is written on the command line (`2s 500ms`).
pub(crate) fn show(duration: Duration) -> String {
    // Whole milliseconds are all that matter here; finer digits are noise.
    let millis = Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(millis).to_string()
}

/// A duration field of the config file, written as a string (`ttl = "30s"`). A bare number
/// (`ttl = 30`) is refused with the string to write, as the environment variable's is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HumanDuration(pub(crate) Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }
}

/// Reads a duration field: a string is parsed; a number gets the hint a bare number on the
/// command line gets, in the config file's syntax.
struct DurationVisitor;

impl DurationVisitor {
    fn bare<E: serde::de::Error>(number: impl fmt::Display) -> E {
        E::custom(format!(
            "`{number}` has no unit; write \"{number}s\" or \"{number}ms\" (a string with a unit)"
        ))
    }
}

impl serde::de::Visitor<'_> for DurationVisitor {
    type Value = HumanDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration written as a string, e.g. \"30s\", \"500ms\" or \"2m\"")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<HumanDuration, E> {
        parse(text).map(HumanDuration).map_err(E::custom)
    }

    fn visit_i64<E: serde::de::Error>(self, number: i64) -> Result<HumanDuration, E> {
        Err(Self::bare(number))
    }

    fn visit_u64<E: serde::de::Error>(self, number: u64) -> Result<HumanDuration, E> {
        Err(Self::bare(number))
    }

    fn visit_f64<E: serde::de::Error>(self, number: f64) -> Result<HumanDuration, E> {
        Err(Self::bare(number))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show(self.0))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse, show};

    #[test]
    fn parses_the_usual_forms() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse(" 5m "), Ok(Duration::from_secs(300)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn refuses_nonsense_and_missing_units_clearly() {
        let err = parse("30").unwrap_err();
        assert!(err.contains("no unit") && err.contains("30s"), "{err}");
        let err = parse("5 parsecs").unwrap_err();
        assert!(err.contains("`5 parsecs` is not a duration"), "{err}");
        assert!(parse("").is_err());
        assert!(parse("-1s").is_err());
    }

    #[test]
    fn shows_whole_milliseconds() {
        assert_eq!(show(Duration::from_millis(2_500)), "2s 500ms");
        assert_eq!(show(Duration::from_micros(1_500_700)), "1s 500ms");
    }
}
