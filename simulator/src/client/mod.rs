//! A simulated client: a workload that drives the very same `redlock_core` machines as the
//! tokio client and the `redlock` command, over the simulated network and the client's own
//! clock.
//!
//! | file | job |
//! |---|---|
//! | `mod.rs` | the client's state, the world's events, routing replies |
//! | [`lock`] | the lease's life: acquire (with retries), mint a token, release |
//! | [`hold`] | holding the lease: keep-alive, supervisor, manual extensions |
//! | [`holding`] | what a held lease is: the lease and the machines that run while it is held |
//! | [`workload`] | the critical section (reads, writes, sleeps, checks, extensions, pauses) |
//! | [`pump`] | the one loop that runs any core machine |
//! | [`links`] | connections, their identification, and the core's restart quarantine |
//! | [`faults`] | the implementation faults (cause C), all lies told to the unmodified core |
//! | [`tokens`] | where fencing tokens come from, including the Redis-counter strawman |
//!
//! Every decision of the shipped client comes from the core: quorum, validity, retries,
//! cleanup, fencing, keep-alive schedule, stop schedule and restart quarantine. A `SAFE`
//! verdict for a client without faults is therefore a verdict on the code the tokio client
//! and the `redlock` command run, with their defaults.

pub(crate) mod faults;
mod hold;
mod holding;
mod links;
mod lock;
mod pump;
mod tokens;
mod workload;

use crate::net::name::Name;
use std::collections::VecDeque;

use rand_chacha::ChaCha8Rng;
use redlock_core::{LockKey, NodeFailure, RequestId, Timestamp, Transmit};

use self::faults::{Faults, Keys};
use self::links::{Links, Out};
use self::lock::Lock;
use self::workload::{Under, Work};
use crate::judge::history::{ClientOutcome, History};
use crate::net::message::{Msg, NodeReply, ServerId, Tag};
use crate::scenario::{ClientSpec, ClockKind, TokenSource};
use crate::time::Nanos;
use crate::time::clock::ClockModel;

/// What a client asks the world to do.
pub(crate) enum Outgoing {
    /// Send to node address `address` (the world routes it to a server).
    Node { address: usize, msg: Msg },
    /// Send to the protected resource.
    Resource { msg: Msg },
    /// Call `on_wake` at this true time for this timer and generation.
    Wake {
        at: Nanos,
        timer: Timer,
        generation: u64,
    },
    /// Stop the world for this client until the given true time.
    Pause { until: Nanos },
}

/// A client's two timers: the lease's side (machines, keep-alive, supervisor) and the
/// workload's. A supervised command keeps running while its supervisor is paused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    Lock,
    Work,
}

impl Timer {
    fn index(self) -> usize {
        match self {
            Self::Lock => 0,
            Self::Work => 1,
        }
    }
}

/// The world's services, lent to a client for one event.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Nanos,
    pub(crate) rng: &'a mut ChaCha8Rng,
    pub(crate) out: &'a mut Vec<Outgoing>,
    pub(crate) history: &'a mut History,
    pub(crate) epochs: &'a mut u64,
    pub(crate) tokens: TokenSource,
    pub(crate) trace: &'a mut Option<String>,
}

impl Ctx<'_> {
    fn trace(&mut self, who: &str, what: std::fmt::Arguments<'_>) {
        if let Some(trace) = self.trace {
            use std::fmt::Write;
            let _ = writeln!(
                trace,
                "{:>16} {who:<10} {what}",
                crate::time::fmt_ms(self.now)
            );
        }
    }
}

pub(crate) struct Client {
    pub(crate) id: usize,
    pub(crate) spec: ClientSpec,
    pub(crate) clock: ClockModel,
    key: LockKey,
    keys: Keys,
    faults: Faults,
    links: Links,
    lock: Lock,
    work: Work,
    /// The lease the running workload acts under.
    under: Option<Under>,
    /// The lease side's current operation; replies to older ones are ignored.
    op: u64,
    generations: [u64; 2],
    iteration: u32,
    /// Failures to feed back to the lease side's machine: commands the core refused to send
    /// (a quarantined node) or that cannot be sent.
    refused: VecDeque<(u64, RequestId, NodeFailure)>,
    pub(crate) paused_until: Option<Nanos>,
    pub(crate) crashed: bool,
}

