//! `redlock run`: take the lease (waiting up to `--wait`), keep it extended while the
//! command runs, stop the command before the lease can pass to anyone else, release it,
//! and exit with the command's status.
//!
//! The decisions are the library core's: its `Keeper` extends the lease and gives it up
//! one per-node timeout before the validity ends, and its `Supervisor` fixes when the
//! command gets `SIGTERM` (`--kill-after` before the kill instant) and when its whole
//! process group gets `SIGKILL` (that margin before the validity ends, at once if `redlock`
//! notices late). This file only reads the client's clock, waits, and sends the signals.

use std::io::IsTerminal;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use futures::FutureExt;

use nix::sys::signal::Signal;
use redlock::Redlock;
use redlock::client::{Fencing, KeepAlive, KeptLease, LeaseSignal};
use redlock_core::{Ending, ReleaseReport, StopCause, Supervisor, SupervisorAction, Timestamp};

use crate::args::RunArgs;
use crate::child::{self, Child, Privileges};
use crate::duration::show;
use crate::exit::{self, Failure, LEASE_LOST, OS_ERROR, OUT_OF_REACH};
use crate::memory::Memory;
use crate::run_report::{self, Outcome, ReportFile, RunReport, Stop};
use crate::settings::{Flags, Setting, Settings};
use crate::signals::Incoming;
use crate::sources;

/// The job's timing, checked against the lease's TTL.
#[derive(Debug)]
struct Plan {
    ttl: Duration,
    wait: Duration,
    kill_after: Duration,
    max_hold: Duration,
}

impl Plan {
    fn new(settings: &Settings, redlock: &Redlock) -> Result<Self, Failure> {
        let ttl = redlock.config().ttl();
        let quarter = Supervisor::longest_grace(ttl);
        let kill_after = match &settings.kill_after {
            None => Supervisor::default_grace(ttl),
            Some(Setting { value, origin }) if *value > quarter => {
                return Err(Failure::usage(format!(
                    "{origin}: the grace period ({}) is more than a quarter of the ttl ({}); \
                     the command must be stopped well before the lease can run out, so raise \
                     the ttl or shorten the grace period",
                    show(*value),
                    show(quarter),
                )));
            }
            Some(setting) => setting.value,
        };
        Ok(Self {
            ttl,
            wait: settings.wait.as_ref().map_or(Duration::ZERO, |w| w.value),
            kill_after,
            max_hold: redlock.config().max_hold(),
        })
    }

    /// The core's policy for a supervised command: extend at half-life.
    fn keep_alive(&self) -> KeepAlive {
        KeepAlive::at_half_life(self.ttl)
    }
}

/// Runs the command line's job; returns the exit code. With `--json PATH`, the final report
/// goes to PATH, whatever the outcome.
pub(crate) async fn run(args: RunArgs) -> Result<u8, Failure> {
    let file = match &args.json {
        Some(path) => Some(ReportFile::create(path)?),
        None => None,
    };
    let mut report = RunReport {
        resource: args.resource.clone(),
        ..RunReport::default()
    };
    let result = run_reporting(&args, &mut report).await;
    if let Some(file) = file {
        report.conclude(&result);
        file.write(&report);
    }
    result
}

async fn run_reporting(args: &RunArgs, report: &mut RunReport) -> Result<u8, Failure> {
    let flags = Flags {
        ttl: args.ttl,
        wait: args.wait,
        kill_after: args.kill_after,
        max_hold: args.max_hold,
        ..Flags::from_node_args(&args.nodes)
    };
    let settings = sources::from_sources(&args.nodes, flags)?;
    let memory = Memory::locate(args.servers_file.as_ref())?;
    let mut redlock = settings.client_remembering(memory.load())?;
    let plan = Plan::new(&settings, &redlock)?;
    if let Some(name) = &args.fence_env {
        check_env_name(name)?;
        redlock = redlock
            .with_fencing(Fencing::Quorum)
            .map_err(|e| Failure::new(exit::for_error(&e), e.to_string()))?;
    }
    let mut incoming = Incoming::install()
        .map_err(|e| Failure::new(OS_ERROR, format!("cannot catch signals: {e}")))?;

    // Connections open (and are identified) now rather than inside the first round's
    // per-node timeout.
    redlock.connect().await;
    // What this run met, for the next one: now, so that a long or interrupted run still
    // leaves it, and again at the end (a node may have been replaced meanwhile).
    memory.save(&redlock.servers_met());
    let outcome = hold(&redlock, args, &plan, &mut incoming, report).await;
    // Released leases and failed acquisitions leave their slower nodes' requests running in
    // the background: let them land before the process exits, or their keys stay until the
    // TTL.
    redlock.settle().await;
    memory.save(&redlock.servers_met());
    outcome
}

