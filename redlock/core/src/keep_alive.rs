//! Keeping a lease alive: when to extend, when to try again, and when to give the lease up.
//!
//! A [`Keeper`] owns a [`Held`] lease and is driven like the other machines. It emits an
//! event for every extension that succeeds or fails, [`KeeperEvent::Lost`] when the lease
//! cannot be kept, and ends with [`KeeperEvent::Release`]: the one moment the driver may
//! release the lease (it then takes it back with [`Keeper::into_held`]).
//!
//! # The schedule
//!
//! Let `V` be the lease's current end of validity, `t` the per-node timeout and `m` the loss
//! margin (by default `t`):
//!
//! - the first attempt starts at `V − threshold` (a third of the TTL by default, see
//!   [`KeepAlive::extend_before`]);
//! - a failed attempt is tried again `t` after it was decided;
//! - an attempt is only started if it can be decided before `V − m` (a round is decided
//!   within `t` of its start), so no round straddles the end of the lease;
//! - the lease is reported [lost](KeeperEvent::Lost) at `V − m` if no extension succeeded,
//!   whether or not a round is still in flight, or at once when the nodes say the key is
//!   gone from a quorum;
//! - no extension starts once the lease has been held for [`LockConfig::max_hold`]: the
//!   lease then runs out and is reported lost at `V − m` too.
//!
//! The margin is what lets work stop *before* another client can hold the resource: a timer
//! that fires late (a busy runtime, a slow `select!`) still has `m` left before `V`, and `V`
//! itself already lies a drift allowance before the keys expire on the nodes.
//!
//! # Stop, then release
//!
//! A release deletes the keys and tells every waiter, one of which holds the resource about
//! a round trip later. So the order between the work and the release is the keeper's too:
//!
//! 1. on a loss the keeper's next output is [`KeeperEvent::Lost`]: *stop the work*;
//! 2. the driver reports the work stopped with [`Keeper::work_stopped`] (the work's future
//!    dropped or returned, the command's whole process group gone), and only then does the
//!    keeper say [`KeeperEvent::Release`];
//! 3. if the driver cannot confirm the stop, the keeper says `Release` on its own at the
//!    *release deadline*: the start of the last extension attempt plus the TTL, whether
//!    that attempt succeeded or not (`V + d` after a success, `d` the drift allowance),
//!    plus twice the drift allowance. The TTL runs on the node's clock, which may be slow:
//!    a node clock running at `1 − f` of true time keeps a key `TTL / (1 − f)`, and twice
//!    the allowance covers that for any drift factor `f` up to ½ (`keep-alive-never-stops-node-slow.toml`
//!    in the model checker; with the TTL alone, a node clock slow within the factor kept a
//!    key that the release then deleted). Every key an attempt wrote expires by then, up to
//!    the one-way latency of the command that wrote it: an attempt whose replies did not
//!    come in time (a pause, a slow network) may still have extended the keys, and a
//!    release before they expire would hand the resource to the next holder while the
//!    work, not confirmed stopped, may still run under them. A key written later still (a
//!    command delayed in the network past its attempt's start by more than a latency) may
//!    live on, and the release deletes it; work that still runs then is a holder acting
//!    after its validity, which only fencing tokens catch.
//!
//! The same rule ends a lease that was not lost: the driver reports the work stopped (it
//! returned, or its owner asked for the release), and the release follows. A driver whose
//! work may outlive the lease says so with [`Keeper::stop_unconfirmed`]: extensions stop and
//! the release waits for the release deadline.
//!
//! # A dropped handle
//!
//! A driver whose owner lets go of the lease without saying the work stopped (a handle
//! dropped by an early return or a panic, while the work may run on elsewhere) reports
//! [`Keeper::handle_dropped`]. That is not a stop: the work is not known to have ended, so
//! extensions stop and the release waits for the release deadline, as after
//! `stop_unconfirmed`. Releasing at once would let another client hold the resource while
//! the work still acts under this lease.
//!
//! From the moment the keeper stops keeping the lease (a loss, a confirmed or unconfirmed
//! stop, a dropped handle) it is no longer [valid](Keeper::is_valid), and
//! [`Keeper::ended`] says why: work that watches the lease must stop then.

use std::collections::VecDeque;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use super::hash_renumbered::HashRenumbered;
use super::renumber::{NodePermutation, RenumberNodes};
use super::{
    Extend, ExtendFailure, ExtendOutcome, Extension, Held, LockConfig, Machine, NodeFailure, Reply,
    RequestId, Timestamp, Transmit,
};

