//! Reading a check file: [`parse`] the TOML into its serde mirror (`raw.rs`), then
//! translate that into a checked [`CheckSpec`].
//!
//! The translation checks what no single field can: bounds against each other, the lock
//! configuration the client would accept, and property names. Each error points at the
//! offending field. Each `Raw*` table has its translation here: the model's bounds and its
//! lock, the clocks, the client's timing of work, the expectation.

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use redlock_core::{DriftFactor, LockConfig, RestartPolicy, RetryPolicy};
use toml::Spanned;

use super::property::Property;
use super::raw::{RawCheck, RawClient, RawClocks, RawExpect, RawFaults, RawModel, ReleaseDeadline};
use super::spec::{CheckSpec, PauseKind, WorkStop};
use crate::scenario::error::Locator;
use crate::scenario::{LossOrder, ScenarioError};

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

/// The most leases a client takes one after another. A client numbers its tokens and
/// operations in 16 bits, and with no retries a lost round ends its lease at once, so that
/// every iteration may come within one tick: 100 of them keep those counts far from the
/// bound at every horizon.
const MAX_ITERATIONS: u32 = 100;

/// The longest stop a check explores, in ticks (past a TTL or two, a longer stop changes
/// nothing: the keep-alive releases at its deadline).
const MAX_STOP_TICKS: u32 = 60;

/// The model's sizes and lengths, checked.
struct Bounds {
    nodes: usize,
    clients: usize,
    tick: Duration,
    ttl_ticks: u32,
    horizon_ticks: u32,
    work_ticks: u32,
    iterations: u32,
}

/// The client's timing: when it starts, and how its works stop.
struct WorkTiming {
    start_within_ticks: u32,
    stop_ticks: u32,
    work_stop: WorkStop,
}

impl RawCheck {
    fn into_spec(self, at: &Locator<'_>) -> Result<CheckSpec, ScenarioError> {
        let bounds = self.model.bounds(at)?;
        let (config, restart) = self.model.lock(at, &bounds)?;
        let clocks = self.clocks.within_ttl(at, bounds.ttl_ticks)?;
        let (always, may_stay_unreached) = self.expect.properties(at)?;
        let timing = self.client.timing_of_work(at, bounds.horizon_ticks)?;
        self.faults.consistent(at, bounds.horizon_ticks)?;
        self.client.consistent(at, &self.model)?;
        let f = &self.faults;
        Ok(CheckSpec {
            name: self.name,
            nodes: bounds.nodes,
            clients: bounds.clients,
            tick: bounds.tick,
            ttl_ticks: bounds.ttl_ticks,
            horizon_ticks: bounds.horizon_ticks,
            work_ticks: bounds.work_ticks,
            iterations: bounds.iterations,
            keep_alive: self.model.keep_alive,
            extend_after_ticks: self.model.extend_after_ticks.map(Spanned::into_inner),
            config,
            restart,
            client_slow_ticks: clocks.client_slow_ticks,
            node_fast_ticks: clocks.node_fast_ticks,
            node_slow_ticks: clocks.node_slow_ticks,
            fault_budget: *f.budget.get_ref(),
            crash: *f.crash.get_ref(),
            durability: f
                .durability
                .as_ref()
                .map_or_else(Default::default, |d| *d.get_ref()),
            restart_delay_ticks: f.restart_delay_ticks.as_ref().map_or(0, |t| *t.get_ref()),
            pause: *f.pause.get_ref(),
            drop: *f.drop.get_ref(),
            delay: *f.delay.get_ref(),
            clock_jump_ticks: *f.clock_jump_ticks.get_ref(),
            timing: self.client.timing,
            release: self.client.release,
            extend: self.client.extend,
            loss_order: self
                .client
                .loss_order
                .as_ref()
                .map_or_else(Default::default, |l| *l.get_ref()),
            start_within_ticks: timing.start_within_ticks,
            stop_ticks: timing.stop_ticks,
            work_stop: timing.work_stop,
            keeper_without_drift: self
                .client
                .release_deadline
                .as_ref()
                .is_some_and(|d| *d.get_ref() == ReleaseDeadline::WithoutDrift),
            waiter_marks: self.model.waiter_marks,
            may_stay_unreached,
            always,
            expect: self.expect.outcome,
            ci: self.ci,
            counterexample: self.counterexample.map(|c| c.path),
        })
    }
}