/// Takes the lease, runs the command under it and releases the lease; returns the exit code.
async fn hold(
    redlock: &Redlock,
    args: &RunArgs,
    plan: &Plan,
    incoming: &mut Incoming,
    report: &mut RunReport,
) -> Result<u8, Failure> {
    let asked = Instant::now();
    let acquired = acquire(
        redlock,
        &args.resource,
        plan.wait,
        args.quiet,
        incoming,
        report,
    )
    .await;
    report.waited_ms = Some(run_report::ms(asked.elapsed()));
    let granted = Instant::now();
    let lease = match acquired {
        Ok(lease) => {
            report.rounds = Some(lease.attempts());
            lease
        }
        Err(refused) if args.quiet && refused.code == exit::TEMP_FAIL => {
            return Err(Failure::silent(refused.code));
        }
        Err(refused) => return Err(refused),
    };
    let kept = lease.keep_alive(plan.keep_alive());
    let signal = kept.signal();
    report.fence = signal.fence();
    let privileges = if args.allow_new_privileges {
        Privileges::Allowed
    } else {
        Privileges::Forbidden
    };
    let mut child = match child::spawn(&args.command, &fence_env(args, &signal), privileges) {
        Ok(child) => child,
        Err(failure) => {
            report.outcome = Outcome::NotStarted;
            let released = kept.release().await;
            report.release = Some((&released).into());
            report.held_ms = Some(run_report::ms(granted.elapsed()));
            return Err(failure);
        }
    };

    let ended = supervise(redlock, &mut child, signal.clone(), plan, incoming).await;
    if ended.is_err() {
        // The command's status could not be read: kill its group anyway, never release a
        // lease under a command that may still run.
        let _ = child.kill_and_reap();
    }
    let waited = release_after(redlock, &mut child, &signal, kept, incoming, report).await;
    report.held_ms = Some(run_report::ms(granted.elapsed()));
    let released = match waited {
        Released::Report(released) => released,
        Released::Interrupted(received) => {
            report.outcome = Outcome::Interrupted;
            if let Ok((_, status)) = ended {
                report.command = Some(status.into());
            }
            return Err(interrupted_while_the_group_dies(
                received,
                &args.resource,
                plan,
            ));
        }
    };
    report.release = Some((&released).into());
    let (ending, status) = ended?;
    report.command = Some(status.into());
    if child.out_of_reach() {
        return Ok(out_of_reach(report, &args.resource, status));
    }
    judge(report, plan, &args.resource, ending, status, &released)
}

/// The end of a run whose command's group refused `redlock`'s signals: whatever else
/// happened, a process of the group may have run on after the lease ended, and that is what
/// the exit code and the message say.
fn out_of_reach(report: &mut RunReport, resource: &str, status: ExitStatus) -> u8 {
    report.outcome = Outcome::OutOfReach;
    say(
        report,
        format!(
            "the command's process group was out of reach of redlock's signals (a member \
             changed its user) and may have run on after the lease on `{resource}` ended; the \
             command itself ended on its own ({status}). Run `sudo redlock run …` rather than \
             `redlock run -- sudo …`, and leave --allow-new-privileges off"
        ),
    );
    OUT_OF_REACH
}

/// The environment the command gets with `--fence-env NAME`: the fencing token in NAME and
/// the lease's owner token in NAME_OWNER. A fenced resource that checks for a repeated token
/// (docs/fencing.md) needs both.
fn fence_env(args: &RunArgs, signal: &LeaseSignal) -> Vec<(String, String)> {
    args.fence_env
        .as_deref()
        .zip(signal.fence())
        .map(|(name, fence)| {
            [
                (name.to_owned(), fence.to_string()),
                (format!("{name}_OWNER"), signal.token().to_string()),
            ]
        })
        .into_iter()
        .flatten()
        .collect()
}

