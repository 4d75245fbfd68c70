//! `redlock run`: take the lease (waiting up to `--wait`), keep it extended while the
//! command runs, terminate the command before the lease can pass to anyone else, release
//! it, and exit with the command's status.
//!
//! When the lease stops being extended (the nodes stopped answering, or `--max-hold` was
//! reached), the command gets `SIGTERM` once only `--kill-after` of validity is left, and
//! `SIGKILL` when that grace period is over: by the end of the lease's validity, not after
//! it, so the command is gone before another holder can start. A lease reported lost
//! earlier (which the keeper only does once the validity is over) starts the same sequence
//! at once.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redlock::Redlock;
use redlock::client::{Fencing, KeepAlive, LeaseSignal};

use crate::args::RunArgs;
use crate::child::{self, Child};
use crate::duration::show;
use crate::exit::{self, Failure, LEASE_LOST, OS_ERROR};
use crate::settings::{self, Flags, Setting, Settings};
use crate::signals::Incoming;

/// How long a lease is held at most unless `--max-hold` says otherwise (the library's
/// keep-alive default).
const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(3600);

/// The longest default grace period between `SIGTERM` and `SIGKILL`.
const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

/// The job's timing, checked against the lease's TTL.
#[derive(Debug)]
struct Plan {
    ttl: Duration,
    wait: Duration,
    kill_after: Duration,
    max_hold: Duration,
}

