//! The TOML scenario format, and its translation into a checked [`Scenario`].
//!
//! Unknown fields are refused, and every error names the file, the line, the column and
//! the field (`client[1].steps[2]`), so a typo never silently changes what runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use redlock::core::{DriftFactor, KeepAlive, LockConfig, RestartPolicy, RetryPolicy};
use serde::Deserialize;
use toml::Spanned;

use super::{
    ClientSpec, ClockKind, Crash, DEFAULT_UPTIME, Delay, Endpoint, Expectation, ExtendImpl,
    Failover, LinkSpec, LossOrder, NetworkSpec, NotificationSpec, Partition, PartitionKind,
    Persistence, ReleaseImpl, Replication, Scenario, ServerSpec, Spoof, SpoofPayload, Step,
    TimingImpl, TokenSource, Verdict,
};
use crate::clock::ClockModel;
use crate::scenario::Cause;
use crate::time::{Nanos, from_ms};

/// A scenario that cannot be read or makes no sense.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The system's message.
        message: String,
    },
    /// The file is malformed or inconsistent.
    #[error("{file}:{line}:{column}: `{field}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The field's path, such as `client[1].steps[2]`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ScenarioError {
    pub(crate) fn io(path: &Path, e: &std::io::Error) -> Self {
        Self::Io {
            file: path.display().to_string(),
            message: e.to_string(),
        }
    }

    /// The offending field's path, for an invalid file.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Invalid { field, .. } => Some(field),
            Self::Io { .. } => None,
        }
    }

    /// The 1-based line, for an invalid file.
    pub fn line(&self) -> Option<usize> {
        match self {
            Self::Invalid { line, .. } => Some(*line),
            Self::Io { .. } => None,
        }
    }
}

/// Where in the text an error points.
struct Locator<'a> {
    file: &'a str,
    text: &'a str,
}

impl Locator<'_> {
    fn error(
        &self,
        offset: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
        ScenarioError::Invalid {
            file: self.file.to_owned(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    fn at<T>(
        &self,
        spanned: &Spanned<T>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        self.error(spanned.span().start, field, message)
    }
}

/// Parses and checks the text of a scenario file; `file` names it in errors.
///
/// # Errors
///
/// A [`ScenarioError::Invalid`] naming the line, column and field of the first problem.
pub fn parse(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let locator = Locator { file, text };
    let deserializer = toml::Deserializer::parse(text)
        .map_err(|e| locator.error(e.span().map_or(0, |s| s.start), "(syntax)", e.message()))?;
    let raw: RawScenario = serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        locator.error(inner.span().map_or(0, |s| s.start), field, inner.message())
    })?;
    raw.into_scenario(&locator)
}

/// Milliseconds: a finite, non-negative number (fractions allowed), kept as nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "f64")]
struct Millis(Nanos);

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
struct SignedMillis(i64);

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
struct Probability(f64);

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
            other => {
                return Err(format!(
                    "unknown step `{other}`; expected read, write, rmw, check, extend, crash, `sleep <ms>` or `pause <ms>`"
                ));
            }
        };
        let takes_argument = matches!(step, Self::Sleep(_) | Self::Pause(_));
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

fn default_duration() -> Millis {
    Millis(60_000 * crate::time::MS)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default = "default_seed")]
    seed: u64,
    #[serde(default = "default_duration")]
    duration_ms: Millis,
    #[serde(default)]
    max_events: Option<u64>,
    #[serde(default)]
    tokens: TokenSource,
    expect: RawExpect,
    #[serde(default)]
    lock: RawLock,
    #[serde(default)]
    network: RawNetwork,
    #[serde(default, rename = "partition")]
    partitions: Vec<RawPartition>,
    #[serde(default, rename = "delay")]
    delays: Vec<RawDelay>,
    #[serde(default)]
    notifications: RawNotifications,
    #[serde(default, rename = "node")]
    nodes: Vec<RawNode>,
    #[serde(rename = "client")]
    clients: Vec<RawClient>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    exclusion: Spanned<Verdict>,
    plain: Verdict,
    fenced: Verdict,
    strict: Verdict,
    #[serde(default)]
    cause: Option<Spanned<Cause>>,
    fences_increase: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    #[serde(default = "RawLock::default_nodes")]
    nodes: usize,
    #[serde(default = "RawLock::default_resource")]
    resource: String,
    ttl_ms: Option<Spanned<Millis>>,
    drift_factor: Option<Spanned<f64>>,
    node_timeout_ms: Option<Millis>,
    #[serde(default)]
    retries: u32,
    retry_delay_ms: Option<Millis>,
    retry_jitter_ms: Option<Millis>,
    max_hold_ms: Option<Millis>,
    restart_quarantine_ms: Option<Quarantine>,
}

