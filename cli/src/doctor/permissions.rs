//! Which commands a node lets this client run, found by doing what the client does.
//!
//! The collector runs real operations of the `redlock` library against each node alone, on a
//! scratch resource of its own: an acquisition (`SET NX PX`), an extension and a release
//! (the ownership scripts, through `EVAL`), a quorum-fenced acquisition and its release, and a
//! multi-resource acquisition with its extension and release. Whatever the library sends is
//! what gets checked, so the list cannot drift from the client. A refusal comes back as the
//! node's `NOPERM` text, which names the command or says that a key is out of reach; this
//! module turns it into the ACL rule that fixes it.
//!
//! Redis 7.0 reports a command refused *inside* a script as a plain error ("The user executing
//! the script can't run this command"), without naming it. The collector then sends each
//! command the scripts use (`GET`, `SET`, `DEL`, `PEXPIRE`, `EXISTS`) directly on a scratch
//! key, and the `NOPERM` answers name the missing ones.
//!
//! Waiting for a lease uses more: the release script's `PUBLISH` on the key's channel (which
//! it calls with `redis.pcall`, so a refusal there is silent), a waiter's `SUBSCRIBE`, the
//! `PTTL` of its rounds, the `HSET` of the script that marks a waiter's interest (the release
//! scripts publish only where a mark is) and the `HDEL` that removes it, the release script's
//! `HKEYS` of the marks (whose they are: another process's waiter bounds this client's
//! hand-offs to its own; also through `redis.pcall`), and the `PING` that probes a node after
//! a timeout. The collector sends each of [`WAIT_COMMANDS`] directly (the
//! marks on the key's mark hash, `LockKey::wait_key`); a refusal there only slows waiters down
//! (they fall back on their retry timers), so it is judged apart.

use std::fmt;

use serde::Serialize;

/// The commands the library's scripts call, probed one by one when a script is refused
/// without saying which command it needed (Redis 7.0).
pub(crate) const SCRIPT_COMMANDS: [&str; 5] = ["EXISTS", "GET", "SET", "PEXPIRE", "DEL"];

/// The commands a waiter relies on, sent one by one on a scratch key and its channel.
pub(crate) const WAIT_COMMANDS: [&str; 7] = [
    "PUBLISH",
    "SUBSCRIBE",
    "PTTL",
    "HSET",
    "HDEL",
    "HKEYS",
    "PING",
];

/// One operation of the probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Operation {
    Acquire,
    Extend,
    Release,
    FencedAcquire,
    FencedRelease,
    MultiAcquire,
    MultiExtend,
    MultiRelease,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Acquire => "acquire",
            Self::Extend => "extend",
            Self::Release => "release",
            Self::FencedAcquire => "fenced acquire",
            Self::FencedRelease => "fenced release",
            Self::MultiAcquire => "multi-resource acquire",
            Self::MultiExtend => "multi-resource extend",
            Self::MultiRelease => "multi-resource release",
        })
    }
}

/// How one operation went on the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "detail", rename_all = "kebab-case")]
pub(crate) enum Outcome {
    Done,
    /// The node refused this client: its `NOPERM`, `WRONGPASS` or `NOAUTH` text.
    Denied(String),
    /// Something else went wrong (a timeout, `READONLY` on a replica, not Redis at all):
    /// this says nothing about permissions.
    Failed(String),
    /// Not tried, because the operation it needs failed.
    Skipped,
}

/// The operations run on one node, and the direct command probes when they were needed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Probe {
    pub(crate) operations: Vec<(Operation, Outcome)>,
    /// Each of [`SCRIPT_COMMANDS`] with the node's refusal, if it refused it.
    pub(crate) commands: Vec<(String, Option<String>)>,
    /// Each of [`WAIT_COMMANDS`] with the node's refusal, if it refused it.
    pub(crate) waiting: Vec<(String, Option<String>)>,
}

