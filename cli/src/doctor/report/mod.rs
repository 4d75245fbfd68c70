//! The report: everything the doctor concluded, as plain data: the verdict and exit code, the
//! settings, one summary per node, and the findings. Its serde shape is the `--json` output,
//! so a field renamed here is a change for scripts. Printing it is [`table`]'s (for people)
//! and [`json`]'s (for scripts); they read this model, and this model imports neither.

pub(super) mod json;
pub(super) mod table;

use std::time::Duration;

use serde::Serialize;

use super::clock::ClockEstimate;
use super::finding::{Finding, Level};
use super::observe::{Limits, NodeObservation};
use super::permissions::{Operation, Probe};

/// Round trips, summarised.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub(crate) struct RoundTrips {
    pub(crate) samples: usize,
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl RoundTrips {
    pub(crate) fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort();
        // Nearest rank: the smallest sample with at least p of the samples at or below it.
        let rank = |p: f64| {
            let index = (p * sorted.len() as f64).ceil() as usize;
            sorted[index.clamp(1, sorted.len()) - 1]
        };
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Some(Self {
            samples: sorted.len(),
            p50_ms: ms(rank(0.50)),
            p99_ms: ms(rank(0.99)),
            max_ms: ms(sorted[sorted.len() - 1]),
        })
    }
}

/// What the table shows of one node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct NodeSummary {
    /// `node` in JSON, as in the findings and in `redlock status --json`.
    #[serde(rename = "node")]
    pub(crate) address: String,
    pub(crate) reachable: bool,
    pub(crate) error: Option<String>,
    pub(crate) round_trips: Option<RoundTrips>,
    pub(crate) version: Option<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) role: Option<String>,
    pub(crate) aof_enabled: Option<bool>,
    /// `always`, `everysec`, `no`, or `unknown` when `CONFIG GET` was refused.
    pub(crate) appendfsync: Option<String>,
    pub(crate) uptime_s: Option<u64>,
    pub(crate) maxmemory_policy: Option<String>,
    pub(crate) clock: Option<ClockEstimate>,
    pub(crate) clock_error: Option<String>,
    /// The operations the node refused, and the ACL rules that fix them.
    pub(crate) refused: Option<Vec<Operation>>,
    pub(crate) grants: Option<Vec<String>>,
    /// The probe's full record.
    pub(crate) probe: Option<Probe>,
}

/// How the check ended, and the process's exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Verdict {
    /// Every condition holds (exit 0).
    Healthy,
    /// At least one does not (exit 1).
    Failing,
    /// The fleet cannot be checked: fewer than a quorum of nodes answered (exit 2).
    Unchecked,
}

impl Verdict {
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Self::Healthy => 0,
            Self::Failing => 1,
            Self::Unchecked => 2,
        }
    }
}

/// The settings as the report shows them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct SettingsSummary {
    pub(crate) nodes: usize,
    pub(crate) quorum: usize,
    pub(crate) ttl_ms: u128,
    pub(crate) node_timeout_ms: u128,
    pub(crate) drift_factor: f64,
    /// `null` when the quarantine is off.
    pub(crate) restart_quarantine_ms: Option<u128>,
    pub(crate) clock_window_ms: u128,
    pub(crate) key_prefix: String,
}

/// Everything the doctor concluded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Report {
    pub(crate) verdict: Verdict,
    pub(crate) exit_code: u8,
    pub(crate) settings: SettingsSummary,
    pub(crate) nodes: Vec<NodeSummary>,
    pub(crate) findings: Vec<Finding>,
}

impl Report {
    pub(crate) fn count(&self, level: Level) -> usize {
        self.findings.iter().filter(|f| f.level == level).count()
    }
}

impl SettingsSummary {
    pub(crate) fn of(limits: &Limits) -> Self {
        Self {
            nodes: limits.nodes,
            quorum: limits.quorum,
            ttl_ms: limits.ttl.as_millis(),
            node_timeout_ms: limits.node_timeout.as_millis(),
            drift_factor: limits.drift_factor,
            restart_quarantine_ms: limits.quarantine.map(|q| q.as_millis()),
            clock_window_ms: limits.clock_window.as_millis(),
            key_prefix: limits.key_prefix.clone(),
        }
    }
}

impl NodeSummary {
    /// The row of `node`, with the clock estimate the rules judged.
    pub(crate) fn of(
        limits: &Limits,
        node: &NodeObservation,
        clock: Option<ClockEstimate>,
    ) -> Self {
        let server = node.server();
        Self {
            address: node.address.clone(),
            reachable: node.is_reachable(),
            error: node.reached.as_ref().err().cloned(),
            round_trips: RoundTrips::of(&node.round_trips),
            version: server.map(|s| s.version.clone()),
            run_id: server.map(|s| s.run_id.clone()),
            role: server.map(|s| s.role.label()),
            aof_enabled: server.map(|s| s.aof_enabled),
            appendfsync: node.appendfsync.as_ref().map(|fsync| match fsync {
                Ok(policy) => policy.clone(),
                Err(_) => "unknown".to_owned(),
            }),
            uptime_s: server.map(|s| s.uptime.as_secs()),
            maxmemory_policy: server.and_then(|s| s.maxmemory_policy.clone()),
            clock,
            clock_error: match &node.clock {
                Some(Err(why)) => Some(why.clone()),
                _ => None,
            },
            refused: node.probe.as_ref().map(Probe::refused),
            grants: node.probe.as_ref().map(|probe| {
                probe
                    .grants(&limits.key_prefix)
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            }),
            probe: node.probe.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::doctor::observe::Limits;
    use crate::doctor::rules::fixtures::{fleet, limits};
    use crate::doctor::rules::judge;

    #[test]
    fn the_report_serialises_with_condition_and_scenario() {
        let mut nodes = fleet();
        nodes[0].appendfsync = Some(Ok("everysec".into()));
        let report = judge(
            &Limits {
                quarantine: None,
                ..limits()
            },
            &nodes,
            &[],
        );
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        assert_eq!(json["exit_code"], 1);
        assert_eq!(json["verdict"], "failing");
        let finding = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["level"] == "error")
            .unwrap();
        assert_eq!(finding["condition"]["id"], "memory");
        assert_eq!(finding["scenario"]["id"], "RL-05");
        assert_eq!(finding["check"], "persistence");
        assert_eq!(json["nodes"][0]["appendfsync"], "everysec");
        assert!(json["nodes"][0]["clock"]["rate"]["bound"].as_f64().unwrap() < 0.001);
    }
}
