//! The exit codes of `redlock` and the failures that carry them.
//!
//! `redlock run` exits with the command's own status when the command ran to its end, so
//! its own codes follow sysexits(3), as `flock(1)` does, and the shell's conventions for a
//! command that cannot be started (as `env(1)` and `timeout(1)` do). `docs/cli.md` lists
//! them for users; keep the two in step.

use std::fmt;
use std::process::ExitStatus;

use redlock::Error;

/// `status`: the resource is not held by a quorum.
pub(crate) const NOT_HELD: u8 = 1;
/// EX_USAGE: bad arguments or configuration.
pub(crate) const USAGE: u8 = 64;
/// EX_UNAVAILABLE: too few nodes answered for a quorum.
pub(crate) const UNAVAILABLE: u8 = 69;
/// EX_SOFTWARE: a bug in `redlock` or the library.
pub(crate) const SOFTWARE: u8 = 70;
/// EX_OSERR: the operating system refused something (signals, a runtime, randomness).
pub(crate) const OS_ERROR: u8 = 71;
/// EX_IOERR: the lease was lost (or ran out unextended) while the command ran, and the
/// command was terminated.
pub(crate) const LEASE_LOST: u8 = 74;
/// EX_TEMPFAIL: another owner holds the resource (after `--wait`, if given).
pub(crate) const TEMP_FAIL: u8 = 75;
/// EX_NOPERM: the nodes refused this client (a wrong or missing password, an ACL without a
/// command the client needs) on too many nodes for a quorum.
pub(crate) const NO_PERMISSION: u8 = 77;
/// A member of the command's process group was out of reach of `redlock`'s signals (the
/// kernel refused them, `EPERM`: it changed its user) and may have run on after the lease
/// ended. `redlock`'s own code: no sysexits(3) code says it.
pub(crate) const OUT_OF_REACH: u8 = 79;
/// The command exists but could not be started (not executable, for instance).
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// The command was not found.
pub(crate) const NOT_FOUND: u8 = 127;

/// Something that ends `redlock` with `code`, after printing `message` on stderr (nothing
/// when it is empty, see [`Failure::silent`]).
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// Ends with `code` and prints nothing.
    pub(crate) fn silent(code: u8) -> Self {
        Self::new(code, String::new())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The exit code for a library error.
pub(crate) fn for_error(error: &Error) -> u8 {
    match error {
        Error::Config(_) | Error::Resource(_) => USAGE,
        Error::Taken { .. } => TEMP_FAIL,
        // Refused credentials or permissions; a node that is not a Redis server at all is a
        // wrong address, a usage error.
        Error::Denied { .. } if !refused_this_client(error) => USAGE,
        Error::Denied { .. } => NO_PERMISSION,
        Error::NoQuorum { .. } | Error::ValidityExhausted { .. } | Error::Fence { .. } => {
            UNAVAILABLE
        }
        Error::Entropy(_) => OS_ERROR,
        // `Internal`, and anything a later version of the library adds.
        _ => SOFTWARE,
    }
}

/// Whether a node of the error's last round refused this client (credentials, permissions).
fn refused_this_client(error: &Error) -> bool {
    use redlock::core::{NodeFailure, NodeStatus};
    error.nodes().is_some_and(|report| {
        report
            .nodes()
            .iter()
            .any(|node| matches!(node.status, NodeStatus::Failed(NodeFailure::Denied(_))))
    })
}

/// The code that reports a child's status as a shell does: its exit code, or 128 + the
/// number of the signal that killed it.
pub(crate) fn for_status(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;

    if let Some(code) = status.code() {
        // An exit code is 0..=255 on Unix; the low byte is what the parent sees anyway.
        return code.to_le_bytes()[0];
    }
    match status.signal() {
        Some(signal) => u8::try_from(128 + signal).unwrap_or(u8::MAX),
        None => SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::for_status;

    #[test]
    fn statuses_map_as_a_shell_reports_them() {
        // Raw wait statuses: exit code in the second byte, signal number in the low bits.
        assert_eq!(for_status(ExitStatus::from_raw(0)), 0);
        assert_eq!(for_status(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(for_status(ExitStatus::from_raw(255 << 8)), 255);
        assert_eq!(for_status(ExitStatus::from_raw(15)), 143);
        assert_eq!(for_status(ExitStatus::from_raw(9)), 137);
    }
}
