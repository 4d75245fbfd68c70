//! What a crash loses, from `INFO` (`aof_enabled`) and `CONFIG GET appendfsync`: nothing with
//! `appendfsync always`; otherwise the restart quarantine has to keep a restarted node out
//! of quorums until the leases it forgot have expired.

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation, ServerInfo};
use crate::duration::show;

pub(super) fn judge_persistence(
    limits: &Limits,
    node: &NodeObservation,
    server: &ServerInfo,
) -> Finding {
    let fsync = match &node.appendfsync {
        Some(Ok(policy)) => Ok(policy.as_str()),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("not read"),
    };
    let finding = |level, summary: String| {
        Finding::new(level, Check::Persistence, Condition::Memory, summary)
    };
    if server.aof_enabled && fsync == Ok("always") {
        return finding(
            Level::Ok,
            "appendonly yes, appendfsync always: a crash loses no acknowledged key".into(),
        )
        .shown_by(catalogue::RL05_ALWAYS);
    }
    let (what, scenario) = match (server.aof_enabled, fsync) {
        (false, _) => (
            "no append-only file (appendonly no): a crash loses every lock key".to_owned(),
            catalogue::RL05_NO_PERSISTENCE,
        ),
        (true, Ok(policy)) => (
            format!(
                "appendfsync {policy}: a crash loses the keys written since the last fsync \
                 (up to a second)"
            ),
            catalogue::RL05_EVERYSEC,
        ),
        (true, Err(why)) => (
            format!("appendonly yes, appendfsync unknown (CONFIG GET appendfsync: {why})"),
            catalogue::RL05_EVERYSEC,
        ),
    };
    let unknown = server.aof_enabled && fsync.is_err();
    match limits.quarantine {
        Some(quarantine) => finding(
            Level::Note,
            format!(
                "{what}; mitigated: the restart quarantine ({}) keeps a restarted node out of \
                 quorums until the leases it forgot have expired ({})",
                show(quarantine),
                catalogue::RL05_QUARANTINE,
            ),
        )
        .shown_by(scenario)
        .remedy(format!(
            "with quorum-minted fencing tokens use appendfsync always: a delayed restart does \
             not protect fence counters ({})",
            catalogue::FENCE_NO_PERSISTENCE
        )),
        None if unknown => finding(
            Level::Warning,
            format!(
                "{what}; the restart quarantine is off, which is safe only with appendfsync \
                 always"
            ),
        )
        .shown_by(scenario)
        .remedy("check appendfsync by hand, or grant the doctor's user +config|get"),
        None => finding(
            Level::Error,
            format!(
                "{what}, and the restart quarantine is off: the node votes again at once after \
                 a restart, while leases it forgot are still valid"
            ),
        )
        .shown_by(scenario)
        .remedy(
            "appendonly yes with appendfsync always, or a restart quarantine of at least the \
             longest TTL (drop --restart-quarantine off)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{fleet, limits, problems};
    use super::super::judge;
    use crate::doctor::catalogue::{self, Condition};
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::observe::Limits;
    use crate::doctor::report::Verdict;

    #[test]
    fn without_persistence_the_quarantine_decides() {
        let mut nodes = fleet();
        nodes[1]
            .info
            .as_mut()
            .unwrap()
            .as_mut()
            .unwrap()
            .aof_enabled = false;
        nodes[2].appendfsync = Some(Ok("everysec".into()));

        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(report.verdict, Verdict::Healthy);
        let notes: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.level == Level::Note)
            .collect();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0].scenario, Some(catalogue::RL05_NO_PERSISTENCE));
        assert_eq!(notes[1].scenario, Some(catalogue::RL05_EVERYSEC));
        assert!(
            notes[1].summary.contains("mitigated"),
            "{}",
            notes[1].summary
        );

        let off = Limits {
            quarantine: None,
            ..limits()
        };
        let report = judge(&off, &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n2:1"), Check::Persistence),
                (Level::Error, Some("n3:1"), Check::Persistence),
            ]
        );
        assert_eq!(report.exit_code, 1);
        let everysec = &report
            .findings
            .iter()
            .find(|f| f.node.as_deref() == Some("n3:1") && f.check == Check::Persistence)
            .unwrap();
        assert_eq!(everysec.condition, Condition::Memory);
        assert_eq!(
            everysec.scenario.unwrap().file,
            "simulator/scenarios/rl-05-crash-everysec-before-fsync.toml"
        );

        // CONFIG GET refused: unknown, a warning when only appendfsync always would be safe.
        nodes[2].appendfsync = Some(Err(
            "NOPERM this user has no permissions to run the 'config|get' command".into(),
        ));
        let report = judge(&off, &nodes[2..], &[]);
        assert!(problems(&report).contains(&(Level::Warning, Some("n3:1"), Check::Persistence)));
    }
}
