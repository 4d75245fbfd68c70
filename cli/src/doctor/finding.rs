//! One finding: what was found on a node or the fleet, how much it matters ([`Level`]),
//! which check found it ([`Check`]), the guarantee condition it touches and the simulator
//! scenario that shows the consequence. The rules build findings; the report prints them.

use serde::Serialize;

use super::catalogue::{Condition, Scenario};

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    /// The condition holds.
    Ok,
    /// Worth knowing; the condition holds (often thanks to a mitigation).
    Note,
    /// The condition holds, with little margin, or could not be checked.
    Warning,
    /// The condition does not hold.
    Error,
}

impl Level {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Note => "note",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// What a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Check {
    Reachability,
    Latency,
    Role,
    Version,
    SameServer,
    Persistence,
    Uptime,
    /// `INFO`'s uptime against the process's age on this host's boot-time clock.
    UptimeClock,
    Eviction,
    ClockOffset,
    ClockRate,
    ClockSteps,
    Permissions,
    Quorum,
    Configuration,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Finding {
    pub(crate) level: Level,
    /// The node's address, or `None` for the fleet as a whole.
    pub(crate) node: Option<String>,
    pub(crate) check: Check,
    /// What was found, in one sentence.
    pub(crate) summary: String,
    /// The guarantee condition it touches.
    pub(crate) condition: Condition,
    /// The scenario that shows what happens when the condition fails.
    pub(crate) scenario: Option<Scenario>,
    /// What to do about it, or what already mitigates it.
    pub(crate) remedy: Option<String>,
}

impl Finding {
    pub(crate) fn new(
        level: Level,
        check: Check,
        condition: Condition,
        summary: impl Into<String>,
    ) -> Self {
        Self {
            level,
            node: None,
            check,
            summary: summary.into(),
            condition,
            scenario: None,
            remedy: None,
        }
    }

    pub(crate) fn at(mut self, node: &str) -> Self {
        self.node = Some(node.to_owned());
        self
    }

    pub(crate) fn shown_by(mut self, scenario: Scenario) -> Self {
        self.scenario = Some(scenario);
        self
    }

    pub(crate) fn remedy(mut self, remedy: impl Into<String>) -> Self {
        self.remedy = Some(remedy.into());
        self
    }
}
