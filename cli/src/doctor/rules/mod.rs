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
use std::net::SocketAddr;

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
    let duplicates = same_servers(observations);
    let mut nodes = Vec::with_capacity(observations.len());
    for (observation, duplicate_of) in observations.iter().zip(&duplicates) {
        let estimate = estimate_clock(limits, observation);
        findings.extend(node::judge_node(
            limits,
            observation,
            *duplicate_of,
            estimate.as_ref(),
        ));
        nodes.push(NodeSummary::of(limits, observation, estimate));
    }
    let reachable = observations.iter().filter(|o| o.is_reachable()).count();
    findings.extend(fleet::judge_fleet(
        limits,
        observations,
        &duplicates,
        reachable,
    ));

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

/// A name of a server already listed under another name: the first name, and what shows
/// that the two are one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SameServer<'a> {
    pub(super) first: &'a str,
    pub(super) by: SameBy<'a>,
}

/// What shows that two names are one server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SameBy<'a> {
    /// Both servers' `INFO` gave this `run_id`.
    RunId(&'a str),
    /// Both names resolve to this socket address (what the client goes by too, where
    /// `INFO` is refused).
    Address(SocketAddr),
}

/// For each reachable node, the name of the same server listed before it, if any: by
/// `run_id`, or by a socket address both names resolve to.
fn same_servers(observations: &[NodeObservation]) -> Vec<Option<SameServer<'_>>> {
    let mut first_of_server: BTreeMap<&str, &str> = BTreeMap::new();
    let mut first_at_address: BTreeMap<SocketAddr, &str> = BTreeMap::new();
    observations
        .iter()
        .map(|observation| {
            if !observation.is_reachable() {
                return None;
            }
            let run_id = observation.server().map(|server| server.run_id.as_str());
            let same = run_id
                .and_then(|run_id| {
                    first_of_server.get(run_id).map(|first| SameServer {
                        first,
                        by: SameBy::RunId(run_id),
                    })
                })
                .or_else(|| {
                    observation.socket_addresses.iter().find_map(|address| {
                        first_at_address.get(address).map(|first| SameServer {
                            first,
                            by: SameBy::Address(*address),
                        })
                    })
                });
            if same.is_none() {
                if let Some(run_id) = run_id {
                    first_of_server.insert(run_id, &observation.address);
                }
                for address in &observation.socket_addresses {
                    first_at_address.insert(*address, &observation.address);
                }
            }
            same
        })
        .collect()
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

    #[test]
    fn names_that_reach_one_address_are_one_voter_without_info() {
        // Three names, INFO refused everywhere; two of them reach the same server.
        let mut nodes = fleet();
        let shared: std::net::SocketAddr = "127.0.0.1:7000".parse().unwrap();
        for (node, address) in nodes.iter_mut().zip(["127.0.0.1:7000", "127.0.0.1:7001"]) {
            node.socket_addresses = vec![address.parse().unwrap()];
        }
        nodes[2].address = "localhost:7000".into();
        nodes[2].socket_addresses = vec!["[::1]:7000".parse().unwrap(), shared];
        for node in &mut nodes {
            node.info = Some(Err(
                "NoPerm: this user has no permissions to run the 'info' \
                                  command"
                    .into(),
            ));
        }
        let report = judge(&limits(), &nodes, &[]);
        let same = report
            .findings
            .iter()
            .find(|f| f.check == Check::SameServer)
            .expect("the second name of one server is found");
        assert_eq!(same.node.as_deref(), Some("localhost:7000"));
        assert!(
            same.summary
                .contains("the same server as n1:1 (both names reach 127.0.0.1:7000)"),
            "{}",
            same.summary
        );
        let quorum = report
            .findings
            .iter()
            .find(|f| f.check == Check::Quorum)
            .unwrap();
        assert!(
            quorum.summary.contains("2 independent masters"),
            "{}",
            quorum.summary
        );
        // Apart, the three names are three voters.
        nodes[2].socket_addresses = vec!["127.0.0.1:7002".parse().unwrap()];
        let report = judge(&limits(), &nodes, &[]);
        assert!(report.findings.iter().all(|f| f.check != Check::SameServer));
    }
}
