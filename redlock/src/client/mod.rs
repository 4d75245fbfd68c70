//! The async client: drives the [`core`](crate::core) machines over real Redis nodes.
//!
//! - One connection per node (the client's own over TCP, redis-rs' multiplexed one over TLS
//!   or a Unix socket), opened on first use and replaced by the client itself when it breaks
//!   (not redis-rs' `ConnectionManager`): every new connection is identified before it
//!   carries anything but a release, so that a restarted node cannot vote unseen (see the core's [`Eligibility`](redlock_core::Eligibility)).
//! - Every node is asked in parallel; each request is bounded by the per-node timeout, so a
//!   dead or paused node costs at most that timeout.
//! - A round is decided as soon as a quorum agrees (or cannot); requests still in flight run
//!   to completion in the background and anything they set is released in order.
//! - Tokens are 128 bits from the operating system's CSPRNG, fresh for every round.
//!
//! # Cancel safety
//!
//! Dropping an [`acquire`](Redlock::acquire) future mid-flight releases the round's token
//! on every node from a detached task bounded by the per-node timeout. Dropping a [`Lease`]
//! without [`release`](Lease::release) spawns a best-effort release and logs a warning.
//! Nothing ever blocks the runtime.
//!
//! # Observability
//!
//! [`Redlock::stats`] returns a [`Stats`] snapshot; with the `metrics` feature the same
//! figures go to the `metrics` facade. Metric names (all counters but the two histograms, in seconds):
//!
//! | name | what |
//! |---|---|
//! | `redlock_rounds_total` | acquisition rounds run |
//! | `redlock_acquisitions_total` | leases granted |
//! | `redlock_contention_total` | rounds lost because another owner held the resource |
//! | `redlock_no_quorum_total` | acquisitions that failed for lack of answering nodes |
//! | `redlock_acquire_failures_total` | acquisitions that failed, for any reason |
//! | `redlock_extensions_total` | successful extensions |
//! | `redlock_extension_failures_total` | failed extensions |
//! | `redlock_expirations_total` | leases whose validity ended before they were released, or that keep-alive gave up |
//! | `redlock_releases_total` | releases |
//! | `redlock_acquire_seconds` | time from the `acquire` call to the grant (histogram) |
//! | `redlock_hold_seconds` | time from the grant to the release (histogram) |
//!
//! Through `tracing` (targets under `redlock`: `RUST_LOG=redlock=debug` with an env filter),
//! with field names that stay stable:
//!
//! | span or event | level | fields |
//! |---|---|---|
//! | spans `acquire`, `extend`, `release`, `holder` (around each operation; its node events nest in it, also those of requests that finish in the background) | debug | `resource` |
//! | `lease acquired` | debug | `resource`, `attempt`, `validity_ms`, `fence` (a quorum-minted token; one from a `FenceSource` is minted after this event) |
//! | `acquisition round failed; retrying`, `acquisition failed` | debug | `resource`, `attempt`, `reason` |
//! | `node request failed` (a timeout, refusal, I/O or protocol error) | debug | `node`, `error` |
//! | `lease extended` | debug | `resource`, `extensions`, `validity_ms` |
//! | `lease extension failed` | debug | `resource`, `reason` |
//! | `lease released` | debug | `resource`, `released`, `not_held`, `in_flight` |
//! | `extension failed; retrying` (a kept-alive lease) | debug | `resource`, `error` |
//! | `lease lost` (a kept-alive lease) | warn | `resource`, `reason` |
//! | `node left out of quorums by the restart quarantine` | warn | `node`, `quarantine_ms`, `reason` |
//! | `cannot read the node's identity (INFO); …` (once per node) | warn | `node`, `error` |
//! | `the node may evict keys (maxmemory-policy); …` (once per node) | warn | `node`, `policy` |
//! | `another client's lease outlives this client's restart quarantine: …` (once per node, in the `acquire` span of the resource where a lost round saw it) | warn | `node`, `remaining_ms`, `quarantine_ms` |
//! | `two configured nodes are the same server (same run_id, or names that resolve to the same address); …` | error | `node`, `of` |
//! | `lease dropped without release(); releasing it in the background` | warn | `resource` |
//! | `lease dropped without release() outside a tokio runtime; …` | warn | `resource` |
//! | `no tokio runtime to finish in-flight lock requests; …` | warn | `requests` |
//! | `weak Redlock configuration` (at build time) | warn | `warning` |
//!
//! `node` is the node's address (`host:port` or socket path, never a password); `resource`
//! is the resource name, or the names of a multi-resource lease.