/// How the wait for the command's group to be gone ended.
enum Released {
    /// The lease was released: the group was confirmed gone, or the keys have expired.
    Report(ReleaseReport),
    /// A signal to `redlock` ended the wait: the lease is no longer extended, and its keys
    /// are left to expire (the group was not confirmed gone).
    Interrupted(Signal),
}

/// Releases the lease once the command's whole group is dead: the core's keeper releases a
/// lease only once the work is confirmed stopped, or when its keys have expired. A signal
/// to `redlock` meanwhile (`SIGTERM` from a service manager) ends the wait at once: the
/// signal goes on to what is left of the group, extensions stop, and nothing is released,
/// so the keys expire on their own, no earlier than a release at the keys' expiry would
/// have come.
async fn release_after(
    redlock: &Redlock,
    child: &mut Child,
    signal: &LeaseSignal,
    kept: KeptLease,
    incoming: &mut Incoming,
    report: &mut RunReport,
) -> Released {
    let resource = signal.resource().to_owned();
    let gone = match group_gone(redlock, child, signal, incoming).await {
        Ok(gone) => gone,
        Err(received) => {
            // One poll hands the keeper its stop (no more extensions); the release it then
            // waits for, at the keys' expiry, is not waited for.
            let _ = kept.release_unconfirmed().now_or_never();
            return Released::Interrupted(received);
        }
    };
    if gone {
        // Every node's answer (each within the per-node timeout), not only a quorum's: the
        // next run then finds the resource free on every node, and the report says so.
        return Released::Report(kept.release().await);
    }
    let why = if child.out_of_reach() {
        "processes of the command's group are out of reach of redlock's signals"
    } else {
        "processes of the command's group did not die after SIGKILL"
    };
    warn(
        report,
        format!("{why}; the lease on `{resource}` is released when its keys have expired"),
    );
    Released::Report(kept.release_unconfirmed().await)
}

/// Why `redlock` exits when a signal ended its wait for the command's killed group.
fn interrupted_while_the_group_dies(received: Signal, resource: &str, plan: &Plan) -> Failure {
    Failure::new(
        128 + exit_signal_number(received),
        format!(
            "interrupted by {received} while waiting for the command's killed processes to be \
             gone; the lease on `{resource}` is no longer extended and was not released: its \
             keys expire within {}",
            show(plan.ttl)
        ),
    )
}

/// The exit code for how the command ended under the lease, with what to say about it.
fn judge(
    report: &mut RunReport,
    plan: &Plan,
    resource: &str,
    ending: Ending,
    status: ExitStatus,
    released: &ReleaseReport,
) -> Result<u8, Failure> {
    match ending {
        Ending::Finished => {
            report.outcome = Outcome::Finished;
            if !released.is_quorum_free() {
                warn(
                    report,
                    format!(
                        "the release of `{resource}` was not confirmed by a quorum of nodes; \
                         their keys expire within {}",
                        show(plan.ttl)
                    ),
                );
            }
            Ok(exit::for_status(status))
        }
        Ending::Late => {
            report.outcome = Outcome::Late;
            say(
                report,
                format!(
                    "the command ended ({status}) after the lease on `{resource}` had run out \
                     (was redlock paused?); another holder may have run meanwhile"
                ),
            );
            Ok(LEASE_LOST)
        }
        Ending::Stopped(cause) => {
            report.outcome = Outcome::Stopped;
            report.stop = Stop::of(&cause);
            // Killed by a signal, or exited by itself after it was told to stop (a SIGTERM
            // handler that exits 0, or a command that ended just then): only the first
            // was terminated.
            let ended = if std::os::unix::process::ExitStatusExt::signal(&status).is_some() {
                format!("the command was terminated ({status})")
            } else {
                format!("the command ended ({status}) after it was told to stop,")
            };
            say(
                report,
                format!(
                    "{ended} because the lease on `{resource}` {}",
                    describe(&cause, plan)
                ),
            );
            Ok(LEASE_LOST)
        }
        _ => {
            report.outcome = Outcome::Stopped;
            Ok(LEASE_LOST)
        }
    }
}