/// What fixes a refusal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", content = "rule", rename_all = "kebab-case")]
pub(crate) enum Grant {
    /// An ACL rule granting a command: `+eval`.
    Command(String),
    /// An ACL rule granting the lock keys: `~redlock:*`.
    Keys(String),
    /// An ACL rule granting the lock keys' channels: `&redlock:*`.
    Channels(String),
    /// The password or user name in the node's URL is wrong or missing.
    Credentials,
    /// A command refused inside a script, not named by the server (Redis 7.0).
    ScriptCommand,
    /// A refusal this module does not recognise (shown as the node said it).
    Other(String),
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Command(rule) | Self::Keys(rule) | Self::Channels(rule) => f.write_str(rule),
            Self::Credentials => f.write_str("the right user name and password in the node URL"),
            Self::ScriptCommand => f.write_str("the commands the scripts call"),
            Self::Other(text) => write!(f, "whatever `{text}` asks for"),
        }
    }
}

/// Whether an error text is Redis 7.0's refusal of a command inside a script.
pub(crate) fn is_script_refusal(text: &str) -> bool {
    text.contains("can't run this command or subcommand")
}

/// The grant that answers a node's refusal `text`; `prefix` is the lock keys' prefix.
pub(crate) fn grant_for(text: &str, prefix: &str) -> Grant {
    let lower = text.to_ascii_lowercase();
    if lower.contains("wrongpass")
        || lower.contains("noauth")
        || lower.contains("invalid username-password")
        || lower.contains("authentication required")
    {
        return Grant::Credentials;
    }
    if let Some(at) = lower.find("permissions to run the '") {
        let rest = &lower[at + "permissions to run the '".len()..];
        if let Some(end) = rest.find('\'') {
            return Grant::Command(format!("+{}", &rest[..end]));
        }
    }
    if lower.contains("access one of the keys") {
        return Grant::Keys(format!("~{}*", acl_pattern(prefix)));
    }
    if lower.contains("access one of the channels") {
        return Grant::Channels(format!("&{}*", acl_pattern(prefix)));
    }
    if is_script_refusal(text) {
        return Grant::ScriptCommand;
    }
    Grant::Other(text.to_owned())
}