mod acquire;
mod background;
mod builder;
mod clock;
mod connect;
mod direct;
mod drive;
mod expiry;
mod fence;
mod flight;
mod freed;
mod holder;
mod identity;
mod keep_alive;
mod lanes;
mod lease;
mod node;
mod notifications;
// Per-call acquisition options (`acquire_with`).
mod options;
mod own_leases;
mod pipe;
mod redact;
mod registry;
mod resp;
mod socket;
mod telemetry;
mod tokens;
mod transport;
mod waiting;
mod wire;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use builder::{DEFAULT_CONNECT_TIMEOUT, RedlockBuilder};
pub use connect::ConnectReport;
pub use fence::{FenceFuture, FenceSource, Fencing};
pub(crate) use keep_alive::StopsWithWork;
pub use keep_alive::{KeepAlive, KeptLease, LeaseLost, LeaseSignal};
pub use lease::Lease;
pub use options::AcquireOptions;
pub use telemetry::Stats;
pub use wire::send_command;

use self::acquire::Wait;
use self::background::Background;
use self::clock::Clock;
use self::flight::Flight;
use self::lanes::{LaneRegistry, Lanes};
use self::node::Nodes;
use self::notifications::Notifications;
use self::telemetry::Telemetry;
use self::tokens::Tokens;
use self::waiting::Waiting;
use crate::error::Error;
use redlock_core::{ConfigError, LockConfig, RetryPolicy, Target, Timestamp};

pub use redlock_core::ReleaseReport;
// What `Redlock::holder` answers.
pub use crate::error::{NodeOutcome, NodeReport};
pub use redlock_core::{Holder, KeyReading, KeyValue, Verdict};

/// A Redlock client over a fixed set of independent Redis masters.
///
/// Cheap to clone; clones share the connections. Build one with [`Redlock::builder`]; derive
/// handles with another TTL or retry policy with [`with_ttl`](Redlock::with_ttl) and
/// [`with_retry`](Redlock::with_retry), which share the connections too.
///
/// ```no_run
/// # async fn demo() -> Result<(), redlock::Error> {
/// use std::time::Duration;
/// use redlock::Redlock;
///
/// let redlock = Redlock::builder()
///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
///     .build()?;
/// let reports = redlock.with_ttl(Duration::from_secs(300))?;
///
/// match reports.try_acquire("nightly-report").await {
///     Ok(lease) => {
///         // ... produce the report, checking lease.is_valid() along the way ...
///         lease.release().await;
///     }
///     Err(e) if e.is_retryable() => println!("someone else is on it: {e}"),
///     Err(e) => return Err(e),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
    config: Arc<LockConfig>,
    fencing: Fencing,
    keep_alive: KeepAlive,
}

/// What every handle of one client shares.
struct Shared {
    nodes: Arc<Nodes>,
    /// Per resource, the order of its commands on each node.
    lanes: LaneRegistry,
    /// Per resource, this client's waiters and the signals that wake them.
    waiting: Waiting,
    /// The nodes' release notifications.
    notifications: Notifications,
    tokens: Tokens,
    /// The tokens of this client's leases still in memory, for the words of a lost round.
    own_leases: own_leases::OwnLeases,
    background: Background,
    addresses: Arc<[Arc<str>]>,
    key_prefix: Arc<str>,
    connect_timeout: std::time::Duration,
    /// Whether the restart quarantine is the default, which follows the longest TTL of the
    /// client's handles.
    quarantine_follows_ttl: bool,
    telemetry: Telemetry,
}

impl Redlock {
    /// A builder; add nodes, then [`build`](RedlockBuilder::build).
    pub fn builder() -> RedlockBuilder {
        RedlockBuilder::default()
    }

    /// The lock parameters of this handle.
    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    /// The nodes' addresses (`host:port` or socket path), without credentials.
    pub fn node_addresses(&self) -> impl Iterator<Item = &str> {
        self.shared.addresses.iter().map(|a| &**a)
    }