/// Prints why the run ends on stderr, and keeps it for the report.
fn say(report: &mut RunReport, message: String) {
    say!("redlock: {message}");
    report.message = Some(message);
}

/// Prints a warning on stderr, and keeps it for the report.
fn warn(report: &mut RunReport, warning: String) {
    say!("redlock: warning: {warning}");
    report.warnings.push(warning);
}

/// Waits until the command's killed process group is confirmed gone, for as long as the
/// lease could still be released before its keys expire (the release deadline, which
/// follows the lease's extensions); returns whether it is gone, or the signal to `redlock`
/// that ended the wait (passed on to the group). (A killed process with a large memory
/// takes a while to be torn down, and one stuck in the kernel may never go.) The
/// keep-alive goes on meanwhile.
async fn group_gone(
    redlock: &Redlock,
    child: &mut Child,
    signal: &LeaseSignal,
    incoming: &mut Incoming,
) -> Result<bool, Signal> {
    loop {
        if child.group_gone() {
            return Ok(true);
        }
        if redlock.now() >= signal.release_deadline() {
            return Ok(false);
        }
        // A member that forked just before the kill may have a child the kill missed.
        child.signal(Signal::SIGKILL);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(2)) => {}
            received = incoming.recv() => {
                child.signal(received);
                return Err(received);
            }
        }
    }
}

fn check_env_name(name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(Failure::usage(format!(
            "--fence-env: `{name}` is not an environment variable name"
        )));
    }
    Ok(())
}

/// Takes the lease: the client's rounds for as long as the retry policy allows (up to 4
/// rounds over about half a second with the default policy) or `wait`, whichever is longer,
/// while the resource is held elsewhere or nodes are unavailable. Between rounds the client
/// waits for the holder's release, the expiry of its keys or the retry timer, whichever
/// comes first. A signal stops the waiting.
///
/// Even without `--wait`, the policy's retries matter: several `redlock run` started at the
/// same moment (cron on several servers) can split the nodes' votes so that none reaches
/// a quorum; each then releases its keys, and a retry after a random delay lets one win
/// instead of all giving up. They also carry a cold process past its first round, which
/// opens the connections within the per-node timeout.
///
/// A `wait` longer than the policy's starts with a single round, so that a long wait is
/// announced on stderr when it begins, with the reason (unless `quiet`): otherwise the
/// command would say nothing for up to `wait`. On a terminal a line below it counts the
/// time waited, and is erased when the wait ends; a pipe gets the announcement alone.
async fn acquire(
    redlock: &Redlock,
    resource: &str,
    wait: Duration,
    quiet: bool,
    incoming: &mut Incoming,
    report: &mut RunReport,
) -> Result<redlock::Lease, Failure> {
    let started = Instant::now();
    let policy = redlock.config().retry().max_wait();
    // A wait too long to represent saturates the deadline: as good as forever.
    let acquired = async {
        if wait <= policy {
            return redlock.acquire(resource).await.map_err(|e| (e, 0));
        }
        match redlock.try_acquire(resource).await {
            Ok(lease) => return Ok(lease),
            Err(error) if !error.is_retryable() => return Err((error, 0)),
            Err(error) if !quiet => say!("redlock: {}", waiting_for(&error, resource, wait)),
            Err(_) => {}
        }
        let waiting = redlock.acquire_timeout(resource, wait.saturating_sub(started.elapsed()));
        let outcome = if quiet || !std::io::stderr().is_terminal() {
            waiting.await
        } else {
            let _line = ElapsedLine;
            tokio::pin!(waiting);
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    outcome = &mut waiting => break outcome,
                    _ = tick.tick() => {
                        let waited = Duration::from_secs(started.elapsed().as_secs());
                        say_part!("\r\x1b[2Kredlock: waited {} of {}", show(waited), show(wait));
                    }
                }
            }
        };
        // The single round came first.
        outcome.map_err(|e| (e, 1))
    };
    tokio::select! {
        acquired = acquired => acquired.map_err(|(error, earlier)| {
            let rounds = error.attempts().unwrap_or(1) + earlier;
            report.outcome = Outcome::Refused;
            report.rounds = Some(rounds);
            refusal(&error, rounds, started.elapsed(), &redlock.quarantined())
        }),
        // Dropping the acquisition releases the round in flight from a background task,
        // which `settle` lets finish before the process exits.
        received = incoming.recv() => {
            report.outcome = Outcome::Interrupted;
            Err(Failure::new(
                128 + exit_signal_number(received),
                format!("interrupted by {received} while waiting for `{resource}`; the command did not run"),
            ))
        }
    }
}

