//! The fleet as a whole: whether its configuration keeps leases exclusive, and whether a
//! quorum of independent masters answers, now and for a client starting now.

use std::collections::BTreeMap;
use std::time::Duration;

use redlock_core::quarantine_left;

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation, Role};
use crate::duration::show;

use super::SameServer;

/// The library's warnings about the configuration, then the doctor's own: a restart
/// quarantine shorter than the TTL.
pub(super) fn judge_configuration(
    limits: &Limits,
    config_warnings: &[(Condition, String)],
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (condition, warning) in config_warnings {
        findings.push(Finding::new(
            Level::Warning,
            Check::Configuration,
            *condition,
            warning.clone(),
        ));
    }
    if let Some(quarantine) = limits.quarantine
        && quarantine < limits.ttl
    {
        findings.push(
            Finding::new(
                Level::Error,
                Check::Configuration,
                Condition::Memory,
                format!(
                    "the restart quarantine ({}) is shorter than the TTL ({}): a node that \
                     restarts empty votes again while leases it forgot are still valid",
                    show(quarantine),
                    show(limits.ttl)
                ),
            )
            .shown_by(catalogue::RL06B_SHORT_QUARANTINE)
            .remedy("set --restart-quarantine to at least the longest TTL of any client"),
        );
    }
    findings
}

/// One finding on the quorum: the first of too few answers, too few independent masters, or
/// too few past the restart quarantine; else an `ok`.
pub(super) fn judge_fleet(
    limits: &Limits,
    observations: &[NodeObservation],
    duplicates: &[Option<SameServer<'_>>],
    reachable: usize,
) -> Vec<Finding> {
    if reachable < limits.quorum {
        return vec![
            Finding::new(
                Level::Error,
                Check::Quorum,
                Condition::Availability,
                format!(
                    "only {reachable} of {} nodes answered; a lease needs {}: the fleet cannot \
                     be checked, nor locked",
                    limits.nodes, limits.quorum
                ),
            )
            .shown_by(catalogue::RL13A_MINORITY),
        ];
    }
    let servers = voters(observations, duplicates);
    let voters = servers.len();
    if voters < limits.quorum {
        return vec![
            Finding::new(
                Level::Error,
                Check::Quorum,
                Condition::Independence,
                format!(
                    "only {voters} independent masters answer among {} names; a lease needs {}",
                    limits.nodes, limits.quorum
                ),
            )
            .shown_by(catalogue::RL13A_MINORITY),
        ];
    }
    if let Some(waiting) = judge_first_quorum(limits, &servers) {
        return vec![waiting];
    }
    vec![Finding::new(
        Level::Ok,
        Check::Quorum,
        Condition::Availability,
        format!(
            "{reachable} of {} nodes answer, {voters} independent masters; a lease needs {}",
            limits.nodes, limits.quorum
        ),
    )]
}

/// The nodes that can vote at all: reachable masters, each server counted once (by run id,
/// or by address where `INFO` is refused), with its uptime.
fn voters(
    observations: &[NodeObservation],
    duplicates: &[Option<SameServer<'_>>],
) -> BTreeMap<String, Duration> {
    let mut servers = BTreeMap::new();
    let named_once = observations
        .iter()
        .zip(duplicates)
        .filter(|(_, duplicate)| duplicate.is_none())
        .map(|(node, _)| node);
    for node in named_once.filter(|o| o.is_reachable()) {
        match node.server() {
            Some(server) if matches!(server.role, Role::Master { .. }) => {
                servers
                    .entry(server.run_id.clone())
                    .or_insert(server.uptime);
            }
            Some(_) => {}
            // Without INFO a node can still vote; it only cannot be identified.
            None => {
                servers.insert(format!("unidentified {}", node.address), Duration::MAX);
            }
        }
    }
    servers
}

/// A warning when a client starting now could not count a quorum yet: fewer than a quorum of
/// `servers` are past the restart quarantine.
fn judge_first_quorum(limits: &Limits, servers: &BTreeMap<String, Duration>) -> Option<Finding> {
    let quarantine = limits.quarantine?;
    let mut waits: Vec<Duration> = servers
        .values()
        .map(|uptime| quarantine_left(quarantine, *uptime))
        .collect();
    waits.sort();
    // The quorum-th shortest wait: when a new client can first count a quorum.
    let wait = waits[limits.quorum - 1];
    if wait.is_zero() {
        return None;
    }
    Some(
        Finding::new(
            Level::Warning,
            Check::Quorum,
            Condition::Availability,
            format!(
                "a client starting now gets no lease for another {}: fewer than {} \
                 nodes are past the restart quarantine",
                show(wait),
                limits.quorum
            ),
        )
        .shown_by(catalogue::RL05B_FRESH_CLIENT),
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::{fleet, limits, problems};
    use super::super::judge;
    use crate::doctor::catalogue;
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::observe::Limits;
    use crate::doctor::report::Verdict;

    #[test]
    fn young_nodes_and_a_short_quarantine() {
        let mut nodes = fleet();
        for node in &mut nodes {
            node.info.as_mut().unwrap().as_mut().unwrap().uptime = Duration::from_secs(4);
        }
        nodes[0].info.as_mut().unwrap().as_mut().unwrap().uptime = Duration::from_secs(3600);
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(report.verdict, Verdict::Healthy);
        let wait = report
            .findings
            .iter()
            .find(|f| f.check == Check::Quorum)
            .unwrap();
        assert_eq!(wait.level, Level::Warning);
        // Up 4 s by their reports, so up at least 3 s: 7 s of a 10 s quarantine are left.
        assert!(wait.summary.contains("for another 7s"), "{}", wait.summary);

        let short = Limits {
            quarantine: Some(Duration::from_secs(5)),
            ..limits()
        };
        let report = judge(&short, &nodes, &[]);
        assert_eq!(
            problems(&report)[0],
            (Level::Error, None, Check::Configuration)
        );
        assert_eq!(
            report.findings[0].scenario,
            Some(catalogue::RL06B_SHORT_QUARANTINE)
        );
    }
}