    /// The key prefix put in front of every resource name.
    pub fn key_prefix(&self) -> &str {
        &self.shared.key_prefix
    }

    /// Now, on the client's clock: the clock that measures every lease's validity. It keeps
    /// counting while the system is suspended (`CLOCK_BOOTTIME` on Linux), and a wall-clock
    /// step does not move it. [`LeaseSignal::deadline`] and the core's machines speak in its
    /// readings.
    pub fn now(&self) -> Timestamp {
        self.clock().now()
    }

    /// Waits until the client's clock reads `at`, counting suspended time: a deadline that
    /// passed while the system was suspended is met as soon as it resumes.
    pub async fn sleep_until(&self, at: Timestamp) {
        self.clock().sleep_until(at).await;
    }

    pub(crate) fn clock(&self) -> &Clock {
        self.shared.nodes.clock()
    }

    pub(crate) fn telemetry(&self) -> &Telemetry {
        &self.shared.telemetry
    }

    pub(crate) fn addresses(&self) -> &[Arc<str>] {
        &self.shared.addresses
    }

    pub(crate) fn waiting(&self) -> &Waiting {
        &self.shared.waiting
    }

    pub(crate) fn background(&self) -> &Background {
        &self.shared.background
    }

    /// The keep-alive policy of [`with_lock`](Redlock::with_lock), for the blocking facade's.
    pub(crate) fn keep_alive_policy(&self) -> KeepAlive {
        self.keep_alive.clone()
    }

    /// A flight of requests for one operation under `config`, ordered on `lanes`.
    pub(crate) fn flight(&self, config: &LockConfig, lanes: Lanes) -> Flight {
        Flight::new(
            Arc::clone(&self.shared.nodes),
            self.shared.background.clone(),
            config.node_timeout(),
            lanes,
        )
    }

    /// A handle sharing these connections whose leases last `ttl`. A per-node timeout that
    /// was not set explicitly is derived from the new TTL.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the TTL is refused (see [`LockConfig::validate`]).
    pub fn with_ttl(&self, ttl: std::time::Duration) -> Result<Self, Error> {
        let handle = self.with_config((*self.config).clone().with_ttl(ttl))?;
        if self.shared.quarantine_follows_ttl {
            // A restarted node forgot this handle's keys too.
            self.shared.nodes.cover(ttl);
        }
        Ok(handle)
    }

    /// A handle sharing these connections whose leases may be held through extensions for
    /// at most `max_hold` (see [`RedlockBuilder::max_hold`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the duration is refused (zero).
    pub fn with_max_hold(&self, max_hold: std::time::Duration) -> Result<Self, Error> {
        self.with_config((*self.config).clone().with_max_hold(max_hold))
    }

    /// A handle sharing these connections with another retry policy.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the policy is refused (see [`LockConfig::validate`]).
    pub fn with_retry(&self, retry: RetryPolicy) -> Result<Self, Error> {
        self.with_config((*self.config).clone().with_retry(retry))
    }

    /// A handle sharing these connections whose leases carry fencing tokens (see
    /// [`Lease::fence`]): minted on the nodes ([`Fencing::Quorum`]) or by an authoritative
    /// [`FenceSource`] ([`Fencing::Source`]). Fencing costs a second round trip per
    /// acquisition with [`Fencing::Quorum`], one call to the source otherwise.
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// use redlock::client::Fencing;
    ///
    /// let fenced = redlock.with_fencing(Fencing::Quorum)?;
    /// let lease = fenced.acquire("stock-sync:warehouse-42").await?;
    /// let token = lease.fence().expect("fenced leases carry a token");
    /// // ... pass `token` with every access; the resource rejects older tokens ...
    /// lease.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// None today; the `Result` keeps room for sources that need checking.
    pub fn with_fencing(&self, fencing: Fencing) -> Result<Self, Error> {
        let quorum = matches!(fencing, Fencing::Quorum);
        let mut handle = self.with_config((*self.config).clone().with_fencing(quorum))?;
        handle.fencing = fencing;
        Ok(handle)
    }

    /// A handle sharing these connections whose [`with_lock`](Redlock::with_lock) calls keep
    /// their leases alive under `policy`.
    pub fn with_keep_alive(&self, policy: KeepAlive) -> Self {
        let mut handle = self.clone();
        handle.keep_alive = policy;
        handle
    }