/// How a lease is kept alive.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{KeepAlive, LockConfig};
///
/// let config = LockConfig::new(5).with_ttl(Duration::from_secs(30));
/// let policy = KeepAlive::default().extend_before(Duration::from_secs(5));
/// assert_eq!(policy.threshold(&config), Duration::from_secs(5));
/// // A loss is reported one per-node timeout before the validity ends.
/// assert_eq!(policy.margin(&config), Duration::from_millis(50));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeepAlive {
    extend_before: Option<Duration>,
    margin: Option<Duration>,
}

impl KeepAlive {
    /// The policy of a supervised command (`redlock run`) with leases of `ttl`: extend at
    /// half-life. That leaves from half the validity down to the kill instant for failed
    /// extensions to be retried before the command is told to stop.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::{KeepAlive, LockConfig};
    ///
    /// let config = LockConfig::new(3).with_ttl(Duration::from_secs(30));
    /// let policy = KeepAlive::at_half_life(config.ttl());
    /// assert_eq!(policy, KeepAlive::default().extend_before(Duration::from_secs(15)));
    /// ```
    pub fn at_half_life(ttl: Duration) -> Self {
        Self::default().extend_before(ttl / 2)
    }

    /// Extends when this much validity remains (a third of the TTL by default). The value is
    /// clamped so that at least two attempts fit before the loss deadline (three per-node
    /// timeouts plus the margin) and so that the lease is not extended more often than every
    /// half validity.
    #[must_use]
    pub fn extend_before(mut self, remaining: Duration) -> Self {
        self.extend_before = Some(remaining);
        self
    }

    /// Reports the lease lost this long before its validity ends (one per-node timeout by
    /// default). Work told of the loss then still has `margin` to stop before the lease is
    /// over, which covers timers that fire late.
    #[must_use]
    pub fn loss_margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// The loss margin for leases of `config`.
    pub fn margin(&self, config: &LockConfig) -> Duration {
        self.margin.unwrap_or_else(|| config.node_timeout())
    }

    /// When, before the end of validity, the first extension attempt starts.
    pub fn threshold(&self, config: &LockConfig) -> Duration {
        let validity = config.ttl().saturating_sub(config.drift());
        let wanted = self.extend_before.unwrap_or(config.ttl() / 3);
        let floor = config
            .node_timeout()
            .saturating_mul(3)
            .saturating_add(self.margin(config));
        let ceiling = (validity / 2).max(floor);
        wanted.clamp(floor, ceiling)
    }
}

/// Why a kept-alive lease was given up.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseLost {
    /// No extension succeeded before the loss deadline (the validity minus the margin).
    Expired {
        /// Why the last attempt failed, when one ran.
        last_failure: Option<String>,
    },
    /// Extension stopped at [`LockConfig::max_hold`] and the validity ran out.
    HoldLimit,
    /// An extension found the key gone, or someone else's, on so many nodes that no quorum
    /// holds it: the lease cannot be trusted any more, whatever its deadline says.
    KeysGone {
        /// What the nodes answered.
        failure: String,
    },
    /// Its holder released it: the work was reported stopped and the release was sent.
    Released,
    /// Its holder stopped keeping it without confirming that the work stopped (the handle
    /// was dropped, or the release was asked for unconfirmed): no more extensions, and the
    /// release waits for the release deadline.
    Abandoned,
}

impl fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Expired {
                last_failure: Some(failure),
            } => write!(
                f,
                "its validity ran out before it could be extended (last attempt: {failure})"
            ),
            Self::Expired { last_failure: None } => {
                f.write_str("its validity ran out before it could be extended")
            }
            Self::HoldLimit => f.write_str("it reached its longest hold and its validity ran out"),
            Self::KeysGone { failure } => {
                write!(f, "a quorum of nodes no longer holds its key ({failure})")
            }
            Self::Released => f.write_str("its holder released it"),
            Self::Abandoned => f.write_str(
                "its holder stopped keeping it without confirming that the work stopped",
            ),
        }
    }
}

/// What a [`Keeper`] reports.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeeperEvent {
    /// An extension succeeded; the lease is valid until [`Held::valid_until`].
    Extended(Extension),
    /// An extension failed; another attempt follows if one can still finish in time.
    ExtendFailed(ExtendFailure),
    /// The lease has been held for [`LockConfig::max_hold`]: no more extensions.
    HoldLimitReached,
    /// The lease is given up: stop the work now, then report it stopped with
    /// [`Keeper::work_stopped`]. [`Release`](KeeperEvent::Release) follows.
    Lost(LeaseLost),
    /// The lease may be released now; nothing follows.
    Release(ReleaseWhen),
}

