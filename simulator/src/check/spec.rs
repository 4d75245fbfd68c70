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
//! Every error names the line, column and field, as a scenario file's do.

use std::path::Path;
use std::time::Duration;

use redlock_core::{DriftFactor, LockConfig, RestartPolicy, RetryPolicy};
use serde::Deserialize;
use toml::Spanned;

use super::model::Property;
use crate::scenario::error::Locator;
use crate::scenario::{ExtendImpl, LossOrder, ReleaseImpl, ScenarioError, TimingImpl};

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
    /// The *sometimes* properties that may stay unreached (bits of [`Property::bit`]);
    /// any other unreached one fails the check.
    pub may_stay_unreached: u8,
    /// The *always* properties judged (bits of [`Property::bit`]); every one by default.
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

    /// Reads and validates a check file.
    ///
    /// # Errors
    ///
    /// A [`ScenarioError`] naming the line, column and field of the first problem.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::io(path, &e))?;
        parse(&text, &path.display().to_string())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: String,
    #[serde(default = "default_ci")]
    ci: bool,
    model: RawModel,
    #[serde(default)]
    clocks: RawClocks,
    #[serde(default)]
    faults: RawFaults,
    #[serde(default)]
    client: RawClient,
    expect: RawExpect,
    counterexample: Option<RawCounterexample>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    #[serde(default = "default_nodes")]
    nodes: Spanned<usize>,
    #[serde(default = "default_clients")]
    clients: Spanned<usize>,
    #[serde(default = "default_tick_ms")]
    tick_ms: Spanned<u64>,
    #[serde(default = "default_ttl_ticks")]
    ttl_ticks: Spanned<u32>,
    horizon_ticks: Spanned<u32>,
    #[serde(default = "default_work_ticks")]
    work_ticks: Spanned<u32>,
    #[serde(default = "default_iterations")]
    iterations: Spanned<u32>,
    #[serde(default)]
    keep_alive: bool,
    extend_after_ticks: Option<u32>,
    max_hold_ticks: Option<Spanned<u32>>,
    #[serde(default = "default_drift")]
    drift_factor: Spanned<f64>,
    #[serde(default = "default_retries")]
    retries: u32,
    #[serde(default = "default_retry_delay_ticks")]
    retry_delay_ticks: Spanned<u32>,
    node_timeout_ticks: Option<Spanned<u32>>,
    #[serde(default = "default_quarantine")]
    quarantine: bool,
    #[serde(default)]
    fencing: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClocks {
    #[serde(default = "no_ticks")]
    client_slow_ticks: Spanned<u32>,
    #[serde(default = "no_ticks")]
    node_fast_ticks: Spanned<u32>,
}

impl Default for RawClocks {
    fn default() -> Self {
        Self {
            client_slow_ticks: no_ticks(),
            node_fast_ticks: no_ticks(),
        }
    }
}

fn no_ticks() -> Spanned<u32> {
    Spanned::new(0..0, 0)
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFaults {
    #[serde(default)]
    budget: u32,
    #[serde(default)]
    crash: bool,
    #[serde(default)]
    durability: Durability,
    #[serde(default)]
    restart_delay_ticks: u32,
    #[serde(default)]
    pause: PauseKind,
    #[serde(default)]
    drop: bool,
    #[serde(default)]
    delay: bool,
    #[serde(default)]
    clock_jump_ticks: u32,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    #[serde(default)]
    timing: TimingImpl,
    #[serde(default)]
    release: ReleaseImpl,
    #[serde(default)]
    extend: ExtendImpl,
    #[serde(default)]
    loss_order: LossOrder,
    start_within_ticks: Option<Spanned<u32>>,
    stop_ticks: Option<Spanned<u32>>,
    stop: Option<Spanned<WorkStop>>,
    #[serde(default)]
    release_deadline: ReleaseDeadline,
}

/// How the keep-alive counts its release deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ReleaseDeadline {
    /// The validity's end plus the drift allowance, as shipped.
    #[default]
    Shipped,
    /// The fault: the keep-alive is configured without the drift allowance.
    WithoutDrift,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    outcome: Outcome,
    /// The *always* properties to judge (default: all).
    always: Option<Spanned<Vec<String>>>,
    /// The *sometimes* properties that may stay unreached (default: none).
    may_stay_unreached: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCounterexample {
    path: Vec<String>,
}

fn default_nodes() -> Spanned<usize> {
    Spanned::new(0..0, 3)
}
fn default_clients() -> Spanned<usize> {
    Spanned::new(0..0, 2)
}
fn default_tick_ms() -> Spanned<u64> {
    Spanned::new(0..0, 1_000)
}
fn default_ttl_ticks() -> Spanned<u32> {
    Spanned::new(0..0, 6)
}
fn default_work_ticks() -> Spanned<u32> {
    Spanned::new(0..0, 2)
}
fn default_iterations() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}
fn default_drift() -> Spanned<f64> {
    Spanned::new(0..0, 0.2)
}
fn default_retries() -> u32 {
    3
}
fn default_retry_delay_ticks() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}
fn default_quarantine() -> bool {
    true
}
fn default_ci() -> bool {
    true
}