    /// The counters of this client (shared by all its handles) since it was built.
    pub fn stats(&self) -> Stats {
        self.shared.telemetry.snapshot()
    }

    /// Runs `work` while holding `resource`, keeping the lease alive under the handle's
    /// [`KeepAlive`] policy, and releases it afterwards.
    ///
    /// `work` receives a [`LeaseSignal`] (the fencing token, the validity). If the lease is
    /// lost while `work` runs (extensions kept failing until the validity ran out, or the
    /// policy's limit was reached), the `work` future is **dropped** at its next `.await` and
    /// the call returns [`Error::LeaseLost`]; otherwise it returns `work`'s output. The lease
    /// is released only after `work` has been dropped or has returned, so a step that was
    /// running when the loss was reported ends before anyone else can hold the resource
    /// (within the keep-alive's margin; a step longer than that runs past the validity,
    /// which only fencing catches). Use
    /// [`with_lock_signalled`](Redlock::with_lock_signalled) for work that must not be
    /// cancelled and watches the signal itself.
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// let synced = redlock
    ///     .with_lock("stock-sync:warehouse-42", |lease| async move {
    ///         // ... long work; `lease.fence()` goes with every write ...
    ///         42
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Redlock::acquire), and [`Error::LeaseLost`].
    pub async fn with_lock<F, Fut, T>(&self, resource: &str, work: F) -> Result<T, Error>
    where
        F: FnOnce(LeaseSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        // Declared before the work, and so dropped after it if this call is cancelled.
        let kept = StopsWithWork::new(
            self.acquire(resource)
                .await?
                .keep_alive(self.keep_alive.clone()),
        );
        let signal = kept.signal();
        let outcome = {
            let work = work(signal.clone());
            tokio::pin!(work);
            tokio::select! {
                biased;
                reason = signal.lost() => Err(reason),
                value = &mut work => Ok(value),
            }
            // `work` is dropped here: it has stopped before the release below lets anyone
            // else hold the resource.
        };
        kept.release().await;
        outcome.map_err(|reason| Error::LeaseLost {
            resource: resource.to_owned(),
            reason,
        })
    }

    /// Like [`with_lock`](Redlock::with_lock), but never cancels `work`: it runs to its end
    /// and should watch the [`LeaseSignal`] (`is_valid`, `lost().await`) itself. The lease
    /// is released once `work` returns; after a loss, if `work` is still running at the
    /// [release deadline](LeaseSignal::release_deadline) (the last extension attempt's start
    /// plus the TTL, answered or not, and twice the drift allowance, when its validity is
    /// long over), it is released then.
    ///
    /// # Errors
    ///
    /// The errors of [`acquire`](Redlock::acquire).
    pub async fn with_lock_signalled<F, Fut, T>(&self, resource: &str, work: F) -> Result<T, Error>
    where
        F: FnOnce(LeaseSignal) -> Fut,
        Fut: Future<Output = T>,
    {
        // Declared before the work, and so dropped after it if this call is cancelled.
        let kept = StopsWithWork::new(
            self.acquire(resource)
                .await?
                .keep_alive(self.keep_alive.clone()),
        );
        let value = work(kept.signal()).await;
        kept.release().await;
        Ok(value)
    }

    fn with_config(&self, config: LockConfig) -> Result<Self, Error> {
        config.validate()?;
        Ok(Self {
            shared: Arc::clone(&self.shared),
            config: Arc::new(config),
            fencing: self.fencing.clone(),
            keep_alive: self.keep_alive.clone(),
        })
    }

    /// Acquires a lease on `resource`, retrying after failed rounds as the retry policy
    /// allows.
    ///
    /// Between rounds it waits for the first of: the holder's release (the nodes' release
    /// notifications, or a release by this client), the expiry of the holder's keys (which
    /// a lost round learns), and the retry policy's delay plus jitter. Every round is an
    /// ordinary quorum round, so a notification that is lost or late only costs time. This
    /// client's own waiters for one resource take turns, first come first served: only the
    /// first in line runs rounds, for at most the policy's longest wait
    /// ([`RetryPolicy::max_wait`]) in line.
    ///
    /// # Errors
    ///
    /// - [`Error::Resource`] for an empty or over-long resource name;
    /// - [`Error::Taken`] when another owner still held it after the last round;
    /// - [`Error::NoQuorum`] when too few nodes answered, or were counted (the restart
    ///   quarantine leaves out nodes that started less than it ago);
    /// - [`Error::ValidityExhausted`] when the nodes were too slow for the TTL.
    ///
    /// Every failed round's token is released on every node that may hold it. A failed
    /// acquisition returns at its decision; those releases finish in the background, ahead
    /// of the resource's next command on each node (see [`settle`](Redlock::settle)).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future mid-flight releases the current round's token on every node from
    /// a detached, time-bounded task.
    pub async fn acquire(&self, resource: &str) -> Result<Lease, Error> {
        let target = Target::one(&self.shared.key_prefix, resource)?;
        self.acquire_target(target, Wait::Policy).await
    }

    /// Acquires a lease on `resource`, waiting up to `wait` for it: rounds follow each other
    /// as in [`acquire`](Redlock::acquire), whatever the policy's retry count, as long as one
    /// can start within `wait`. The last round starts by then, so the call returns within
    /// `wait` plus one round.
    ///
    /// ```no_run
    /// # async fn run(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// use std::time::Duration;
    /// let lease = redlock.acquire_timeout("warehouse-7", Duration::from_secs(30)).await?;
    /// // ... sync the warehouse ...
    /// lease.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire); [`Error::Taken`] when `wait` ran out with the
    /// resource still held.
    pub async fn acquire_timeout(
        &self,
        resource: &str,
        wait: std::time::Duration,
    ) -> Result<Lease, Error> {
        let target = Target::one(&self.shared.key_prefix, resource)?;
        self.acquire_target(target, Wait::For(wait)).await
    }

    /// Acquires one lease on several resources at once: on each node, one script takes all of
    /// their keys or none, so a lease never holds part of the set. Retries as
    /// [`acquire`](Redlock::acquire) does.
    ///
    /// Each resource keeps its own key (`["ab", "c"]` and `["a", "bc"]` never collide); order
    /// and duplicates do not matter. On a Redis Cluster member, the keys must share a hash
    /// slot (use a `{hash tag}` in the resource names).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire), plus [`Error::Resource`] for more than
    /// [`MAX_RESOURCES`](redlock_core::MAX_RESOURCES) resources, and [`Error::Config`] on a
    /// handle with [`Fencing::Quorum`] (quorum-minted tokens are per resource).
    pub async fn acquire_many<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a str>,
    ) -> Result<Lease, Error> {
        let target = self.many_target(resources)?;
        self.acquire_target(target, Wait::Policy).await
    }

    /// The target of a multi-resource lease, refused on a handle with quorum fencing.
    fn many_target<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a str>,
    ) -> Result<Target, Error> {
        let target = Target::many(&self.shared.key_prefix, resources)?;
        if matches!(target, Target::Many(_)) && matches!(self.fencing, Fencing::Quorum) {
            return Err(ConfigError::new(
                "fencing",
                "quorum-minted tokens are per resource; a multi-resource lease cannot carry one (use Fencing::Source)",
            )
            .into());
        }
        Ok(target)
    }

    /// Like [`acquire`](Redlock::acquire), but a single round: no retry, no waiting in line
    /// behind this client's other waiters.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire).
    pub async fn try_acquire(&self, resource: &str) -> Result<Lease, Error> {
        let target = Target::one(&self.shared.key_prefix, resource)?;
        self.acquire_target(target, Wait::OneRound).await
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field("nodes", &self.shared.addresses)
            .field("key_prefix", &self.shared.key_prefix)
            .field("config", &self.config)
            .field("fencing", &self.fencing)
            .finish()
    }
}

/// Returns once `ready()` holds, checking it again each time `notify` wakes this waiter.
/// The waiter registers before each check, so a change (and its `notify_waiters`) between
/// the check and the wait still wakes it.
async fn wait_for(notify: &tokio::sync::Notify, ready: impl Fn() -> bool) {
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if ready() {
            return;
        }
        notified.await;
    }
}

/// Locks `mutex` whatever a panicking holder left: every lock of the client guards plain
/// data (maps, queues, a generator) that stays usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