/// Why a [`Keeper`] lets its lease be released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReleaseWhen {
    /// The driver reported the work stopped.
    WorkStopped,
    /// The stop was never confirmed and the release deadline (the last successful round's
    /// start plus the TTL, plus twice the drift allowance for node clocks that run slow)
    /// has passed: the holder's validity is long over, and the keys that round wrote have
    /// expired.
    KeysExpired,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum State {
    /// Waiting for the next attempt.
    Waiting { next: Timestamp },
    /// An attempt is running (boxed: a machine is far larger than a timestamp).
    Extending(Box<Extend>),
    /// No attempt can help any more (the hold limit, or too little time left): waiting for
    /// the loss deadline.
    Idle,
    /// Lost, or told that the work may outlive the lease: no more extensions, and waiting
    /// for the work's stop (or the release deadline) before the release.
    Stopping,
    /// The release was allowed; nothing follows.
    Released,
}

/// The keep-alive machine (the schedule is described in the source of the module,
/// `core/keep_alive.rs`).
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let config = LockConfig::new(3).with_ttl(Duration::from_millis(1_000));
/// # let key = LockKey::new(DEFAULT_KEY_PREFIX, "report").unwrap();
/// # let t0 = Timestamp::ZERO;
/// # let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), t0);
/// # let sent: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
/// # acquire.handle_reply(sent[0].request, Ok(Reply::Acquired), t0);
/// # acquire.handle_reply(sent[1].request, Ok(Reply::Acquired), t0);
/// # let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else { panic!() };
/// // A lease valid until t0 + 988 ms (1 s TTL − 12 ms drift allowance).
/// let mut keeper = Keeper::new(&config, KeepAlive::default(), Held::new(grant));
/// assert_eq!(keeper.lost_at(), t0.saturating_add(Duration::from_millis(988 - 50)));
///
/// // Nothing happens before the first attempt, a third of the TTL before the deadline.
/// let first = keeper.poll_timeout().unwrap();
/// assert_eq!(first, keeper.held().valid_until().saturating_sub(config.ttl() / 3));
/// keeper.handle_timeout(first);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| keeper.poll_transmit()).collect();
/// assert_eq!(sent.len(), 3);
///
/// // Every node hangs: the round fails at its timeout, and the loss is reported at the
/// // deadline minus the margin, never after it.
/// let mut now = first;
/// let lost = loop {
///     now = keeper.poll_timeout().unwrap();
///     keeper.handle_timeout(now);
///     while keeper.poll_transmit().is_some() {}
///     if let Some(KeeperEvent::Lost(reason)) = keeper.poll_outcome() {
///         break reason;
///     }
/// };
/// assert_eq!(now, keeper.lost_at());
/// assert!(matches!(lost, LeaseLost::Expired { last_failure: Some(_) }));
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Keeper {
    config: LockConfig,
    threshold: Duration,
    margin: Duration,
    held: Held,
    state: State,
    /// The number of the current (or last) attempt; request ids carry it.
    attempt: u32,
    hold_limit_reported: bool,
    lost: bool,
    /// Why the lease is no longer kept, once it is not.
    ended: Option<LeaseLost>,
    last_failure: Option<ExtendFailure>,
    /// The start of the latest attempt that has not succeeded (in flight, failed or
    /// abandoned): its commands may have reached the nodes and extended the keys until this
    /// start plus the TTL, whatever its replies said or whether they came.
    unconfirmed_attempt: Option<Timestamp>,
    events: VecDeque<KeeperEvent>,
}

impl Keeper {
    /// Keeps `held` alive under `policy`.
    pub fn new(config: &LockConfig, policy: KeepAlive, held: Held) -> Self {
        let threshold = policy.threshold(config);
        let next = held.valid_until().saturating_sub(threshold);
        Self {
            config: config.clone(),
            threshold,
            margin: policy.margin(config),
            held,
            state: State::Waiting { next },
            attempt: 0,
            hold_limit_reported: false,
            lost: false,
            ended: None,
            unconfirmed_attempt: None,
            last_failure: None,
            events: VecDeque::new(),
        }
    }

