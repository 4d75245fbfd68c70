//! The rules: pure functions from what was observed ([`NodeObservation`]) and the settings
//! ([`Limits`]) to findings, each naming the guarantee condition it touches and the
//! simulator scenario that shows the consequence. No rule talks to a node, so every rule is
//! tested here without a server.
//!
//! Mostly one function per [`Check`](super::finding::Check), in files by what they read:
//!
//! | file | checks | from |
//! |---|---|---|
//! | [`node`] | reachability, latency (and runs a node's checks) | the connection, `PING` |
//! | [`server`] | role, version, same server, eviction | `INFO` |
//! | [`persistence`] | persistence | `INFO`, `CONFIG GET` |
//! | [`uptime`] | uptime, against the quarantine and the process's age | `INFO`, `/proc` |
//! | [`clock`] | clock steps, offset and rate | `TIME` |
//! | [`permissions`] | the lease's and the waiters' commands | the probe |
//! | [`fleet`] | configuration, quorum | the settings, all nodes |
//!
//! This file runs them in the order the report lists them and draws the verdict.

mod clock;
#[cfg(test)]
pub(crate) mod fixtures;
mod fleet;
mod node;
mod permissions;
mod persistence;
mod server;
mod uptime;

use std::collections::BTreeMap;

use super::catalogue::Condition;
use super::clock::ClockEstimate;
use super::finding::Level;
use super::observe::{Limits, NodeObservation};
use super::report::{NodeSummary, Report, SettingsSummary, Verdict};

/// Judges every node and the fleet. `config_warnings` are the library's warnings about the
/// configuration, with the condition each touches.
pub(crate) fn judge(
    limits: &Limits,
    observations: &[NodeObservation],
    config_warnings: &[(Condition, String)],
) -> Report {
    let mut findings = fleet::judge_configuration(limits, config_warnings);
    let mut first_of_server: BTreeMap<&str, &str> = BTreeMap::new();
    let mut nodes = Vec::with_capacity(observations.len());
    for observation in observations {
        let duplicate_of = observation.server().and_then(|server| {
            match first_of_server.get(server.run_id.as_str()) {
                Some(first) => Some(*first),
                None => {
                    first_of_server.insert(&server.run_id, &observation.address);
                    None
                }
            }
        });
        let estimate = estimate_clock(limits, observation);
        findings.extend(node::judge_node(
            limits,
            observation,
            duplicate_of,
            estimate.as_ref(),
        ));
        nodes.push(NodeSummary::of(limits, observation, estimate));
    }
    let reachable = observations.iter().filter(|o| o.is_reachable()).count();
    findings.extend(fleet::judge_fleet(limits, observations, reachable));

    let verdict = if reachable < limits.quorum {
        Verdict::Unchecked
    } else if findings.iter().any(|f| f.level == Level::Error) {
        Verdict::Failing
    } else {
        Verdict::Healthy
    };
    Report {
        verdict,
        exit_code: verdict.exit_code(),
        settings: SettingsSummary::of(limits),
        nodes,
        findings,
    }
}

/// The node's clock as estimated from its `TIME` samples, if it gave any.
fn estimate_clock(limits: &Limits, observation: &NodeObservation) -> Option<ClockEstimate> {
    match &observation.clock {
        Some(Ok(samples)) => {
            let mut estimate = super::clock::estimate(samples);
            if limits.clock_window.is_zero() {
                // Back-to-back samples: an offset, but no rate or step worth a judgement.
                estimate.rate = None;
                estimate.steps.clear();
            }
            Some(estimate)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{fleet, limits, problems};
    use super::judge;
    use crate::doctor::finding::Check;
    use crate::doctor::observe::NodeObservation;
    use crate::doctor::report::Verdict;

    #[test]
    fn a_healthy_fleet_passes_every_check() {
        let report = judge(&limits(), &fleet(), &[]);
        assert_eq!(problems(&report), []);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Healthy, 0));
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.node.is_some() || f.check == Check::Quorum)
        );
    }

    #[test]
    fn too_few_answers_leave_the_fleet_unchecked() {
        let mut nodes = fleet();
        nodes[0] = NodeObservation::unreachable("n1:1", "connection refused");
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Failing, 1));
        nodes[1] = NodeObservation::unreachable("n2:1", "WRONGPASS invalid username-password pair");
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!((report.verdict, report.exit_code), (Verdict::Unchecked, 2));
        let wrongpass = report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n2:1"))
            .unwrap();
        assert!(
            wrongpass
                .summary
                .starts_with("refuses this client's credentials"),
            "{}",
            wrongpass.summary
        );
    }
}
