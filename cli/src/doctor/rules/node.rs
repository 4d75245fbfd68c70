//! One node: whether it answers at all (reachability), how fast (latency), and the order in
//! which its other checks run; a node that does not answer gets no other finding.

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::clock::ClockEstimate;
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation};
use crate::doctor::permissions::{Grant, grant_for};
use crate::doctor::report::RoundTrips;
use crate::duration::show;
use crate::numbers::ms;

use super::{SameServer, clock, permissions, server};

/// Every finding on `node`, each placed at its address. `duplicate_of` names the node that
/// showed the same server first.
pub(super) fn judge_node(
    limits: &Limits,
    node: &NodeObservation,
    duplicate_of: Option<SameServer<'_>>,
    estimate: Option<&ClockEstimate>,
) -> Vec<Finding> {
    let address = node.address.as_str();
    if let Err(why) = &node.reached {
        return vec![judge_unreachable(limits, why).at(address)];
    }
    let mut findings = Vec::new();
    findings.extend(judge_latency(limits, node));
    match &node.info {
        Some(Ok(info)) => findings.extend(server::judge_server(limits, node, info, duplicate_of)),
        Some(Err(why)) => {
            findings.push(judge_without_info(limits, why));
            findings.extend(duplicate_of.map(|same| server::judge_same_server(limits, same)));
        }
        None => {}
    }
    findings.extend(clock::judge_clock(limits, node, estimate));
    findings.extend(permissions::judge_permissions(limits, node));
    findings.extend(permissions::judge_waiting(limits, node));
    findings.into_iter().map(|f| f.at(address)).collect()
}

/// The node did not answer, or refused the credentials.
fn judge_unreachable(limits: &Limits, why: &str) -> Finding {
    let (summary, remedy) = if grant_for(why, &limits.key_prefix) == Grant::Credentials {
        (
            format!("refuses this client's credentials: {why}"),
            "fix the user name and password in the node's URL",
        )
    } else {
        (
            format!("unreachable: {why}"),
            "start the node, or fix its address or the network between it and the clients",
        )
    };
    Finding::new(
        Level::Error,
        Check::Reachability,
        Condition::Availability,
        format!("{summary}; the fleet tolerates one failed node fewer"),
    )
    .shown_by(catalogue::RL13A_MINORITY)
    .remedy(remedy)
}

/// `INFO` failed: refused by the ACL (an error: clients need it to see restarts), or
/// unusable (a warning: only the doctor's checks suffer).
fn judge_without_info(limits: &Limits, why: &str) -> Finding {
    let denied = matches!(grant_for(why, &limits.key_prefix), Grant::Command(_));
    if denied {
        Finding::new(
            Level::Error,
            Check::Permissions,
            Condition::Memory,
            format!(
                "refuses INFO ({why}): clients cannot see it restart, so every \
                 reconnection leaves it out for a whole quarantine, and role, \
                 persistence, uptime and eviction cannot be checked"
            ),
        )
        .shown_by(catalogue::RL05B_FRESH_CLIENT)
        .remedy("ACL SETUSER <user> +info")
    } else {
        Finding::new(
            Level::Warning,
            Check::Role,
            Condition::Memory,
            format!(
                "no usable INFO ({why}): role, persistence, uptime and eviction \
                 cannot be checked"
            ),
        )
        .shown_by(catalogue::RL05_NO_PERSISTENCE)
    }
}

/// Round trips against the per-node timeout; `None` without samples.
fn judge_latency(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let trips = RoundTrips::of(&node.round_trips)?;
    let timeout_ms = limits.node_timeout.as_secs_f64() * 1e3;
    let ttl_ms = limits.ttl.as_secs_f64() * 1e3;
    let numbers = format!(
        "round trips p50 {}, p99 {} over {} samples, against a per-node timeout of {} and a \
         TTL of {} (p99 is {:.2} % of it)",
        ms(trips.p50_ms),
        ms(trips.p99_ms),
        trips.samples,
        show(limits.node_timeout),
        show(limits.ttl),
        trips.p99_ms / ttl_ms * 100.0,
    );
    let finding = if trips.p50_ms >= timeout_ms {
        Finding::new(
            Level::Error,
            Check::Latency,
            Condition::Availability,
            format!("{numbers}: most requests to it time out, so it cannot vote"),
        )
        .remedy("raise --node-timeout (below a tenth of the TTL) or move the node closer")
    } else if trips.p99_ms > timeout_ms / 2.0 {
        Finding::new(
            Level::Warning,
            Check::Latency,
            Condition::Availability,
            format!(
                "{numbers}: above half the timeout, acquisitions will fail when the node \
                 is loaded"
            ),
        )
        .remedy("raise --node-timeout (below a tenth of the TTL) or move the node closer")
    } else {
        Finding::new(Level::Ok, Check::Latency, Condition::Availability, numbers)
    };
    Some(finding.shown_by(catalogue::RL12_SLOW_REPLIES))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::{fleet, limits, problems};
    use super::super::judge;
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::report::RoundTrips;

    #[test]
    fn round_trips_are_judged_against_the_per_node_timeout() {
        let mut nodes = fleet();
        nodes[0].round_trips = vec![Duration::from_millis(40); 26];
        nodes[1].round_trips = vec![Duration::from_millis(80); 26];
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Warning, Some("n1:1"), Check::Latency),
                (Level::Error, Some("n2:1"), Check::Latency),
            ]
        );
        let trips = RoundTrips::of(&[
            Duration::from_millis(1),
            Duration::from_millis(3),
            Duration::from_millis(2),
        ])
        .unwrap();
        assert_eq!((trips.p50_ms, trips.p99_ms, trips.samples), (2.0, 3.0, 3));
    }
}
