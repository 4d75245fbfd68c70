//! A node of the model: its keys (the simulator's [`Store`], the same operations as a
//! simulated server), its clock in ticks, and its incarnations.

use std::hash::{Hash, Hasher};
use std::time::Duration;

use redlock_core::Token;

use super::client_symmetry::Owners;
use super::fingerprint::{Fingerprint, Hasher128};
use super::rate::Strays;
use super::shared::{MemoKey, PLAIN, Shared};
use super::spec::{CheckSpec, Durability};
use crate::net::message::{NodeOp, NodeReply, ServerId};
use crate::node::store::Store;

/// How long the first incarnation had run before the check began: long enough that no
/// restart quarantine applies to it.
const UPTIME_BEFORE: Duration = Duration::from_secs(24 * 60 * 60);

/// How many fingerprints of itself a node remembers: its own (for node symmetry's order)
/// and one under each renaming of the clients the canonical form tries (usually one or
/// two).
const NODE_MEMO: usize = 4;

/// A node of a state, shared with the states that have it alike.
pub(super) type SharedNode = Shared<Node, NODE_MEMO>;

/// `node`'s own fingerprint under `seed`, with its tokens' owners renamed by `owners` (as
/// they are for `None`), remembered with the node: a step writes one node at most but a
/// tick, and a state's fingerprint hashes every node once or more.
pub(super) fn fingerprint(node: &SharedNode, owners: Option<&Owners>, seed: u64) -> Fingerprint {
    let tag = owners.map_or(PLAIN, Owners::tag);
    let hash = || {
        let mut h = Hasher128::seeded(seed);
        match owners {
            None => node.hash(&mut h),
            Some(owners) => node.hash_renamed(|t| owners.rename(t), &mut h),
        }
        (h.finish128(), false)
    };
    node.memo().get_or(MemoKey { seed, tag }, hash).0
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Node {
    pub(super) up: bool,
    /// Starts at 1; a restart is a new one (a new `run_id`).
    pub(super) incarnation: u8,
    pub(super) keys: Store,
    /// Its clock, in ticks.
    pub(super) clock: u32,
    /// Milliseconds its clock has moved within the current tick: one per command performed
    /// (a real clock does not stand still between two commands; a key whose expiry is due
    /// is gone for the next command, as it would be a moment later).
    within_tick_ms: u32,
    /// Its clock when the current incarnation started.
    started: u32,
    pub(super) strays: Strays,
    /// Ticks of true time since it crashed, while down.
    pub(super) down_for: u32,
}

impl Node {
    pub(super) fn new() -> Self {
        Self {
            up: true,
            incarnation: 1,
            keys: Store::default(),
            clock: 0,
            within_tick_ms: 0,
            started: 0,
            strays: Strays::default(),
            down_for: 0,
        }
    }

    /// Feeds `h` what the derived `Hash` of this node would with every token renamed by
    /// `rename` (client symmetry, `client_symmetry.rs`): the same fields in the same order.
    pub(super) fn hash_renamed<H: Hasher>(&self, rename: impl Fn(Token) -> Token, h: &mut H) {
        self.up.hash(h);
        self.incarnation.hash(h);
        self.keys.hash_renamed(rename, h);
        self.clock.hash(h);
        self.within_tick_ms.hash(h);
        self.started.hash(h);
        self.strays.hash(h);
        self.down_for.hash(h);
    }

    /// Performs `op` (the node is up), as the server `index`.
    pub(super) fn execute(&mut self, index: usize, op: &NodeOp, spec: &CheckSpec) -> NodeReply {
        match op {
            NodeOp::Ping => NodeReply::Pong,
            NodeOp::Identify => {
                let before = if self.incarnation == 1 {
                    UPTIME_BEFORE
                } else {
                    Duration::ZERO
                };
                let uptime = spec
                    .ticks(self.clock.saturating_sub(self.started))
                    .saturating_add(before);
                NodeReply::Identity {
                    server: ServerId {
                        server: index,
                        incarnation: u64::from(self.incarnation),
                    },
                    uptime_ms: u64::try_from(uptime.as_millis()).unwrap_or(u64::MAX),
                }
            }
            _ => {
                let now_ms = self.now_ms(spec);
                let tick_ms = u32::try_from(spec.tick.as_millis()).unwrap_or(u32::MAX);
                self.within_tick_ms = (self.within_tick_ms + 1).min(tick_ms.saturating_sub(1));
                self.keys.execute(op, now_ms).0
            }
        }
    }

    /// Its clock in milliseconds, as Redis reads it.
    pub(super) fn now_ms(&self, spec: &CheckSpec) -> u64 {
        let ticks = u64::try_from(spec.ticks(self.clock).as_millis()).unwrap_or(u64::MAX);
        ticks.saturating_add(u64::from(self.within_tick_ms))
    }

    /// The first millisecond of its clock's next tick.
    pub(super) fn next_tick_ms(&self, spec: &CheckSpec) -> u64 {
        let next = spec.ticks(self.clock.saturating_add(1));
        u64::try_from(next.as_millis()).unwrap_or(u64::MAX)
    }

    /// True time moves on a tick; its clock by `ticks`.
    pub(super) fn tick(&mut self, ticks: u32) {
        self.clock = self.clock.saturating_add(ticks);
        self.within_tick_ms = 0;
    }

    pub(super) fn crash(&mut self, durability: Durability) {
        self.up = false;
        self.down_for = 0;
        if durability == Durability::None {
            self.keys = Store::default();
        }
    }

    pub(super) fn restart(&mut self) {
        self.up = true;
        self.incarnation = self.incarnation.saturating_add(1);
        self.started = self.clock;
    }
}
