//! `redlock run --json PATH`: the run's final report, one JSON document written to PATH when
//! `redlock` exits, for scripts and monitors that must tell a refused run from a lost lease
//! without parsing stderr. It goes to a file because CMD inherits stdout and stderr: a
//! document on either would be mixed with CMD's own output. The serde shape here is the
//! document (as the doctor's report is for `doctor --json`), so a field renamed here is a
//! change for scripts; docs/cli.md lists the fields.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use redlock_core::{ReleaseReport, StopCause};
use serde::Serialize;

use crate::exit::{Failure, USAGE};

/// How the run ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Outcome {
    /// CMD ran to its end while the lease was valid; the exit code is CMD's.
    Finished,
    /// CMD was terminated because the lease was lost, not extended in time, or held for
    /// `--max-hold` (exit 74).
    Stopped,
    /// CMD ended on its own, but only after the lease had run out (exit 74).
    Late,
    /// A process of CMD's group refused `redlock`'s signals (it changed its user) and may
    /// have run on after the lease ended (exit 79).
    OutOfReach,
    /// The lease was not granted: held elsewhere (75), too few nodes (69), refused by the
    /// nodes (77). CMD did not run.
    Refused,
    /// A signal ended the wait for the lease (128 + N; CMD did not run), or the wait for
    /// CMD's killed processes to be gone (128 + N; the lease was left to expire).
    Interrupted,
    /// CMD could not be started (126) or was not found (127).
    NotStarted,
    /// Bad arguments or configuration (64), or an error of the system (70, 71).
    #[default]
    Error,
}

/// Why CMD was stopped (`Outcome::Stopped`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Stop {
    /// No extension succeeded in time (nodes unreachable, or `redlock` paused).
    NotExtended,
    /// `--max-hold` was reached.
    HoldLimit,
    /// The keep-alive found the lease gone (taken over, or expired on the nodes).
    Lost,
}

impl Stop {
    pub(crate) fn of(cause: &StopCause) -> Option<Self> {
        match cause {
            StopCause::NotExtended { .. } => Some(Self::NotExtended),
            StopCause::HoldLimit { .. } => Some(Self::HoldLimit),
            StopCause::Lost(_) => Some(Self::Lost),
            // A cause a later core adds: the message still says it.
            _ => None,
        }
    }
}

/// CMD's own status: its exit code, or the signal that killed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct CommandStatus {
    pub(crate) exit_code: Option<i32>,
    pub(crate) signal: Option<i32>,
}

impl From<ExitStatus> for CommandStatus {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self {
            exit_code: status.code(),
            signal: status.signal(),
        }
    }
}

/// What the release did, node by node counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Release {
    /// Nodes where the lease's key was deleted.
    pub(crate) released: usize,
    /// Nodes where it had already expired.
    pub(crate) not_held: usize,
    /// Nodes where another owner's key was found (and left alone).
    pub(crate) held_by_other: usize,
    /// Nodes that failed or timed out.
    pub(crate) failed: usize,
    /// Nodes that had not answered when the release was decided: `redlock run` waits for
    /// every node's answer, so only a release the keep-alive made itself (a lost lease whose
    /// keys had expired) can leave some; their answers land before `redlock` exits.
    pub(crate) pending: usize,
    /// Whether a quorum is known to be free of this lease: the next run can take it at once.
    pub(crate) quorum_free: bool,
}

impl From<&ReleaseReport> for Release {
    fn from(report: &ReleaseReport) -> Self {
        Self {
            released: report.released(),
            not_held: report.not_held(),
            held_by_other: report.held_by_other(),
            failed: report.failed(),
            pending: report.pending(),
            quorum_free: report.is_quorum_free(),
        }
    }
}

/// The report: filled in as the run goes, written once at the end.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct RunReport {
    /// `redlock`'s exit code.
    pub(crate) exit_code: u8,
    pub(crate) outcome: Outcome,
    pub(crate) resource: String,
    /// What `redlock` said on stderr about the end, if anything (nothing for a refusal under
    /// `--quiet`).
    pub(crate) message: Option<String>,
    /// Warnings printed on stderr (an unconfirmed release, a group that did not die).
    pub(crate) warnings: Vec<String>,
    /// CMD's status, when it ran.
    pub(crate) command: Option<CommandStatus>,
    /// Why CMD was stopped, for `stopped`.
    pub(crate) stop: Option<Stop>,
    /// The lease's fencing token (with `--fence-env`).
    pub(crate) fence: Option<u64>,
    /// The acquisition's rounds, when it made any.
    pub(crate) rounds: Option<u32>,
    /// How long the acquisition took, granted or not.
    pub(crate) waited_ms: Option<f64>,
    /// How long the lease was held, from its grant to the end of its release.
    pub(crate) held_ms: Option<f64>,
    /// What the release did, when a lease was granted.
    pub(crate) release: Option<Release>,
}

