//! A client of the model: the core's machines ([`Acquire`], [`Waiting`], [`Held`],
//! [`Keeper`], [`Release`], [`Eligibility`]) driven as the simulator's clients drive them,
//! with every reading of time taken from the client's clock in ticks.
//!
//! The driver moves bytes and reads the clock; every decision is a machine's. What it adds
//! is what a process does between the machines' calls: one connection per node, identified
//! before it carries anything but a release, commands to a node in the order issued; a
//! work that runs `work_ticks` of the client's clock and, told to stop, stops within
//! `stop_ticks` of them (a separate step of the model, so that anything may happen before
//! it), or never (`stop = "never"`: it runs to its own end).
//!
//! Its parts: `connection.rs` (the messages and the connection to each node), `lease.rs`
//! (a lease held: its work, keep-alive, extension and release), `renumber.rs` (the client
//! renumbered for node symmetry), `fingerprint.rs` (its fingerprint, composed of its
//! parts'), `phase_fingerprint.rs` (its phase's, hashed once for every renaming of the
//! clients); this file, the client itself and its acquisitions.

use redlock_core::{
    Acquire, AcquireEvent, DEFAULT_KEY_PREFIX, Eligibility, Held, KeepAlive, Keeper, LockKey,
    Machine, NodeFailure, Reply, RequestId, Timestamp, Token, Waiting,
};

mod connection;
mod fingerprint;
mod lease;
mod phase_fingerprint;
mod renumber;

pub(super) use connection::{Msg, NodeLink};
use lease::{Lease, Work, keeper_config};

use super::rate::Strays;
use super::shared::Shared;
use super::spec::{CheckSpec, WaiterMarks};
use super::token::model_token;
use crate::client::faults::{Faults, Keys, RoundClock};
use crate::net::name::Name;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Acquiring {
    op: u16,
    machine: Acquire,
    round: RoundClock,
    waiting: Waiting,
    /// Whether a round was lost: a grant after it is a contended hand-off.
    lost_a_round: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Not started yet (its start is a step of the model, at any tick up to
    /// `start_within_ticks`).
    Idle,
    Acquiring(Acquiring),
    Holding(Lease),
    Done,
}

/// What a step of a client did that the properties ask about.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Happened {
    /// A lease whose deadline had passed was extended after another client's grant: its
    /// holder believed it throughout (as the simulator's checker counts windows), across
    /// the other's.
    pub(super) revived_over_another: bool,
    /// A grant, with its fence when fenced.
    pub(super) granted: Option<Option<u64>>,
    /// The grant came after a lost round.
    pub(super) handed_off: bool,
    pub(super) extended: bool,
    /// A release removed a key of a lease whose work still runs, before the key expired.
    pub(super) released_live_key: bool,
    /// A release deleted its key on a node where a waiter's mark was, and published
    /// nothing.
    pub(super) waiter_untold: bool,
}

/// How many fingerprints of itself a client's phase or link remembers: under each
/// renumbering of the nodes and renaming of the clients the canonical form tries, and
/// as it is and swapped for node symmetry's swap test.
pub(super) const PART_MEMO: usize = 8;

/// How many fingerprints of itself a client's eligibility remembers: as it is, and under
/// each renumbering of the nodes the canonical form tries (at most 6 for three nodes) and
/// node symmetry's swap test uses.
pub(super) const ELIGIBILITY_MEMO: usize = 8;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Client {
    /// Its clock, in ticks.
    pub(super) clock: u32,
    pub(super) strays: Strays,
    pub(super) paused: bool,
    /// Whether the last step of the model was this client's.
    pub(super) acted: bool,
    /// Shared with the copies of this client until one writes it: a tick, a delay or a
    /// message lost leaves it alone, and its fingerprints with it (`client/fingerprint.rs`).
    pub(super) phase: Shared<Phase, PART_MEMO>,
    iteration: u32,
    op: u16,
    /// Tokens it has drawn: its next is numbered one more (`token.rs`).
    drawn: u16,
    /// Shared with the copies of this client until one writes it: a step seldom changes it,
    /// and copying its per-node strings was much of a client's copy.
    eligibility: Shared<Eligibility, ELIGIBILITY_MEMO>,
    faults: Faults,
    /// Per node: its connection and the messages on their way, each shared with the copies
    /// of this client until one writes it (most steps write one link at most).
    pub(super) links: Vec<Shared<NodeLink, PART_MEMO>>,
}

/// What a client needs from the world while it steps.
pub(super) struct Env<'a> {
    pub(super) spec: &'a CheckSpec,
    pub(super) key: &'a LockKey,
    pub(super) keys: &'a Keys,
    /// The client that steps: the owner written in the tokens it draws (`token.rs`).
    pub(super) client: u8,
    /// Grants made so far, by every client.
    pub(super) grants: u16,
    pub(super) happened: Happened,
}