/// `value`, when it is at least 1.
fn positive(at: &Locator<'_>, value: &Spanned<u32>, field: &str) -> Result<u32, ScenarioError> {
    if *value.get_ref() == 0 {
        Err(at.at(value, field, "must be at least 1"))
    } else {
        Ok(*value.get_ref())
    }
}

/// `value`, when it is in `range`.
fn within(
    at: &Locator<'_>,
    value: &Spanned<usize>,
    field: &str,
    range: RangeInclusive<usize>,
) -> Result<usize, ScenarioError> {
    if range.contains(value.get_ref()) {
        Ok(*value.get_ref())
    } else {
        Err(at.at(
            value,
            field,
            format!("must be from {} to {}", range.start(), range.end()),
        ))
    }
}

impl RawModel {
    /// The sizes and lengths, each within what the explorer takes.
    fn bounds(&self, at: &Locator<'_>) -> Result<Bounds, ScenarioError> {
        let nodes = within(at, &self.nodes, "model.nodes", 1..=MAX_PROCESSES)?;
        let clients = within(at, &self.clients, "model.clients", 1..=MAX_PROCESSES)?;
        let ttl_ticks = positive(at, &self.ttl_ticks, "model.ttl_ticks")?;
        if ttl_ticks > 30 {
            return Err(at.at(&self.ttl_ticks, "model.ttl_ticks", "must be at most 30"));
        }
        let horizon_ticks = positive(at, &self.horizon_ticks, "model.horizon_ticks")?;
        if horizon_ticks > 200 {
            return Err(at.at(
                &self.horizon_ticks,
                "model.horizon_ticks",
                "must be at most 200",
            ));
        }
        let work_ticks = positive(at, &self.work_ticks, "model.work_ticks")?;
        let iterations = positive(at, &self.iterations, "model.iterations")?;
        if iterations > MAX_ITERATIONS {
            return Err(at.at(
                &self.iterations,
                "model.iterations",
                format!("must be at most {MAX_ITERATIONS}"),
            ));
        }
        let tick_ms = *self.tick_ms.get_ref();
        if !(1..=60_000).contains(&tick_ms) {
            return Err(at.at(&self.tick_ms, "model.tick_ms", "must be from 1 to 60000"));
        }
        Ok(Bounds {
            nodes,
            clients,
            tick: Duration::from_millis(tick_ms),
            ttl_ticks,
            horizon_ticks,
            work_ticks,
            iterations,
        })
    }

    /// The lock configuration every client runs (validated as the client validates it), and
    /// the restart quarantine.
    fn lock(
        &self,
        at: &Locator<'_>,
        bounds: &Bounds,
    ) -> Result<(LockConfig, RestartPolicy), ScenarioError> {
        let tick = bounds.tick;
        let drift = DriftFactor::from_f64(*self.drift_factor.get_ref()).ok_or_else(|| {
            at.at(
                &self.drift_factor,
                "model.drift_factor",
                "must be in [0, 1)",
            )
        })?;
        let ttl = tick.saturating_mul(bounds.ttl_ticks);
        let retry_delay = tick.saturating_mul(positive(
            at,
            &self.retry_delay_ticks,
            "model.retry_delay_ticks",
        )?);
        // Rounds a tick apart, without jitter: the jitter is a random draw, which a model
        // checker does not sample (the round's start is already any tick).
        let mut config = LockConfig::new(bounds.nodes)
            .with_ttl(ttl)
            .with_drift_factor(drift)
            .with_retry(RetryPolicy::new(self.retries, retry_delay, Duration::ZERO))
            .with_fencing(self.fencing);
        if let Some(timeout) = &self.node_timeout_ticks {
            // Also the keep-alive's loss margin: a whole tick makes the loss come before the
            // validity ends, as it does in real time.
            config = config.with_node_timeout(tick.saturating_mul(positive(
                at,
                timeout,
                "model.node_timeout_ticks",
            )?));
        }
        if let Some(max_hold) = &self.max_hold_ticks {
            config = config.with_max_hold(tick.saturating_mul(positive(
                at,
                max_hold,
                "model.max_hold_ticks",
            )?));
        }
        config.validate().map_err(|e| {
            // The file's own field for what the lock names, where the file sets it.
            let (field, value) = match e.field() {
                "nodes" => ("model.nodes", Some(self.nodes.span())),
                "ttl" => ("model.ttl_ticks", Some(self.ttl_ticks.span())),
                "node_timeout" => (
                    "model.node_timeout_ticks",
                    self.node_timeout_ticks.as_ref().map(Spanned::span),
                ),
                "max_hold" => (
                    "model.max_hold_ticks",
                    self.max_hold_ticks.as_ref().map(Spanned::span),
                ),
                _ => ("model", None),
            };
            let reason = format!("{} (the lock's {})", e.reason(), e.field());
            at.error(value.map_or(0, |span| span.start), field, reason)
        })?;
        let restart = if self.quarantine {
            RestartPolicy::default_for(ttl)
        } else {
            RestartPolicy::Persistent
        };
        Ok((config, restart))
    }
}

