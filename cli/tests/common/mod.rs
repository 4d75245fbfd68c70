//! Helpers shared by the CLI tests: fleets, the `redlock` binary run with a deadline, and
//! shell commands that report through files.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redlock_tests::{FleetOptions, RedisFleet};

/// The default key prefix of lock keys.
pub const PREFIX: &str = "redlock:";

/// Far beyond anything a test waits for; reaching it means a hang, reported as a failure.
pub const HANG: Duration = Duration::from_secs(30);

/// A fleet of `n` nodes; panics with the fixture's explanation when redis-server is missing.
pub fn fleet(n: usize) -> RedisFleet {
    RedisFleet::start(n).unwrap_or_else(|e| panic!("{e}"))
}

/// A fleet of `n` nodes with `options`.
pub fn fleet_with(n: usize, options: FleetOptions) -> RedisFleet {
    RedisFleet::start_with(n, options).unwrap_or_else(|e| panic!("{e}"))
}

/// Every environment variable `redlock` reads its settings from.
pub const SETTING_VARIABLES: [&str; 9] = [
    "REDLOCK_NODES",
    "REDLOCK_CONFIG",
    "REDLOCK_KEY_PREFIX",
    "REDLOCK_NODE_TIMEOUT",
    "REDLOCK_RESTART_QUARANTINE",
    "REDLOCK_TTL",
    "REDLOCK_WAIT",
    "REDLOCK_KILL_AFTER",
    "REDLOCK_MAX_HOLD",
];

/// Where a test's `redlock` looks for its default config files: nowhere that exists, so
/// that neither a developer's `~/.config/redlock/redlock.toml` nor the machine's
/// `/etc/redlock/redlock.toml` can change what a test sees.
pub const NO_CONFIG_HOME: &str = "/nonexistent/redlock-tests/config";

/// The `redlock` binary with a clean environment for its own variables, so that a
/// developer's `REDLOCK_NODES`, config files or `RUST_LOG` cannot change what a test sees.
/// Its messages are not wrapped (`COLUMNS` wide enough for any of them), so that a test can
/// look for a phrase wherever a line would break; `terminal_output.rs` tests the wrapping.
pub fn redlock() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_redlock"));
    for name in SETTING_VARIABLES {
        command.env_remove(name);
    }
    command
        .env("XDG_CONFIG_HOME", NO_CONFIG_HOME)
        .env(
            "REDLOCK_SYSTEM_CONFIG",
            format!("{NO_CONFIG_HOME}/system/redlock.toml"),
        )
        .env_remove("RUST_LOG")
        // Every test's fleet is new, on ports an earlier test's servers may have used: a run
        // must not take them for replaced servers. Tests of the memory give it a file.
        .env("REDLOCK_SERVERS_FILE", "off")
        .env("COLUMNS", "10000")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The fleets of these tests were started by the test a moment ago and never held a lease:
/// no restart to guard against, so `redlock run` is told not to wait for the restart
/// quarantine (which leaves a node out for a TTL after it starts). Tests of the quarantine
/// pass their own `--restart-quarantine`.
pub const FRESH_NODES: [&str; 2] = ["--restart-quarantine", "off"];

/// `redlock run --node … <args> -- sh -c <script>`, with [`FRESH_NODES`] unless `args` sets
/// a quarantine.
pub fn run_sh(fleet: &RedisFleet, args: &[&str], script: &str) -> Command {
    let mut command = redlock();
    command.arg("run");
    for url in fleet.urls() {
        command.args(["--node", &url]);
    }
    if !args.contains(&"--restart-quarantine") {
        command.args(FRESH_NODES);
    }
    command.args(args).args(["--", "sh", "-c", script]);
    command
}

/// What a finished `redlock` did.
#[derive(Debug)]
pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// When it was seen to exit.
    pub ended: Instant,
}

impl Finished {
    fn from(output: Output) -> Self {
        Self {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            ended: Instant::now(),
        }
    }