impl Client {
    pub(super) fn new(spec: &CheckSpec) -> Self {
        let nodes = spec.nodes;
        Self {
            clock: 0,
            strays: Strays::default(),
            paused: false,
            acted: false,
            phase: Shared::new(Phase::Idle),
            iteration: 0,
            op: 0,
            drawn: 0,
            eligibility: Shared::new(Eligibility::new(nodes, spec.restart)),
            faults: Faults::new(spec.timing, spec.release, spec.extend, spec.loss_order),
            links: vec![Shared::new(NodeLink::default()); nodes],
        }
    }

    /// Its clock as the machines read it.
    pub(super) fn now(&self, spec: &CheckSpec) -> Timestamp {
        Timestamp::from_duration(spec.ticks(self.clock))
    }

    /// Starts its first acquisition.
    pub(super) fn start(&mut self, env: &mut Env<'_>) {
        self.begin_acquire(env);
        self.settle(env);
    }

    /// A token of its own, never drawn before by any client.
    fn fresh_token(&mut self, env: &Env<'_>) -> Token {
        self.drawn += 1;
        model_token(env.client, self.drawn)
    }

    fn begin_acquire(&mut self, env: &mut Env<'_>) {
        let now = self.now(env.spec);
        let key = env.key.clone();
        let token = self.fresh_token(env);
        self.op += 1;
        let mut waiting = Waiting::new(&env.spec.config, key.clone());
        if env.spec.waiter_marks != WaiterMarks::Off {
            // The waiter's id: its first round's token, unique to this acquisition.
            waiting = waiting.marking(token, env.spec.config.ttl());
        }
        *self.phase.make_mut() = Phase::Acquiring(Acquiring {
            op: self.op,
            machine: Acquire::new(&env.spec.config, key, token, now),
            round: RoundClock {
                start: now,
                first_reply: None,
            },
            waiting,
            lost_a_round: false,
        });
    }

    /// Whether it believes it holds a lease now: its clock reads before the lease's deadline,
    /// from the grant until it both released and its work stopped.
    pub(super) fn believes(&self, spec: &CheckSpec) -> bool {
        match &*self.phase {
            Phase::Holding(lease) => {
                !(lease.released() && lease.work == Work::Stopped)
                    && self.now(spec) < lease.held.valid_until()
            }
            _ => false,
        }
    }

    /// The token of its lease while the lease's release has started and its work still
    /// runs: the stop-before-release rule is broken if any node still holds a key with it.
    pub(super) fn released_while_working(&self) -> Option<Token> {
        match &*self.phase {
            Phase::Holding(lease) if lease.released() && lease.work != Work::Stopped => {
                Some(lease.held.token())
            }
            _ => None,
        }
    }

    /// When its next timer is due (machine timers, the next round, the work's end).
    fn next_timer(&self, spec: &CheckSpec) -> Option<Timestamp> {
        let earliest = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match &*self.phase {
            Phase::Acquiring(a) => a.waiting.next_round().or_else(|| {
                a.machine
                    .poll_timeout()
                    .map(|at| self.faults.acquire_timer(a.round, at))
            }),
            Phase::Holding(lease) => {
                let work = match lease.work {
                    Work::Running(until) | Work::Stopping { until, .. } => {
                        Some(Timestamp::from_duration(spec.ticks(until)))
                    }
                    _ => None,
                };
                let keeper = lease.keeper.as_ref().and_then(Keeper::poll_timeout);
                let extend = match (&lease.extending, lease.extend_at) {
                    (Some((_, extend)), _) => extend.poll_timeout(),
                    (None, Some(at)) => Some(Timestamp::from_duration(spec.ticks(at))),
                    (None, None) => None,
                };
                let release = match &lease.releasing {
                    Some((_, Some(release))) => release.poll_timeout(),
                    _ => None,
                };
                earliest(earliest(work, keeper), earliest(extend, release))
            }
            Phase::Idle | Phase::Done => None,
        }
    }

    /// Whether one of its timers is due.
    pub(super) fn timer_due(&self, spec: &CheckSpec) -> bool {
        self.next_timer(spec).is_some_and(|at| at <= self.now(spec))
    }

    /// Whether its work, told to stop, may stop now (`Some`), and whether it must before
    /// true time moves on (`Some(true)`: its clock has reached the stop's latest tick).
    pub(super) fn work_may_stop(&self) -> Option<bool> {
        match &*self.phase {
            Phase::Holding(lease) => match lease.work {
                Work::Stopping { by: Some(by), .. } => Some(self.clock >= by),
                _ => None,
            },
            _ => None,
        }
    }

    /// Tokens it has drawn.
    pub(super) fn tokens_drawn(&self) -> u16 {
        self.drawn
    }

