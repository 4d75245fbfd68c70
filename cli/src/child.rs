//! The command run under the lease, and everything it starts.
//!
//! It runs in a process group of its own, and every signal `redlock` sends goes to that
//! group, so a shell script's children are stopped along with the script. The group is also
//! what is killed before the lease is released, on every path: when the command is stopped,
//! and when its leader exits on its own while something it started (`work &`) still runs.
//! Nothing the command started keeps running after the lease is gone, unless it leaves the
//! group (as a daemon does with `setsid`) or changes its user: the kernel refuses a signal
//! (`EPERM`) to a process whose real and saved user IDs both differ from `redlock`'s. On
//! Linux the command therefore runs with no new privileges (`PR_SET_NO_NEW_PRIVS`), so that
//! a setuid program (`sudo`, `su`, `ping` on old systems) cannot gain a user that would put
//! it out of reach; `--allow-new-privileges` turns that off, and a refused kill is then
//! reported as a group out of reach ([`Child::out_of_reach`]).
//!
//! That needs the group's ID to stay reserved until the group has been killed. The group ID
//! is the leader's process ID, which the system may reuse once the leader is *reaped*. So
//! the leader's exit is noticed without reaping it (`waitid` with `WNOWAIT`, on Linux,
//! Android and FreeBSD), the group is killed, and only then is the leader reaped. Elsewhere
//! the leader is reaped first and the group killed right after: a process that took the
//! reaped ID for a group of its own in between would be hit, which `WNOWAIT` rules out.
//!
//! A killed process is not gone yet: it may still be tearing down (a large memory takes a
//! while) or be stuck in the kernel, and it is not truly gone until it is reaped. So the
//! lease is released only once the group is *confirmed* empty: `kill(-group, 0)` fails with
//! `ESRCH`. An orphan of the group (a child whose parent was killed first) is re-parented to
//! `redlock` itself, which registers as a child subreaper on Linux, so it is reaped here
//! rather than waiting for a first process that may never reap it.
//!
//! The price of the separate group is that the command is not in the terminal's foreground
//! group: `redlock run` is meant for jobs, not for interactive programs.

use std::cell::Cell;
use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::exit::{CANNOT_EXECUTE, Failure, NOT_FOUND, OS_ERROR};

/// A running command and its process group.
#[derive(Debug)]
pub(crate) struct Child {
    process: std::process::Child,
    group: Pid,
    exit: exit::Watch,
    status: Option<ExitStatus>,
    /// Whether the kernel refused a signal to the group (`EPERM`): a member changed its user.
    out_of_reach: Cell<bool>,
}

/// Whether the command may gain privileges when it runs a setuid or file-capability program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Privileges {
    /// No new privileges (`PR_SET_NO_NEW_PRIVS`, Linux): every member stays within reach.
    Forbidden,
    /// `--allow-new-privileges`: a member may switch users and escape the signals.
    Allowed,
}

/// Starts `command` (program and arguments) in a new process group, with the `env`
/// variables (name, value) added to the environment it inherits, and with the
/// `privileges` it may gain.
///
/// # Errors
///
/// Exit code 127 when the program is not found, 126 when it cannot be started, 71 when new
/// privileges cannot be forbidden.
pub(crate) fn spawn(
    command: &[OsString],
    env: &[(String, String)],
    privileges: Privileges,
) -> Result<Child, Failure> {
    use std::os::unix::process::CommandExt;

    let Some((program, arguments)) = command.split_first() else {
        return Err(Failure::usage("no command given after `--`"));
    };
    let shown = program.to_string_lossy();
    become_subreaper();
    if privileges == Privileges::Forbidden {
        forbid_new_privileges()?;
    }
    let mut builder = std::process::Command::new(program);
    builder.args(arguments).process_group(0);
    builder.envs(env.iter().map(|(name, value)| (name, value)));
    let process = builder.spawn().map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Failure::new(NOT_FOUND, format!("{shown}: command not found")),
        _ => Failure::new(CANNOT_EXECUTE, format!("cannot run {shown}: {e}")),
    })?;
    let pid = i32::try_from(process.id())
        .map_err(|_| Failure::new(CANNOT_EXECUTE, format!("{shown}: unusable process id")))?;
    let group = Pid::from_raw(pid);
    let exit = exit::Watch::start(group)
        .map_err(|e| Failure::new(CANNOT_EXECUTE, format!("cannot watch {shown}: {e}")))?;
    Ok(Child {
        process,
        group,
        exit,
        status: None,
        out_of_reach: Cell::new(false),
    })
}