/// Escapes the glob characters of an ACL key pattern.
fn acl_pattern(prefix: &str) -> String {
    let mut escaped = String::with_capacity(prefix.len());
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

impl Probe {
    /// Every grant the node's refusals call for, deduplicated and sorted. A script refusal
    /// that the direct probes explained is replaced by the commands they found.
    pub(crate) fn grants(&self, prefix: &str) -> Vec<Grant> {
        let mut grants: Vec<Grant> = self
            .operations
            .iter()
            .filter_map(|(_, outcome)| match outcome {
                Outcome::Denied(text) => Some(grant_for(text, prefix)),
                Outcome::Failed(text) if is_script_refusal(text) => Some(grant_for(text, prefix)),
                _ => None,
            })
            .collect();
        let direct: Vec<Grant> = self
            .commands
            .iter()
            .filter_map(|(_, refusal)| refusal.as_deref().map(|text| grant_for(text, prefix)))
            .collect();
        if !direct.is_empty() {
            grants.retain(|grant| *grant != Grant::ScriptCommand);
            grants.extend(direct);
        }
        grants.sort();
        grants.dedup();
        grants
    }

    /// The commands of [`WAIT_COMMANDS`] the node refused, and the grants that fix them.
    pub(crate) fn waiting_refused(&self, prefix: &str) -> (Vec<String>, Vec<Grant>) {
        let mut commands = Vec::new();
        let mut grants = Vec::new();
        for (command, refusal) in &self.waiting {
            if let Some(text) = refusal {
                commands.push(command.clone());
                grants.push(grant_for(text, prefix));
            }
        }
        grants.sort();
        grants.dedup();
        (commands, grants)
    }

    /// The operations the node refused.
    pub(crate) fn refused(&self) -> Vec<Operation> {
        self.operations
            .iter()
            .filter(|(_, outcome)| match outcome {
                Outcome::Denied(_) => true,
                Outcome::Failed(text) => is_script_refusal(text),
                _ => false,
            })
            .map(|(operation, _)| *operation)
            .collect()
    }

    /// The first failure that is not a refusal, if any: the probe could not tell.
    pub(crate) fn inconclusive(&self) -> Option<(Operation, &str)> {
        self.operations
            .iter()
            .find_map(|(operation, outcome)| match outcome {
                Outcome::Failed(text) if !is_script_refusal(text) => {
                    Some((*operation, text.as_str()))
                }
                _ => None,
            })
    }

    /// Whether a script was refused without naming the command.
    pub(crate) fn needs_direct_probe(&self) -> bool {
        self.operations.iter().any(|(_, outcome)| {
            matches!(outcome, Outcome::Denied(text) | Outcome::Failed(text)
                if grant_for(text, "") == Grant::ScriptCommand)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_the_rule_that_fixes_them() {
        let cases = [
            (
                "access denied: NOPERM this user has no permissions to run the 'eval' command",
                Grant::Command("+eval".into()),
            ),
            (
                "NOPERM User locker has no permissions to run the 'pexpire' command script: x, on @user_script:1.",
                Grant::Command("+pexpire".into()),
            ),
            (
                "NOPERM this user has no permissions to run the 'config|get' command",
                Grant::Command("+config|get".into()),
            ),
            (
                "NOPERM this user has no permissions to access one of the keys used as arguments",
                Grant::Keys("~redlock:*".into()),
            ),
            (
                "NoPerm: this user has no permissions to access one of the channels used as arguments",
                Grant::Channels("&redlock:*".into()),
            ),
            (
                "WRONGPASS invalid username-password pair or user is disabled.",
                Grant::Credentials,
            ),
            ("NOAUTH Authentication required.", Grant::Credentials),
            (
                "server error: ERR The user executing the script can't run this command or subcommand script: da05, on @user_script:1.",
                Grant::ScriptCommand,
            ),
        ];
        for (text, grant) in cases {
            assert_eq!(grant_for(text, "redlock:"), grant, "{text}");
        }
        assert_eq!(
            grant_for("NOPERM … access one of the keys", "jobs[1]:"),
            Grant::Keys("~jobs\\[1\\]:*".into())
        );
    }

    #[test]
    fn direct_probes_name_what_a_script_refusal_did_not() {
        let script =
            "ERR The user executing the script can't run this command or subcommand script: x";
        let probe = Probe {
            operations: vec![
                (Operation::Acquire, Outcome::Done),
                (Operation::Extend, Outcome::Failed(script.into())),
                (Operation::Release, Outcome::Done),
                (
                    Operation::FencedAcquire,
                    Outcome::Failed("timed out".into()),
                ),
            ],
            commands: vec![
                ("GET".into(), None),
                (
                    "PEXPIRE".into(),
                    Some("NOPERM this user has no permissions to run the 'pexpire' command".into()),
                ),
            ],
            waiting: vec![
                ("PING".into(), None),
                (
                    "PUBLISH".into(),
                    Some("NOPERM this user has no permissions to access one of the channels used as arguments".into()),
                ),
            ],
        };
        // A refused channel is judged apart: it does not show among the lease's grants.
        assert_eq!(
            probe.waiting_refused("redlock:"),
            (
                vec!["PUBLISH".to_owned()],
                vec![Grant::Channels("&redlock:*".into())]
            )
        );
        assert!(probe.needs_direct_probe());
        assert_eq!(
            probe.grants("redlock:"),
            [Grant::Command("+pexpire".into())]
        );
        assert_eq!(probe.refused(), [Operation::Extend]);
        assert_eq!(
            probe.inconclusive(),
            Some((Operation::FencedAcquire, "timed out"))
        );
    }
}