impl Client {
    pub(crate) fn new(id: usize, spec: ClientSpec, resource: &str) -> Self {
        // A monotonic clock never steps; only a client that reads the wall clock sees steps.
        let clock = match spec.clock_kind {
            ClockKind::Wall => spec.clock.clone(),
            ClockKind::Monotonic => ClockModel::new(0, spec.clock.rate_ppm(), Vec::new()),
        };
        let key = LockKey::new("redlock:", resource).unwrap_or_else(|_| {
            LockKey::new("redlock:", "resource").expect("a constant, valid resource name")
        });
        // The same counter key as the client's scripts use (`LockKey::fence_key`).
        let keys = Keys {
            key: key.as_str().into(),
            fence_key: Name::from(key.fence_key()),
            wait_key: Name::from(key.wait_key()),
        };
        let faults = Faults::of(&spec);
        Self {
            id,
            clock,
            key,
            links: Links::new(
                id,
                spec.nodes.len(),
                spec.restart,
                spec.config.node_timeout(),
                faults,
                keys.clone(),
            ),
            keys,
            faults,
            lock: Lock::Idle(None),
            work: Work::Idle,
            under: None,
            op: 0,
            generations: [0; 2],
            iteration: 0,
            refused: VecDeque::new(),
            paused_until: None,
            crashed: false,
            spec,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.crashed || matches!(self.lock, Lock::Done)
    }

    /// Whether a pause of this client stops events of `timer`'s side: a supervised
    /// command keeps running while its supervisor process is stopped.
    pub(crate) fn pauses(&self, timer: Timer) -> bool {
        self.spec.supervisor.is_none() || timer == Timer::Lock
    }

    /// The client's clock at true time `t`.
    fn local(&self, t: Nanos) -> Timestamp {
        Timestamp::from_nanos(self.clock.read(t))
    }

    /// Wakes `timer` when the client's clock reads `local`.
    fn wake_at(&mut self, ctx: &mut Ctx<'_>, timer: Timer, local: Timestamp) {
        let at = self.clock.when(local.as_nanos(), ctx.now);
        self.wake_true(ctx, timer, at);
    }

    /// Wakes `timer` at true time `at`.
    fn wake_true(&mut self, ctx: &mut Ctx<'_>, timer: Timer, at: Nanos) {
        let generation = &mut self.generations[timer.index()];
        *generation += 1;
        ctx.out.push(Outgoing::Wake {
            at,
            timer,
            generation: *generation,
        });
    }

    /// Forgets `timer`'s pending wake.
    fn cancel(&mut self, timer: Timer) {
        self.generations[timer.index()] += 1;
    }

    fn outcome(&self, ctx: &mut Ctx<'_>, what: ClientOutcome) {
        ctx.trace(&self.spec.name, format_args!("{what}"));
        ctx.history.outcomes[self.id].push(what);
    }

    // ----- events from the world ------------------------------------------------------

    pub(crate) fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        self.begin_acquire(ctx);
        self.settle(ctx);
    }

    pub(crate) fn on_wake(&mut self, ctx: &mut Ctx<'_>, timer: Timer, generation: u64) {
        if generation != self.generations[timer.index()] || self.crashed {
            return;
        }
        // Time moved on: commands whose budget ran out while they waited give way.
        let now = self.local(ctx.now);
        let out = self.links.flush_all(now);
        self.deliver(ctx, out);
        match timer {
            Timer::Lock => self.lock_timer(ctx),
            Timer::Work => self.work_timer(ctx),
        }
        self.settle(ctx);
    }