    /// Both streams, for assertion messages.
    pub fn text(&self) -> String {
        format!(
            "exit {:?}\nstdout:\n{}stderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A `redlock` process started by a test.
#[derive(Debug)]
pub struct Running {
    child: Child,
}

impl Running {
    pub fn start(command: &mut Command) -> Self {
        Self {
            child: command.spawn().expect("start redlock"),
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).unwrap())
    }

    /// Whether it has exited (without collecting its output).
    pub fn exited(&mut self) -> bool {
        self.child.try_wait().expect("poll redlock").is_some()
    }

    /// Sends `signal` to this process only.
    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal redlock");
    }

    /// Waits for it to exit and collects its output; a hang fails the test after `HANG`.
    pub fn finish(self) -> Finished {
        let pid = self.pid();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(self.child.wait_with_output());
        });
        match rx.recv_timeout(HANG) {
            Ok(output) => Finished::from(output.expect("wait for redlock")),
            Err(_) => {
                let _ = kill(pid, Signal::SIGKILL);
                panic!("redlock (pid {pid}) did not exit within {HANG:?}");
            }
        }
    }
}

/// Runs `command` to its end.
pub fn finish(command: &mut Command) -> Finished {
    Running::start(command).finish()
}

/// Whether `pid` is a live process: it exists and is not a zombie. A killed orphan stays a
/// zombie until its new parent reaps it, which a container's first process may never do.
pub fn alive(pid: Pid) -> bool {
    if kill(pid, None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        // Gone meanwhile, or no /proc to tell (then `kill` said it exists).
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

/// Polls `condition` every 10 ms until it holds or `within` elapses; returns whether it held.
pub fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A scratch directory for the files the commands write.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("redlock-cli-test-")
        .tempdir()
        .unwrap()
}

/// The lines of a file the commands append to (none if it does not exist yet).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// `path` as a string, for environment variables.
pub fn text(path: &Path) -> String {
    path.display().to_string()
}

/// A shell loop that waits (at most 20 s, so a failed test leaves nothing running) until
/// the file named by `$GO` exists.
pub const WAIT_FOR_GO: &str =
    "i=0; while [ ! -e \"$GO\" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done";

/// The paths a test's commands use: `lines` to append to, `go` to wait for.
pub struct Files {
    pub dir: tempfile::TempDir,
    pub lines: PathBuf,
    pub go: PathBuf,
}

impl Files {
    pub fn new() -> Self {
        let dir = scratch();
        let lines = dir.path().join("lines");
        let go = dir.path().join("go");
        Self { dir, lines, go }
    }

    /// Passes the paths to a command as `$LINES` and `$GO`.
    pub fn env(&self, command: &mut Command) {
        command
            .env("LINES", text(&self.lines))
            .env("GO", text(&self.go));
    }

    /// Lets every waiting command finish.
    pub fn go(&self) {
        std::fs::write(&self.go, "").unwrap();
    }
}

/// How many clients node `index` has connected, counted over `inspector`, a connection of
/// the test's own that stays open so that it counts the same every time.
pub fn connected_clients(inspector: &mut redis::Connection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(inspector)
        .expect("list the clients");
    list.lines().count()
}

/// Lock keys (not fence counters, which live forever by design) on all running nodes.
pub fn lock_keys(fleet: &RedisFleet, prefix: &str) -> Vec<(String, Option<String>)> {
    (0..fleet.len())
        .filter(|&i| fleet.pid(i).is_some())
        .flat_map(|i| {
            fleet
                .keys_with_prefix(i, prefix)
                .expect("inspect the nodes")
        })
        .filter(|(key, _)| !key.contains('\0'))
        .collect()
}

/// Asserts that the resource under `key` can be taken at once: fewer than a quorum of the
/// running nodes hold it. (A node whose release answer was lost, on a loaded machine, keeps
/// the key until its TTL; that blocks nobody, and no release promises more.)
pub fn assert_free(fleet: &RedisFleet, key: &str) {
    let holders = (0..fleet.len())
        .filter(|&i| fleet.pid(i).is_some())
        .filter(|&i| {
            fleet
                .keys_with_prefix(i, key)
                .expect("inspect the nodes")
                .iter()
                .any(|(k, _)| k == key)
        })
        .count();
    let quorum = fleet.len() / 2 + 1;
    assert!(
        holders < quorum,
        "`{key}` is still held on {holders} of {} nodes: {:?}",
        fleet.len(),
        lock_keys(fleet, key)
    );
}
