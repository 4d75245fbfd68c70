//! What the node's ACL lets this client do, from the probe (which takes, extends and releases
//! leases on a scratch resource, as the library would): a refused lease command costs the
//! node's vote (an error); a refused waiting command only slows waiters down (a warning).

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, NodeObservation};
use crate::doctor::permissions::{Grant, Operation};

/// The lease's operations; `None` when the node was not probed.
pub(super) fn judge_permissions(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let probe = node.probe.as_ref()?;
    let grants = probe.grants(&limits.key_prefix);
    let refused = probe.refused();
    if !grants.is_empty() {
        let operations: Vec<String> = refused.iter().map(ToString::to_string).collect();
        let mut finding = Finding::new(
            Level::Error,
            Check::Permissions,
            Condition::Availability,
            format!(
                "refuses {}: {}",
                operations.join(", "),
                consequences(&refused)
            ),
        )
        .remedy(remedy(&grants));
        if refused.contains(&Operation::Release) {
            finding = finding.shown_by(catalogue::RL14_PLAIN_DEL);
        }
        return Some(finding);
    }
    if let Some((operation, why)) = probe.inconclusive() {
        return Some(Finding::new(
            Level::Warning,
            Check::Permissions,
            Condition::Availability,
            format!(
                "permissions not checked: the {operation} on a scratch resource failed ({why})"
            ),
        ));
    }
    Some(Finding::new(
        Level::Ok,
        Check::Permissions,
        Condition::Availability,
        "acquire, extend, release, fenced and multi-resource leases all permitted",
    ))
}

/// What the `refused` operations cost the leases, most serious first.
fn consequences(refused: &[Operation]) -> String {
    let refuses = |ops: &[Operation]| ops.iter().any(|op| refused.contains(op));
    let mut consequences = Vec::new();
    if refuses(&[Operation::Acquire]) {
        consequences.push("no lease can count on its vote");
    } else if refuses(&[Operation::FencedAcquire, Operation::MultiAcquire]) {
        consequences.push("fenced or multi-resource leases cannot count on its vote");
    }
    if refuses(&[
        Operation::Release,
        Operation::FencedRelease,
        Operation::MultiRelease,
    ]) {
        consequences.push(
            "leases taken on it are never released there: its keys stay until their TTL, \
             and a plain DEL is no workaround",
        );
    }
    if refuses(&[Operation::Extend, Operation::MultiExtend]) {
        consequences.push("leases cannot be extended on it: long work loses its vote");
    }
    consequences.join("; ")
}

/// The ACL rules to add, then the credentials to fix, as one remedy.
fn remedy(grants: &[Grant]) -> String {
    let credentials = grants.contains(&Grant::Credentials);
    let rules: Vec<String> = grants
        .iter()
        .filter(|g| **g != Grant::Credentials)
        .map(ToString::to_string)
        .collect();
    let mut remedy = Vec::new();
    if !rules.is_empty() {
        remedy.push(format!("ACL SETUSER <user> {}", rules.join(" ")));
    }
    if credentials {
        remedy.push("fix the user name and password in the node's URL".to_owned());
    }
    remedy.join("; ")
}

/// The commands a waiter relies on: a refusal only slows waiters down.
pub(super) fn judge_waiting(limits: &Limits, node: &NodeObservation) -> Option<Finding> {
    let probe = node.probe.as_ref()?;
    if probe.waiting.is_empty() {
        return None;
    }
    let (commands, grants) = probe.waiting_refused(&limits.key_prefix);
    if commands.is_empty() {
        return Some(Finding::new(
            Level::Ok,
            Check::Permissions,
            Condition::Availability,
            "release notifications, the holder's remaining time and probes permitted",
        ));
    }
    let rules: Vec<String> = grants.iter().map(ToString::to_string).collect();
    Some(
        Finding::new(
            Level::Warning,
            Check::Permissions,
            Condition::Availability,
            format!(
                "refuses {}: releases on it notify no waiter and waiters cannot subscribe or \
                 read the holder's remaining time, so they wake on their retry timers (up to \
                 the retry delay plus jitter after a release) instead of at once",
                commands.join(", ")
            ),
        )
        .remedy(format!("ACL SETUSER <user> {}", rules.join(" "))),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{fleet, limits, problems};
    use super::super::judge;
    use crate::doctor::catalogue;
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::permissions::{Operation, Outcome, Probe};

    #[test]
    fn refusals_name_the_rule_to_add() {
        let mut nodes = fleet();
        nodes[0].probe = Some(Probe {
            operations: vec![
                (Operation::Acquire, Outcome::Done),
                (
                    Operation::Extend,
                    Outcome::Denied(
                        "NOPERM this user has no permissions to run the 'eval' command".into(),
                    ),
                ),
                (
                    Operation::Release,
                    Outcome::Denied(
                        "NOPERM this user has no permissions to run the 'eval' command".into(),
                    ),
                ),
            ],
            commands: Vec::new(),
            waiting: Vec::new(),
        });
        nodes[1].probe = Some(Probe {
            operations: vec![(
                Operation::Acquire,
                Outcome::Failed(
                    "server error: READONLY You can't write against a read only replica.".into(),
                ),
            )],
            commands: Vec::new(),
            waiting: Vec::new(),
        });
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [
                (Level::Error, Some("n1:1"), Check::Permissions),
                (Level::Warning, Some("n2:1"), Check::Permissions),
            ]
        );
        let refusal = &report
            .findings
            .iter()
            .find(|f| f.level == Level::Error)
            .unwrap();
        assert_eq!(refusal.remedy.as_deref(), Some("ACL SETUSER <user> +eval"));
        assert_eq!(refusal.scenario, Some(catalogue::RL14_PLAIN_DEL));
        assert!(
            refusal.summary.starts_with("refuses extend, release:"),
            "{}",
            refusal.summary
        );
    }
}
