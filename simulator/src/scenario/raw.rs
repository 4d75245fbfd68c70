//! The serde mirror of the TOML scenario format: one `Raw*` type per table, with its field
//! names and defaults, and the value types a field may hold (milliseconds, probabilities,
//! steps, the restart quarantine).
//!
//! A value is checked alone here; whatever depends on other values (names that must
//! resolve, a failover that needs a replica, the lock's validation) is the translation's
//! job, in `file.rs`. Every table refuses unknown fields, so a typo is an error rather than
//! a silent default. The fields are `pub(super)` for that translation only.

use serde::Deserialize;
use toml::Spanned;

use super::{
    Cause, ClockKind, ExtendImpl, LossOrder, Persistence, ReleaseImpl, SpoofPayload, Step,
    TimingImpl, TokenSource, Verdict,
};
use crate::time::{Nanos, from_ms};

/// Milliseconds: a finite, non-negative number (fractions allowed), kept as nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "f64")]
pub(super) struct Millis(pub(super) Nanos);

impl TryFrom<f64> for Millis {
    type Error = String;
    fn try_from(ms: f64) -> Result<Self, String> {
        if !ms.is_finite() || ms < 0.0 {
            return Err(format!("{ms} is not a non-negative number of milliseconds"));
        }
        if ms > 1e12 {
            return Err(format!("{ms} ms is absurdly long"));
        }
        Ok(Self(from_ms(ms)))
    }
}

/// Signed milliseconds (clock offsets and steps).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "f64")]
pub(super) struct SignedMillis(pub(super) i64);

impl TryFrom<f64> for SignedMillis {
    type Error = String;
    fn try_from(ms: f64) -> Result<Self, String> {
        if !ms.is_finite() || ms.abs() > 1e12 {
            return Err(format!("{ms} is not a usable number of milliseconds"));
        }
        Ok(Self((ms * 1e6).round() as i64))
    }
}

/// A probability in `[0, 1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
#[serde(try_from = "f64")]
pub(super) struct Probability(pub(super) f64);

impl TryFrom<f64> for Probability {
    type Error = String;
    fn try_from(p: f64) -> Result<Self, String> {
        if (0.0..=1.0).contains(&p) {
            Ok(Self(p))
        } else {
            Err(format!("{p} is not a probability in [0, 1]"))
        }
    }
}

impl TryFrom<String> for Step {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let mut words = text.split_whitespace();
        let verb = words.next().unwrap_or_default();
        let argument = words.next();
        let millis = |what: &str| -> Result<Nanos, String> {
            let arg = argument.ok_or_else(|| {
                format!("`{what}` needs a duration in milliseconds, e.g. `{what} 500`")
            })?;
            let ms: f64 = arg
                .parse()
                .map_err(|_| format!("`{arg}` is not a number of milliseconds"))?;
            Millis::try_from(ms).map(|m| m.0)
        };
        let step = match verb {
            "read" => Self::Read,
            "write" => Self::Write,
            "rmw" => Self::ReadModifyWrite,
            "check" => Self::Check,
            "extend" => Self::Extend,
            "crash" => Self::Crash,
            "sleep" => Self::Sleep(millis("sleep")?),
            "pause" => Self::Pause(millis("pause")?),
            "drop-handle" => Self::DropHandle(millis("drop-handle")?),
            other => {
                return Err(format!(
                    "unknown step `{other}`; expected read, write, rmw, check, extend, crash, `sleep <ms>`, `pause <ms>` or `drop-handle <ms>`"
                ));
            }
        };
        let takes_argument = matches!(step, Self::Sleep(_) | Self::Pause(_) | Self::DropHandle(_));
        if words.next().is_some() || (!takes_argument && argument.is_some()) {
            return Err(format!("unexpected words in step `{text}`"));
        }
        Ok(step)
    }
}

impl<'de> Deserialize<'de> for Step {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::try_from(text).map_err(serde::de::Error::custom)
    }
}

fn default_seed() -> u64 {
    1
}

