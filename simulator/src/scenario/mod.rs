//! Scenarios: what runs (nodes, clients, workloads), what goes wrong (faults), and what the
//! checker is expected to say. Read from TOML files (see [`file`]) or built in code.
//!
//! A file is read in three steps, each in its own file: `raw.rs` mirrors the TOML format,
//! `file.rs` translates it into a checked [`Scenario`], and `error.rs` points each error at
//! its line, column and field. The scenarios shipped with the crate are embedded in it
//! ([`catalogue`]).

pub mod catalogue;
pub(crate) mod error;
mod file;
mod raw;

use std::fmt;
use std::path::Path;

use std::time::Duration;

use redlock_core::{KeepAlive, LockConfig, RestartPolicy};
use serde::{Deserialize, Serialize};

use crate::time::Nanos;
use crate::time::clock::ClockModel;

pub use error::ScenarioError;
pub use file::parse;

/// One process of the simulated world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// A client, by index.
    Client(usize),
    /// A Redis server, by index: primaries `0..nodes`, then replicas.
    Server(usize),
    /// The protected resource.
    Resource,
}

/// A verdict of the judge: on mutual exclusion (`SAFE` or `VIOLATED`), or on one resource
/// mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Verdict {
    /// Mutual exclusion: no two windows overlapped. A resource mode: no lease overlap touched
    /// the resource, and its history is in lease order.
    #[serde(rename = "SAFE")]
    Safe,
    /// Mutual exclusion: two holders' windows overlapped. A resource mode: the resource
    /// applied an access out of lease order, or two holders used it at once.
    #[serde(rename = "VIOLATED")]
    Violated,
    /// Something went wrong at the lock level, but the token check kept the resource in
    /// lease order.
    #[serde(rename = "PREVENTED_BY_FENCING")]
    PreventedByFencing,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "SAFE",
            Self::Violated => "VIOLATED",
            Self::PreventedByFencing => "PREVENTED_BY_FENCING",
        })
    }
}

/// Why something went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cause {
    /// Redlock's own claim failed: validity windows overlapped in true time because a node
    /// forgot a key or a clock misbehaved.
    A,
    /// The usage contract failed: a holder acted after its validity (pause, delayed message,
    /// long work). Never the cause of an overlap of windows: a window is what its holder
    /// believes, which neither a pause nor a delay lengthens.
    B,
    /// An implementation fault of the client (plain `DEL`, extend as re-acquire, wall-clock
    /// elapsed time, a late start time, a clock that stops while the process is suspended).
    C,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
        })
    }
}

/// The three ways the protected resource can treat tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ResourceMode {
    /// No token check.
    #[serde(rename = "plain")]
    Plain,
    /// Writes carrying a token below the highest seen are rejected; reads are not checked.
    #[serde(rename = "fenced")]
    Fenced,
    /// Every access is checked and registers its token.
    #[serde(rename = "strict")]
    Strict,
}

impl ResourceMode {
    /// All three, in report order.
    pub const ALL: [Self; 3] = [Self::Plain, Self::Fenced, Self::Strict];
}

impl fmt::Display for ResourceMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plain => "plain",
            Self::Fenced => "fenced",
            Self::Strict => "strict",
        })
    }
}

/// The expected verdicts of a scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectation {
    /// Mutual exclusion: `Violated` when any two holders' windows overlap, else `Safe`.
    pub exclusion: Verdict,
    /// With an unfenced resource.
    pub plain: Verdict,
    /// With write-only fencing.
    pub fenced: Verdict,
    /// With strict fencing.
    pub strict: Verdict,
    /// The cause, when any of the four verdicts is not `SAFE`.
    pub cause: Option<Cause>,
    /// Whether fencing tokens must strictly increase with each lease (`Some(true)`), must
    /// repeat or regress at least once (`Some(false)`), or are not checked.
    pub fences_increase: Option<bool>,
}

impl Expectation {
    /// The expectation of a report read back from JSON, which does not carry one: every
    /// verdict `SAFE`, no cause, tokens unchecked.
    pub fn unknown() -> Self {
        Self {
            exclusion: Verdict::Safe,
            plain: Verdict::Safe,
            fenced: Verdict::Safe,
            strict: Verdict::Safe,
            cause: None,
            fences_increase: None,
        }
    }

    /// The expected verdict in `mode`.
    pub fn verdict(&self, mode: ResourceMode) -> Verdict {
        match mode {
            ResourceMode::Plain => self.plain,
            ResourceMode::Fenced => self.fenced,
            ResourceMode::Strict => self.strict,
        }
    }
}

