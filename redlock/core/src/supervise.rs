//! Stopping a command that runs under a lease before the lease can pass to anyone else.
//!
//! A supervisor (`redlock run`) runs a command while a [`Keeper`](super::Keeper) keeps the
//! lease alive. The [`Supervisor`] decides when the command must be told to stop and when it
//! must be killed, as absolute instants on the supervisor's clock:
//!
//! - **kill** at `V − m` (`V` the end of validity, `m` the keep-alive's loss margin): the
//!   command and everything in its process group must be gone before the lease ends;
//! - **terminate** (`SIGTERM`) at `kill − grace`, so that a command that handles it can stop
//!   cleanly;
//! - both move with every extension, until the command has been told to stop;
//! - an instant noticed late (the supervisor was paused, or starved) is acted on at once:
//!   the grace period is never granted after the kill instant has passed;
//! - when the command's leader exits, whatever it left in its group is killed before the
//!   lease is released, on every path.
//!
//! Time enters as `now`, read from a clock that counts suspended time; the driver only sends
//! the signals this machine asks for.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use super::{LeaseLost, Timestamp};

/// The longest grace period [`Supervisor::default_grace`] gives, whatever the TTL: a command
/// that needs more than this to stop cleanly should say so.
pub const MAX_DEFAULT_GRACE: Duration = Duration::from_secs(10);

/// Why the command is being stopped.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopCause {
    /// No extension succeeded in time; this much validity was left when the stop began.
    NotExtended {
        /// The validity left.
        left: Duration,
    },
    /// Extensions stopped at the longest hold; this much validity was left.
    HoldLimit {
        /// The validity left.
        left: Duration,
    },
    /// The keep-alive gave the lease up.
    Lost(LeaseLost),
}

impl fmt::Display for StopCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotExtended { left } => write!(
                f,
                "was not extended in time (nodes unreachable, or the supervisor paused) with {} of validity left",
                super::Readable(*left)
            ),
            Self::HoldLimit { left } => {
                write!(
                    f,
                    "reached its longest hold with {} of validity left",
                    super::Readable(*left)
                )
            }
            Self::Lost(reason) => write!(f, "was lost: {reason}"),
        }
    }
}

/// What the driver must do now.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SupervisorAction {
    /// Send `SIGTERM` to the command's process group. `SIGKILL` follows at `kill_at` (at once
    /// when `kill_at` has already passed).
    Terminate {
        /// Why.
        cause: StopCause,
        /// When `SIGKILL` follows.
        kill_at: Timestamp,
    },
    /// Send `SIGKILL` to the command's whole process group.
    Kill,
}

/// How the command ended, as the supervisor judges it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Ending {
    /// It exited on its own while the lease was valid.
    Finished,
    /// It exited on its own, but its exit was only noticed after the lease had run out (the
    /// supervisor was not running): another holder may have run meanwhile.
    Late,
    /// It was stopped.
    Stopped(StopCause),
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Stopping {
    cause: StopCause,
    kill_at: Timestamp,
    killed: bool,
}

/// The stop schedule of one supervised command (described in the source of the module,
/// `core/supervise.rs`).
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{Supervisor, SupervisorAction, Timestamp};
///
/// let ms = Duration::from_millis;
/// let valid_until = Timestamp::ZERO.saturating_add(ms(10_000));
/// // A 2 s grace period, loss reported 50 ms before the validity ends.
/// let mut supervisor = Supervisor::new(ms(2_000), ms(50), valid_until);
/// assert_eq!(supervisor.poll_timeout(), Some(Timestamp::ZERO.saturating_add(ms(7_950))));
///
/// // The supervisor was paused and wakes up after the kill instant: no grace any more.
/// let late = Timestamp::ZERO.saturating_add(ms(12_000));
/// supervisor.handle_timeout(late);
/// assert!(matches!(supervisor.poll_action(), Some(SupervisorAction::Terminate { .. })));
/// assert_eq!(supervisor.poll_action(), Some(SupervisorAction::Kill));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Supervisor {
    grace: Duration,
    margin: Duration,
    valid_until: Timestamp,
    hold_limit: bool,
    stopping: Option<Stopping>,
    ended: bool,
    actions: VecDeque<SupervisorAction>,
}

impl Supervisor {
    /// The longest grace period (between `SIGTERM` and `SIGKILL`) accepted for leases of
    /// `ttl`: a quarter of it. The command is told to stop a grace period before the kill
    /// instant, itself before the end of validity: a longer grace would stop the command
    /// while most of the lease is left, at every extension that comes late.
    pub fn longest_grace(ttl: Duration) -> Duration {
        ttl / 4
    }