/// How far the clocks may stray, in ticks per window of one TTL.
struct Strays {
    client_slow_ticks: u32,
    node_fast_ticks: u32,
    node_slow_ticks: u32,
}

impl RawClocks {
    /// Each at most a TTL; node clocks that gain or that lose, not both (a node keeps one
    /// record of its strays).
    fn within_ttl(&self, at: &Locator<'_>, ttl_ticks: u32) -> Result<Strays, ScenarioError> {
        let ttl_window = |value: &Spanned<u32>, field: &str| {
            if *value.get_ref() > ttl_ticks {
                Err(at.at(value, field, "must be at most model.ttl_ticks"))
            } else {
                Ok(*value.get_ref())
            }
        };
        let strays = Strays {
            client_slow_ticks: ttl_window(&self.client_slow_ticks, "clocks.client_slow_ticks")?,
            node_fast_ticks: ttl_window(&self.node_fast_ticks, "clocks.node_fast_ticks")?,
            node_slow_ticks: ttl_window(&self.node_slow_ticks, "clocks.node_slow_ticks")?,
        };
        if strays.node_fast_ticks > 0 && strays.node_slow_ticks > 0 {
            return Err(at.at(
                &self.node_slow_ticks,
                "clocks.node_slow_ticks",
                "node clocks gain (node_fast_ticks) or lose (node_slow_ticks) in one check, not both",
            ));
        }
        Ok(strays)
    }
}

