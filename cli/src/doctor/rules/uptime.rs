//! How long a node has been up, from `INFO`: against the restart quarantine (a node within
//! it may have restarted without its keys), and against the process's age on this host's
//! boot-time clock (a wall clock stepped since the server started makes the uptime lie, and
//! the quarantine counts from it).

use std::time::Duration;

use redlock_core::quarantine_left;

use crate::doctor::catalogue::{self, Condition};
use crate::doctor::clock::{self, StartStep};
use crate::doctor::finding::{Check, Finding, Level};
use crate::doctor::observe::{Limits, ServerInfo};
use crate::duration::show;

/// The uptime against the restart quarantine; `None` when the quarantine is off.
pub(super) fn judge_uptime(limits: &Limits, server: &ServerInfo) -> Option<Finding> {
    let quarantine = limits.quarantine?;
    // The client's own rule: the uptime a node reports can read up to a second high.
    let left = quarantine_left(quarantine, server.uptime);
    if !left.is_zero() {
        return Some(
            Finding::new(
                Level::Warning,
                Check::Uptime,
                Condition::Memory,
                format!(
                    "up {}, within the restart quarantine ({}): it may have restarted \
                     without its keys, so a client that meets it now leaves it out of \
                     quorums for another {}",
                    show(server.uptime),
                    show(quarantine),
                    show(left)
                ),
            )
            .shown_by(catalogue::RL06_SHORT)
            .remedy(quarantine_remedy(left)),
        );
    }
    Some(
        Finding::new(
            Level::Ok,
            Check::Uptime,
            Condition::Memory,
            format!(
                "up {}, past the restart quarantine ({})",
                show(server.uptime),
                show(quarantine)
            ),
        )
        .shown_by(catalogue::RL06_LONG),
    )
}

/// What to do about a node within the quarantine: the README's sentence about a first lease
/// on fresh nodes, said for this node, so that the doctor and the documentation agree.
fn quarantine_remedy(left: Duration) -> String {
    format!(
        "wait {}: a node started less than the quarantine ago is left out until it has been \
         up that long, since it may have restarted without its keys; or, if every node \
         persists each write before acknowledging it (appendfsync always), declare it with \
         --restart-quarantine off (nodes_persist_every_write() in the library); see \
         \"Persistence and restarts\" in operations.md",
        show(left)
    )
}