/// The announcement of a long wait, from the first round's refusal.
fn waiting_for(error: &redlock::Error, resource: &str, wait: Duration) -> String {
    let why = match error {
        redlock::Error::Taken { .. } => format!("`{resource}` is held by another owner"),
        redlock::Error::NoQuorum { .. } => format!("too few nodes available to lock `{resource}`"),
        _ => format!("`{resource}` could not be locked yet"),
    };
    format!("{why}; waiting up to {} for it", show(wait))
}

/// The terminal's elapsed-time line during a wait: erased when the wait ends, however it
/// ends (a signal drops the wait), so that the next message starts on a clean line.
struct ElapsedLine;

impl Drop for ElapsedLine {
    fn drop(&mut self) {
        say_part!("\r\x1b[2K");
    }
}

fn exit_signal_number(signal: Signal) -> u8 {
    u8::try_from(signal as i32).unwrap_or(0)
}

/// Why the command was not run; `quarantined` are the nodes the restart quarantine leaves
/// out now (the last round may have ended before it asked them all).
fn refusal(
    error: &redlock::Error,
    rounds: u32,
    waited: Duration,
    quarantined: &[(String, Duration)],
) -> Failure {
    let code = exit::for_error(error);
    let tried = if rounds > 1 {
        format!(" ({rounds} rounds over {})", show(waited))
    } else {
        String::new()
    };
    let message = match error {
        redlock::Error::Taken {
            resource, nodes, ..
        } => format!(
            "`{resource}` is held by another owner{tried}; the command did not run. Last round: {nodes}"
        ),
        redlock::Error::NoQuorum {
            resource,
            nodes,
            quarantine_wait: Some(wait),
            ..
        } => quarantine_refusal(resource, nodes, quarantined, *wait, &tried),
        redlock::Error::NoQuorum {
            resource, nodes, ..
        } => format!(
            "too few nodes answered to lock `{resource}`{tried}; the command did not run. Last round: {nodes}"
        ),
        other => format!("{other}{tried}; the command did not run"),
    };
    Failure::new(code, message)
}

/// The refusal when the restart quarantine left out so many nodes that no quorum could form:
/// those nodes answered, so "too few nodes answered" would send the reader after a network
/// fault. Names the nodes, the time left, and both ways out.
fn quarantine_refusal(
    resource: &str,
    nodes: &redlock::client::NodeReport,
    quarantined: &[(String, Duration)],
    wait: Duration,
    tried: &str,
) -> String {
    // The round's own word for the nodes it asked, then the client's for those it did not
    // get to (a round ends as soon as no quorum can form).
    let mut out: Vec<(&str, Duration)> = nodes.quarantined().collect();
    for (address, remaining) in quarantined {
        if out.iter().all(|(known, _)| known != address) {
            out.push((address, *remaining));
        }
    }
    let order = |address: &str| {
        nodes
            .nodes()
            .iter()
            .position(|node| &*node.address == address)
    };
    out.sort_by_key(|(address, _)| order(address));
    let left_out: Vec<String> = out
        .iter()
        .map(|(address, remaining)| format!("{address} for another {}", show(*remaining)))
        .collect();
    let others: Vec<String> = nodes
        .nodes()
        .iter()
        .filter(|node| out.iter().all(|(address, _)| *address != &*node.address))
        .map(|node| format!("{} {}", node.address, node.status))
        .collect();
    let others = if others.is_empty() {
        String::new()
    } else {
        format!(" Other nodes in the last round: {}.", others.join(", "))
    };
    format!(
        "the restart quarantine leaves out {count} of {total} nodes to lock `{resource}`{tried}; \
         the command did not run. They answered, but started or restarted less than the \
         quarantine ago and may have lost their keys: {list}. A quorum can form in {wait} at \
         the earliest: wait for it (`{wait_flag}`), or, if every node persists each write \
         before acknowledging it (appendfsync always), declare that with \
         `--restart-quarantine off`; see \"Persistence and restarts\" in docs/operations.md.\
         {others}",
        count = left_out.len(),
        total = nodes.nodes().len(),
        list = left_out.join(", "),
        wait = show(wait),
        wait_flag = wait_flag(wait),
    )
}