/// Where fencing tokens come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// An idealized linearizable counter, incremented at every grant (a consensus system).
    #[default]
    Linearizable,
    /// After the grant, `INCR` on every node of the lease; the token is the largest value of
    /// a quorum of replies. Redis-derived and therefore as forgetful as the nodes.
    RedisCounter,
    /// The core's two-phase fenced acquisition (`LockConfig::with_fencing`): read the
    /// counters with the `SET NX`, raise them to the largest plus one on a quorum, then grant.
    /// The same code the client ships.
    QuorumMinted,
}

/// Latency, loss, duplication and spikes of one directed link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    /// One-way latency, uniform in `[min, max]`.
    pub latency: (Nanos, Nanos),
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message takes `spike` longer.
    pub spike_probability: f64,
    /// The extra latency of a spike.
    pub spike: Nanos,
}

impl Default for LinkSpec {
    fn default() -> Self {
        Self {
            latency: (500_000, 1_500_000),
            loss: 0.0,
            duplicate: 0.0,
            spike_probability: 0.0,
            spike: 0,
        }
    }
}

/// A network partition active during `[start, end)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Start, true time.
    pub start: Nanos,
    /// End, true time.
    pub end: Nanos,
    /// Which links are cut.
    pub kind: PartitionKind,
}

/// Which links a partition cuts.
#[derive(Clone, Debug, PartialEq)]
pub enum PartitionKind {
    /// Processes talk only within a group; a process in several groups talks to all of
    /// them. Processes named in no group are unaffected.
    Groups(Vec<Vec<Endpoint>>),
    /// These directed links are cut (a one-way partition when only one direction is listed).
    Cut(Vec<(Endpoint, Endpoint)>),
}

/// Extra latency for messages sent on one link during `[start, end)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Delay {
    /// Sender.
    pub from: Endpoint,
    /// Receiver.
    pub to: Endpoint,
    /// Start, true time.
    pub start: Nanos,
    /// End, true time.
    pub end: Nanos,
    /// Added latency.
    pub extra: Nanos,
}

/// The network of a scenario.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetworkSpec {
    /// Every link not overridden.
    pub default: LinkSpec,
    /// Directed per-link overrides.
    pub links: Vec<(Endpoint, Endpoint, LinkSpec)>,
    /// Partitions.
    pub partitions: Vec<Partition>,
    /// Scripted delays.
    pub delays: Vec<Delay>,
}

/// The release notifications: what the release script `PUBLISH`es on the lock key's channel
/// (the released token), sent to every client over a subscription per client and node, with
/// their faults, and messages that others publish on the same channel.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NotificationSpec {
    /// The probability that a notification is lost (the subscription was down).
    pub loss: f64,
    /// The probability that a notification arrives twice.
    pub duplicate: f64,
    /// How much later than the replies on the same link a notification arrives.
    pub extra_delay: Nanos,
    /// Messages published by others.
    pub spoofs: Vec<Spoof>,
}

/// Someone else publishing on every node's channel of the lock key, from `start` to `end`,
/// one message per node every `every`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spoof {
    /// From, true time.
    pub start: Nanos,
    /// Until, true time.
    pub end: Nanos,
    /// The period.
    pub every: Nanos,
    /// What is published.
    pub payload: SpoofPayload,
}

/// What a spoofer publishes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpoofPayload {
    /// Something that is no token (another application's message).
    #[default]
    Junk,
    /// The token the key holds on that node now (a replay by someone who can read the key).
    Holder,
}

/// What a crash loses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Nothing survives a crash.
    #[default]
    None,
    /// The state of the last once-a-second fsync survives.
    Everysec,
    /// Every acknowledged write survives (`appendfsync always`).
    Always,
}

/// A crash, and the restart that may follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crash {
    /// When the server dies, true time.
    pub at: Nanos,
    /// How long it stays down; `None` for ever.
    pub restart_after: Option<Nanos>,
}

/// A replica's promotion in place of its master.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failover {
    /// When replication stops (the master is cut off or dies), true time.
    pub at: Nanos,
    /// How long until the replica is promoted and clients are sent to it.
    pub promote_after: Nanos,
    /// Whether the master crashes at `at` (else it keeps serving the clients not moved).
    pub crash_master: bool,
    /// The clients moved to the promoted replica; `None` for all.
    pub clients: Option<Vec<usize>>,
}

