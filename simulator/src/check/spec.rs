//! A check file: the bounds of one exhaustive exploration, its faults and its expectation.
//!
//! ```toml
//! name = "shipped defaults: crashes without persistence, pauses, drift within the factor"
//! [model]
//! nodes = 3
//! clients = 2
//! ttl_ticks = 6
//! horizon_ticks = 14
//! [faults]
//! budget = 2
//! crash = true
//! [expect]
//! outcome = "no-violation"
//! ```
//!
//! A file is read in two steps, each in its own file, as a scenario file is: `raw.rs`
//! mirrors the TOML format, `file.rs` translates it into a checked [`CheckSpec`]. Every
//! error names the line, column and field, as a scenario file's do.

use std::time::Duration;

use redlock_core::{LockConfig, RestartPolicy};
use serde::Deserialize;

use crate::scenario::{ExtendImpl, LossOrder, ReleaseImpl, TimingImpl};

/// What a check expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Every *always* property holds in every state explored.
    NoViolation,
    /// Some state violates an *always* property.
    Violation,
}

impl Outcome {
    /// The name used in files and in `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Self::NoViolation => "no-violation",
            Self::Violation => "violation",
        }
    }
}

/// How a paused client's clock behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PauseKind {
    /// No pauses.
    #[default]
    None,
    /// The process stops; its monotonic clock keeps counting (a GC pause, `SIGSTOP`).
    Running,
    /// The process and its clock stop (a suspended VM whose clock does not catch up).
    Frozen,
}

/// What a crashed node keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Nothing (no persistence, or `appendfsync everysec` losing its last second).
    #[default]
    None,
    /// Every write (`appendfsync always`).
    Always,
}

/// What a work told to stop does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkStop {
    /// It stops within `stop_ticks` ticks of its clock (at any point of them), or at its own
    /// end if that comes first; its stop is reported to the keeper with `work_stopped`.
    #[default]
    Signalled,
    /// It ignores the stop and runs to its own end (a process that cannot be signalled):
    /// the keep-alive releases at its release deadline (`Release(KeysExpired)`) unless the
    /// work's end comes first.
    Never,
    /// It stops as [`Signalled`](Self::Signalled) does, but its holder cannot confirm it
    /// (`KeptLease::release_unconfirmed`): the driver reports the work's end with
    /// `stop_unconfirmed`, and the keep-alive releases at its release deadline.
    Unconfirmed,
}

/// Whether waiters mark their interest on the nodes, and so whether a release publishes
/// only where a mark is (`model.waiter_marks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaiterMarks {
    /// No marks: every release notifies every client then acquiring (the model of the
    /// safety checks; see docs/simulator.md for why it covers the marks' behaviours).
    #[default]
    Off,
    /// The shipped client: a waiter marks the nodes where its lost round saw a holder
    /// (the mark reads the key), removes its marks when its acquisition ends, and a
    /// release notifies only where some mark is.
    On,
    /// A fault: marks as [`On`](Self::On), but the release never publishes.
    Unannounced,
}

/// One check, read from a file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CheckSpec {
    /// Its name.
    pub name: String,
    /// The nodes.
    pub nodes: usize,
    /// The clients; all share one configuration (they are interchangeable).
    pub clients: usize,
    /// One tick of true time.
    pub tick: Duration,
    /// The lease TTL, in ticks.
    pub ttl_ticks: u32,
    /// True time stops advancing here (what is in flight still lands).
    pub horizon_ticks: u32,
    /// How long each client works under a lease, in ticks of its clock.
    pub work_ticks: u32,
    /// Leases each client takes, one after another.
    pub iterations: u32,
    /// Whether a lease is kept alive (extended at half-life) while its work runs.
    pub keep_alive: bool,
    /// The work extends its lease by hand once, this many ticks of its clock after the grant.
    pub extend_after_ticks: Option<u32>,
    /// The lock configuration every client runs.
    pub config: LockConfig,
    /// The restart quarantine, or none.
    pub restart: RestartPolicy,
    /// In any window of one TTL, how many ticks a client clock may lose.
    pub client_slow_ticks: u32,
    /// In any window of one TTL, how many ticks a node clock may gain.
    pub node_fast_ticks: u32,
    /// In any window of one TTL, how many ticks a node clock may lose (a check has node
    /// clocks that gain or that lose, not both).
    pub node_slow_ticks: u32,
    /// How many faults (crash, restart, pause, drop, clock jump) one path may take.
    pub fault_budget: u32,
    /// Whether nodes may crash (and restart).
    pub crash: bool,
    /// What a crashed node keeps.
    pub durability: Durability,
    /// Ticks a crashed node stays down at least.
    pub restart_delay_ticks: u32,
    /// Client pauses.
    pub pause: PauseKind,
    /// Whether messages may be lost.
    pub drop: bool,
    /// Whether messages may arrive after a tick (else every message sent arrives before
    /// true time moves on).
    pub delay: bool,
    /// A node clock may jump forward by this many ticks (0: never).
    pub clock_jump_ticks: u32,
    /// The clients' implementation (faulty variants as in the simulator).
    pub timing: TimingImpl,
    /// How the clients release.
    pub release: ReleaseImpl,
    /// How the clients extend.
    pub extend: ExtendImpl,
    /// What a kept-alive client does first when its lease is lost.
    pub loss_order: LossOrder,
    /// Each client starts its first acquisition at any tick from 0 to this one (0: every
    /// client starts at time zero).
    pub start_within_ticks: u32,
    /// A work told to stop stops within this many ticks of its client's clock (0: within
    /// the tick it is told).
    pub stop_ticks: u32,
    /// What a work told to stop does.
    pub work_stop: WorkStop,
    /// Whether the keep-alive is built without the drift allowance (a fault: its release
    /// deadline is the validity's end, before the keys have expired on the nodes).
    pub keeper_without_drift: bool,
    /// Whether waiters mark their interest, and releases publish only where a mark is.
    pub waiter_marks: WaiterMarks,
    /// The *sometimes* properties that may stay unreached (bits of
    /// [`Property::bit`](super::Property::bit)); any other unreached one fails the check.
    pub may_stay_unreached: u8,
    /// The *always* properties judged (bits of [`Property::bit`](super::Property::bit));
    /// every one by default.
    pub always: u8,
    /// What the check expects.
    pub expect: Outcome,
    /// Whether the catalogue test runs it on every CI run (`ci = false`: too large; run it
    /// by hand or as a benchmark).
    pub ci: bool,
    /// The path of a counterexample to replay instead of exploring (`[counterexample]`).
    pub counterexample: Option<Vec<String>>,
}

impl CheckSpec {
    /// `ticks` of time.
    pub fn ticks(&self, ticks: u32) -> Duration {
        self.tick.saturating_mul(ticks)
    }
}
