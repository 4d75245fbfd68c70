//! A command that changes its user escapes `redlock`'s signals: the kernel refuses `kill`
//! (`EPERM`) to a process whose real and saved user IDs both differ from the sender's.
//!
//! The tests build a setuid-root helper (a tiny C program compiled with `cc`) that switches
//! to uid 0 for good, ignores `SIGTERM`, says who it is and sleeps. They run `redlock` as
//! the unprivileged user `nobody` (through `setpriv`), so they need to run as root on a
//! file system that honours the setuid bit, with `cc` and `setpriv` installed; elsewhere
//! they say why on stderr and pass without checking anything.
//!
//! - By default the command cannot gain privileges (`PR_SET_NO_NEW_PRIVS`): the helper
//!   stays `nobody`, and the lease's end kills it.
//! - With `--allow-new-privileges` the helper becomes root; the kill is refused, `redlock`
//!   reports the group out of reach with its own exit code, and the release still waits
//!   until the group is confirmed gone or its keys have expired.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nix::unistd::Pid;

/// `redlock run`'s exit code for a process group with a member out of reach.
const OUT_OF_REACH: i32 = 79;

/// The helper: `setresuid(0, 0, 0)`, then `SIGTERM` ignored, `uid <uid> pid <pid>` appended
/// to the file `argv[1]`, a sleep of `argv[2]` seconds, and `done`.
const HELPER: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void say(const char *path, const char *text) {
    FILE *file = fopen(path, "a");
    if (file) { fputs(text, file); fclose(file); }
}

int main(int argc, char **argv) {
    char line[64];
    if (argc < 3) return 2;
    (void) setresuid(0, 0, 0);
    signal(SIGTERM, SIG_IGN);
    snprintf(line, sizeof line, "uid %d pid %d\n", (int) getuid(), (int) getpid());
    say(argv[1], line);
    sleep((unsigned) atoi(argv[2]));
    say(argv[1], "done\n");
    return 0;
}
"#;

/// A scratch directory with the setuid helper and a file everyone may write, or why the
/// machine cannot have one.
struct Setuid {
    dir: tempfile::TempDir,
    helper: PathBuf,
    said: PathBuf,
}

impl Setuid {
    fn build() -> Result<Self, String> {
        let uid = Command::new("id").arg("-u").output().map(|out| out.stdout);
        if !uid.is_ok_and(|uid| uid.trim_ascii() == b"0") {
            return Err("the test does not run as root: it cannot make a setuid-root file".into());
        }
        for tool in ["cc", "setpriv"] {
            let found = Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|out| out.status.success());
            if !found {
                return Err(format!("`{tool}` is not installed"));
            }
        }
        let dir = scratch();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let source = dir.path().join("uid0.c");
        std::fs::write(&source, HELPER).unwrap();
        let helper = dir.path().join("uid0");
        let built = Command::new("cc")
            .arg("-o")
            .arg(&helper)
            .arg(&source)
            .output()
            .unwrap();
        if !built.status.success() {
            return Err(format!(
                "cc failed: {}",
                String::from_utf8_lossy(&built.stderr)
            ));
        }
        // Owned by root (the test's user), setuid.
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let said = dir.path().join("said");
        std::fs::write(&said, "").unwrap();
        std::fs::set_permissions(&said, std::fs::Permissions::from_mode(0o666)).unwrap();
        let setuid = Self { dir, helper, said };
        // The file system may ignore the setuid bit (mounted nosuid): check that it works.
        let probe = setuid.as_nobody(Command::new(&setuid.helper).arg(&setuid.said).arg("0"));
        let probed = probe.map(|mut probe| probe.output());
        if !matches!(probed, Ok(Ok(ref out)) if out.status.success())
            || !setuid
                .lines()
                .first()
                .is_some_and(|l| l.starts_with("uid 0 "))
        {
            return Err(format!(
                "the setuid helper does not become root here: {probed:?} {:?}",
                setuid.lines()
            ));
        }
        std::fs::write(&setuid.said, "").unwrap();
        Ok(setuid)
    }

    /// `command` run as `nobody` (its program, arguments and environment; output piped).
    fn as_nobody(&self, command: &Command) -> Result<Command, String> {
        let mut wrapped = Command::new("setpriv");
        wrapped
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(command.get_program())
            .args(command.get_args())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(name, value),
                None => wrapped.env_remove(name),
            };
        }
        Ok(wrapped)
    }

    fn lines(&self) -> Vec<String> {
        lines(&self.said)
    }

    /// The helper's uid and pid, once it has said them.
    fn helper_said(&self) -> Option<(u32, Pid)> {
        let lines = self.lines();
        let mut words = lines.first()?.split_whitespace();
        let uid = words.nth(1)?.parse().ok()?;
        let pid = words.nth(1)?.parse().ok()?;
        Some((uid, Pid::from_raw(pid)))
    }

    /// The helper line for a shell script: `<helper> <said> <seconds>`.
    fn helper_line(&self, seconds: u32) -> String {
        format!(
            "{} {} {seconds}",
            self.helper.display(),
            self.said.display()
        )
    }
}