/// How long every server has been running when a scenario starts, unless it says
/// otherwise: a day, so that only a restart in the scenario makes a node young.
pub const DEFAULT_UPTIME: Nanos = 24 * 3_600_000 * crate::time::MS;

/// One Redis server.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerSpec {
    /// `n0`…, or `n0.replica`.
    pub name: String,
    /// Its wall clock, by which it expires keys.
    pub clock: ClockModel,
    /// What survives a crash.
    pub persistence: Persistence,
    /// How long it had been running when the scenario starts (a day by default: only a
    /// restart in the scenario makes a node young).
    pub uptime: Nanos,
    /// Crashes.
    pub crashes: Vec<Crash>,
    /// The replica of this server, its replication lag, and whether writes wait for it
    /// (`WAIT 1`) before they are acknowledged.
    pub replica: Option<Replication>,
    /// A failover of this node to its replica.
    pub failover: Option<Failover>,
}

/// Asynchronous replication from a master to its replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replication {
    /// The replica's server index.
    pub replica: usize,
    /// How long a write takes to reach the replica.
    pub lag: Nanos,
    /// Acknowledge writes only once the replica has them (`WAIT 1`).
    pub wait: bool,
}

/// One step of a client's critical section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Read the resource and wait for the answer.
    Read,
    /// Write the resource and wait for the answer.
    Write,
    /// Read, then write a value derived from what was read.
    ReadModifyWrite,
    /// Wait this long on the client's clock.
    Sleep(Nanos),
    /// Abort the critical section (and release) unless the lease is still valid.
    Check,
    /// Extend the lease; abort the critical section if that fails.
    Extend,
    /// Stop the world for this long (true time): a GC pause or a suspended VM.
    Pause(Nanos),
    /// The client dies here.
    Crash,
    /// The owner of a kept-alive lease drops its handle (an early return, a panic in the
    /// task that owned it) while the work runs on for this long (client clock), then stops.
    /// The keeper is told that the handle was dropped; nobody can tell it when the work
    /// stops.
    DropHandle(Nanos),
}

/// Which clock a client measures time with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockKind {
    /// A monotonic clock: rate errors apply, steps do not (the correct client).
    #[default]
    Monotonic,
    /// The wall clock: steps apply too (an implementation fault).
    Wall,
}

/// How a client releases (implementation variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReleaseImpl {
    /// Compare-and-delete (correct).
    #[default]
    Script,
    /// A plain `DEL`, whoever holds the key (an implementation fault).
    PlainDel,
}

/// What a kept-alive client does first when its lease is lost (implementation variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossOrder {
    /// The work stops, then the lease is released (the core's keeper; correct).
    #[default]
    StopFirst,
    /// The lease is released at the loss while the work finishes its step (an
    /// implementation fault: the order the client had before the keeper decided it).
    ReleaseFirst,
    /// A dropped handle (a `drop-handle` step) counts as the work's stop, and the lease is
    /// released at once while the work runs on (an implementation fault: what the client
    /// did before the keeper decided what a dropped handle means).
    DropReleases,
}

/// How a client extends (implementation variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExtendImpl {
    /// Compare-and-`PEXPIRE`, refused after the lease expired (correct).
    #[default]
    Script,
    /// Re-`SET` the key when it is missing, even after the lease expired (an implementation
    /// fault).
    Reacquire,
}

/// How a client measures a round (implementation variants).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TimingImpl {
    /// Elapsed time from before the first `SET` (correct).
    #[default]
    Correct,
    /// The round's elapsed time is ignored: validity counts from the decision.
    NoElapsedCheck,
    /// The start time is taken when the first reply arrives.
    StartAfterFirstReply,
}