    /// The grace period when none is set, for leases of `ttl`: the
    /// [longest](Self::longest_grace) one, up to [`MAX_DEFAULT_GRACE`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::Supervisor;
    ///
    /// assert_eq!(Supervisor::default_grace(Duration::from_secs(2)), Duration::from_millis(500));
    /// assert_eq!(Supervisor::default_grace(Duration::from_secs(300)), Duration::from_secs(10));
    /// ```
    pub fn default_grace(ttl: Duration) -> Duration {
        Self::longest_grace(ttl).min(MAX_DEFAULT_GRACE)
    }

    /// A schedule with `grace` between `SIGTERM` and `SIGKILL`, killing `margin` before
    /// `valid_until`.
    pub fn new(grace: Duration, margin: Duration, valid_until: Timestamp) -> Self {
        Self {
            grace,
            margin,
            valid_until,
            hold_limit: false,
            stopping: None,
            ended: false,
            actions: VecDeque::new(),
        }
    }

    /// When the command must be dead: `valid_until − margin`, or the instant fixed when the
    /// stop began.
    pub fn kill_at(&self) -> Timestamp {
        self.stopping.as_ref().map_or_else(
            || self.valid_until.saturating_sub(self.margin),
            |stopping| stopping.kill_at,
        )
    }

    /// When the command is told to stop unless the lease is extended first.
    pub fn terminate_at(&self) -> Timestamp {
        self.kill_at().saturating_sub(self.grace)
    }

