//! `--restart-quarantine DURATION|off`: how long a node that restarted, or that this process
//! meets for the first time, is left out of quorums (see the library's
//! `RedlockBuilder::restart_quarantine`).

use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::duration;

/// The restart quarantine as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(crate) enum Quarantine {
    /// `off`: the nodes persist every write (`appendfsync always`), so none is left out.
    Off,
    /// Left out until this long after the node started.
    For(Duration),
}

impl Quarantine {
    /// What the library's builder takes: `None` declares the nodes persistent.
    pub(crate) fn as_option(self) -> Option<Duration> {
        match self {
            Self::Off => None,
            Self::For(duration) => Some(duration),
        }
    }
}

/// Parses `off` or a duration (`30s`, `10m`).
pub(crate) fn parse(text: &str) -> Result<Quarantine, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(Quarantine::Off);
    }
    duration::parse(text)
        .map(Quarantine::For)
        .map_err(|e| format!("{e}, or `off` when every node persists each write"))
}

impl TryFrom<String> for Quarantine {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        parse(&text)
    }
}

impl fmt::Display for Quarantine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Off => f.write_str("off"),
            Self::For(duration) => f.write_str(&duration::show(*duration)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_or_a_duration() {
        assert_eq!(parse("off"), Ok(Quarantine::Off));
        assert_eq!(parse(" OFF "), Ok(Quarantine::Off));
        assert_eq!(parse("30s"), Ok(Quarantine::For(Duration::from_secs(30))));
        let err = parse("never").unwrap_err();
        assert!(
            err.contains("`never` is not a duration") && err.contains("`off`"),
            "{err}"
        );
        assert_eq!(
            Quarantine::For(Duration::from_secs(90)).to_string(),
            "1m 30s"
        );
    }
}