/// A duration as the report writes it: milliseconds, to the microsecond.
pub(crate) fn ms(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e6).round() / 1e3
}

impl RunReport {
    /// Ends the report with the run's result: its exit code and, for a failure, the message
    /// (the outcome for failures was set where they happened).
    pub(crate) fn conclude(&mut self, result: &Result<u8, Failure>) {
        match result {
            Ok(code) => self.exit_code = *code,
            Err(failure) => {
                self.exit_code = failure.code;
                if !failure.message.is_empty() {
                    self.message = Some(failure.message.clone());
                }
            }
        }
    }

    /// The report as JSON (one document, pretty-printed, as `doctor --json`).
    pub(crate) fn render(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            // Every field is plain data; this cannot fail, but a report is better than a panic.
            format!("{{\"error\": \"cannot encode the report: {e}\"}}")
        })
    }
}

/// The file named by `--json`, opened (created, or emptied) before anything else, so that a
/// path that cannot be written is refused before CMD runs rather than after, and a report
/// left by an earlier run is never mistaken for this one's.
#[derive(Debug)]
pub(crate) struct ReportFile {
    path: PathBuf,
    file: File,
}

impl ReportFile {
    /// # Errors
    ///
    /// A usage failure naming `--json` and the path.
    pub(crate) fn create(path: &Path) -> Result<Self, Failure> {
        let file = File::create(path).map_err(|e| {
            Failure::new(
                USAGE,
                format!("--json: cannot create {}: {e}", path.display()),
            )
        })?;
        Ok(Self {
            path: path.to_owned(),
            file,
        })
    }

    /// Writes the report; a failure to write is reported on stderr but does not change the
    /// exit code, which is CMD's.
    pub(crate) fn write(mut self, report: &RunReport) {
        let mut text = report.render();
        text.push('\n');
        // One write, no fsync: readers see the whole document once redlock has exited, and a
        // PATH that is a pipe or a terminal (`/dev/fd/3`) cannot be synced.
        if let Err(e) = self.file.write_all(text.as_bytes()) {
            say!(
                "redlock: warning: --json: cannot write the report to {}: {e}",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use redlock_core::{NodeStatus, Reply};

    use super::*;

    #[test]
    fn the_report_has_the_documented_shape() {
        let report = RunReport {
            exit_code: 74,
            outcome: Outcome::Stopped,
            resource: "import".into(),
            message: Some("the command was terminated".into()),
            command: Some(ExitStatus::from_raw(15).into()),
            stop: Some(Stop::NotExtended),
            fence: Some(7),
            rounds: Some(1),
            waited_ms: Some(ms(Duration::from_micros(12_345))),
            ..RunReport::default()
        };
        let json: serde_json::Value = serde_json::from_str(&report.render()).unwrap();
        assert_eq!(json["exit_code"], 74);
        assert_eq!(json["outcome"], "stopped");
        assert_eq!(json["stop"], "not-extended");
        assert_eq!(json["command"]["exit_code"], serde_json::Value::Null);
        assert_eq!(json["command"]["signal"], 15);
        assert_eq!(json["fence"], 7);
        assert_eq!(json["waited_ms"], 12.345);
        assert_eq!(json["release"], serde_json::Value::Null);
        assert_eq!(json["warnings"], serde_json::json!([]));
    }

    #[test]
    fn a_failure_gives_its_code_and_message() {
        let mut report = RunReport::default();
        report.conclude(&Err(Failure::new(75, "held elsewhere")));
        assert_eq!(
            (report.exit_code, report.message.as_deref()),
            (75, Some("held elsewhere"))
        );
        let mut quiet = RunReport::default();
        quiet.conclude(&Err(Failure::silent(75)));
        assert_eq!((quiet.exit_code, quiet.message), (75, None));
    }

    #[test]
    fn a_release_is_counted_node_by_node() {
        let mut report = ReleaseReport::default();
        report.nodes = vec![
            NodeStatus::Replied(Reply::Released),
            NodeStatus::Replied(Reply::NotHeld),
            NodeStatus::Pending,
        ];
        let release = Release::from(&report);
        assert_eq!(
            (release.released, release.not_held, release.pending),
            (1, 1, 1)
        );
        assert!(release.quorum_free);
    }

    #[test]
    fn an_unwritable_path_is_refused_naming_the_flag() {
        let err = ReportFile::create(Path::new("/nonexistent/dir/report.json")).unwrap_err();
        assert_eq!(err.code, USAGE);
        assert!(
            err.message
                .starts_with("--json: cannot create /nonexistent/dir/report.json: "),
            "{err}"
        );
    }
}