/// Sets `PR_SET_NO_NEW_PRIVS` on the calling thread, which the child started next from this
/// thread inherits (the attribute is per thread, copied by `fork`, `vfork` and `clone`, and
/// kept across `execve`): its setuid and file-capability programs then run without gaining
/// anything, and no member of the group can take a user that refuses `redlock`'s signals.
///
/// Setting it here rather than between `fork` and `exec` needs no `unsafe` code (a
/// `pre_exec` hook would). It binds `redlock`'s own thread for good, which costs nothing:
/// `redlock run` executes no program but the command. [`spawn`] calls it just before it
/// starts the child, on the same thread.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn forbid_new_privileges() -> Result<(), Failure> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| {
        Failure::new(
            OS_ERROR,
            format!(
                "cannot forbid the command new privileges (PR_SET_NO_NEW_PRIVS: {e}); \
                 --allow-new-privileges runs it without that protection"
            ),
        )
    })
}

/// Elsewhere there is no such attribute: a setuid program may put itself out of reach, and
/// a refused kill is reported as such.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[allow(clippy::unnecessary_wraps)] // The same signature as on Linux.
fn forbid_new_privileges() -> Result<(), Failure> {
    Ok(())
}

/// Makes `redlock` the parent of every orphan its command leaves (Linux), so that the
/// group's killed members are reaped here and the group can be confirmed gone.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        // Not fatal: orphans are then reaped by the first process, if it does.
        say!("redlock: warning: cannot adopt the command's orphans ({e})");
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn become_subreaper() {}

impl Child {
    /// Whether nothing is left of the command's process group: every member is dead and
    /// reaped (`kill(-group, 0)` fails with `ESRCH`). Reaps the members that are this
    /// process's children (orphans adopted as a subreaper); call it only after the leader
    /// was reaped by [`kill_and_reap`](Child::kill_and_reap).
    pub(crate) fn group_gone(&mut self) -> bool {
        if self.status.is_none() {
            return false;
        }
        let group = Pid::from_raw(-self.group.as_raw());
        loop {
            match waitpid(group, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => {}
            }
        }
        match killpg(self.group, None) {
            Err(Errno::ESRCH) => true,
            Err(Errno::EPERM) => {
                self.refused(None);
                false
            }
            _ => false,
        }
    }

    /// Whether the kernel refused a signal to the command's group (`EPERM`): a member changed
    /// its user (a setuid program run with `--allow-new-privileges`, on a system without
    /// `PR_SET_NO_NEW_PRIVS`) and runs on beyond `redlock`'s reach.
    pub(crate) fn out_of_reach(&self) -> bool {
        self.out_of_reach.get()
    }

    /// Notes a refused `signal` (`None`: the probe of the group), saying so the first time.
    fn refused(&self, signal: Option<Signal>) {
        if self.out_of_reach.replace(true) {
            return;
        }
        let what = signal.map_or_else(|| "a signal".to_owned(), |signal| signal.to_string());
        say!(
            "redlock: the kernel refused {what} to the command's process group (EPERM): a \
             member changed its user (as a setuid program or sudo does), is out of reach, and \
             may run on after the lease ends"
        );
    }

    /// Resolves when the command's leader has exited (it is not reaped yet where the
    /// platform allows). Cancel safe.
    pub(crate) async fn exited(&mut self) {
        self.exit.exited(&mut self.process, &mut self.status).await;
    }

