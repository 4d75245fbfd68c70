//! The serde mirror of the TOML check format: one `Raw*` type per table, with its field
//! names and defaults.
//!
//! A value is read here as the file writes it; whatever depends on other values (bounds
//! against each other, the lock's validation, property names) is the translation's job, in
//! `file.rs`. Every table refuses unknown fields, so a typo is an error rather than a
//! silent default. The fields are `pub(super)` for that translation only.

use serde::Deserialize;
use toml::Spanned;

use super::spec::{Durability, Outcome, PauseKind, WaiterMarks, WorkStop};
use crate::scenario::{ExtendImpl, LossOrder, ReleaseImpl, TimingImpl};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheck {
    pub(super) name: String,
    #[serde(default = "default_ci")]
    pub(super) ci: bool,
    pub(super) model: RawModel,
    #[serde(default)]
    pub(super) clocks: RawClocks,
    #[serde(default)]
    pub(super) faults: RawFaults,
    #[serde(default)]
    pub(super) client: RawClient,
    pub(super) expect: RawExpect,
    pub(super) counterexample: Option<RawCounterexample>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawModel {
    #[serde(default = "default_nodes")]
    pub(super) nodes: Spanned<usize>,
    #[serde(default = "default_clients")]
    pub(super) clients: Spanned<usize>,
    #[serde(default = "default_tick_ms")]
    pub(super) tick_ms: Spanned<u64>,
    #[serde(default = "default_ttl_ticks")]
    pub(super) ttl_ticks: Spanned<u32>,
    pub(super) horizon_ticks: Spanned<u32>,
    #[serde(default = "default_work_ticks")]
    pub(super) work_ticks: Spanned<u32>,
    #[serde(default = "default_iterations")]
    pub(super) iterations: Spanned<u32>,
    #[serde(default)]
    pub(super) keep_alive: bool,
    pub(super) extend_after_ticks: Option<Spanned<u32>>,
    pub(super) max_hold_ticks: Option<Spanned<u32>>,
    #[serde(default = "default_drift")]
    pub(super) drift_factor: Spanned<f64>,
    #[serde(default = "default_retries")]
    pub(super) retries: u32,
    #[serde(default = "default_retry_delay_ticks")]
    pub(super) retry_delay_ticks: Spanned<u32>,
    pub(super) node_timeout_ticks: Option<Spanned<u32>>,
    #[serde(default = "default_quarantine")]
    pub(super) quarantine: bool,
    #[serde(default)]
    pub(super) fencing: bool,
    #[serde(default)]
    pub(super) waiter_marks: WaiterMarks,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClocks {
    #[serde(default = "no_ticks")]
    pub(super) client_slow_ticks: Spanned<u32>,
    #[serde(default = "no_ticks")]
    pub(super) node_fast_ticks: Spanned<u32>,
    #[serde(default = "no_ticks")]
    pub(super) node_slow_ticks: Spanned<u32>,
}

impl Default for RawClocks {
    fn default() -> Self {
        Self {
            client_slow_ticks: no_ticks(),
            node_fast_ticks: no_ticks(),
            node_slow_ticks: no_ticks(),
        }
    }
}

fn no_ticks() -> Spanned<u32> {
    Spanned::new(0..0, 0)
}

/// Each field is spanned: an error about how they go together points at the one to change.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFaults {
    #[serde(default = "unspanned")]
    pub(super) budget: Spanned<u32>,
    #[serde(default = "unspanned")]
    pub(super) crash: Spanned<bool>,
    pub(super) durability: Option<Spanned<Durability>>,
    pub(super) restart_delay_ticks: Option<Spanned<u32>>,
    #[serde(default = "unspanned")]
    pub(super) pause: Spanned<PauseKind>,
    #[serde(default = "unspanned")]
    pub(super) drop: Spanned<bool>,
    #[serde(default = "unspanned")]
    pub(super) delay: Spanned<bool>,
    #[serde(default = "unspanned")]
    pub(super) clock_jump_ticks: Spanned<u32>,
}

impl Default for RawFaults {
    fn default() -> Self {
        Self {
            budget: unspanned(),
            crash: unspanned(),
            durability: None,
            restart_delay_ticks: None,
            pause: unspanned(),
            drop: unspanned(),
            delay: unspanned(),
            clock_jump_ticks: unspanned(),
        }
    }
}

/// A field the file leaves out: its default, at no place in the file.
fn unspanned<T: Default>() -> Spanned<T> {
    Spanned::new(0..0, T::default())
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    #[serde(default)]
    pub(super) timing: TimingImpl,
    #[serde(default)]
    pub(super) release: ReleaseImpl,
    #[serde(default)]
    pub(super) extend: ExtendImpl,
    pub(super) loss_order: Option<Spanned<LossOrder>>,
    pub(super) start_within_ticks: Option<Spanned<u32>>,
    pub(super) stop_ticks: Option<Spanned<u32>>,
    pub(super) stop: Option<Spanned<WorkStop>>,
    pub(super) release_deadline: Option<Spanned<ReleaseDeadline>>,
}

/// How the keep-alive counts its release deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum ReleaseDeadline {
    /// The validity's end plus the drift allowance, as shipped.
    #[default]
    Shipped,
    /// The fault: the keep-alive is configured without the drift allowance.
    WithoutDrift,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub(super) outcome: Outcome,
    /// The *always* properties to judge (default: all).
    pub(super) always: Option<Spanned<Vec<String>>>,
    /// The *sometimes* properties that may stay unreached (default: none).
    pub(super) may_stay_unreached: Option<Spanned<Vec<String>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCounterexample {
    pub(super) path: Vec<String>,
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