    /// The lease as it stands (its deadline moves with every extension).
    pub fn held(&self) -> &Held {
        &self.held
    }

    /// Stops keeping the lease and hands it back, to be released. Requests of an attempt in
    /// flight are abandoned: the driver lets them finish, and they can only push the keys'
    /// expiry further, never re-create a key.
    pub fn into_held(self) -> Held {
        self.held
    }

    /// When the lease is reported lost unless an extension succeeds first: the end of
    /// validity minus the margin.
    pub fn lost_at(&self) -> Timestamp {
        self.held.valid_until().saturating_sub(self.margin)
    }

    /// Whether the lease has been given up.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// Whether the keeper has said [`KeeperEvent::Release`].
    pub fn is_released(&self) -> bool {
        matches!(self.state, State::Released)
    }

    /// Why the lease is no longer kept, once it is not: the loss, the release, or a stop
    /// that was not confirmed. From then on [`is_valid`](Keeper::is_valid) is false.
    pub fn ended(&self) -> Option<&LeaseLost> {
        self.ended.as_ref()
    }

    /// When the keeper lets the lease be released without the work's stop confirmed: the last
    /// extension attempt's start plus the TTL, succeeded or not (after a success, the end of
    /// validity plus the drift allowance), plus twice the drift allowance for a node clock
    /// that runs slow (see the module documentation). It moves with every attempt.
    pub fn release_deadline(&self) -> Timestamp {
        let last_success = self.held.valid_until().saturating_add(self.config.drift());
        // An attempt that did not succeed may still have extended keys on the nodes.
        let written_for_a_ttl_from = self.unconfirmed_attempt.map_or(last_success, |start| {
            last_success.max(start.saturating_add(self.config.ttl()))
        });
        // A TTL on a node clock at `1 − f` of true time lasts `TTL / (1 − f)`, at most
        // `TTL (1 + 2f)` for `f` up to ½.
        written_for_a_ttl_from.saturating_add(self.config.drift().saturating_mul(2))
    }

    /// The driver confirms that the work under the lease has stopped (its future dropped or
    /// finished, the command's process group gone): no more extensions, and
    /// [`KeeperEvent::Release`] follows at once. Requests of an attempt in flight are
    /// abandoned (see [`into_held`](Keeper::into_held)).
    pub fn work_stopped(&mut self, _now: Timestamp) {
        if !self.is_released() {
            self.ended.get_or_insert(LeaseLost::Released);
            self.state = State::Released;
            self.events
                .push_back(KeeperEvent::Release(ReleaseWhen::WorkStopped));
        }
    }

    /// The driver cannot confirm that the work will stop (or has stopped): extensions stop,
    /// and the release waits for the release deadline, or for
    /// [`work_stopped`](Keeper::work_stopped) if that comes first.
    pub fn stop_unconfirmed(&mut self, now: Timestamp) {
        if matches!(self.state, State::Stopping | State::Released) {
            return;
        }
        self.ended.get_or_insert(LeaseLost::Abandoned);
        self.state = State::Stopping;
        self.handle_timeout(now);
    }

    /// The driver's owner let go of the lease without saying that the work stopped (its
    /// handle was dropped). The work is not known to have ended, so this is an unconfirmed
    /// stop (see the module documentation): extensions stop, and the release waits for the
    /// release deadline, or for [`work_stopped`](Keeper::work_stopped).
    pub fn handle_dropped(&mut self, now: Timestamp) {
        self.stop_unconfirmed(now);
    }

    /// Whether the lease is still worth using at `now`: still kept (not lost, no stop begun)
    /// and before the loss deadline.
    pub fn is_valid(&self, now: Timestamp) -> bool {
        !matches!(self.state, State::Stopping | State::Released) && now < self.lost_at()
    }

    fn lose(&mut self, reason: LeaseLost) {
        self.lost = true;
        self.ended.get_or_insert_with(|| reason.clone());
        self.state = State::Stopping;
        self.events.push_back(KeeperEvent::Lost(reason));
    }

    fn expired(&mut self) -> LeaseLost {
        if self.hold_limit_reported {
            LeaseLost::HoldLimit
        } else {
            LeaseLost::Expired {
                last_failure: self.last_failure.as_ref().map(ToString::to_string),
            }
        }
    }