    /// Whether the command has been told to stop.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_some()
    }

    /// The lease was extended until `valid_until`. Once the command has been told to stop,
    /// the stop goes on regardless.
    pub fn extended(&mut self, valid_until: Timestamp) {
        if self.stopping.is_none() {
            self.valid_until = self.valid_until.max(valid_until);
        }
    }

    /// The keep-alive reached the longest hold: no extension will come.
    pub fn hold_limit_reached(&mut self) {
        self.hold_limit = true;
    }

    /// The keep-alive gave the lease up at `now`: the command is killed at once.
    pub fn lost(&mut self, reason: LeaseLost, now: Timestamp) {
        if self.ended {
            return;
        }
        // Past saving: the SIGKILL follows the SIGTERM at once, and the SIGTERM says so.
        self.stop_by(StopCause::Lost(reason), now, now.min(self.kill_at()));
        self.kill();
    }

    /// The command's leader exited at or before `now`. Whatever it left in its process group
    /// is killed (the [`SupervisorAction::Kill`] to act on before releasing), and the ending
    /// is judged.
    pub fn leader_exited(&mut self, now: Timestamp) -> Ending {
        self.ended = true;
        self.actions.clear();
        self.actions.push_back(SupervisorAction::Kill);
        match &self.stopping {
            Some(stopping) => Ending::Stopped(stopping.cause.clone()),
            // Its exit may have happened any time before it was noticed: only a notice
            // inside the validity proves it ended in time.
            None if now < self.valid_until => Ending::Finished,
            None => Ending::Late,
        }
    }

    /// Starts stopping at `now` for `cause`: `SIGTERM` now, `SIGKILL` at the kill instant.
    fn stop(&mut self, cause: StopCause, now: Timestamp) {
        self.stop_by(cause, now, self.kill_at());
    }

    /// Starts stopping at `now` for `cause`, with `SIGKILL` at `kill_at`.
    fn stop_by(&mut self, cause: StopCause, now: Timestamp, kill_at: Timestamp) {
        if self.stopping.is_some() {
            return;
        }
        self.actions.push_back(SupervisorAction::Terminate {
            cause: cause.clone(),
            kill_at,
        });
        self.stopping = Some(Stopping {
            cause,
            kill_at,
            killed: false,
        });
        if now >= kill_at {
            self.kill();
        }
    }

    fn kill(&mut self) {
        if let Some(stopping) = &mut self.stopping
            && !stopping.killed
        {
            stopping.killed = true;
            self.actions.push_back(SupervisorAction::Kill);
        }
    }

    /// Call when the timer from [`poll_timeout`](Supervisor::poll_timeout) may have fired.
    /// Calling it early is harmless.
    pub fn handle_timeout(&mut self, now: Timestamp) {
        if self.ended {
            return;
        }
        if self.stopping.is_none() && now >= self.terminate_at() {
            let left = self.valid_until.saturating_duration_since(now);
            let cause = if self.hold_limit {
                StopCause::HoldLimit { left }
            } else {
                StopCause::NotExtended { left }
            };
            self.stop(cause, now);
        }
        if now >= self.kill_at() {
            self.kill();
        }
    }

    /// When [`handle_timeout`](Supervisor::handle_timeout) must be called next.
    pub fn poll_timeout(&self) -> Option<Timestamp> {
        if self.ended {
            return None;
        }
        match &self.stopping {
            None => Some(self.terminate_at()),
            Some(stopping) if !stopping.killed => Some(stopping.kill_at),
            Some(_) => None,
        }
    }

    /// The next thing to do, in order.
    pub fn poll_action(&mut self) -> Option<SupervisorAction> {
        self.actions.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_grace_is_a_quarter_ttl_up_to_ten_seconds() {
        let secs = Duration::from_secs;
        assert_eq!(
            Supervisor::longest_grace(secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(
            Supervisor::default_grace(secs(2)),
            Duration::from_millis(500)
        );
        assert_eq!(Supervisor::default_grace(secs(40)), secs(10));
        assert_eq!(Supervisor::longest_grace(secs(300)), secs(75));
        assert_eq!(Supervisor::default_grace(secs(300)), MAX_DEFAULT_GRACE);
        assert!(Supervisor::default_grace(secs(300)) <= Supervisor::longest_grace(secs(300)));
    }

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_millis(ms))
    }

    #[test]
    fn terminate_then_kill_at_absolute_instants_before_the_end() {
        let mut s = Supervisor::new(Duration::from_secs(1), Duration::from_millis(50), at(4_000));
        s.extended(at(6_000));
        assert_eq!(s.poll_timeout(), Some(at(4_950)));
        s.handle_timeout(at(4_949));
        assert_eq!(s.poll_action(), None, "an early call is harmless");
        s.handle_timeout(at(4_960));
        let Some(SupervisorAction::Terminate { cause, kill_at }) = s.poll_action() else {
            panic!()
        };
        assert_eq!(kill_at, at(5_950));
        assert!(matches!(cause, StopCause::NotExtended { .. }));
        // An extension once the stop began changes nothing.
        s.extended(at(20_000));
        assert_eq!(s.poll_timeout(), Some(at(5_950)));
        s.handle_timeout(at(5_950));
        assert_eq!(s.poll_action(), Some(SupervisorAction::Kill));
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(
            s.leader_exited(at(5_951)),
            Ending::Stopped(StopCause::NotExtended {
                left: Duration::from_millis(1_040)
            })
        );
        assert_eq!(s.poll_action(), Some(SupervisorAction::Kill));
    }

    #[test]
    fn a_leader_that_exits_leaves_nothing_behind() {
        let mut s = Supervisor::new(Duration::from_secs(1), Duration::from_millis(50), at(4_000));
        assert_eq!(s.leader_exited(at(1_000)), Ending::Finished);
        assert_eq!(s.poll_action(), Some(SupervisorAction::Kill));
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn an_exit_noticed_after_the_validity_is_late() {
        let mut s = Supervisor::new(Duration::from_secs(1), Duration::from_millis(50), at(4_000));
        assert_eq!(s.leader_exited(at(4_000)), Ending::Late);
    }

    #[test]
    fn a_loss_kills_at_once() {
        let mut s = Supervisor::new(Duration::from_secs(1), Duration::from_millis(50), at(4_000));
        s.lost(LeaseLost::Expired { last_failure: None }, at(3_950));
        assert!(matches!(
            s.poll_action(),
            Some(SupervisorAction::Terminate { .. })
        ));
        assert_eq!(s.poll_action(), Some(SupervisorAction::Kill));
        assert_eq!(s.poll_action(), None);
    }

    #[test]
    fn a_loss_long_before_the_kill_instant_announces_the_kill_at_once() {
        let mut s = Supervisor::new(Duration::from_secs(1), Duration::from_millis(50), at(4_000));
        s.lost(LeaseLost::Expired { last_failure: None }, at(3_000));
        let Some(SupervisorAction::Terminate { kill_at, .. }) = s.poll_action() else {
            panic!("a loss terminates first");
        };
        assert_eq!(
            kill_at,
            at(3_000),
            "the SIGKILL follows at once, not at the lease's end"
        );
        assert_eq!(s.kill_at(), at(3_000));
        assert_eq!(s.poll_action(), Some(SupervisorAction::Kill));
        assert_eq!(s.poll_action(), None);
    }
}