/// Parses a check file's text; `file` names it in errors.
///
/// # Errors
///
/// A [`ScenarioError::Invalid`] naming the line, column and field of the first problem.
pub fn parse(text: &str, file: &str) -> Result<CheckSpec, ScenarioError> {
    let at = Locator { file, text };
    let raw: RawCheck = at.deserialize()?;
    raw.into_spec(&at)
}

/// The largest model the explorer takes: its state packs node and client numbers in bytes.
const MAX_PROCESSES: usize = 8;

impl RawCheck {
    fn into_spec(self, at: &Locator<'_>) -> Result<CheckSpec, ScenarioError> {
        let m = &self.model;
        let within =
            |value: &Spanned<usize>, field: &str, range: std::ops::RangeInclusive<usize>| {
                if range.contains(value.get_ref()) {
                    Ok(*value.get_ref())
                } else {
                    Err(at.at(
                        value,
                        field,
                        format!("must be from {} to {}", range.start(), range.end()),
                    ))
                }
            };
        let nodes = within(&m.nodes, "model.nodes", 1..=MAX_PROCESSES)?;
        let clients = within(&m.clients, "model.clients", 1..=MAX_PROCESSES)?;
        let positive = |value: &Spanned<u32>, field: &str| {
            if *value.get_ref() == 0 {
                Err(at.at(value, field, "must be at least 1"))
            } else {
                Ok(*value.get_ref())
            }
        };
        let ttl_ticks = positive(&m.ttl_ticks, "model.ttl_ticks")?;
        if ttl_ticks > 30 {
            return Err(at.at(&m.ttl_ticks, "model.ttl_ticks", "must be at most 30"));
        }
        let horizon_ticks = positive(&m.horizon_ticks, "model.horizon_ticks")?;
        if horizon_ticks > 200 {
            return Err(at.at(
                &m.horizon_ticks,
                "model.horizon_ticks",
                "must be at most 200",
            ));
        }
        let work_ticks = positive(&m.work_ticks, "model.work_ticks")?;
        let iterations = positive(&m.iterations, "model.iterations")?;
        let tick_ms = *m.tick_ms.get_ref();
        if !(1..=60_000).contains(&tick_ms) {
            return Err(at.at(&m.tick_ms, "model.tick_ms", "must be from 1 to 60000"));
        }
        let tick = Duration::from_millis(tick_ms);
        let drift = DriftFactor::from_f64(*m.drift_factor.get_ref())
            .ok_or_else(|| at.at(&m.drift_factor, "model.drift_factor", "must be in [0, 1)"))?;
        let ttl = tick.saturating_mul(ttl_ticks);
        let retry_delay =
            tick.saturating_mul(positive(&m.retry_delay_ticks, "model.retry_delay_ticks")?);
        // Rounds a tick apart, without jitter: the jitter is a random draw, which a model
        // checker does not sample (the round's start is already any tick).
        let mut config = LockConfig::new(nodes)
            .with_ttl(ttl)
            .with_drift_factor(drift)
            .with_retry(RetryPolicy::new(
                self.model.retries,
                retry_delay,
                Duration::ZERO,
            ))
            .with_fencing(m.fencing);
        if let Some(timeout) = &m.node_timeout_ticks {
            // Also the keep-alive's loss margin: a whole tick makes the loss come before the
            // validity ends, as it does in real time.
            config = config.with_node_timeout(
                tick.saturating_mul(positive(timeout, "model.node_timeout_ticks")?),
            );
        }
        if let Some(max_hold) = &m.max_hold_ticks {
            config = config
                .with_max_hold(tick.saturating_mul(positive(max_hold, "model.max_hold_ticks")?));
        }
        config
            .validate()
            .map_err(|e| at.error(0, format!("model ({})", e.field()), e.reason().to_owned()))?;
        let restart = if m.quarantine {
            RestartPolicy::default_for(ttl)
        } else {
            RestartPolicy::Persistent
        };
        let ttl_window = |value: &Spanned<u32>, field: &str| {
            if *value.get_ref() > ttl_ticks {
                Err(at.at(value, field, "must be at most model.ttl_ticks"))
            } else {
                Ok(*value.get_ref())
            }
        };
        let client_slow_ticks =
            ttl_window(&self.clocks.client_slow_ticks, "clocks.client_slow_ticks")?;
        let node_fast_ticks = ttl_window(&self.clocks.node_fast_ticks, "clocks.node_fast_ticks")?;
        let always = match &self.expect.always {
            None => Property::ALL
                .iter()
                .filter(|p| p.is_always())
                .fold(0, |a, p| a | p.bit()),
            Some(names) => properties(at, names, "expect.always", true)?,
        };
        let may_stay_unreached = match &self.expect.may_stay_unreached {
            None => 0,
            Some(names) => properties(at, names, "expect.may_stay_unreached", false)?,
        };
        let (start_within_ticks, stop_ticks, work_stop) = self.client.timing_of_work(at)?;
        if let Some(start) = &self.client.start_within_ticks
            && start_within_ticks >= horizon_ticks
        {
            return Err(at.at(
                start,
                "client.start_within_ticks",
                "must be below model.horizon_ticks",
            ));
        }
        let f = &self.faults;
        if f.clock_jump_ticks > horizon_ticks {
            return Err(at.error(
                0,
                "faults.clock_jump_ticks",
                "must be at most model.horizon_ticks",
            ));
        }
        Ok(CheckSpec {
            name: self.name,
            nodes,
            clients,
            tick,
            ttl_ticks,
            horizon_ticks,
            work_ticks,
            iterations,
            keep_alive: m.keep_alive,
            extend_after_ticks: m.extend_after_ticks,
            config,
            restart,
            client_slow_ticks,
            node_fast_ticks,
            fault_budget: f.budget,
            crash: f.crash,
            durability: f.durability,
            restart_delay_ticks: f.restart_delay_ticks,
            pause: f.pause,
            drop: f.drop,
            delay: f.delay,
            clock_jump_ticks: f.clock_jump_ticks,
            timing: self.client.timing,
            release: self.client.release,
            extend: self.client.extend,
            loss_order: self.client.loss_order,
            start_within_ticks,
            stop_ticks,
            work_stop,
            keeper_without_drift: self.client.release_deadline == ReleaseDeadline::WithoutDrift,
            may_stay_unreached,
            always,
            expect: self.expect.outcome,
            ci: self.ci,
            counterexample: self.counterexample.map(|c| c.path),
        })
    }
}

