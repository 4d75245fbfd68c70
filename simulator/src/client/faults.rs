//! The implementation faults a simulated client can carry, all in one place.
//!
//! Each is a lie the driver tells the unmodified core, or a different Redis operation it
//! sends for a core command: the core never knows. A client with none of them is the
//! shipped client.
//!
//! | switch | lie |
//! |---|---|
//! | `timing = "no-elapsed-check"` | replies are reported at the round's start, so validity ignores the round's length |
//! | `timing = "start-after-first-reply"` | every time is reported as if the round started at its first reply |
//! | `release = "plain-del"` | a release is a plain `DEL`, whoever holds the key |
//! | `extend = "reacquire"` | an extension re-creates a missing key, and does not check its own validity first |
//! | `loss_order = "release-first"` | a lost kept-alive lease is released at the loss, before the work has stopped |
//! | `loss_order = "drop-releases"` | a dropped handle (`drop-handle`) counts as the work's stop: the lease is released at once while the work runs on |
//!
//! (The wall clock and the clock that freezes during pauses are faults of the client's
//! clock: see [`crate::scenario::ClockKind`] and the world's pauses.)

use crate::net::name::Name;
use std::time::Duration;

use redlock_core::{Command, Extend, Grant, Held, LockConfig, NodeFailure, Timestamp};

use crate::net::message::NodeOp;
use crate::scenario::{ClientSpec, ExtendImpl, LossOrder, ReleaseImpl, TimingImpl};

/// The timing of the acquisition round in progress, as the faults need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RoundClock {
    /// When the round started (client clock).
    pub(crate) start: Timestamp,
    /// When its first reply arrived.
    pub(crate) first_reply: Option<Timestamp>,
}

/// The keys a client's commands name on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Keys {
    pub(crate) key: Name,
    pub(crate) fence_key: Name,
    /// The waiting marks' hash ([`redlock_core::LockKey::wait_key`]).
    pub(crate) wait_key: Name,
}

/// A client's faults (none for the shipped client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Faults {
    timing: TimingImpl,
    release: ReleaseImpl,
    extend: ExtendImpl,
    loss_order: LossOrder,
}

impl Faults {
    /// The shipped client's (no fault).
    #[cfg(test)]
    pub(crate) fn none() -> Self {
        Self {
            timing: TimingImpl::Correct,
            release: ReleaseImpl::Script,
            extend: ExtendImpl::Script,
            loss_order: LossOrder::StopFirst,
        }
    }

    pub(crate) fn of(spec: &ClientSpec) -> Self {
        Self::new(spec.timing, spec.release, spec.extend, spec.loss_order)
    }

    /// A client with these implementation variants.
    pub(crate) fn new(
        timing: TimingImpl,
        release: ReleaseImpl,
        extend: ExtendImpl,
        loss_order: LossOrder,
    ) -> Self {
        Self {
            timing,
            release,
            extend,
            loss_order,
        }
    }

    /// Whether a lost lease is released before its work has stopped.
    pub(crate) fn releases_before_stop(self) -> bool {
        self.loss_order == LossOrder::ReleaseFirst
    }

    /// Whether a dropped handle counts as the work's stop (released at once).
    pub(crate) fn drop_releases(self) -> bool {
        self.loss_order == LossOrder::DropReleases
    }

    /// How much later than the truth the client believes its round started.
    fn late_start(self, round: RoundClock) -> Duration {
        match self.timing {
            TimingImpl::StartAfterFirstReply => round.first_reply.map_or(Duration::ZERO, |first| {
                first.saturating_duration_since(round.start)
            }),
            TimingImpl::Correct | TimingImpl::NoElapsedCheck => Duration::ZERO,
        }
    }

    /// The time the acquisition machine is told, for a reply (`reply`) or a timer at `now`.
    pub(crate) fn acquire_now(self, round: RoundClock, now: Timestamp, reply: bool) -> Timestamp {
        match self.timing {
            TimingImpl::Correct => now,
            // The round is treated as instantaneous: replies arrive "at the start".
            TimingImpl::NoElapsedCheck if reply => round.start,
            TimingImpl::NoElapsedCheck => now,
            // Everything is measured from the first reply instead of the first send.
            TimingImpl::StartAfterFirstReply => now.saturating_sub(self.late_start(round)),
        }
    }