impl RawLock {
    fn default_nodes() -> usize {
        5
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
struct RawLink {
    latency_ms: Option<[Millis; 2]>,
    loss: Option<Probability>,
    duplicate: Option<Probability>,
    spike_probability: Option<Probability>,
    spike_ms: Option<Millis>,
}

/// `[notifications]`: the release notifications' faults, and `[[notifications.spoof]]`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNotifications {
    loss: Option<Probability>,
    duplicate: Option<Probability>,
    #[serde(default)]
    extra_delay_ms: Millis,
    #[serde(default)]
    spoof: Vec<Spanned<RawSpoof>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpoof {
    #[serde(default)]
    start_ms: Millis,
    end_ms: Millis,
    every_ms: Millis,
    #[serde(default)]
    payload: SpoofPayload,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    #[serde(flatten)]
    default: RawLink,
    #[serde(default, rename = "link")]
    links: Vec<RawLinkOverride>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinkOverride {
    from: Spanned<String>,
    to: Spanned<String>,
    #[serde(flatten)]
    link: RawLink,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPartition {
    #[serde(default)]
    start_ms: Millis,
    end_ms: Option<Millis>,
    #[serde(default)]
    groups: Vec<Vec<Spanned<String>>>,
    #[serde(default)]
    cut: Vec<[Spanned<String>; 2]>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDelay {
    from: Spanned<String>,
    to: Spanned<String>,
    #[serde(default)]
    start_ms: Millis,
    end_ms: Option<Millis>,
    extra_ms: Millis,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at_ms: Millis,
    by_ms: SignedMillis,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNodeClock {
    #[serde(default)]
    offset_ms: SignedMillis,
    rate_ppm: Option<Spanned<i64>>,
    #[serde(default)]
    steps: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCrash {
    at_ms: Millis,
    restart_after_ms: Option<Millis>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReplica {
    lag_ms: Millis,
    #[serde(default)]
    wait: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFailover {
    at_ms: Millis,
    #[serde(default)]
    promote_after_ms: Millis,
    #[serde(default = "yes")]
    crash_master: bool,
    clients: Option<Vec<Spanned<String>>>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    #[serde(default)]
    persistence: Persistence,
    #[serde(default)]
    clock: RawNodeClock,
    #[serde(default)]
    crash: Vec<RawCrash>,
    replica: Option<RawReplica>,
    failover: Option<Spanned<RawFailover>>,
    /// How long the node has run when the scenario starts.
    uptime_ms: Option<Millis>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawClientClock {
    #[serde(default)]
    kind: ClockKind,
    #[serde(default)]
    offset_ms: SignedMillis,
    rate_ppm: Option<Spanned<i64>>,
    #[serde(default)]
    steps: Vec<Spanned<RawStep>>,
    #[serde(default)]
    freeze_during_pauses: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPause {
    at_ms: Millis,
    for_ms: Millis,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClient {
    name: Spanned<String>,
    #[serde(default)]
    start_ms: Millis,
    #[serde(default = "one")]
    iterations: u32,
    #[serde(default)]
    gap_ms: Millis,
    #[serde(default)]
    steps: Vec<Step>,
    access_timeout_ms: Option<Millis>,
    #[serde(default)]
    pauses: Vec<RawPause>,
    crash_at_ms: Option<Millis>,
    #[serde(default)]
    clock: RawClientClock,
    #[serde(default)]
    release: ReleaseImpl,
    #[serde(default)]
    extend: ExtendImpl,
    #[serde(default)]
    loss_order: LossOrder,
    #[serde(default)]
    timing: TimingImpl,
    nodes: Option<Spanned<Vec<usize>>>,
    retries: Option<u32>,
    retry_delay_ms: Option<Millis>,
    retry_jitter_ms: Option<Millis>,
    node_timeout_ms: Option<Millis>,
    ttl_ms: Option<Millis>,
    restart_quarantine_ms: Option<Quarantine>,
    keep_alive: Option<Spanned<RawKeepAlive>>,
    supervisor: Option<Spanned<RawSupervisor>>,
}

/// `keep_alive = {}`: the lease is extended while the work runs (`with_lock`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawKeepAlive {
    extend_before_ms: Option<Millis>,
    margin_ms: Option<Millis>,
}

/// `supervisor = {}`: the work is a command supervised as `redlock run` does.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSupervisor {
    kill_after_ms: Option<Millis>,
}

/// `restart_quarantine_ms`: a number of milliseconds, or `"off"` (the nodes are declared
/// persistent: no quarantine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "NumberOrWord")]
struct Quarantine(Option<Nanos>);

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

impl RawScenario {
    fn into_scenario(self, at: &Locator<'_>) -> Result<Scenario, ScenarioError> {
        let nodes = self.lock.nodes;
        if nodes == 0 || nodes > 64 {
            return Err(at.error(0, "lock.nodes", format!("{nodes} nodes; use 1 to 64")));
        }
        let base = self.lock_config(at)?;

        // Servers: primaries first, replicas after, so names resolve in one table.
        let mut servers: Vec<ServerSpec> = (0..nodes)
            .map(|i| ServerSpec {
                name: format!("n{i}"),
                clock: ClockModel::ideal(),
                persistence: Persistence::None,
                uptime: DEFAULT_UPTIME,
                crashes: Vec::new(),
                replica: None,
                failover: None,
            })
            .collect();
        let client_names: BTreeMap<String, usize> = self
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.get_ref().clone(), i))
            .collect();
        for (i, client) in self.clients.iter().enumerate() {
            let name = client.name.get_ref();
            if name.is_empty()
                || name.starts_with('n')
                    && name[1..].chars().next().is_some_and(|c| c.is_ascii_digit())
                || name == "resource"
            {
                return Err(at.at(
                    &client.name,
                    format!("client[{i}].name"),
                    format!("`{name}` is reserved or empty; name clients like `c1`"),
                ));
            }
            if client_names[name] != i {
                return Err(at.at(
                    &client.name,
                    format!("client[{i}].name"),
                    format!("`{name}` is used by two clients"),
                ));
            }
        }
        let mut seen_nodes = BTreeMap::new();
        for (k, node) in self.nodes.iter().enumerate() {
            let field = format!("node[{k}]");
            let index = parse_node_name(node.name.get_ref(), nodes).ok_or_else(|| {
                at.at(
                    &node.name,
                    format!("{field}.name"),
                    format!(
                        "`{}` is not a node; nodes are n0..n{}",
                        node.name.get_ref(),
                        nodes - 1
                    ),
                )
            })?;
            if seen_nodes.insert(index, k).is_some() {
                return Err(at.at(
                    &node.name,
                    format!("{field}.name"),
                    "this node is configured twice",
                ));
            }
            let rate = node.clock.rate_ppm.as_ref().map_or(0, |r| *r.get_ref());
            if let Some(spanned) = &node.clock.rate_ppm {
                check_rate(rate)
                    .map_err(|m| at.at(spanned, format!("{field}.clock.rate_ppm"), m))?;
            }
            let steps = node
                .clock
                .steps
                .iter()
                .map(|s| (s.at_ms.0, s.by_ms.0))
                .collect();
            servers[index].clock = ClockModel::new(node.clock.offset_ms.0, rate, steps);
            servers[index].persistence = node.persistence;
            if let Some(uptime) = node.uptime_ms {
                servers[index].uptime = uptime.0;
            }
            servers[index].crashes = node
                .crash
                .iter()
                .map(|c| Crash {
                    at: c.at_ms.0,
                    restart_after: c.restart_after_ms.map(|m| m.0),
                })
                .collect();
            if let Some(replica) = &node.replica {
                let replica_index = servers.len();
                servers.push(ServerSpec {
                    name: format!("n{index}.replica"),
                    clock: ClockModel::ideal(),
                    persistence: Persistence::None,
                    uptime: DEFAULT_UPTIME,
                    crashes: Vec::new(),
                    replica: None,
                    failover: None,
                });
                servers[index].replica = Some(Replication {
                    replica: replica_index,
                    lag: replica.lag_ms.0,
                    wait: replica.wait,
                });
            }
            if let Some(failover) = &node.failover {
                if node.replica.is_none() {
                    return Err(at.at(
                        failover,
                        format!("{field}.failover"),
                        "a failover needs a `replica`",
                    ));
                }
                let raw = failover.get_ref();
                let clients = match &raw.clients {
                    None => None,
                    Some(names) => Some(
                        names
                            .iter()
                            .enumerate()
                            .map(|(j, n)| {
                                client_names.get(n.get_ref()).copied().ok_or_else(|| {
                                    at.at(
                                        n,
                                        format!("{field}.failover.clients[{j}]"),
                                        format!("no client named `{}`", n.get_ref()),
                                    )
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                };
                servers[index].failover = Some(Failover {
                    at: raw.at_ms.0,
                    promote_after: raw.promote_after_ms.0,
                    crash_master: raw.crash_master,
                    clients,
                });
            }
        }

        let names = Names {
            nodes,
            servers: &servers,
            clients: &client_names,
        };
        let network = self.network(at, &names)?;
        let notifications = self.notifications(at)?;

        let base = base.with_fencing(self.tokens == TokenSource::QuorumMinted);
        let mut clients = Vec::with_capacity(self.clients.len());
        let quarantine = self.lock.restart_quarantine_ms;
        for (i, raw) in self.clients.into_iter().enumerate() {
            clients.push(raw.into_spec(i, &base, nodes, quarantine, at)?);
        }
        if clients.is_empty() {
            return Err(at.error(0, "client", "at least one [[client]] is required"));
        }

        let expect = Expectation {
            exclusion: *self.expect.exclusion.get_ref(),
            plain: self.expect.plain,
            fenced: self.expect.fenced,
            strict: self.expect.strict,
            cause: self.expect.cause.as_ref().map(|c| *c.get_ref()),
            fences_increase: self.expect.fences_increase,
        };
        if expect.exclusion == Verdict::PreventedByFencing {
            return Err(at.at(
                &self.expect.exclusion,
                "expect.exclusion",
                "mutual exclusion is SAFE or VIOLATED: fencing protects the resource, not the lock",
            ));
        }
        let all_safe = [expect.exclusion, expect.plain, expect.fenced, expect.strict]
            .iter()
            .all(|v| *v == Verdict::Safe);
        match (&self.expect.cause, all_safe) {
            (None, false) => {
                return Err(at.error(
                    0,
                    "expect.cause",
                    "a scenario that expects anything but SAFE must name the cause (A, B or C)",
                ));
            }
            (Some(cause), true) => {
                return Err(at.at(
                    cause,
                    "expect.cause",
                    "a scenario that expects SAFE everywhere has no cause",
                ));
            }
            (Some(cause), false)
                if expect.exclusion == Verdict::Violated && *cause.get_ref() == Cause::B =>
            {
                return Err(at.at(
                    cause,
                    "expect.cause",
                    "an overlap of windows is never cause B (a pause or a delay does not lengthen what a holder believes): A or C",
                ));
            }
            _ => {}
        }

        Ok(Scenario {
            name: self.name,
            description: self.description,
            source: at.file.to_owned(),
            seed: self.seed,
            duration: self.duration_ms.0,
            max_events: self.max_events.unwrap_or(20_000_000),
            tokens: self.tokens,
            expect,
            resource: self.lock.resource,
            nodes,
            network,
            notifications,
            servers,
            clients,
        })
    }

    fn notifications(&self, at: &Locator<'_>) -> Result<NotificationSpec, ScenarioError> {
        let raw = &self.notifications;
        let mut spoofs = Vec::with_capacity(raw.spoof.len());
        for (k, spoof) in raw.spoof.iter().enumerate() {
            let field = format!("notifications.spoof[{k}]");
            let span = spoof.span();
            let spoof = spoof.get_ref();
            if spoof.every_ms.0 == 0 {
                return Err(at.error(span.start, format!("{field}.every_ms"), "must be above 0"));
            }
            if spoof.end_ms.0 <= spoof.start_ms.0 {
                return Err(at.error(
                    span.start,
                    format!("{field}.end_ms"),
                    "must be after start_ms",
                ));
            }
            spoofs.push(Spoof {
                start: spoof.start_ms.0,
                end: spoof.end_ms.0,
                every: spoof.every_ms.0,
                payload: spoof.payload,
            });
        }
        Ok(NotificationSpec {
            loss: raw.loss.map_or(0.0, |p| p.0),
            duplicate: raw.duplicate.map_or(0.0, |p| p.0),
            extra_delay: raw.extra_delay_ms.0,
            spoofs,
        })
    }

    fn lock_config(&self, at: &Locator<'_>) -> Result<LockConfig, ScenarioError> {
        let lock = &self.lock;
        let mut config = LockConfig::new(lock.nodes).with_retry(RetryPolicy::new(
            lock.retries,
            lock.retry_delay_ms
                .map_or(Duration::from_millis(50), |m| Duration::from_nanos(m.0)),
            lock.retry_jitter_ms
                .map_or(Duration::from_millis(10), |m| Duration::from_nanos(m.0)),
        ));
        if let Some(ttl) = &lock.ttl_ms {
            config = config.with_ttl(Duration::from_nanos(ttl.get_ref().0));
        }
        if let Some(factor) = &lock.drift_factor {
            let drift = DriftFactor::from_f64(*factor.get_ref()).ok_or_else(|| {
                at.at(
                    factor,
                    "lock.drift_factor",
                    "must be a finite number in [0, 1)",
                )
            })?;
            config = config.with_drift_factor(drift);
        }
        if let Some(timeout) = lock.node_timeout_ms {
            config = config.with_node_timeout(Duration::from_nanos(timeout.0));
        }
        if let Some(max_hold) = lock.max_hold_ms {
            config = config.with_max_hold(Duration::from_nanos(max_hold.0));
        }
        // The simulator runs the configurations the client accepts: the same validation.
        config.validate().map_err(|e| {
            let offset = lock.ttl_ms.as_ref().map_or(0, |t| t.span().start);
            at.error(offset, format!("lock.{}", e.field()), e.reason())
        })?;
        Ok(config)
    }

    fn network(&self, at: &Locator<'_>, names: &Names<'_>) -> Result<NetworkSpec, ScenarioError> {
        let mut network = NetworkSpec {
            default: self.network.default.to_spec(&LinkSpec::default()),
            ..NetworkSpec::default()
        };
        for (k, link) in self.network.links.iter().enumerate() {
            let field = format!("network.link[{k}]");
            let from = names.resolve(&link.from, at, &format!("{field}.from"))?;
            let to = names.resolve(&link.to, at, &format!("{field}.to"))?;
            network
                .links
                .push((from, to, link.link.to_spec(&network.default)));
        }
        for (k, partition) in self.partitions.iter().enumerate() {
            let field = format!("partition[{k}]");
            let end = partition.end_ms.map_or(Nanos::MAX, |m| m.0);
            let kind = match (partition.groups.is_empty(), partition.cut.is_empty()) {
                (false, true) => PartitionKind::Groups(
                    partition
                        .groups
                        .iter()
                        .enumerate()
                        .map(|(g, group)| {
                            group
                                .iter()
                                .enumerate()
                                .map(|(m, name)| {
                                    names.resolve(name, at, &format!("{field}.groups[{g}][{m}]"))
                                })
                                .collect::<Result<Vec<_>, _>>()
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                ),
                (true, false) => PartitionKind::Cut(
                    partition
                        .cut
                        .iter()
                        .enumerate()
                        .map(|(c, [from, to])| {
                            Ok((
                                names.resolve(from, at, &format!("{field}.cut[{c}][0]"))?,
                                names.resolve(to, at, &format!("{field}.cut[{c}][1]"))?,
                            ))
                        })
                        .collect::<Result<Vec<_>, ScenarioError>>()?,
                ),
                _ => return Err(at.error(0, field, "give either `groups` or `cut`")),
            };
            network.partitions.push(Partition {
                start: partition.start_ms.0,
                end,
                kind,
            });
        }
        for (k, delay) in self.delays.iter().enumerate() {
            let field = format!("delay[{k}]");
            network.delays.push(Delay {
                from: names.resolve(&delay.from, at, &format!("{field}.from"))?,
                to: names.resolve(&delay.to, at, &format!("{field}.to"))?,
                start: delay.start_ms.0,
                end: delay.end_ms.map_or(Nanos::MAX, |m| m.0),
                extra: delay.extra_ms.0,
            });
        }
        Ok(network)
    }
}

impl RawLink {
    fn to_spec(&self, base: &LinkSpec) -> LinkSpec {
        let mut spec = base.clone();
        if let Some([min, max]) = self.latency_ms {
            spec.latency = (min.0.min(max.0), min.0.max(max.0));
        }
        if let Some(p) = self.loss {
            spec.loss = p.0;
        }
        if let Some(p) = self.duplicate {
            spec.duplicate = p.0;
        }
        if let Some(p) = self.spike_probability {
            spec.spike_probability = p.0;
        }
        if let Some(ms) = self.spike_ms {
            spec.spike = ms.0;
        }
        spec
    }
}

impl RawClient {
    fn into_spec(
        self,
        i: usize,
        base: &LockConfig,
        nodes: usize,
        quarantine: Option<Quarantine>,
        at: &Locator<'_>,
    ) -> Result<ClientSpec, ScenarioError> {
        let field = format!("client[{i}]");
        let rate = self.clock.rate_ppm.as_ref().map_or(0, |r| *r.get_ref());
        if let Some(spanned) = &self.clock.rate_ppm {
            check_rate(rate).map_err(|m| at.at(spanned, format!("{field}.clock.rate_ppm"), m))?;
        }
        let steps = self
            .clock
            .steps
            .iter()
            .map(|s| (s.get_ref().at_ms.0, s.get_ref().by_ms.0))
            .collect();
        let subset: Vec<usize> = match &self.nodes {
            None => (0..nodes).collect(),
            Some(list) => {
                let subset = list.get_ref().clone();
                let mut sorted = subset.clone();
                sorted.sort_unstable();
                sorted.dedup();
                if subset.is_empty()
                    || sorted.len() != subset.len()
                    || subset.iter().any(|&n| n >= nodes)
                {
                    return Err(at.at(
                        list,
                        format!("{field}.nodes"),
                        format!("must list distinct node indices below {nodes}"),
                    ));
                }
                subset
            }
        };
        let retry = RetryPolicy::new(
            self.retries.unwrap_or(base.retry().retries()),
            self.retry_delay_ms
                .map_or(base.retry().delay(), |m| Duration::from_nanos(m.0)),
            self.retry_jitter_ms
                .map_or(base.retry().jitter(), |m| Duration::from_nanos(m.0)),
        );
        let mut config = base.clone().with_nodes(subset.len()).with_retry(retry);
        if let Some(ttl) = self.ttl_ms {
            config = config.with_ttl(Duration::from_nanos(ttl.0));
        }
        if let Some(timeout) = self.node_timeout_ms {
            config = config.with_node_timeout(Duration::from_nanos(timeout.0));
        }
        config
            .validate()
            .map_err(|e| at.at(&self.name, format!("{field}.{}", e.field()), e.reason()))?;
        // As the client's builder: a quarantine as long as the TTL unless set.
        let restart = match self.restart_quarantine_ms.or(quarantine) {
            None => RestartPolicy::Quarantine(config.ttl()),
            Some(Quarantine(Some(ms))) => RestartPolicy::Quarantine(Duration::from_nanos(ms)),
            Some(Quarantine(None)) => RestartPolicy::Persistent,
        };
        let (keep_alive, supervisor) = self.lease_keeping(&field, &config, at)?;
        Ok(ClientSpec {
            name: self.name.into_inner(),
            start: self.start_ms.0,
            iterations: self.iterations,
            gap: self.gap_ms.0,
            steps: self.steps,
            access_timeout: self
                .access_timeout_ms
                .map_or(1_000 * crate::time::MS, |m| m.0),
            pauses: self
                .pauses
                .iter()
                .map(|p| (p.at_ms.0, p.for_ms.0))
                .collect(),
            crash_at: self.crash_at_ms.map(|m| m.0),
            clock: ClockModel::new(self.clock.offset_ms.0, rate, steps),
            clock_kind: self.clock.kind,
            freeze_during_pauses: self.clock.freeze_during_pauses,
            release: self.release,
            extend: self.extend,
            loss_order: self.loss_order,
            timing: self.timing,
            nodes: subset,
            config,
            restart,
            keep_alive,
            supervisor,
        })
    }

    /// The keep-alive policy and the supervisor's grace period, checked against the rest of
    /// the client: a kept-alive lease is extended by the keep-alive alone, with the script.
    fn lease_keeping(
        &self,
        field: &str,
        config: &LockConfig,
        at: &Locator<'_>,
    ) -> Result<(Option<KeepAlive>, Option<Duration>), ScenarioError> {
        let ms = |m: Millis| Duration::from_nanos(m.0);
        let mut keep_alive = self.keep_alive.as_ref().map(|raw| {
            let raw = raw.get_ref();
            let mut policy = KeepAlive::default();
            if let Some(before) = raw.extend_before_ms {
                policy = policy.extend_before(ms(before));
            }
            if let Some(margin) = raw.margin_ms {
                policy = policy.loss_margin(ms(margin));
            }
            policy
        });
        let supervisor = match &self.supervisor {
            None => None,
            Some(raw) => {
                let quarter = config.ttl() / 4;
                let grace = raw
                    .get_ref()
                    .kill_after_ms
                    .map_or_else(|| quarter.min(Duration::from_secs(10)), ms);
                if grace > quarter {
                    return Err(at.at(
                        raw,
                        format!("{field}.supervisor.kill_after_ms"),
                        "more than a quarter of the ttl (as `redlock run` refuses it)",
                    ));
                }
                if self.clock.freeze_during_pauses {
                    return Err(at.at(
                        raw,
                        format!("{field}.supervisor"),
                        "a supervised client's pauses stop the supervisor alone, not the host's clock; drop `freeze_during_pauses`",
                    ));
                }
                // As `redlock run`: extend at half-life.
                keep_alive
                    .get_or_insert_with(|| KeepAlive::default().extend_before(config.ttl() / 2));
                Some(grace)
            }
        };
        if keep_alive.is_some() {
            let spanned = self
                .keep_alive
                .as_ref()
                .map(|k| k.span())
                .or_else(|| self.supervisor.as_ref().map(|s| s.span()))
                .unwrap_or_default();
            let refuse =
                |why: &str| at.error(spanned.start, format!("{field}.keep_alive"), why.to_owned());
            if self.steps.contains(&Step::Extend) {
                return Err(refuse(
                    "a kept-alive lease is extended by the keep-alive; remove the `extend` steps",
                ));
            }
            if self.extend != ExtendImpl::Script {
                return Err(refuse(
                    "the keep-alive extends with the script; it cannot be combined with `extend = \"reacquire\"`",
                ));
            }
        }
        Ok((keep_alive, supervisor))
    }
}

fn check_rate(ppm: i64) -> Result<(), String> {
    if (-500_000..=1_000_000).contains(&ppm) {
        Ok(())
    } else {
        Err(format!(
            "{ppm} ppm; a clock rate error must lie in [-500000, 1000000] ppm"
        ))
    }
}

fn parse_node_name(name: &str, nodes: usize) -> Option<usize> {
    let index: usize = name.strip_prefix('n')?.parse().ok()?;
    (index < nodes && name == format!("n{index}")).then_some(index)
}

/// Resolves process names: `c1` (clients), `n0` (nodes), `n0.replica`, `resource`.
struct Names<'a> {
    nodes: usize,
    servers: &'a [ServerSpec],
    clients: &'a BTreeMap<String, usize>,
}

impl Names<'_> {
    fn resolve(
        &self,
        name: &Spanned<String>,
        at: &Locator<'_>,
        field: &str,
    ) -> Result<Endpoint, ScenarioError> {
        let text = name.get_ref();
        if text == "resource" {
            return Ok(Endpoint::Resource);
        }
        if let Some(&client) = self.clients.get(text) {
            return Ok(Endpoint::Client(client));
        }
        if let Some(index) = self.servers.iter().position(|s| s.name == *text) {
            return Ok(Endpoint::Server(index));
        }
        Err(at.at(
            name,
            field,
            format!(
                "`{text}` names no process; use a client name, `resource`, n0..n{} or `nX.replica`",
                self.nodes - 1
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "minimal"
[expect]
exclusion = "SAFE"
plain = "SAFE"
fenced = "SAFE"
strict = "SAFE"
[[client]]
name = "c1"
steps = ["write"]
"#;

    #[test]
    fn minimal_file_gets_the_defaults() {
        let scenario = parse(MINIMAL, "minimal.toml").unwrap();
        assert_eq!(scenario.nodes, 5);
        assert_eq!(scenario.servers.len(), 5);
        assert_eq!(scenario.clients[0].nodes, vec![0, 1, 2, 3, 4]);
        assert_eq!(scenario.clients[0].steps, vec![Step::Write]);
    }

    fn error(text: &str) -> ScenarioError {
        parse(text, "bad.toml").unwrap_err()
    }

    #[test]
    fn errors_name_line_and_field() {
        let e = error(&MINIMAL.replace("steps = [\"write\"]", "steps = [\"write\", \"slep 5\"]"));
        assert_eq!(e.line(), Some(10), "{e}");
        assert_eq!(e.field(), Some("client[0].steps[1]"), "{e}");
        assert!(e.to_string().contains("unknown step `slep`"), "{e}");

        let e = error(&MINIMAL.replace("name = \"c1\"", "name = \"c1\"\nstart = 5"));
        assert_eq!(e.line(), Some(10), "{e}");
        assert!(e.to_string().contains("unknown field `start`"), "{e}");

        let e = error(&format!(
            "{MINIMAL}\n[[partition]]\ngroups = [[\"c1\", \"n9\"]]\n"
        ));
        assert_eq!(e.field(), Some("partition[0].groups[0][1]"), "{e}");
        assert_eq!(e.line(), Some(13), "{e}");

        let e = error(&MINIMAL.replace("plain = \"SAFE\"", "plain = \"VIOLATED\""));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");

        let e = error(&format!(
            "{MINIMAL}\n[lock]\nttl_ms = 100\nnode_timeout_ms = 50\n"
        ));
        assert_eq!(e.field(), Some("lock.node_timeout"), "{e}");

        let e = error("name = \"x\"\n[expect\n");
        assert_eq!(e.line(), Some(2), "{e}");
    }

    #[test]
    fn the_mutual_exclusion_expectation_is_required_and_checked() {
        let e = error(&MINIMAL.replace("exclusion = \"SAFE\"\n", ""));
        assert!(e.to_string().contains("missing field `exclusion`"), "{e}");

        let e = error(&MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"PREVENTED_BY_FENCING\"",
        ));
        assert_eq!(e.field(), Some("expect.exclusion"), "{e}");
        assert_eq!(e.line(), Some(4), "{e}");

        // An overlap alone, with the resource untouched, still needs its cause...
        let e = error(&MINIMAL.replace("exclusion = \"SAFE\"", "exclusion = \"VIOLATED\""));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");
        // ...which is never B.
        let e = error(&MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"VIOLATED\"\ncause = \"B\"",
        ));
        assert_eq!(e.field(), Some("expect.cause"), "{e}");
        assert!(e.to_string().contains("never cause B"), "{e}");
        let ok = MINIMAL.replace(
            "exclusion = \"SAFE\"",
            "exclusion = \"VIOLATED\"\ncause = \"A\"",
        );
        assert_eq!(
            parse(&ok, "ok.toml").unwrap().expect.exclusion,
            Verdict::Violated
        );
    }

    #[test]
    fn bad_rates_are_refused() {
        let text = MINIMAL.replace(
            "steps = [\"write\"]",
            "steps = [\"write\"]\nclock = { rate_ppm = -2000000 }",
        );
        let e = error(&text);
        assert_eq!(e.field(), Some("client[0].clock.rate_ppm"), "{e}");
        assert_eq!(e.line(), Some(11), "{e}");
    }
}