/// The properties named in `names` (of the kind `always` asks), as bits of
/// [`Property::bit`].
fn properties(
    at: &Locator<'_>,
    names: &Spanned<Vec<String>>,
    field: &str,
    always: bool,
) -> Result<u8, ScenarioError> {
    let mut bits = 0;
    for name in names.get_ref() {
        let property = Property::ALL
            .iter()
            .find(|p| p.is_always() == always && p.name() == name)
            .ok_or_else(|| {
                let expected = Property::ALL
                    .iter()
                    .filter(|p| p.is_always() == always)
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ");
                at.at(
                    names,
                    field,
                    format!("unknown property `{name}`; expected one of {expected}"),
                )
            })?;
        bits |= property.bit();
    }
    Ok(bits)
}

impl RawClient {
    /// When the clients start, and how their works stop: `(start_within_ticks, stop_ticks,
    /// stop)`.
    fn timing_of_work(&self, at: &Locator<'_>) -> Result<(u32, u32, WorkStop), ScenarioError> {
        let start = self.start_within_ticks.as_ref().map_or(0, |s| *s.get_ref());
        let stop = self
            .stop
            .as_ref()
            .map_or(WorkStop::Signalled, |s| *s.get_ref());
        let stop_ticks = match &self.stop_ticks {
            None => 0,
            Some(ticks) if stop == WorkStop::Never => {
                return Err(at.at(
                    ticks,
                    "client.stop_ticks",
                    "a work that never stops takes no stop_ticks (remove one of them)",
                ));
            }
            Some(ticks) if *ticks.get_ref() > MAX_STOP_TICKS => {
                return Err(at.at(
                    ticks,
                    "client.stop_ticks",
                    format!("must be at most {MAX_STOP_TICKS}"),
                ));
            }
            Some(ticks) => *ticks.get_ref(),
        };
        Ok((start, stop_ticks, stop))
    }
}

/// The longest stop a check explores, in ticks (past a TTL or two, a longer stop changes
/// nothing: the keep-alive releases at its deadline).
const MAX_STOP_TICKS: u32 = 60;