/// The `--wait` that covers `wait`: whole seconds, rounded up (a wait a little short of the
/// quarantine fails), written as one shell word (`1m30s`, not `1m 30s`).
fn wait_flag(wait: Duration) -> String {
    let whole_seconds = Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0));
    format!("--wait {}", show(whole_seconds).replace(' ', ""))
}

/// Why the command was stopped, as the rest of `redlock run`'s messages write durations.
fn describe(cause: &StopCause, plan: &Plan) -> String {
    match cause {
        StopCause::NotExtended { left } => format!(
            "was not extended in time (nodes unreachable, or redlock paused) with {} of \
             validity left",
            show(*left)
        ),
        StopCause::HoldLimit { left } => format!(
            "reached the longest hold ({}) with {} of validity left",
            show(plan.max_hold),
            show(*left)
        ),
        StopCause::Lost(reason) => format!("was lost: {reason}"),
        other => other.to_string(),
    }
}

/// Waits for the command while the core's supervisor watches the lease; sends the signals
/// it asks for and forwards received ones. Returns how the command ended, once its whole
/// process group is dead and its leader reaped.
///
/// # Errors
///
/// Only if the operating system cannot report the command's status.
async fn supervise(
    redlock: &Redlock,
    child: &mut Child,
    mut signal: LeaseSignal,
    plan: &Plan,
    incoming: &mut Incoming,
) -> Result<(Ending, ExitStatus), Failure> {
    let failed =
        |e: std::io::Error| Failure::new(OS_ERROR, format!("cannot wait for the command: {e}"));
    let margin = plan.keep_alive().margin(redlock.config());
    let mut supervisor = Supervisor::new(plan.kill_after, margin, signal.deadline());
    let mut ending = None;
    // A stop whose SIGKILL was announced with its SIGTERM ("SIGKILL at once").
    let mut kill_announced = false;
    loop {
        while let Some(action) = supervisor.poll_action() {
            if let SupervisorAction::Terminate { kill_at, .. } = &action {
                kill_announced = *kill_at <= redlock.now();
            }
            let say_kill = ending.is_none() && !kill_announced;
            act(redlock, child, &signal, plan, say_kill, action);
        }
        if let Some(ending) = ending {
            let status = child.kill_and_reap().map_err(failed)?;
            return Ok((ending, status));
        }
        let timer = supervisor.poll_timeout();
        tokio::select! {
            // An exit counts before anything else that happened meanwhile.
            biased;
            () = child.exited() => ending = Some(supervisor.leader_exited(redlock.now())),
            () = sleep_until(redlock, timer) => {
                // The command may have exited while redlock was not running (paused, or
                // busy): that is judged before the timer.
                if child.has_exited().map_err(failed)? {
                    ending = Some(supervisor.leader_exited(redlock.now()));
                } else {
                    supervisor.handle_timeout(redlock.now());
                }
            }
            () = signal.changed() => {
                let now = redlock.now();
                match signal.lost_reason() {
                    Some(reason) => supervisor.lost(reason, now),
                    None => {
                        supervisor.extended(signal.deadline());
                        if signal.hold_limit_reached() {
                            supervisor.hold_limit_reached();
                        }
                    }
                }
            }
            received = incoming.recv() => child.signal(received),
        }
    }
}

/// Carries out one of the supervisor's actions.
fn act(
    redlock: &Redlock,
    child: &Child,
    signal: &LeaseSignal,
    plan: &Plan,
    say_kill: bool,
    action: SupervisorAction,
) {
    match action {
        SupervisorAction::Terminate { cause, kill_at } => {
            let now = redlock.now();
            let kill = if kill_at <= now {
                "SIGKILL at once".to_owned()
            } else {
                format!(
                    "SIGKILL in {}",
                    show(kill_at.saturating_duration_since(now))
                )
            };
            // The signal first: a write to stderr may block on a full pipe, and the
            // command must not run on while it does.
            child.signal(Signal::SIGTERM);
            say!(
                "redlock: the lease on `{}` {}: sent SIGTERM to the command, {kill}",
                signal.resource(),
                describe(&cause, plan)
            );
        }
        SupervisorAction::Kill => {
            child.signal(Signal::SIGKILL);
            if say_kill {
                say!(
                    "redlock: the command did not stop before the lease's end: sent SIGKILL \
                     to its process group"
                );
            }
        }
        _ => {}
    }
}