    /// Whether it has not started yet.
    pub(super) fn is_idle(&self) -> bool {
        matches!(*self.phase, Phase::Idle)
    }

    /// Its lease side in a few words, for a counterexample's steps.
    pub(super) fn summary(&self, spec: &CheckSpec) -> String {
        match &*self.phase {
            Phase::Acquiring(a) => format!("acquiring with {}", a.machine.token().short()),
            Phase::Holding(lease) => {
                let until = lease.held.valid_until().as_duration().as_millis()
                    / spec.tick.as_millis().max(1);
                let work = match lease.work {
                    Work::Running(_) => "work runs",
                    Work::Stopping { .. } => "work stopping",
                    Work::Stopped => "work stopped",
                };
                let released = match lease.releasing {
                    None => "",
                    Some((_, Some(_))) => ", releasing",
                    Some((_, None)) => ", released",
                };
                let believes = if self.believes(spec) {
                    "believes it holds"
                } else {
                    "holds"
                };
                format!(
                    "{believes} {} valid before clock {until}, {work}{released}",
                    lease.held.token().short()
                )
            }
            Phase::Idle => "not started".to_owned(),
            Phase::Done => "done".to_owned(),
        }
    }

    pub(super) fn is_acquiring(&self) -> bool {
        matches!(*self.phase, Phase::Acquiring(_))
    }

    pub(super) fn is_done(&self) -> bool {
        matches!(*self.phase, Phase::Done)
    }

    // ----- events -------------------------------------------------------------------------

    /// Its due timers fire.
    pub(super) fn fire(&mut self, env: &mut Env<'_>) {
        let now = self.now(env.spec);
        let next_round = match &*self.phase {
            Phase::Acquiring(a) => a.waiting.next_round().is_some_and(|at| at <= now),
            _ => false,
        };
        let token = next_round.then(|| self.fresh_token(env));
        match self.phase.make_mut() {
            Phase::Acquiring(a) => match token {
                Some(token) => {
                    a.round = RoundClock {
                        start: now,
                        first_reply: None,
                    };
                    a.waiting.round_started(now);
                    a.machine.retry(token, now);
                }
                None => {
                    let machine_now = self.faults.acquire_now(a.round, now, false);
                    a.machine.handle_timeout(machine_now);
                }
            },
            Phase::Holding(lease) => {
                if let Work::Running(until) | Work::Stopping { until, .. } = lease.work
                    && Timestamp::from_duration(env.spec.ticks(until)) <= now
                {
                    // The work ends on its own.
                    lease.work_stopped(&mut self.op, env.spec, now);
                }
                if let Some(at) = lease.extend_at
                    && Timestamp::from_duration(env.spec.ticks(at)) <= now
                    && lease.work != Work::Stopped
                {
                    // The work's extension step: as this client's implementation makes it.
                    lease.extend_at = None;
                    self.op += 1;
                    let extend = self.faults.extend(&env.spec.config, &lease.held, now);
                    lease.extending = Some((self.op, extend));
                } else if let Some((_, extend)) = &mut lease.extending {
                    extend.handle_timeout(now);
                }
                if let Some(keeper) = &mut lease.keeper {
                    keeper.handle_timeout(now);
                }
                if let Some((_, Some(release))) = &mut lease.releasing {
                    release.handle_timeout(now);
                }
            }
            Phase::Idle | Phase::Done => {}
        }
        self.settle(env);
    }

    /// Its work, told to stop, reaches the end of its step.
    pub(super) fn stop_work(&mut self, env: &mut Env<'_>) {
        let now = self.now(env.spec);
        if let Phase::Holding(lease) = self.phase.make_mut()
            && matches!(lease.work, Work::Stopping { .. })
        {
            lease.work_stopped(&mut self.op, env.spec, now);
        }
        self.settle(env);
    }