    /// Whether the leader has exited, asking the operating system directly, so that an exit
    /// the waiting side has not reported yet is seen.
    pub(crate) fn has_exited(&mut self) -> io::Result<bool> {
        self.exit.has_exited(&mut self.process, &mut self.status)
    }

    /// Sends `signal` to the command's whole process group.
    pub(crate) fn signal(&self, signal: Signal) {
        match killpg(self.group, signal) {
            Ok(()) => {}
            // Nobody is left in the group. Before the leader is reaped that cannot happen
            // (it is a member until then), so the leader left its group (setpgid): signal it
            // while it is still ours to signal.
            Err(Errno::ESRCH) => {
                if self.status.is_none() {
                    let _ = kill(self.group, signal);
                }
            }
            Err(Errno::EPERM) => self.refused(Some(signal)),
            Err(e) => say!("redlock: cannot send {signal} to the command: {e}"),
        }
    }

    /// Kills whatever is left of the command's group, then reaps the leader (once it has
    /// exited) and returns its status.
    pub(crate) fn kill_and_reap(&mut self) -> io::Result<ExitStatus> {
        self.signal(Signal::SIGKILL);
        if let Some(status) = self.status {
            return Ok(status);
        }
        let status = self.process.wait()?;
        self.status = Some(status);
        Ok(status)
    }
}

#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
mod exit {
    //! The leader's exit, seen with `waitid(…, WEXITED | WNOWAIT)`: the leader stays a zombie,
    //! its process-group ID reserved, until it is reaped on purpose.

    use std::io;
    use std::process::ExitStatus;

    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    use nix::unistd::Pid;
    use tokio::sync::watch;

    #[derive(Debug)]
    pub(super) struct Watch {
        pid: Pid,
        exited: watch::Receiver<bool>,
    }

    impl Watch {
        pub(super) fn start(pid: Pid) -> io::Result<Self> {
            let (tx, exited) = watch::channel(false);
            // One thread blocks in waitid until the leader exits; it reaps nothing.
            std::thread::Builder::new()
                .name("redlock-child".into())
                .spawn(move || {
                    // Exited, or nothing left to wait for: either way it is over.
                    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
                    while let Err(nix::errno::Errno::EINTR) = waitid(Id::Pid(pid), flags) {}
                    let _ = tx.send(true);
                })?;
            Ok(Self { pid, exited })
        }

        pub(super) async fn exited(
            &mut self,
            _process: &mut std::process::Child,
            _status: &mut Option<ExitStatus>,
        ) {
            // An error means the thread is gone, which it only is once the leader exited.
            let _ = self.exited.wait_for(|exited| *exited).await;
        }

        pub(super) fn has_exited(
            &mut self,
            _process: &mut std::process::Child,
            _status: &mut Option<ExitStatus>,
        ) -> io::Result<bool> {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
            match waitid(Id::Pid(self.pid), flags) {
                Ok(WaitStatus::StillAlive) => Ok(false),
                Ok(_) => Ok(true),
                Err(e) => Err(e.into()),
            }
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
mod exit {
    //! Without `waitid`: the leader is reaped when its exit is seen (polled every 10 ms), and
    //! the group is killed right after (see the module documentation for the small race).

    use std::io;
    use std::process::ExitStatus;
    use std::time::Duration;

    use nix::unistd::Pid;

    #[derive(Debug)]
    pub(super) struct Watch;

    impl Watch {
        pub(super) fn start(_pid: Pid) -> io::Result<Self> {
            Ok(Self)
        }

        pub(super) async fn exited(
            &mut self,
            process: &mut std::process::Child,
            status: &mut Option<ExitStatus>,
        ) {
            while !matches!(self.has_exited(process, status), Ok(true) | Err(_)) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }

        pub(super) fn has_exited(
            &mut self,
            process: &mut std::process::Child,
            status: &mut Option<ExitStatus>,
        ) -> io::Result<bool> {
            if status.is_none() {
                *status = process.try_wait()?;
            }
            Ok(status.is_some())
        }
    }
}