async fn sleep_until(redlock: &Redlock, at: Option<Timestamp>) {
    match at {
        Some(at) => redlock.sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Origin;

    fn settings(kill_after: Option<Duration>) -> Settings {
        Settings {
            nodes: vec![Setting {
                value: "redis://127.0.0.1:1".into(),
                origin: Origin::Flag("--node"),
            }],
            kill_after: kill_after.map(|value| Setting {
                value,
                origin: Origin::Flag("--flag"),
            }),
            ..Settings::default()
        }
    }

    fn plan(kill_after: Option<Duration>, ttl: Duration) -> Result<Plan, Failure> {
        let settings = settings(kill_after);
        let redlock = Redlock::builder()
            .nodes(["redis://127.0.0.1:1"])
            .ttl(ttl)
            .build()
            .unwrap();
        Plan::new(&settings, &redlock)
    }

    #[test]
    fn the_suggested_wait_covers_the_quarantine_in_one_shell_word() {
        for (wait, expected) in [
            (Duration::from_millis(29_542), "--wait 30s"),
            (Duration::from_secs(30), "--wait 30s"),
            (Duration::from_millis(89_001), "--wait 1m30s"),
            (Duration::from_nanos(1), "--wait 1s"),
        ] {
            let flag = wait_flag(wait);
            assert_eq!(flag, expected);
            let parsed = crate::duration::parse(flag.trim_start_matches("--wait ")).unwrap();
            assert!(parsed >= wait, "{flag} is shorter than {wait:?}");
        }
    }

    #[test]
    fn a_stopped_command_is_said_terminated_only_when_a_signal_ended_it() {
        use std::os::unix::process::ExitStatusExt;

        let plan = plan(None, Duration::from_secs(10)).unwrap();
        let stopped = || {
            Ending::Stopped(StopCause::HoldLimit {
                left: Duration::from_secs(2),
            })
        };
        let released = ReleaseReport::default();
        let mut report = RunReport::default();
        let killed = ExitStatus::from_raw(9);
        let code = judge(&mut report, &plan, "r", stopped(), killed, &released);
        assert_eq!(code.unwrap(), LEASE_LOST);
        let message = report.message.take().unwrap();
        assert!(
            message.starts_with("the command was terminated (signal: 9"),
            "{message}"
        );
        let exited = ExitStatus::from_raw(0);
        let code = judge(&mut report, &plan, "r", stopped(), exited, &released);
        assert_eq!(code.unwrap(), LEASE_LOST);
        let message = report.message.take().unwrap();
        assert!(
            message.starts_with(
                "the command ended (exit status: 0) after it was told to stop, because the \
                 lease on `r` reached the longest hold"
            ),
            "{message}"
        );
    }

    #[test]
    fn the_grace_period_defaults_to_a_quarter_ttl_up_to_ten_seconds() {
        let plan_2s = plan(None, Duration::from_secs(2)).unwrap();
        assert_eq!(plan_2s.kill_after, Duration::from_millis(500));
        let plan_300s = plan(None, Duration::from_secs(300)).unwrap();
        assert_eq!(plan_300s.kill_after, Duration::from_secs(10));
        assert_eq!(plan_300s.max_hold, redlock_core::DEFAULT_MAX_HOLD);
        assert_eq!(plan_300s.wait, Duration::ZERO);
    }

    #[test]
    fn a_grace_period_the_lease_cannot_cover_is_refused() {
        let Err(err) = plan(Some(Duration::from_secs(8)), Duration::from_secs(30)) else {
            panic!("accepted")
        };
        assert_eq!(err.code, exit::USAGE);
        assert!(
            err.message.starts_with("--flag: the grace period (8s)"),
            "{err}"
        );
    }
}
