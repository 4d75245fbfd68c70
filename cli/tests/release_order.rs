//! The lease's keys stay on the nodes until the whole process group of the command is dead:
//! after a loss (the group is killed, then released) and after a command that ends on its
//! own and leaves a job behind (the job is killed, then released).
//!
//! A `SIGKILL` is not a death: a process with a large memory takes a while to be torn down
//! after it (here about 0.1–0.3 s for 2 GiB), and until it is, it may still finish a write.
//! The test's command starts such a process (this test binary itself, in its
//! [`memory_hog`] mode), watches a node's lock key and the process every millisecond, and
//! checks that the key disappeared only after the process did.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use nix::unistd::Pid;
use redlock_tests::RedisFleet;

/// The environment variable that turns [`memory_hog`] on: the file to write its pid to.
const HOG: &str = "REDLOCK_TEST_HOG";

/// Not a test: the process the other tests start under `redlock run`. It says `hog <pid>`
/// in the file named by `$REDLOCK_TEST_HOG`, fills 2 GiB of memory (so that its teardown
/// after a kill takes a measurable time), adds `ready`, and sleeps.
#[test]
#[ignore = "a helper process, started by the tests of this file"]
fn memory_hog() {
    let Some(path) = std::env::var_os(HOG) else {
        return;
    };
    // The pid first, so that the watch can start at once on a loaded machine.
    std::fs::write(&path, format!("hog {}\n", std::process::id())).unwrap();
    // In 1 MiB blocks: one huge block would be backed by huge pages, whose teardown is quick.
    let memory: Vec<Vec<u8>> = (0..2048).map(|_| vec![1_u8; 1 << 20]).collect();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut file, b"ready\n").unwrap();
    std::thread::sleep(Duration::from_secs(60));
    drop(memory);
}

/// One hog at a time: two would compete for the machine's memory and cores.
static ONE_HOG: Mutex<()> = Mutex::new(());

/// Starts the hog in the background of the command's group (`$HOG_EXE`, `$REDLOCK_TEST_HOG`
/// set by [`hog_env`]).
const START_HOG: &str =
    "\"$HOG_EXE\" --ignored --exact memory_hog --test-threads 1 >/dev/null 2>&1 &";

/// Gives `command` what [`START_HOG`] needs.
fn hog_env(files: &Files, command: &mut Command) {
    command
        .env(HOG, files.dir.path().join("hog"))
        .env("HOG_EXE", std::env::current_exe().unwrap());
}

fn hog_pid(files: &Files) -> Option<Pid> {
    let text = std::fs::read_to_string(files.dir.path().join("hog")).ok()?;
    let pid = text.lines().next()?.strip_prefix("hog ")?.parse().ok()?;
    Some(Pid::from_raw(pid))
}

/// Whether the hog has filled its memory.
fn hog_ready(files: &Files) -> bool {
    std::fs::read_to_string(files.dir.path().join("hog")).is_ok_and(|text| text.contains("ready"))
}

/// When (from the start of the watch) the key was first seen gone from node 0 and the hog
/// first seen dead, and whether the hog was seen alive after the key was seen gone.
#[derive(Debug)]
struct Watched {
    key_gone: Option<Duration>,
    hog_dead: Option<Duration>,
    /// The first time the hog was seen alive *after* the key had been seen gone: proof of a
    /// release while the group still ran. (Both seen gone in the same poll proves nothing
    /// either way, so the key is read first in each poll.)
    alive_after_release: Option<Duration>,
}

/// Polls node 0's `key`, then the hog, every millisecond until both are gone or `within`
/// elapses.
fn watch(fleet: &RedisFleet, key: &str, hog: Pid, within: Duration) -> Watched {
    let mut node = fleet.connect(0).unwrap();
    let started = Instant::now();
    let mut watched = Watched {
        key_gone: None,
        hog_dead: None,
        alive_after_release: None,
    };
    while started.elapsed() < within && (watched.key_gone.is_none() || watched.hog_dead.is_none()) {
        let exists: bool = redis::cmd("EXISTS").arg(key).query(&mut node).unwrap();
        if !exists && watched.key_gone.is_none() {
            watched.key_gone = Some(started.elapsed());
        }
        if dead(hog) {
            watched.hog_dead.get_or_insert(started.elapsed());
        } else if watched.key_gone.is_some() && watched.alive_after_release.is_none() {
            watched.alive_after_release = Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    watched
}

/// Whether every thread of `pid` has exited: it is gone, or a zombie whose last thread has
/// passed its exit (a group leader shows `Z` as soon as *it* exits, while another thread,
/// here the test harness's, may still be tearing the memory down).
fn dead(pid: Pid) -> bool {
    if nix::sys::signal::kill(pid, None).is_err() {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    field("State:").starts_with('Z') && field("Threads:") == "1"
}

fn assert_key_outlived_the_hog(watched: &Watched, output: &str) {
    let (Some(key_gone), Some(_)) = (watched.key_gone, watched.hog_dead) else {
        panic!("the key or the hog never went away: {watched:?}\n{output}");
    };
    if let Some(alive) = watched.alive_after_release {
        panic!(
            "the lease was released while its command's process still ran: the key was gone \
             at {key_gone:?} and the process still alive at {alive:?} ({watched:?})\n{output}"
        );
    }
}

/// The hog's pid, once it has filled its memory; if it never does, fails with what
/// `redlock` said.
fn wait_for_hog(files: &Files, running: Running) -> (Pid, Running) {
    if !eventually(HANG, || hog_pid(files).is_some()) {
        panic!("the hog did not start: {}", running.finish().text());
    }
    (hog_pid(files).unwrap(), running)
}

/// The longest hold ends the lease: the group is killed and the lease released, in that
/// order, the release waiting until the group is dead.
#[test]
fn a_lost_lease_is_released_only_after_the_killed_group_is_dead() {
    let _one_hog = ONE_HOG.lock();
    let fleet = fleet(3);
    let files = Files::new();
    // No extension fits in the longest hold: SIGTERM comes about 4.4 s after the grant.
    let args = ["--resource", "hog-loss", "--ttl", "6s", "--max-hold", "1s"];
    let mut command = run_sh(&fleet, &args, &format!("{START_HOG} wait"));
    hog_env(&files, &mut command);
    let (hog, running) = wait_for_hog(&files, Running::start(&mut command));
    let watched = watch(&fleet, "redlock:hog-loss", hog, Duration::from_secs(10));
    let done = running.finish();
    assert_eq!(done.code, Some(74), "{}", done.text());
    assert_key_outlived_the_hog(&watched, &done.text());
}

/// A command that exits 0 and leaves the hog running in the background: the hog is killed,
/// and the lease released once it is dead.
#[test]
fn a_finished_commands_leftover_job_is_dead_before_the_release() {
    let _one_hog = ONE_HOG.lock();
    let fleet = fleet(3);
    let files = Files::new();
    let args = ["--resource", "hog-left", "--ttl", "10s"];
    // The command exits 0 once the test, watching, says go.
    let script = format!("{START_HOG} {WAIT_FOR_GO}; exit 0");
    let mut command = run_sh(&fleet, &args, &script);
    hog_env(&files, &mut command);
    files.env(&mut command);
    let (hog, running) = wait_for_hog(&files, Running::start(&mut command));
    assert!(
        eventually(HANG, || hog_ready(&files)),
        "the hog never filled its memory"
    );
    files.go();
    let watched = watch(&fleet, "redlock:hog-left", hog, Duration::from_secs(10));
    let done = running.finish();
    assert_eq!(done.code, Some(0), "{}", done.text());
    assert_key_outlived_the_hog(&watched, &done.text());
}