impl RawExpect {
    /// `(always, may_stay_unreached)`: the *always* properties judged (every one by
    /// default) and the *sometimes* ones that may stay unreached (none by default).
    fn properties(&self, at: &Locator<'_>) -> Result<(u8, u8), ScenarioError> {
        let always = match &self.always {
            None => Property::ALL
                .iter()
                .filter(|p| p.is_always())
                .fold(0, |a, p| a | p.bit()),
            Some(names) => properties(at, names, "expect.always", true)?,
        };
        let may_stay_unreached = match &self.may_stay_unreached {
            None => 0,
            Some(names) => properties(at, names, "expect.may_stay_unreached", false)?,
        };
        Ok((always, may_stay_unreached))
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
    /// How the clients' works stop, and when the clients start (below the horizon).
    fn timing_of_work(
        &self,
        at: &Locator<'_>,
        horizon_ticks: u32,
    ) -> Result<WorkTiming, ScenarioError> {
        let start_within_ticks = self.start_within_ticks.as_ref().map_or(0, |s| *s.get_ref());
        let work_stop = self
            .stop
            .as_ref()
            .map_or(WorkStop::Signalled, |s| *s.get_ref());
        let stop_ticks = match &self.stop_ticks {
            None => 0,
            Some(ticks) if work_stop == WorkStop::Never => {
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
        if let Some(start) = &self.start_within_ticks
            && start_within_ticks >= horizon_ticks
        {
            return Err(at.at(
                start,
                "client.start_within_ticks",
                "must be below model.horizon_ticks",
            ));
        }
        Ok(WorkTiming {
            start_within_ticks,
            stop_ticks,
            work_stop,
        })
    }
}

/// What a setting takes: a field set without it would change nothing, silently.
fn takes<T>(at: &Locator<'_>, value: &Spanned<T>, field: &str, needs: &str) -> ScenarioError {
    at.at(value, field, format!("takes {needs}, or changes nothing"))
}

impl RawFaults {
    /// Kinds of fault and a budget to spend on them, each only with the other; the details
    /// of a crash only with crashes.
    fn consistent(&self, at: &Locator<'_>, horizon_ticks: u32) -> Result<(), ScenarioError> {
        let kinds = [
            (self.crash.span(), "faults.crash", *self.crash.get_ref()),
            (
                self.pause.span(),
                "faults.pause",
                *self.pause.get_ref() != PauseKind::None,
            ),
            (self.drop.span(), "faults.drop", *self.drop.get_ref()),
            (self.delay.span(), "faults.delay", *self.delay.get_ref()),
            (
                self.clock_jump_ticks.span(),
                "faults.clock_jump_ticks",
                *self.clock_jump_ticks.get_ref() > 0,
            ),
        ];
        let on = kinds.iter().find(|(_, _, on)| *on);
        match (on, *self.budget.get_ref()) {
            (Some((span, field, _)), 0) => {
                return Err(at.error(
                    span.start,
                    *field,
                    "takes faults.budget of at least 1: with none, no fault is explored",
                ));
            }
            (None, budget) if budget > 0 => {
                return Err(at.at(
                    &self.budget,
                    "faults.budget",
                    "no fault is on to spend it (faults.crash, pause, drop, delay or \
                     clock_jump_ticks)",
                ));
            }
            _ => {}
        }
        if *self.clock_jump_ticks.get_ref() > horizon_ticks {
            return Err(at.at(
                &self.clock_jump_ticks,
                "faults.clock_jump_ticks",
                "must be at most model.horizon_ticks",
            ));
        }
        if !*self.crash.get_ref() {
            if let Some(durability) = &self.durability {
                return Err(takes(
                    at,
                    durability,
                    "faults.durability",
                    "faults.crash = true",
                ));
            }
            if let Some(delay) = &self.restart_delay_ticks {
                return Err(takes(
                    at,
                    delay,
                    "faults.restart_delay_ticks",
                    "faults.crash = true",
                ));
            }
        }
        Ok(())
    }
}

impl RawClient {
    /// The keep-alive's settings only with the keep-alive, and none the checker cannot act.
    fn consistent(&self, at: &Locator<'_>, model: &RawModel) -> Result<(), ScenarioError> {
        if let Some(order) = &self.loss_order
            && *order.get_ref() == LossOrder::DropReleases
        {
            return Err(at.at(
                order,
                "client.loss_order",
                "the checker has no dropped handle: drop-releases is the simulator's (a \
                 scenario's drop-handle step)",
            ));
        }
        if model.keep_alive {
            if let Some(extend) = &model.extend_after_ticks {
                return Err(at.at(
                    extend,
                    "model.extend_after_ticks",
                    "a kept-alive lease is not extended by hand (remove one of them)",
                ));
            }
            return Ok(());
        }
        let keep_alive = "model.keep_alive = true";
        if let Some(stop) = &self.stop {
            return Err(takes(at, stop, "client.stop", keep_alive));
        }
        if let Some(ticks) = &self.stop_ticks {
            return Err(takes(at, ticks, "client.stop_ticks", keep_alive));
        }
        if let Some(deadline) = &self.release_deadline {
            return Err(takes(at, deadline, "client.release_deadline", keep_alive));
        }
        if let Some(order) = &self.loss_order
            && *order.get_ref() != LossOrder::StopFirst
        {
            return Err(takes(at, order, "client.loss_order", keep_alive));
        }
        Ok(())
    }
}

impl CheckSpec {
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