    /// A message on the lock key's channel, over the subscription to node `node`.
    pub(crate) fn on_notify(
        &mut self,
        ctx: &mut Ctx<'_>,
        node: usize,
        channel: &str,
        payload: &[u8],
    ) {
        if self.crashed {
            return;
        }
        self.notified(ctx, node, channel, payload);
    }

    pub(crate) fn on_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: u64,
        tag: Tag,
        conn: redlock_core::ConnectionId,
        server: ServerId,
        reply: NodeReply,
    ) {
        if self.crashed {
            return;
        }
        let index = tag.node();
        let now = self.local(ctx.now);
        let (broke, out) = self.links.answered(index, conn, server, &reply, now);
        if broke {
            ctx.trace(
                &self.spec.name,
                format_args!("connection to node #{index} broke: {reply:?}"),
            );
        }
        self.deliver(ctx, out);
        match tag {
            Tag::Identify(_) => {
                let (events, out) = self.links.identified(index, conn, &reply, now);
                for event in events {
                    let line = Links::describe(&event);
                    ctx.trace(&self.spec.name, format_args!("{line}"));
                }
                self.deliver(ctx, out);
            }
            Tag::Probe(_) => {
                let out = self.links.probed(index, conn, &reply, now);
                self.deliver(ctx, out);
            }
            Tag::Core { request, .. } if op == self.op => {
                let result = match reply {
                    NodeReply::Core(reply) => Ok(reply),
                    NodeReply::Failure(failure) => Err(failure),
                    other => Err(NodeFailure::Protocol(format!("unexpected {other:?}"))),
                };
                self.lock_reply(ctx, request, result);
            }
            Tag::Mint(slot) if op == self.op => {
                if let NodeReply::Counter(value) = reply {
                    self.minted(ctx, slot, value);
                }
            }
            Tag::Core { .. } | Tag::Mint(_) => {}
        }
        self.settle(ctx);
    }

    pub(crate) fn on_access_ack(&mut self, ctx: &mut Ctx<'_>, access: usize) {
        if self.crashed {
            return;
        }
        self.access_answered(ctx, access);
        self.settle(ctx);
    }

    /// A stop-the-world pause ended.
    pub(crate) fn on_resume(&mut self, ctx: &mut Ctx<'_>) {
        if self.crashed {
            return;
        }
        self.pause_ended(ctx);
        self.settle(ctx);
    }

    pub(crate) fn crash(&mut self, ctx: &mut Ctx<'_>) {
        if self.crashed {
            return;
        }
        self.crashed = true;
        if let Some(record) = self.lock.record() {
            ctx.history.leases[record].crashed_at = Some(ctx.now);
        }
        self.lock = Lock::Done;
        self.work = Work::Idle;
        self.under = None;
        self.outcome(ctx, ClientOutcome::Crashed);
    }

    // ----- the wire -------------------------------------------------------------------

    /// Issues a command of the lease side's current machine.
    fn send(&mut self, ctx: &mut Ctx<'_>, transmit: Transmit) {
        let now = self.local(ctx.now);
        let out = self.links.issue(self.op, transmit, now);
        self.deliver(ctx, out);
    }

    /// Sends what the connections let out, and keeps the failures for the machines.
    fn deliver(&mut self, ctx: &mut Ctx<'_>, out: Vec<Out>) {
        for out in out {
            match out {
                Out::Send { index, msg } => self.send_to_node(ctx, index, msg),
                Out::Fail {
                    op,
                    request,
                    failure,
                } => self.refused.push_back((op, request, failure)),
            }
        }
    }

    fn send_to_node(&mut self, ctx: &mut Ctx<'_>, index: usize, msg: Msg) {
        if let Some(&address) = self.spec.nodes.get(index) {
            ctx.out.push(Outgoing::Node { address, msg });
        }
    }

    /// Feeds refused commands back to the machine that sent them, until none is left.
    fn settle(&mut self, ctx: &mut Ctx<'_>) {
        while let Some((op, request, failure)) = self.refused.pop_front() {
            if op == self.op && !self.crashed {
                self.lock_reply(ctx, request, Err(failure));
            }
        }
    }
}