impl Drop for Setuid {
    fn drop(&mut self) {
        // Never leave a root helper running after a failed test.
        if let Some((_, pid)) = self.helper_said() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

fn setuid_or_skip(test: &str) -> Option<Setuid> {
    match Setuid::build() {
        Ok(setuid) => Some(setuid),
        Err(why) => {
            eprintln!("{test}: not checked on this machine: {why}");
            None
        }
    }
}

/// By default the command runs with no new privileges: the setuid helper stays `nobody`,
/// so the lease's end reaches it (SIGTERM ignored, SIGKILL at the kill instant), long
/// before its own end.
#[test]
fn a_setuid_program_gains_nothing_and_stays_killable() {
    let Some(setuid) = setuid_or_skip("a_setuid_program_gains_nothing_and_stays_killable") else {
        return;
    };
    let fleet = fleet(3);
    // No extension fits in the longest hold: SIGTERM at about 2.2 s, SIGKILL at about 3 s.
    let args = ["--resource", "uid", "--ttl", "3s", "--max-hold", "1s"];
    let command = run_sh(&fleet, &args, &format!("exec {}", setuid.helper_line(8)));
    let started = Instant::now();
    let done = finish(&mut setuid.as_nobody(&command).unwrap());
    let took = started.elapsed();
    let said = setuid.helper_said();
    let text = format!("{}\nthe helper said: {:?}", done.text(), setuid.lines());
    let Some((uid, pid)) = said else {
        panic!("the helper never ran: {text}");
    };
    assert_ne!(uid, 0, "the command became root under redlock: {text}");
    assert_eq!(done.code, Some(74), "{text}");
    assert!(!alive(pid), "the helper outlived redlock: {text}");
    assert!(
        !setuid.lines().iter().any(|line| line == "done"),
        "the helper ran to its end: {text}"
    );
    assert!(took < Duration::from_secs(7), "took {took:?}: {text}");
}

/// With `--allow-new-privileges` the helper becomes root and leaves the command's group
/// beyond `redlock`'s signals: the leader (a shell) exits at once and leaves the helper
/// behind. The kill is refused; `redlock` says the group is out of reach and exits with its
/// own code, and the release does not come before the keys' expiry (the group is never
/// confirmed gone), which is all a lease can do for a process it cannot stop.
#[test]
fn a_setuid_member_out_of_reach_is_reported_with_its_own_exit_code() {
    let Some(setuid) =
        setuid_or_skip("a_setuid_member_out_of_reach_is_reported_with_its_own_exit_code")
    else {
        return;
    };
    let fleet = fleet(3);
    // The lease is kept extended while the group may still die, up to the longest hold:
    // then its keys are left to expire.
    let args = [
        "--resource",
        "escape",
        "--ttl",
        "3s",
        "--max-hold",
        "2s",
        "--allow-new-privileges",
    ];
    // Its output elsewhere: the test reads redlock's to its end, which an inherited pipe
    // would hold open until the helper's own end.
    // The shell exits once the helper has switched users (before that, a kill reaches it).
    let script = format!(
        "{} >/dev/null 2>&1 & i=0; while [ ! -s {said} ] && [ $i -lt 200 ]; do sleep 0.05; \
         i=$((i+1)); done; exit 0",
        setuid.helper_line(15),
        said = setuid.said.display()
    );
    let command = run_sh(&fleet, &args, &script);
    let running = Running::start(&mut setuid.as_nobody(&command).unwrap());
    let started = Instant::now();
    assert!(
        eventually(HANG, || setuid.helper_said().is_some()),
        "the helper never ran"
    );
    let (uid, pid) = setuid.helper_said().unwrap();
    assert_eq!(uid, 0, "the opt-out did not let the helper become root");
    // The key stays until it expires: no release while the group may run.
    let mut node = fleet.connect(0).unwrap();
    let mut key_gone = None;
    // Extensions go on while the group may still die: the keys live up to a TTL past the
    // last one.
    while key_gone.is_none() && started.elapsed() < Duration::from_secs(12) {
        let exists: bool = redis::cmd("EXISTS")
            .arg("redlock:escape")
            .query(&mut node)
            .unwrap();
        if !exists {
            key_gone = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let done = running.finish();
    let text = done.text();
    assert!(alive(pid), "the helper was reached after all: {text}");
    let key_gone = key_gone.unwrap_or_else(|| panic!("the key never went: {text}"));
    assert!(
        key_gone >= Duration::from_millis(2_500),
        "the lease was released at {key_gone:?}, while its group still ran: {text}"
    );
    assert_eq!(done.code, Some(OUT_OF_REACH), "{text}");
    assert!(done.stderr.contains("out of reach"), "{text}");
    assert!(
        !done.stderr.contains("did not die after SIGKILL"),
        "a refused kill is not a slow death: {text}"
    );
}

/// The H1 recipe itself, with the opt-out: the command is the setuid helper, which ignores
/// `SIGTERM` and becomes root, so that neither signal reaches it and it ends on its own. The
/// report must say so, not that the command "was terminated".
#[test]
fn a_command_no_signal_reached_is_said_to_have_ended_on_its_own() {
    let Some(setuid) =
        setuid_or_skip("a_command_no_signal_reached_is_said_to_have_ended_on_its_own")
    else {
        return;
    };
    let fleet = fleet(3);
    let args = [
        "--resource",
        "own",
        "--ttl",
        "3s",
        "--max-hold",
        "1s",
        "--allow-new-privileges",
    ];
    let command = run_sh(&fleet, &args, &format!("exec {}", setuid.helper_line(4)));
    let done = finish(&mut setuid.as_nobody(&command).unwrap());
    let text = format!("{}\nthe helper said: {:?}", done.text(), setuid.lines());
    assert_eq!(setuid.helper_said().map(|(uid, _)| uid), Some(0), "{text}");
    assert!(
        setuid.lines().iter().any(|line| line == "done"),
        "the helper was reached: {text}"
    );
    assert!(!done.stderr.contains("was terminated"), "{text}");
    assert!(done.stderr.contains("ended on its own"), "{text}");
    assert_eq!(done.code, Some(OUT_OF_REACH), "{text}");
}