    /// Starts an attempt at `now` if one may still help; otherwise waits for the deadline.
    fn attempt_at(&mut self, now: Timestamp) {
        if now >= self.held.hold_limit(&self.config) {
            self.reach_hold_limit();
            return;
        }
        let decided_by = now.saturating_add(self.config.node_timeout());
        if decided_by > self.lost_at() {
            // Too late for a round to be decided before the loss deadline.
            self.state = State::Idle;
            return;
        }
        self.attempt = self.attempt.saturating_add(1);
        self.unconfirmed_attempt = Some(now);
        let extend = self.held.extend_numbered(&self.config, now, self.attempt);
        self.state = State::Extending(Box::new(extend));
        self.settle(now);
    }

    fn reach_hold_limit(&mut self) {
        self.state = State::Idle;
        if !self.hold_limit_reported {
            self.hold_limit_reported = true;
            self.events.push_back(KeeperEvent::HoldLimitReached);
        }
    }

    /// Takes the running attempt's outcome, if it has one.
    fn settle(&mut self, now: Timestamp) {
        let State::Extending(extend) = &mut self.state else {
            return;
        };
        let Some(outcome) = extend.poll_outcome() else {
            return;
        };
        match outcome {
            ExtendOutcome::Extended(extension) => {
                self.held.apply(&extension);
                self.last_failure = None;
                // Its start plus the TTL is the new validity's end plus the drift allowance.
                self.unconfirmed_attempt = None;
                self.state = State::Waiting {
                    next: self.held.valid_until().saturating_sub(self.threshold),
                };
                self.events.push_back(KeeperEvent::Extended(extension));
            }
            ExtendOutcome::Failed(ExtendFailure::HoldLimit { .. }) => self.reach_hold_limit(),
            ExtendOutcome::Failed(failure) if failure.keys_gone(&self.config) => {
                let reason = LeaseLost::KeysGone {
                    failure: failure.to_string(),
                };
                self.events.push_back(KeeperEvent::ExtendFailed(failure));
                self.lose(reason);
            }
            ExtendOutcome::Failed(failure) => {
                self.last_failure = Some(failure.clone());
                self.events.push_back(KeeperEvent::ExtendFailed(failure));
                // A failed extension deletes nothing: try again shortly while it can help.
                self.state = State::Waiting {
                    next: now.saturating_add(self.config.node_timeout()),
                };
            }
        }
        if now >= self.lost_at() && !self.is_lost() {
            let reason = self.expired();
            self.lose(reason);
        }
    }
}

impl Machine for Keeper {
    type Outcome = KeeperEvent;

    fn poll_transmit(&mut self) -> Option<Transmit> {
        match &mut self.state {
            State::Extending(extend) => extend.poll_transmit(),
            _ => None,
        }
    }

    fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        if let State::Extending(extend) = &mut self.state {
            // Replies of earlier attempts carry another number; the machine ignores them.
            extend.handle_reply(request, reply, now);
            self.settle(now);
        }
    }

    fn handle_timeout(&mut self, now: Timestamp) {
        match self.state {
            State::Released => return,
            State::Stopping => {
                if now >= self.release_deadline() {
                    // Nobody confirmed the stop; the keys have expired by now.
                    self.state = State::Released;
                    self.events
                        .push_back(KeeperEvent::Release(ReleaseWhen::KeysExpired));
                }
                return;
            }
            _ => {}
        }
        if now >= self.lost_at() {
            // Whatever is in flight, the lease is over for its holder.
            let reason = self.expired();
            self.lose(reason);
            return;
        }
        match &mut self.state {
            State::Waiting { next } => {
                if now >= *next {
                    self.attempt_at(now);
                }
            }
            State::Extending(extend) => {
                extend.handle_timeout(now);
                self.settle(now);
            }
            State::Idle | State::Stopping | State::Released => {}
        }
    }

    fn poll_timeout(&self) -> Option<Timestamp> {
        let lost_at = self.lost_at();
        match &self.state {
            State::Released => None,
            State::Stopping => Some(self.release_deadline()),
            State::Waiting { next } => Some((*next).min(lost_at)),
            State::Extending(extend) => {
                Some(extend.poll_timeout().map_or(lost_at, |t| t.min(lost_at)))
            }
            State::Idle => Some(lost_at),
        }
    }

    fn poll_outcome(&mut self) -> Option<KeeperEvent> {
        self.events.pop_front()
    }
}

impl RenumberNodes for KeeperEvent {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Extended(extension) => extension.renumber_nodes(perm),
            Self::ExtendFailed(failure) => failure.renumber_nodes(perm),
            Self::HoldLimitReached | Self::Lost(_) | Self::Release(_) => {}
        }
    }
}