/// One client process and its workload.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSpec {
    /// Its name (`c1`).
    pub name: String,
    /// When it starts, true time.
    pub start: Nanos,
    /// How many acquisitions it makes.
    pub iterations: u32,
    /// Wait between a release and the next acquisition, on its clock.
    pub gap: Nanos,
    /// The critical section.
    pub steps: Vec<Step>,
    /// How long it waits for the resource's answer, on its clock.
    pub access_timeout: Nanos,
    /// Stop-the-world pauses `(start, length)` in true time.
    pub pauses: Vec<(Nanos, Nanos)>,
    /// When it crashes, true time.
    pub crash_at: Option<Nanos>,
    /// Its host's wall clock. A monotonic client sees only its rate error; a client that
    /// reads the wall clock sees its steps too.
    pub clock: ClockModel,
    /// Monotonic or wall clock.
    pub clock_kind: ClockKind,
    /// Whether its clock stands still while it is paused.
    pub freeze_during_pauses: bool,
    /// Release variant.
    pub release: ReleaseImpl,
    /// Extension variant.
    pub extend: ExtendImpl,
    /// The order of stop and release after a loss.
    pub loss_order: LossOrder,
    /// Timing variant.
    pub timing: TimingImpl,
    /// The node addresses it locks on (all by default; one for a single-node lock).
    pub nodes: Vec<usize>,
    /// Its lock parameters (`nodes` equals the length of `nodes` above).
    pub config: LockConfig,
    /// How it treats nodes that may have restarted: the restart quarantine (by default as
    /// long as its TTL, as the client's builder does) or none.
    pub restart: RestartPolicy,
    /// Whether its lease is kept alive while the work runs, and how (`with_lock`).
    pub keep_alive: Option<KeepAlive>,
    /// A supervisor (the `redlock` command) with this grace period between `SIGTERM` and
    /// `SIGKILL`: the work is then a command of its own that keeps running while the
    /// supervisor is paused. Implies keep-alive.
    pub supervisor: Option<Duration>,
}

impl ClientSpec {
    /// Whether this client carries an implementation fault (cause C). A restart quarantine
    /// switched off is not one: it is the algorithm as described, without the client's
    /// extra rule.
    pub fn is_faulty(&self) -> bool {
        self.clock_kind == ClockKind::Wall
            || self.freeze_during_pauses
            || self.release != ReleaseImpl::Script
            || self.extend != ExtendImpl::Script
            || self.loss_order != LossOrder::StopFirst
            || self.timing != TimingImpl::Correct
    }
}

/// A complete scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// What it shows and why the expectation holds.
    pub description: String,
    /// The file it came from (for messages), or a label.
    pub source: String,
    /// The default seed.
    pub seed: u64,
    /// How long the simulation may run, true time.
    pub duration: Nanos,
    /// The most events a run may process before it is stopped with an error.
    pub max_events: u64,
    /// Where fencing tokens come from.
    pub tokens: TokenSource,
    /// The expected verdicts.
    pub expect: Expectation,
    /// The resource name.
    pub resource: String,
    /// The number of node addresses.
    pub nodes: usize,
    /// The network.
    pub network: NetworkSpec,
    /// The release notifications.
    pub notifications: NotificationSpec,
    /// Every server: primaries `0..nodes`, then replicas.
    pub servers: Vec<ServerSpec>,
    /// Every client.
    pub clients: Vec<ClientSpec>,
}

impl Scenario {
    /// Reads and checks a scenario file, or a scenario of the embedded catalogue named
    /// `catalogue:FILE` ([`crate::scenario::catalogue`]).
    ///
    /// # Errors
    ///
    /// A [`ScenarioError`] naming the file, line, column and field.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        if let Some((file, text)) = catalogue::name_of(path).and_then(catalogue::find) {
            return parse(text, &format!("{}{file}", catalogue::PREFIX));
        }
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError::io(path, &e))?;
        parse(&text, &path.display().to_string())
    }

    /// The same scenario with fencing tokens from `tokens` (every client's acquisition
    /// switches to the fenced two-phase round for `quorum-minted`). The expected verdicts are
    /// the file's, which were written for its own token source: compare with care.
    #[must_use]
    pub fn with_tokens(mut self, tokens: TokenSource) -> Self {
        self.tokens = tokens;
        for client in &mut self.clients {
            client.config = client
                .config
                .clone()
                .with_fencing(tokens == TokenSource::QuorumMinted);
        }
        self
    }

    /// Whether any client carries an implementation fault.
    pub fn has_faulty_client(&self) -> bool {
        self.clients.iter().any(ClientSpec::is_faulty)
    }

    /// The display name of an endpoint.
    pub fn endpoint_name(&self, endpoint: Endpoint) -> String {
        match endpoint {
            Endpoint::Client(i) => self
                .clients
                .get(i)
                .map_or_else(|| format!("c?{i}"), |c| c.name.clone()),
            Endpoint::Server(i) => self
                .servers
                .get(i)
                .map_or_else(|| format!("n?{i}"), |s| s.name.clone()),
            Endpoint::Resource => "resource".into(),
        }
    }
}
