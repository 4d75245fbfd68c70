//! The command run under the lease.
//!
//! It runs in a process group of its own, and every signal `redlock` sends goes to that
//! group: a shell script's children are stopped along with the script, so nothing the
//! command started keeps running after the lease is gone (unless it leaves the group, as a
//! daemon does). The price is that the command is not in the terminal's foreground group:
//! `redlock run` is meant for jobs, not for interactive programs.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::exit::{CANNOT_EXECUTE, Failure, NOT_FOUND};

/// A running command and its process group.
#[derive(Debug)]
pub(crate) struct Child {
    process: tokio::process::Child,
    group: Pid,
    reaped: bool,
}

/// Starts `command` (program and arguments) in a new process group, with `env` added to
/// the environment it inherits.
///
/// # Errors
///
/// Exit code 127 when the program is not found, 126 when it cannot be started.
pub(crate) fn spawn(command: &[OsString], env: Option<(&str, String)>) -> Result<Child, Failure> {
    let Some((program, arguments)) = command.split_first() else {
        return Err(Failure::usage("no command given after `--`"));
    };
    let shown = program.to_string_lossy();
    let mut builder = tokio::process::Command::new(program);
    builder.args(arguments).process_group(0);
    if let Some((name, value)) = env {
        builder.env(name, value);
    }
    let process = builder.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Failure::new(NOT_FOUND, format!("{shown}: command not found")),
        _ => Failure::new(CANNOT_EXECUTE, format!("cannot run {shown}: {e}")),
    })?;
    let pid = process
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| Failure::new(CANNOT_EXECUTE, format!("{shown} exited at once")))?;
    Ok(Child {
        process,
        group: Pid::from_raw(pid),
        reaped: false,
    })
}

impl Child {
    /// Waits for the command to exit. Cancel safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.process.wait().await?;
        self.reaped = true;
        Ok(status)
    }

    /// The command's status if it has exited, without waiting. Asks the operating system
    /// directly, so it sees an exit that the runtime has not yet been told about.
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.process.try_wait()?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Sends `signal` to the command's process group.
    ///
    /// Signals are only sent before the command has been reaped: until then its pid, which
    /// is also the group's id, cannot be reused by another process.
    pub(crate) fn signal(&self, signal: Signal) {
        if self.reaped {
            return;
        }
        match killpg(self.group, signal) {
            Ok(()) => {}
            // The command left its group (setpgid); signal the process itself.
            Err(Errno::ESRCH) => {
                let _ = kill(self.group, signal);
            }
            Err(e) => eprintln!("redlock: cannot send {signal} to the command: {e}"),
        }
    }
}