pub(super) fn default_duration() -> Millis {
    Millis(60_000 * crate::time::MS)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawScenario {
    pub(super) name: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default = "default_seed")]
    pub(super) seed: u64,
    #[serde(default = "default_duration")]
    pub(super) duration_ms: Millis,
    #[serde(default)]
    pub(super) max_events: Option<u64>,
    #[serde(default)]
    pub(super) tokens: TokenSource,
    pub(super) expect: RawExpect,
    #[serde(default)]
    pub(super) lock: RawLock,
    #[serde(default)]
    pub(super) network: RawNetwork,
    #[serde(default, rename = "partition")]
    pub(super) partitions: Vec<RawPartition>,
    #[serde(default, rename = "delay")]
    pub(super) delays: Vec<RawDelay>,
    #[serde(default)]
    pub(super) notifications: RawNotifications,
    #[serde(default, rename = "node")]
    pub(super) nodes: Vec<RawNode>,
    #[serde(rename = "client")]
    pub(super) clients: Vec<RawClient>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExpect {
    pub(super) exclusion: Spanned<Verdict>,
    pub(super) plain: Verdict,
    pub(super) fenced: Verdict,
    pub(super) strict: Verdict,
    #[serde(default)]
    pub(super) cause: Option<Spanned<Cause>>,
    pub(super) fences_increase: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLock {
    #[serde(default = "RawLock::default_nodes")]
    pub(super) nodes: Spanned<usize>,
    #[serde(default = "RawLock::default_resource")]
    pub(super) resource: String,
    pub(super) ttl_ms: Option<Spanned<Millis>>,
    pub(super) drift_factor: Option<Spanned<f64>>,
    pub(super) node_timeout_ms: Option<Spanned<Millis>>,
    #[serde(default)]
    pub(super) retries: u32,
    pub(super) retry_delay_ms: Option<Millis>,
    pub(super) retry_jitter_ms: Option<Millis>,
    pub(super) max_hold_ms: Option<Spanned<Millis>>,
    pub(super) restart_quarantine_ms: Option<Quarantine>,
}

impl RawLock {
    fn default_nodes() -> Spanned<usize> {
        Spanned::new(0..0, 5)
    }
    fn default_resource() -> String {
        "resource".into()
    }
}

impl Default for RawLock {
    fn default() -> Self {
        Self {
            nodes: Self::default_nodes(),
            resource: Self::default_resource(),
            ttl_ms: None,
            drift_factor: None,
            node_timeout_ms: None,
            retries: 0,
            retry_delay_ms: None,
            retry_jitter_ms: None,
            max_hold_ms: None,
            restart_quarantine_ms: None,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLink {
    pub(super) latency_ms: Option<[Millis; 2]>,
    pub(super) loss: Option<Probability>,
    pub(super) duplicate: Option<Probability>,
    pub(super) spike_probability: Option<Probability>,
    pub(super) spike_ms: Option<Millis>,
}

/// `[notifications]`: the release notifications' faults, and `[[notifications.spoof]]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotifications {
    pub(super) loss: Option<Probability>,
    pub(super) duplicate: Option<Probability>,
    #[serde(default)]
    pub(super) extra_delay_ms: Millis,
    #[serde(default)]
    pub(super) spoof: Vec<Spanned<RawSpoof>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpoof {
    #[serde(default)]
    pub(super) start_ms: Millis,
    pub(super) end_ms: Millis,
    pub(super) every_ms: Millis,
    #[serde(default)]
    pub(super) payload: SpoofPayload,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    #[serde(flatten)]
    pub(super) default: RawLink,
    #[serde(default, rename = "link")]
    pub(super) links: Vec<RawLinkOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLinkOverride {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
    #[serde(flatten)]
    pub(super) link: RawLink,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPartition {
    #[serde(default)]
    pub(super) start_ms: Millis,
    pub(super) end_ms: Option<Millis>,
    #[serde(default)]
    pub(super) groups: Vec<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) cut: Vec<[Spanned<String>; 2]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDelay {
    pub(super) from: Spanned<String>,
    pub(super) to: Spanned<String>,
    #[serde(default)]
    pub(super) start_ms: Millis,
    pub(super) end_ms: Option<Millis>,
    pub(super) extra_ms: Millis,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStep {
    pub(super) at_ms: Millis,
    pub(super) by_ms: SignedMillis,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNodeClock {
    #[serde(default)]
    pub(super) offset_ms: SignedMillis,
    pub(super) rate_ppm: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) steps: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCrash {
    pub(super) at_ms: Millis,
    pub(super) restart_after_ms: Option<Millis>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReplica {
    pub(super) lag_ms: Millis,
    #[serde(default)]
    pub(super) wait: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFailover {
    pub(super) at_ms: Millis,
    #[serde(default)]
    pub(super) promote_after_ms: Millis,
    #[serde(default = "yes")]
    pub(super) crash_master: bool,
    pub(super) clients: Option<Vec<Spanned<String>>>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNode {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) persistence: Persistence,
    #[serde(default)]
    pub(super) clock: RawNodeClock,
    #[serde(default)]
    pub(super) crash: Vec<RawCrash>,
    pub(super) replica: Option<RawReplica>,
    pub(super) failover: Option<Spanned<RawFailover>>,
    /// How long the node has run when the scenario starts.
    pub(super) uptime_ms: Option<Millis>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClientClock {
    #[serde(default)]
    pub(super) kind: ClockKind,
    #[serde(default)]
    pub(super) offset_ms: SignedMillis,
    pub(super) rate_ppm: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) steps: Vec<Spanned<RawStep>>,
    #[serde(default)]
    pub(super) freeze_during_pauses: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPause {
    pub(super) at_ms: Millis,
    pub(super) for_ms: Millis,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClient {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) start_ms: Millis,
    #[serde(default = "one")]
    pub(super) iterations: u32,
    #[serde(default)]
    pub(super) gap_ms: Millis,
    #[serde(default)]
    pub(super) steps: Vec<Step>,
    pub(super) access_timeout_ms: Option<Millis>,
    #[serde(default)]
    pub(super) pauses: Vec<RawPause>,
    pub(super) crash_at_ms: Option<Millis>,
    #[serde(default)]
    pub(super) clock: RawClientClock,
    #[serde(default)]
    pub(super) release: ReleaseImpl,
    #[serde(default)]
    pub(super) extend: ExtendImpl,
    #[serde(default)]
    pub(super) loss_order: LossOrder,
    #[serde(default)]
    pub(super) timing: TimingImpl,
    pub(super) nodes: Option<Spanned<Vec<usize>>>,
    pub(super) retries: Option<u32>,
    pub(super) retry_delay_ms: Option<Millis>,
    pub(super) retry_jitter_ms: Option<Millis>,
    pub(super) node_timeout_ms: Option<Millis>,
    pub(super) ttl_ms: Option<Millis>,
    pub(super) restart_quarantine_ms: Option<Quarantine>,
    pub(super) keep_alive: Option<Spanned<RawKeepAlive>>,
    pub(super) supervisor: Option<Spanned<RawSupervisor>>,
}

/// `keep_alive = {}`: the lease is extended while the work runs (`with_lock`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeepAlive {
    pub(super) extend_before_ms: Option<Millis>,
    pub(super) margin_ms: Option<Millis>,
}

/// `supervisor = {}`: the work is a command supervised as `redlock run` does.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSupervisor {
    pub(super) kill_after_ms: Option<Millis>,
}

/// `restart_quarantine_ms`: a number of milliseconds, or `"off"` (the nodes are declared
/// persistent: no quarantine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "NumberOrWord")]
pub(super) struct Quarantine(pub(super) Option<Nanos>);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrWord {
    Number(f64),
    Word(String),
}

impl TryFrom<NumberOrWord> for Quarantine {
    type Error = String;
    fn try_from(value: NumberOrWord) -> Result<Self, String> {
        match value {
            NumberOrWord::Number(ms) => Millis::try_from(ms).map(|m| Self(Some(m.0))),
            NumberOrWord::Word(word) if word == "off" => Ok(Self(None)),
            NumberOrWord::Word(word) => Err(format!(
                "`{word}`: give a number of milliseconds, or \"off\" for nodes that persist every write"
            )),
        }
    }
}

fn one() -> u32 {
    1
}