impl Plan {
    fn new(settings: &Settings, ttl: Duration) -> Result<Self, Failure> {
        let quarter = ttl / 4;
        let kill_after = match &settings.kill_after {
            None => quarter.min(DEFAULT_KILL_AFTER),
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
        let max_hold = match &settings.max_hold {
            None => DEFAULT_MAX_HOLD,
            Some(Setting { value, origin }) if value.is_zero() => {
                return Err(Failure::usage(format!(
                    "{origin}: the longest hold must be greater than zero"
                )));
            }
            Some(setting) => setting.value,
        };
        Ok(Self {
            ttl,
            wait: settings.wait.as_ref().map_or(Duration::ZERO, |w| w.value),
            kill_after,
            max_hold,
        })
    }

    /// Extend at half-life: that leaves from half the validity down to `kill_after` (at
    /// least a quarter of the TTL) for failed extensions to be retried before the command
    /// is told to stop.
    fn keep_alive(&self) -> KeepAlive {
        KeepAlive::default()
            .extend_before(self.ttl / 2)
            .max_hold(self.max_hold)
    }
}

/// Enough extensions to last `max_hold` (the bound users set) when a lease of `ttl` is
/// extended at most every quarter TTL; the library's own default would stop far earlier.
fn max_extensions(ttl: Duration, max_hold: Duration) -> u32 {
    let every = (ttl / 4).as_millis();
    max_hold
        .as_millis()
        .checked_div(every)
        .and_then(|n| u32::try_from(n.saturating_add(2)).ok())
        .unwrap_or(u32::MAX)
}

/// Runs the command line's job; returns the exit code.
pub(crate) async fn run(args: RunArgs) -> Result<u8, Failure> {
    let flags = Flags {
        ttl: args.ttl,
        wait: args.wait,
        kill_after: args.kill_after,
        max_hold: args.max_hold,
        ..Flags::from_node_args(&args.nodes)
    };
    let settings = settings::from_sources(&args.nodes, flags)?;
    let ttl = settings
        .ttl
        .as_ref()
        .map_or(redlock::core::DEFAULT_TTL, |t| t.value);
    let max_hold = settings
        .max_hold
        .as_ref()
        .map_or(DEFAULT_MAX_HOLD, |m| m.value);
    let mut redlock = settings.client(Some(max_extensions(ttl, max_hold)))?;
    let plan = Plan::new(&settings, redlock.config().ttl())?;
    if let Some(name) = &args.fence_env {
        check_env_name(name)?;
        redlock = redlock
            .with_fencing(Fencing::Quorum)
            .map_err(|e| Failure::new(exit::for_error(&e), e.to_string()))?;
    }
    let mut incoming = Incoming::install()
        .map_err(|e| Failure::new(OS_ERROR, format!("cannot catch signals: {e}")))?;

    // Connections open now rather than inside the first round's per-node timeout.
    redlock.connect().await;
    let outcome = hold(&redlock, &args, &plan, &mut incoming).await;
    // Released leases and failed acquisitions leave their slower nodes' requests running in
    // the background: let them land before the process exits, or their keys stay until the
    // TTL.
    redlock.settle().await;
    outcome
}

/// Takes the lease, runs the command under it and releases the lease; returns the exit code.
async fn hold(
    redlock: &Redlock,
    args: &RunArgs,
    plan: &Plan,
    incoming: &mut Incoming,
) -> Result<u8, Failure> {
    let lease = match acquire(redlock, &args.resource, plan.wait, incoming).await {
        Ok(lease) => lease,
        Err(refused) if args.quiet && refused.code == exit::TEMP_FAIL => {
            return Err(Failure::silent(refused.code));
        }
        Err(refused) => return Err(refused),
    };
    let kept = lease.keep_alive(plan.keep_alive());
    let signal = kept.signal();
    let env = args
        .fence_env
        .as_deref()
        .zip(signal.fence())
        .map(|(name, fence)| (name, fence.to_string()));
    let mut child = match child::spawn(&args.command, env) {
        Ok(child) => child,
        Err(failure) => {
            kept.release().await;
            return Err(failure);
        }
    };

    let ending = supervise(&mut child, &signal, plan, incoming).await;
    let report = kept.release().await;
    let resource = &args.resource;
    match ending? {
        Ending::Finished(status) => {
            if !report.is_quorum_free() {
                eprintln!(
                    "redlock: warning: the release of `{resource}` was not confirmed by a quorum \
                     of nodes; their keys expire within {}",
                    show(plan.ttl)
                );
            }
            Ok(exit::for_status(status))
        }
        Ending::Late(status) => {
            eprintln!(
                "redlock: the command ended ({status}) after the lease on `{resource}` had run \
                 out (was redlock paused?); another holder may have run meanwhile"
            );
            Ok(LEASE_LOST)
        }
        Ending::Terminated { status, cause } => {
            eprintln!(
                "redlock: the command was terminated ({status}) because the lease on `{resource}` {cause}"
            );
            Ok(LEASE_LOST)
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

/// Takes the lease: one acquisition as the client makes it (up to 4 rounds over about
/// half a second with the default retry policy), then more rounds until `wait` is over,
/// while the resource is held elsewhere or nodes are unavailable. A signal stops the
/// waiting.
///
/// Even without `--wait`, the policy's retries matter: several `redlock run` started at the
/// same moment (cron on several servers) can split the nodes' votes so that none reaches
/// a quorum; each then releases its keys, and a retry after a random delay lets one win
/// instead of all giving up. They also carry a cold process past its first round, which
/// opens the connections within the per-node timeout.
async fn acquire(
    redlock: &Redlock,
    resource: &str,
    wait: Duration,
    incoming: &mut Incoming,
) -> Result<redlock::Lease, Failure> {
    let started = Instant::now();
    let deadline = started + wait;
    let retry = redlock.config().retry().clone();
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        // A whole round each time: a failed round has cleaned up after itself when it
        // returns, so stopping between rounds leaves nothing behind.
        let error = match redlock.try_acquire(resource).await {
            Ok(lease) => return Ok(lease),
            Err(error) => error,
        };
        let now = Instant::now();
        let again = error.is_retryable() && (now < deadline || attempts <= retry.retries());
        if !again {
            return Err(refusal(&error, attempts, started.elapsed()));
        }
        let pause = retry.delay() + rand::random_range(Duration::ZERO..=retry.jitter());
        let pause = if now < deadline {
            pause.min(deadline - now)
        } else {
            pause
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            received = incoming.recv() => {
                return Err(Failure::new(
                    128 + exit_signal_number(received),
                    format!("interrupted by {received} while waiting for `{resource}`; the command did not run"),
                ));
            }
        }
    }
}

fn exit_signal_number(signal: Signal) -> u8 {
    u8::try_from(signal as i32).unwrap_or(0)
}

/// Why the command was not run.
fn refusal(error: &redlock::Error, rounds: u32, waited: Duration) -> Failure {
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
            resource, nodes, ..
        } => format!(
            "too few nodes answered to lock `{resource}`{tried}; the command did not run. Last round: {nodes}"
        ),
        other => format!("{other}{tried}; the command did not run"),
    };
    Failure::new(code, message)
}

/// Why the command was stopped.
#[derive(Debug)]
enum Cause {
    /// The keeper reported the lease lost.
    Lost(redlock::client::LeaseLost),
    /// Extension stopped at `--max-hold`; this much validity was left.
    HoldLimit(Duration, Duration),
    /// No extension succeeded in time; this much validity was left.
    NotExtended(Duration),
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Lost(reason) => write!(f, "was lost: {reason}"),
            Self::HoldLimit(limit, left) => write!(
                f,
                "reached the longest hold ({}) with {} of validity left",
                show(*limit),
                show(*left)
            ),
            Self::NotExtended(left) => write!(
                f,
                "was not extended in time (nodes unreachable, or redlock paused) with {} of validity left",
                show(*left)
            ),
        }
    }
}