    /// When the client's clock must read for a machine timer at `at` (the machine's time
    /// runs behind the clock by the late start).
    pub(crate) fn acquire_timer(self, round: RoundClock, at: Timestamp) -> Timestamp {
        at.saturating_add(self.late_start(round))
    }

    /// The grant as the (possibly faulty) client believes it: its deadline moved by the
    /// round's length or the late start.
    pub(crate) fn believed(self, mut grant: Grant, round: RoundClock, now: Timestamp) -> Grant {
        grant.valid_until = match self.timing {
            TimingImpl::Correct => grant.valid_until,
            TimingImpl::NoElapsedCheck => grant
                .valid_until
                .saturating_add(now.saturating_duration_since(round.start)),
            TimingImpl::StartAfterFirstReply => {
                grant.valid_until.saturating_add(self.late_start(round))
            }
        };
        grant
    }

    /// An extension of `held` at `now`, as this client makes it.
    pub(crate) fn extend(self, config: &LockConfig, held: &Held, now: Timestamp) -> Extend {
        match self.extend {
            ExtendImpl::Script => held.extend(config, now),
            // The re-acquiring variant does not check its own validity first.
            ExtendImpl::Reacquire => Extend::new(
                config,
                held.target().clone(),
                held.token(),
                Timestamp::MAX,
                held.acquired_at(),
                now,
            ),
        }
    }

    /// The server operation this client sends for `command`.
    ///
    /// # Errors
    ///
    /// The multi-resource commands, which the simulated servers do not model: the machine
    /// gets this failure instead of a reply (a command is never dropped silently).
    pub(crate) fn node_op(self, command: Command, keys: &Keys) -> Result<NodeOp, NodeFailure> {
        let key = keys.key.clone();
        Ok(match command {
            Command::SetIfAbsent { token, ttl, .. } => NodeOp::SetNx {
                key,
                token,
                ttl_ms: Command::px(ttl),
            },
            Command::SetIfAbsentReportHolder { token, ttl, .. } => NodeOp::SetNxReportHolder {
                key,
                token,
                ttl_ms: Command::px(ttl),
            },
            Command::ReleaseIfOwner { token, .. } => match self.release {
                ReleaseImpl::Script => NodeOp::ReleaseIfOwner {
                    key,
                    wait_key: keys.wait_key.clone(),
                    token,
                },
                ReleaseImpl::PlainDel => NodeOp::Del { key },
            },
            Command::SetIfAbsentReadFence { token, ttl, .. } => NodeOp::SetNxReadFence {
                key,
                fence_key: keys.fence_key.clone(),
                token,
                ttl_ms: Command::px(ttl),
            },
            Command::RaiseFence { token, fence, .. } => NodeOp::RaiseFence {
                key,
                fence_key: keys.fence_key.clone(),
                token,
                fence,
            },
            Command::ExtendIfOwner { token, ttl, .. } => match self.extend {
                ExtendImpl::Script => NodeOp::ExtendIfOwner {
                    key,
                    token,
                    ttl_ms: Command::px(ttl),
                },
                ExtendImpl::Reacquire => NodeOp::SetOrExtend {
                    key,
                    token,
                    ttl_ms: Command::px(ttl),
                },
            },
            Command::MarkWaiting { waiter, ttl, .. } => NodeOp::MarkWaiting {
                key,
                wait_key: keys.wait_key.clone(),
                waiter,
                ttl_ms: Command::px(ttl),
            },
            Command::UnmarkWaiting { waiter, .. } => NodeOp::UnmarkWaiting {
                wait_key: keys.wait_key.clone(),
                waiter,
            },
            other => {
                return Err(NodeFailure::Protocol(format!(
                    "the simulator does not model multi-resource commands ({other:?})"
                )));
            }
        })
    }
}