impl RenumberNodes for Keeper {
    /// What a lost lease says ([`LeaseLost`]) names no node: it is text about why.
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        self.held.renumber_nodes(perm);
        if let State::Extending(extend) = &mut self.state {
            extend.renumber_nodes(perm);
        }
        self.last_failure.renumber_nodes(perm);
        self.events.renumber_nodes(perm);
    }
}

impl HashRenumbered for KeeperEvent {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        match self {
            Self::Extended(extension) => {
                std::mem::discriminant(self).hash(state);
                extension.hash_renumbered(perm, state);
            }
            Self::ExtendFailed(failure) => {
                std::mem::discriminant(self).hash(state);
                failure.hash_renumbered(perm, state);
            }
            Self::HoldLimitReached | Self::Lost(_) | Self::Release(_) => self.hash(state),
        }
    }
}

impl HashRenumbered for Keeper {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // Every field, so that a field added to the machine must be added here.
        let Self {
            config,
            threshold,
            margin,
            held,
            state: schedule,
            attempt,
            hold_limit_reported,
            lost,
            ended,
            last_failure,
            unconfirmed_attempt,
            events,
        } = self;
        (config, threshold, margin).hash(state);
        held.hash_renumbered(perm, state);
        match schedule {
            State::Extending(extend) => {
                std::mem::discriminant(schedule).hash(state);
                extend.hash_renumbered(perm, state);
            }
            State::Waiting { .. } | State::Idle | State::Stopping | State::Released => {
                schedule.hash(state);
            }
        }
        (attempt, hold_limit_reported, lost, ended).hash(state);
        last_failure.hash_renumbered(perm, state);
        unconfirmed_attempt.hash(state);
        events.hash_renumbered(perm, state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_life_asks_to_extend_with_half_the_ttl_left() {
        let config = LockConfig::new(3).with_ttl(Duration::from_secs(10));
        let policy = KeepAlive::at_half_life(config.ttl());
        assert_eq!(
            policy,
            KeepAlive::default().extend_before(Duration::from_secs(5))
        );
        // Clamped, as any policy, to half the validity.
        assert_eq!(
            policy.threshold(&config),
            (config.ttl() - config.drift()) / 2
        );
    }
    use crate::{Acquire, AcquireEvent, LockKey, Token};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn granted(config: &LockConfig, t0: Timestamp) -> Held {
        let key = LockKey::new("", "r").unwrap();
        let mut acquire = Acquire::new(config, key, Token::from_bytes([1; 16]), t0);
        let sent: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
        for t in &sent {
            acquire.handle_reply(t.request, Ok(Reply::Acquired), t0);
        }
        let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else {
            panic!("granted")
        };
        Held::new(grant)
    }

    fn drain(keeper: &mut Keeper) -> Vec<Transmit> {
        std::iter::from_fn(|| keeper.poll_transmit()).collect()
    }

    #[test]
    fn a_successful_extension_moves_the_deadline_and_the_next_attempt() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let first = keeper.poll_timeout().unwrap();
        keeper.handle_timeout(first);
        let sent = drain(&mut keeper);
        let t1 = first.saturating_add(ms(2));
        keeper.handle_reply(sent[0].request, Ok(Reply::Extended), t1);
        keeper.handle_reply(sent[1].request, Ok(Reply::Extended), t1);
        assert!(matches!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Extended(_))
        ));
        assert_eq!(keeper.held().valid_until(), first.saturating_add(ms(988)));
        assert_eq!(keeper.held().extensions(), 1);
        assert_eq!(
            keeper.poll_timeout(),
            Some(
                first
                    .saturating_add(ms(988))
                    .saturating_sub(config.ttl() / 3)
            )
        );
        // A late reply of that attempt changes nothing.
        keeper.handle_reply(sent[2].request, Ok(Reply::Extended), t1);
        assert!(keeper.poll_outcome().is_none());
    }

    #[test]
    fn no_attempt_starts_that_cannot_be_decided_before_the_loss_deadline() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let lost_at = keeper.lost_at();
        let mut starts = Vec::new();
        while let Some(now) = keeper.poll_timeout() {
            keeper.handle_timeout(now);
            if !drain(&mut keeper).is_empty() {
                starts.push(now);
            }
            while let Some(event) = keeper.poll_outcome() {
                match event {
                    KeeperEvent::Lost(_) => assert_eq!(now, lost_at),
                    KeeperEvent::Release(when) => {
                        // Nobody confirmed the stop: not before the keys have expired.
                        assert_eq!(when, ReleaseWhen::KeysExpired);
                        assert_eq!(now, keeper.release_deadline());
                    }
                    _ => {}
                }
            }
        }
        assert!(keeper.is_lost() && keeper.is_released());
        assert!(starts.len() >= 2, "{starts:?}");
        for start in &starts {
            assert!(start.saturating_add(config.node_timeout()) <= lost_at);
        }
        assert!(lost_at < keeper.held().valid_until());
        // No attempt was answered, yet each may have extended the keys: the last one's
        // start plus the TTL is when they may expire, after the grant's validity.
        let last = *starts.last().unwrap();
        let slow_nodes = config.drift().saturating_mul(2);
        assert_eq!(
            keeper.release_deadline(),
            last.saturating_add(config.ttl()).saturating_add(slow_nodes)
        );
        assert!(
            keeper.release_deadline() > keeper.held().valid_until().saturating_add(config.drift())
        );
    }

    #[test]
    fn a_lost_lease_is_released_once_the_work_has_stopped_and_not_before() {
        let config = LockConfig::new(3)
            .with_ttl(ms(1_000))
            .with_max_hold(ms(100));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let lost_at = keeper.lost_at();
        let first = keeper.poll_timeout().unwrap();
        keeper.handle_timeout(first);
        assert_eq!(keeper.poll_outcome(), Some(KeeperEvent::HoldLimitReached));
        keeper.handle_timeout(lost_at);
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Lost(LeaseLost::HoldLimit))
        );
        // The loss says "stop the work"; the release waits for the driver's word.
        assert_eq!(keeper.poll_outcome(), None);
        assert!(!keeper.is_valid(lost_at));
        assert_eq!(keeper.poll_timeout(), Some(keeper.release_deadline()));
        keeper.handle_timeout(lost_at.saturating_add(ms(20)));
        assert_eq!(keeper.poll_outcome(), None, "no release before the stop");
        keeper.work_stopped(lost_at.saturating_add(ms(20)));
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Release(ReleaseWhen::WorkStopped))
        );
        assert_eq!(keeper.poll_timeout(), None);
        keeper.work_stopped(lost_at.saturating_add(ms(30)));
        assert_eq!(keeper.poll_outcome(), None, "one release only");
    }

    #[test]
    fn work_that_ends_while_the_lease_is_kept_is_released_at_once() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        keeper.work_stopped(t0.saturating_add(ms(5)));
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Release(ReleaseWhen::WorkStopped))
        );
        assert!(!keeper.is_lost() && keeper.is_released());
        assert_eq!(keeper.poll_timeout(), None);
    }

    #[test]
    fn an_unconfirmed_stop_ends_the_extensions_and_releases_when_the_keys_have_expired() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        keeper.stop_unconfirmed(t0.saturating_add(ms(5)));
        assert!(!keeper.is_valid(t0.saturating_add(ms(5))));
        let deadline = keeper.release_deadline();
        assert_eq!(keeper.poll_timeout(), Some(deadline));
        keeper.handle_timeout(deadline.saturating_sub(ms(1)));
        assert_eq!(keeper.poll_outcome(), None);
        assert!(keeper.poll_transmit().is_none(), "no extension any more");
        keeper.handle_timeout(deadline);
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Release(ReleaseWhen::KeysExpired))
        );
    }

    #[test]
    fn an_extension_unanswered_at_the_loss_holds_the_release_until_its_keys_may_expire() {
        // The holder pauses just after its extension went out: the nodes extend the keys
        // until the attempt's start plus the TTL, but no reply comes in time, the lease is
        // lost at its deadline and the work's stop is not confirmed. Releasing at the last
        // success's deadline would delete keys that still keep the resource for this work.
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let attempt = keeper.poll_timeout().unwrap();
        keeper.handle_timeout(attempt);
        assert_eq!(drain(&mut keeper).len(), 3, "the extension went out");
        let lost = keeper.lost_at();
        keeper.handle_timeout(lost);
        assert!(matches!(keeper.poll_outcome(), Some(KeeperEvent::Lost(_))));
        keeper.stop_unconfirmed(lost);
        let keys_may_live_until = attempt
            .saturating_add(config.ttl())
            .saturating_add(config.drift().saturating_mul(2));
        assert_eq!(keeper.release_deadline(), keys_may_live_until);
        keeper.handle_timeout(keys_may_live_until.saturating_sub(ms(1)));
        assert_eq!(keeper.poll_outcome(), None);
        keeper.handle_timeout(keys_may_live_until);
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Release(ReleaseWhen::KeysExpired))
        );
    }

    #[test]
    fn a_dropped_handle_is_an_unconfirmed_stop_not_a_stopped_work() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let dropped = t0.saturating_add(ms(5));
        keeper.handle_dropped(dropped);
        assert!(!keeper.is_valid(dropped));
        assert_eq!(keeper.ended(), Some(&LeaseLost::Abandoned));
        // No release while the work may still run, and no more extensions.
        assert_eq!(keeper.poll_outcome(), None);
        let deadline = keeper.release_deadline();
        assert_eq!(keeper.poll_timeout(), Some(deadline));
        keeper.handle_timeout(deadline.saturating_sub(ms(1)));
        assert_eq!(keeper.poll_outcome(), None);
        assert!(keeper.poll_transmit().is_none());
        keeper.handle_timeout(deadline);
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Release(ReleaseWhen::KeysExpired))
        );
        // A confirmed stop ends the lease as released, and is never valid again.
        let mut stopped = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        stopped.work_stopped(dropped);
        assert_eq!(stopped.ended(), Some(&LeaseLost::Released));
        assert!(!stopped.is_valid(dropped));
    }

    #[test]
    fn the_release_deadline_follows_every_extension() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let first = keeper.release_deadline();
        for round in 1..=2 {
            let at = keeper.poll_timeout().unwrap();
            keeper.handle_timeout(at);
            for sent in drain(&mut keeper) {
                keeper.handle_reply(sent.request, Ok(Reply::Extended), at);
            }
            assert!(matches!(
                keeper.poll_outcome(),
                Some(KeeperEvent::Extended(_))
            ));
            assert_eq!(keeper.held().extensions(), round);
            // The validity's end plus the allowance is the round's start plus the TTL; twice
            // the allowance more covers slow node clocks.
            assert_eq!(
                keeper.release_deadline(),
                keeper
                    .held()
                    .valid_until()
                    .saturating_add(config.drift().saturating_mul(3))
            );
            assert!(keeper.release_deadline() > first);
        }
        assert_eq!(keeper.ended(), None);
    }

    #[test]
    fn keys_gone_from_a_quorum_lose_the_lease_at_once() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let first = keeper.poll_timeout().unwrap();
        keeper.handle_timeout(first);
        let sent = drain(&mut keeper);
        keeper.handle_reply(sent[0].request, Ok(Reply::NotHeld), first);
        keeper.handle_reply(sent[1].request, Ok(Reply::HeldByOther), first);
        assert!(matches!(
            keeper.poll_outcome(),
            Some(KeeperEvent::ExtendFailed(_))
        ));
        assert!(matches!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Lost(LeaseLost::KeysGone { .. }))
        ));
        // Waiting for the work to stop, at most until the keys have expired.
        assert_eq!(keeper.poll_timeout(), Some(keeper.release_deadline()));
    }

    #[test]
    fn the_hold_limit_stops_extensions_and_the_lease_then_runs_out() {
        let config = LockConfig::new(3)
            .with_ttl(ms(1_000))
            .with_max_hold(ms(100));
        let t0 = Timestamp::ZERO;
        let mut keeper = Keeper::new(&config, KeepAlive::default(), granted(&config, t0));
        let first = keeper.poll_timeout().unwrap();
        keeper.handle_timeout(first);
        assert!(drain(&mut keeper).is_empty());
        assert_eq!(keeper.poll_outcome(), Some(KeeperEvent::HoldLimitReached));
        assert_eq!(keeper.poll_timeout(), Some(keeper.lost_at()));
        keeper.handle_timeout(keeper.lost_at());
        assert_eq!(
            keeper.poll_outcome(),
            Some(KeeperEvent::Lost(LeaseLost::HoldLimit))
        );
    }

    #[test]
    fn thresholds_leave_room_for_two_attempts_and_the_margin() {
        let config = LockConfig::new(3).with_ttl(ms(1_000));
        let policy = KeepAlive::default().extend_before(ms(1));
        assert_eq!(policy.threshold(&config), ms(3 * 50 + 50));
        let policy = KeepAlive::default().extend_before(ms(900));
        assert_eq!(policy.threshold(&config), ms(494), "half the validity");
    }
}