#[derive(Debug)]
enum Ending {
    /// The command ended on its own while the lease was valid.
    Finished(ExitStatus),
    /// The command ended on its own, but only after the lease had run out: `redlock` was not
    /// scheduled in time to stop it (a paused process, an overloaded machine).
    Late(ExitStatus),
    /// The command was stopped because of `cause`.
    Terminated { status: ExitStatus, cause: Cause },
}

/// How a command that exited on its own ended: in time, or after the lease had run out.
fn exited(status: ExitStatus, signal: &LeaseSignal) -> Ending {
    if signal.is_valid() {
        Ending::Finished(status)
    } else {
        Ending::Late(status)
    }
}

/// Waits for the command while watching the lease; forwards received signals to it.
///
/// # Errors
///
/// Only if the operating system cannot report the command's status.
async fn supervise(
    child: &mut Child,
    signal: &LeaseSignal,
    plan: &Plan,
    incoming: &mut Incoming,
) -> Result<Ending, Failure> {
    let waited =
        |e: std::io::Error| Failure::new(OS_ERROR, format!("cannot wait for the command: {e}"));
    let held_since = Instant::now();
    let cause = loop {
        let valid_until = signal.valid_until();
        let stop_at = valid_until
            .checked_sub(plan.kill_after)
            .unwrap_or(valid_until);
        tokio::select! {
            // A command that has already exited needs no stopping: report it first.
            biased;
            status = child.wait() => return Ok(exited(status.map_err(waited)?, signal)),
            reason = signal.lost() => break Cause::Lost(reason),
            () = tokio::time::sleep_until(stop_at.into()) => {
                if signal.valid_until() > valid_until {
                    continue; // Extended meanwhile.
                }
                let left = signal.remaining();
                break if held_since.elapsed() >= plan.max_hold {
                    Cause::HoldLimit(plan.max_hold, left)
                } else {
                    Cause::NotExtended(left)
                };
            }
            received = incoming.recv() => child.signal(received),
        }
    };
    // The command may have exited while redlock was not running (paused, or busy).
    if let Some(status) = child.try_wait().map_err(waited)? {
        return Ok(exited(status, signal));
    }
    eprintln!(
        "redlock: the lease on `{}` {cause}: sending SIGTERM to the command, SIGKILL in {}",
        signal.resource(),
        show(plan.kill_after)
    );
    child.signal(Signal::SIGTERM);
    let status = tokio::select! {
        status = child.wait() => status,
        () = tokio::time::sleep(plan.kill_after) => {
            eprintln!("redlock: the command did not stop within {}: sending SIGKILL", show(plan.kill_after));
            child.signal(Signal::SIGKILL);
            child.wait().await
        }
    };
    Ok(Ending::Terminated {
        status: status.map_err(waited)?,
        cause,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Origin;

    fn settings(kill_after: Option<Duration>, max_hold: Option<Duration>) -> Settings {
        let flag = |value| Setting {
            value,
            origin: Origin::Flag("--flag"),
        };
        Settings {
            kill_after: kill_after.map(flag),
            max_hold: max_hold.map(flag),
            ..Settings::default()
        }
    }

    #[test]
    fn the_grace_period_defaults_to_a_quarter_ttl_up_to_ten_seconds() {
        let plan = Plan::new(&settings(None, None), Duration::from_secs(2)).unwrap();
        assert_eq!(plan.kill_after, Duration::from_millis(500));
        let plan = Plan::new(&settings(None, None), Duration::from_secs(300)).unwrap();
        assert_eq!(plan.kill_after, Duration::from_secs(10));
        assert_eq!(plan.max_hold, DEFAULT_MAX_HOLD);
        assert_eq!(plan.wait, Duration::ZERO);
    }

    #[test]
    fn a_grace_period_the_lease_cannot_cover_is_refused() {
        let err = Plan::new(
            &settings(Some(Duration::from_secs(8)), None),
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert_eq!(err.code, exit::USAGE);
        assert!(
            err.message.starts_with("--flag: the grace period (8s)"),
            "{err}"
        );
        let err = Plan::new(
            &settings(None, Some(Duration::ZERO)),
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(err.message.contains("greater than zero"), "{err}");
    }

    #[test]
    fn extensions_last_the_longest_hold() {
        // Extended at most every quarter TTL: 1 h on a 10 s lease needs 1,440 extensions.
        assert_eq!(
            max_extensions(Duration::from_secs(10), Duration::from_secs(3600)),
            1_442
        );
        assert_eq!(
            max_extensions(Duration::ZERO, Duration::from_secs(1)),
            u32::MAX
        );
    }
}
