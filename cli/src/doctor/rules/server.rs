//! What kind of server a node is, from its `INFO`: an independent master (role), new enough
//! for the lock request (version), not a server already listed under another name (same
//! server), and one that never evicts keys (eviction). It also runs the checks that need
//! `INFO` and live in their own files: persistence and uptime.

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation, Role, ServerInfo, version_numbers};

use super::{SameBy, SameServer, persistence, uptime};

/// Every finding that needs the node's `INFO`, in the report's order.
pub(super) fn judge_server(
    limits: &Limits,
    node: &NodeObservation,
    server: &ServerInfo,
    duplicate_of: Option<SameServer<'_>>,
) -> Vec<Finding> {
    let mut findings = vec![judge_role(server), judge_version(server)];
    findings.extend(duplicate_of.map(|same| judge_same_server(limits, same)));
    findings.push(persistence::judge_persistence(limits, node, server));
    findings.extend(uptime::judge_uptime(limits, server));
    if let Some(age) = node.process_age {
        findings.push(uptime::judge_uptime_clock(limits, server.uptime, age));
    }
    findings.push(judge_eviction(server));
    findings
}

/// Redlock needs independent masters: a replica refuses writes, and a master with replicas
/// can be replaced by one that lacks its keys.
fn judge_role(server: &ServerInfo) -> Finding {
    match &server.role {
        Role::Master { replicas: 0 } => Finding::new(
            Level::Ok,
            Check::Role,
            Condition::Independence,
            "a master without replicas",
        )
        .shown_by(catalogue::RL07_FAILOVER),
        Role::Master { replicas } => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Memory,
            format!(
                "a master with {replicas} connected replica(s): a failover promotes a replica \
                 that may lack lock keys this master acknowledged, and a Sentinel split brain \
                 lets two masters grant the same lease"
            ),
        )
        .shown_by(catalogue::RL08B_SPLIT_BRAIN)
        .remedy(
            "use independent masters without replication; if replicas must stay, disable \
             automatic failover and keep a promoted node out of every client for the longest \
             TTL: a running client leaves a known name that now reaches another server out \
             for a whole restart quarantine, and so does a redlock run that remembers the \
             server it met before (its servers file), but a client with no memory of the old \
             server counts it at once",
        ),
        Role::Replica { master } => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Memory,
            format!(
                "a replica of {master}: it refuses lock writes, and a promoted replica may \
                 lack keys its master acknowledged; Redlock needs independent masters"
            ),
        )
        .shown_by(catalogue::RL07_FAILOVER)
        .remedy("list independent masters only; never a replica"),
        Role::Other(role) => Finding::new(
            Level::Error,
            Check::Role,
            Condition::Independence,
            format!("role `{role}`: not a master that can hold lock keys"),
        )
        .remedy("list independent masters only"),
    }
}

/// The oldest server the tests run against is Redis 6.2; before 7.0 the lock request is
/// `SET … NX PX` and a lost round that will wait reads the holder with one more request.
fn judge_version(server: &ServerInfo) -> Finding {
    let version = version_numbers(&server.version);
    if version < [6, 2, 0] {
        Finding::new(
            Level::Warning,
            Check::Version,
            Condition::Availability,
            format!(
                "Redis {}: older than any server the client is tested against (6.2 and later)",
                server.version
            ),
        )
        .remedy("upgrade the node to Redis 6.2 or later")
    } else if version < [7, 0, 0] {
        Finding::new(
            Level::Note,
            Check::Version,
            Condition::Availability,
            format!(
                "Redis {}: before 7.0 the lock request is `SET … NX PX`, and a lost round \
                 that will wait reads the holder with one more request",
                server.version
            ),
        )
    } else {
        Finding::new(
            Level::Ok,
            Check::Version,
            Condition::Availability,
            format!("Redis {}", server.version),
        )
    }
}

/// The node's server was listed first under another name.
pub(super) fn judge_same_server(limits: &Limits, same: SameServer<'_>) -> Finding {
    let by = match same.by {
        SameBy::RunId(run_id) => format!("run_id {}…", &run_id[..run_id.len().min(8)]),
        SameBy::Address(address) => format!("both names reach {address}"),
    };
    Finding::new(
        Level::Error,
        Check::SameServer,
        Condition::Independence,
        format!(
            "the same server as {} ({by}): one server must not vote twice; \
             the client refuses this name for good, so the fleet has one voter fewer \
             than its {} names suggest",
            same.first, limits.nodes
        ),
    )
    .shown_by(catalogue::RL13A_MINORITY)
    .remedy("list each server once, under one name")
}