    /// A reply (or failure) for operation `op`'s machine.
    fn feed(
        &mut self,
        op: u16,
        request: RequestId,
        result: Result<Reply, NodeFailure>,
        now: Timestamp,
    ) {
        match self.phase.make_mut() {
            Phase::Acquiring(a) if a.op == op && Waiting::sent(request) => {
                a.waiting.handle_reply(request, result, now);
            }
            Phase::Acquiring(a) if a.op == op => {
                if a.round.first_reply.is_none() && a.machine.expects(request) {
                    a.round.first_reply = Some(now);
                }
                let machine_now = self.faults.acquire_now(a.round, now, true);
                a.machine.handle_reply(request, result, machine_now);
            }
            Phase::Holding(lease) => match &mut lease.releasing {
                Some((release_op, Some(release))) if *release_op == op => {
                    release.handle_reply(request, result, now);
                }
                _ if lease.extending.as_ref().is_some_and(|(o, _)| *o == op) => {
                    if let Some((_, extend)) = &mut lease.extending {
                        extend.handle_reply(request, result, now);
                    }
                }
                _ if lease.op == op => {
                    if let Some(keeper) = &mut lease.keeper {
                        keeper.handle_reply(request, result, now);
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    // ----- the machines -------------------------------------------------------------------

    /// Runs the machines as far as they go without an event.
    fn settle(&mut self, env: &mut Env<'_>) {
        loop {
            let progressed = match std::mem::replace(self.phase.make_mut(), Phase::Done) {
                Phase::Acquiring(a) => self.settle_acquire(a, env),
                Phase::Holding(lease) => self.settle_lease(lease, env),
                Phase::Idle | Phase::Done => false,
            };
            if !progressed {
                return;
            }
        }
    }

    fn settle_acquire(&mut self, mut a: Acquiring, env: &mut Env<'_>) -> bool {
        let now = self.now(env.spec);
        while let Some(transmit) = a.machine.poll_transmit() {
            self.issue(a.op, transmit, env);
        }
        match a.machine.poll_outcome() {
            None => {
                *self.phase.make_mut() = Phase::Acquiring(a);
                false
            }
            Some(AcquireEvent::Acquired(grant)) => {
                self.end_acquisition(&mut a, env);
                let grant = self.faults.believed(grant, a.round, now);
                env.happened.granted = Some(grant.fence);
                env.happened.handed_off = a.lost_a_round;
                let held = Held::new(grant);
                let keeper = env.spec.keep_alive.then(|| {
                    Keeper::new(
                        &keeper_config(env.spec),
                        KeepAlive::at_half_life(env.spec.config.ttl()),
                        held.clone(),
                    )
                });
                self.op += 1;
                *self.phase.make_mut() = Phase::Holding(Lease {
                    op: self.op,
                    held,
                    keeper,
                    work: Work::Running(self.clock.saturating_add(env.spec.work_ticks)),
                    releasing: None,
                    extend_at: env
                        .spec
                        .extend_after_ticks
                        .map(|t| self.clock.saturating_add(t)),
                    extending: None,
                    // The world counts this grant after the step: counted here, so that
                    // only a grant to another makes a late extension a revival over it.
                    grants_before: env.grants.saturating_add(1),
                });
                true
            }
            Some(AcquireEvent::Retry {
                window,
                failure,
                wake_on_release,
                ..
            }) => {
                let timer = self.faults.acquire_timer(a.round, window.earliest());
                a.waiting.round_lost(&failure, wake_on_release, timer);
                while let Some(mark) = a.waiting.poll_transmit() {
                    self.issue(a.op, mark, env);
                }
                a.lost_a_round = true;
                *self.phase.make_mut() = Phase::Acquiring(a);
                false
            }
            Some(_) => {
                self.end_acquisition(&mut a, env);
                self.next_iteration(env);
                true
            }
        }
    }

    /// The acquisition ended (granted or failed): its waiting marks are removed from the
    /// nodes, and its subscription ends with it, taking the release notifications still on
    /// their way. Delivered, those could change nothing but their queue: only an
    /// acquisition hears a notification, and a later one cannot have read the token a
    /// notification carries on the node it came from (that release deleted the token's only
    /// `SET` there, and a round writes a fresh token), so its `Waiting` would ignore it.
    /// Kept, they would multiply the states of every later step by the orders of their
    /// deliveries.
    fn end_acquisition(&mut self, a: &mut Acquiring, env: &mut Env<'_>) {
        a.waiting.stop();
        while let Some(unmark) = a.waiting.poll_transmit() {
            self.issue(a.op, unmark, env);
        }
        for link in &mut self.links {
            if !link.notices.is_empty() {
                link.make_mut().notices.clear();
            }
        }
    }

    fn next_iteration(&mut self, env: &mut Env<'_>) {
        self.iteration += 1;
        if self.iteration >= env.spec.iterations {
            *self.phase.make_mut() = Phase::Done;
        } else {
            self.begin_acquire(env);
        }
    }
}

/// The model's lock key and the names its commands carry: constants, so that a state's
/// clone copies them where shared names would count every clone on one counter that every
/// thread writes (`LockKey::from_static`).
pub(super) fn model_keys() -> (LockKey, Keys) {
    const KEY: &str = "redlock:model";
    let key = LockKey::from_static(DEFAULT_KEY_PREFIX, KEY).expect("a constant, valid key");
    let keys = Keys {
        key: Name::Static(KEY),
        fence_key: Name::Static("redlock:model\0fence"),
        wait_key: Name::Static("redlock:model\0wait{redlock:model}"),
    };
    debug_assert_eq!(*keys.fence_key, key.fence_key());
    debug_assert_eq!(*keys.wait_key, key.wait_key());
    (key, keys)
}