/// `uptime` (`INFO`, wall clock) against `age` (the process's age on this host's boot-time
/// clock): a wall clock stepped forward since the server started makes the uptime read
/// high, and the restart quarantine, which counts from it, ends early or not at all.
pub(super) fn judge_uptime_clock(limits: &Limits, uptime: Duration, age: Duration) -> Finding {
    let ages = format!(
        "INFO's uptime {} (wall clock), the process's age {} (this host's boot-time clock)",
        show(uptime),
        show(age)
    );
    match clock::start_step(uptime, age) {
        StartStep::None => Finding::new(
            Level::Ok,
            Check::UptimeClock,
            Condition::Memory,
            format!("{ages}: the wall clock was not stepped since the server started"),
        )
        .shown_by(catalogue::RL05_QUARANTINE),
        StartStep::Forward(by) => {
            let effect = match limits.quarantine {
                Some(quarantine) => format!(
                    "the uptime reads {} high, so after a restart without persistence the \
                     restart quarantine ({}) ends that much early, or at once, while leases \
                     the node forgot are still valid",
                    show(by),
                    show(quarantine)
                ),
                None => format!(
                    "the uptime reads {} high; with the quarantine off that matters only if \
                     it is turned on, but a step forward also expires lock keys early",
                    show(by)
                ),
            };
            Finding::new(
                Level::Warning,
                Check::UptimeClock,
                Condition::Memory,
                format!(
                    "{ages}: the wall clock was stepped forward by {} since the server started \
                     (a time daemon's step at boot, typically); {effect}",
                    show(by)
                ),
            )
            .shown_by(catalogue::RL05_NO_PERSISTENCE)
            .remedy(
                "start redis-server only once the clock is synchronised (systemd: \
                 After=time-sync.target and Wants=time-sync.target, with chrony-wait or \
                 systemd-time-wait-sync enabled), or allow no clock steps on lock nodes; see \
                 operations.md",
            )
        }
        StartStep::Backward(by) => Finding::new(
            Level::Note,
            Check::UptimeClock,
            Condition::Clocks,
            format!(
                "{ages}: the wall clock was stepped back by {} since the server started; the \
                 uptime reads low, which only lengthens the restart quarantine",
                show(by)
            ),
        )
        .shown_by(catalogue::RL04B_STEP_BACKWARD)
        .remedy("allow no clock steps on lock nodes: slew only (operations.md)"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::{fleet, limits, problems, server};
    use super::super::judge;
    use crate::doctor::finding::{Check, Level};
    use crate::doctor::observe::ServerInfo;

    #[test]
    fn a_node_within_the_quarantine_says_how_long_is_left_and_how_to_decide() {
        let mut nodes = fleet();
        nodes[0].info = Some(Ok(ServerInfo {
            uptime: Duration::from_secs(4),
            ..server("a")
        }));
        let report = judge(&limits(), &nodes, &[]);
        let warning = report
            .findings
            .iter()
            .find(|f| f.check == Check::Uptime && f.level == Level::Warning)
            .unwrap();
        let remedy = warning.remedy.as_deref().unwrap();
        let quarantine = limits().quarantine.unwrap();
        let left = super::show(redlock_core::quarantine_left(
            quarantine,
            Duration::from_secs(4),
        ));
        assert!(
            warning.summary.contains(&format!("for another {left}")),
            "{}",
            warning.summary
        );
        assert!(remedy.starts_with(&format!("wait {left}: ")), "{remedy}");
        assert!(
            remedy.contains("--restart-quarantine off")
                && remedy.contains("appendfsync always")
                && remedy.contains("\"Persistence and restarts\" in operations.md"),
            "{remedy}"
        );
    }

    #[test]
    fn a_local_node_whose_clock_was_stepped_since_it_started_is_warned_about() {
        let mut nodes = fleet();
        // n1 started 40 s ago by the boot-time clock; its wall clock then jumped 2 h ahead.
        nodes[0].info = Some(Ok(ServerInfo {
            uptime: Duration::from_secs(2 * 3_600 + 40),
            process_id: Some(4242),
            ..server("a")
        }));
        nodes[0].process_age = Some(Duration::from_millis(40_250));
        // n2 agrees within whole seconds; n3 is remote (no age read): nothing is said.
        nodes[1].process_age = Some(Duration::from_millis(3_600_400));
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [(Level::Warning, Some("n1:1"), Check::UptimeClock)]
        );
        let warning = report
            .findings
            .iter()
            .find(|f| f.check == Check::UptimeClock && f.level == Level::Warning)
            .unwrap();
        assert!(
            warning.summary.contains("uptime 2h 40s"),
            "{}",
            warning.summary
        );
        assert!(
            warning.summary.contains("age 40s 250ms"),
            "{}",
            warning.summary
        );
        assert!(
            warning
                .summary
                .contains("stepped forward by 1h 59m 59s 750ms"),
            "{}",
            warning.summary
        );
        assert!(
            warning
                .remedy
                .as_deref()
                .unwrap()
                .contains("After=time-sync.target")
        );
        let checked: Vec<_> = report
            .findings
            .iter()
            .filter(|f| f.check == Check::UptimeClock)
            .map(|f| (f.level, f.node.as_deref()))
            .collect();
        assert_eq!(
            checked,
            [(Level::Warning, Some("n1:1")), (Level::Ok, Some("n2:1"))]
        );

        // Stepped back: the quarantine only gets longer; a note.
        nodes[0].process_age = Some(Duration::from_secs(3 * 3_600));
        let report = judge(&limits(), &nodes, &[]);
        assert_eq!(
            problems(&report),
            [(Level::Note, Some("n1:1"), Check::UptimeClock)]
        );
    }
}