/// An evicted lock key is a forgotten one.
fn judge_eviction(server: &ServerInfo) -> Finding {
    match server.maxmemory_policy.as_deref() {
        Some("noeviction") => Finding::new(
            Level::Ok,
            Check::Eviction,
            Condition::Memory,
            "maxmemory-policy noeviction: keys are never evicted",
        )
        .shown_by(catalogue::RL05_NO_PERSISTENCE),
        Some(policy) => {
            let limit = match server.maxmemory {
                Some(0) => " (maxmemory 0 today: eviction starts once a limit is set)".to_owned(),
                Some(bytes) => format!(" (maxmemory {bytes} bytes)"),
                None => String::new(),
            };
            Finding::new(
                Level::Error,
                Check::Eviction,
                Condition::Memory,
                format!(
                    "maxmemory-policy {policy}{limit}: under memory pressure the node evicts \
                     keys, lock keys and fence counters included, and forgets them as a crash \
                     without persistence does"
                ),
            )
            .shown_by(catalogue::RL05_NO_PERSISTENCE)
            .remedy("CONFIG SET maxmemory-policy noeviction, and the same in redis.conf")
        }
        None => Finding::new(
            Level::Warning,
            Check::Eviction,
            Condition::Memory,
            "INFO does not give maxmemory_policy: eviction cannot be checked",
        )
        .shown_by(catalogue::RL05_NO_PERSISTENCE),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{fleet, healthy, limits, problems};
    use super::super::judge;
    use crate::doctor::catalogue::{self, Condition};
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::observe::{Limits, Role};

    /// Redis 6.2 takes the older form of the lock request (a note); older servers are not
    /// tested (a warning); none is an error.
    #[test]
    fn servers_before_seven_are_a_note_and_before_six_two_a_warning() {
        let level = |version: &str| {
            let mut server = super::super::fixtures::server("a");
            server.version = version.into();
            super::judge_version(&server).level
        };
        assert_eq!(level("7.0.15"), Level::Ok);
        assert_eq!(level("6.2.14"), Level::Note);
        assert_eq!(level("6.0.20"), Level::Warning);
    }

    #[test]
    fn replicas_evicting_nodes_and_duplicates_are_errors() {
        let mut nodes = fleet();
        nodes.push(healthy("n4:1", "d"));
        nodes.push(healthy("localhost:1", "a"));
        let limits = Limits {
            nodes: 5,
            quorum: 3,
            ..limits()
        };
        nodes[0].info.as_mut().unwrap().as_mut().unwrap().role = Role::Master { replicas: 1 };
        nodes[1].info.as_mut().unwrap().as_mut().unwrap().role = Role::Replica {
            master: "n1:1".into(),
        };
        nodes[2]
            .info
            .as_mut()
            .unwrap()
            .as_mut()
            .unwrap()
            .maxmemory_policy = Some("allkeys-lru".into());
        let report = judge(&limits, &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n1:1"), Check::Role),
                (Level::Error, Some("n2:1"), Check::Role),
                (Level::Error, Some("n3:1"), Check::Eviction),
                (Level::Error, Some("localhost:1"), Check::SameServer),
            ]
        );
        let same = report
            .findings
            .iter()
            .find(|f| f.check == Check::SameServer)
            .unwrap();
        assert!(
            same.summary.contains("the same server as n1:1"),
            "{}",
            same.summary
        );
        assert_eq!(same.condition, Condition::Independence);
        let replica = report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n2:1") && f.check == Check::Role)
            .unwrap();
        assert_eq!(replica.scenario, Some(catalogue::RL07_FAILOVER));

        // Three masters with distinct run_ids remain of five names: exactly a quorum.
        nodes[3].info.as_mut().unwrap().as_mut().unwrap().role = Role::Replica {
            master: "x:1".into(),
        };
        let report = judge(&limits, &nodes, &[]);
        assert!(problems(&report).contains(&(Level::Error, None, Check::Quorum)));
    }
}
