//! The partial-order reduction: sleep sets over the model's steps, with the visited set's
//! rule for states reached again (docs/simulator.md, "Partial-order reduction", states the
//! independence relation and why it is sound).
//!
//! Two steps enabled in a state are *independent* there when neither disables the other
//! and both orders lead to the same state with the same judgement. Once a step `u` has been
//! taken from a state, each later sibling `t` independent of `u` need not take `u` again
//! below it: `u` is *asleep* in the state `t` leads to, and stays asleep along steps
//! independent of it. Every reachable state is still reached (sleep sets prune steps, not
//! states); what is saved is the successors computed.
//!
//! With a visited set, a state reached again with a sleep set that lacks steps asleep at
//! every earlier visit must take those steps now (Godefroid's rule for sleep sets with
//! state caching): the set keeps, with each fingerprint, the steps asleep at every visit so
//! far (their intersection), and a later visit takes those of them not asleep in it.

use super::client::{Happened, Msg};
use super::model::{Action, Link, Model};
use super::spec::PauseKind;
use super::state::{CheckState, MAX_CLIENTS, MAX_NODES, Naming, Symmetry};
use super::visited::{Seen, Visit};
use crate::net::message::NodeOp;

/// What a step did that another step may notice (bits): a token drawn (an acquisition
/// begun, which a release's notification reaches or not, as the release comes after it or
/// before), a grant (the grant counter and the highest fence), a read of the grant counter
/// (an extension's outcome), a broken property. Tokens are drawn per client (`token.rs`):
/// two clients' draws touch nothing shared.
const TOKENS: u8 = 1;
const GRANT: u8 = 2;
const READS_GRANTS: u8 = 4;
const VIOLATION: u8 = 8;

/// The shared things a step at `before` touched, leading to `after`.
fn effect(before: &CheckState, after: &CheckState, happened: &Happened) -> u8 {
    let mut effect = 0;
    if after.tokens_drawn() != before.tokens_drawn() {
        effect |= TOKENS;
    }
    if happened.granted.is_some() || after.grants != before.grants {
        effect |= GRANT;
    }
    if happened.extended {
        effect |= READS_GRANTS;
    }
    if after.violation.is_some() {
        effect |= VIOLATION;
    }
    effect
}

/// Whether steps with effects `a` and `b` touch a shared thing, one of them writing it.
fn effects_conflict(a: u8, b: u8) -> bool {
    let grants = |x: u8, y: u8| x & GRANT != 0 && y & (GRANT | READS_GRANTS) != 0;
    (a | b) & VIOLATION != 0 || grants(a, b) || grants(b, a)
}

/// A sleep set: steps by their index in a [`Numbering`], each with the effect it had where
/// it was taken (the same wherever it is asleep: nothing it reads changed since).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sleep {
    members: u64,
    tokens: u64,
    grants: u64,
    reads: u64,
}

impl Sleep {
    fn add(&mut self, index: u8, effect: u8) {
        let bit = 1u64 << index;
        self.members |= bit;
        let set = |mask: &mut u64, on: bool| *mask = (*mask & !bit) | if on { bit } else { 0 };
        set(&mut self.tokens, effect & TOKENS != 0);
        set(&mut self.grants, effect & GRANT != 0);
        set(&mut self.reads, effect & READS_GRANTS != 0);
    }

    fn effect(&self, index: u8) -> u8 {
        let on = |mask: u64, flag: u8| if mask >> index & 1 != 0 { flag } else { 0 };
        on(self.tokens, TOKENS) | on(self.grants, GRANT) | on(self.reads, READS_GRANTS)
    }

    /// Only the members in `mask`.
    fn keep(&self, mask: u64) -> Self {
        Self {
            members: self.members & mask,
            tokens: self.tokens & mask,
            grants: self.grants & mask,
            reads: self.reads & mask,
        }
    }
}

/// What a state in the frontier is to take: every enabled step but those asleep, or, when
/// reached again, only `only` (steps asleep at every earlier visit but not at this one).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pending {
    pub(super) sleep: Sleep,
    pub(super) only: Option<u64>,
}

/// Where a successor goes: new, reached again with steps still to take, or done.
pub(super) enum Next {
    New(Pending),
    Again(Pending),
    Seen,
}

/// Which steps may sleep, and their indices: groups in order of how often they are
/// enabled (deliveries, timers and stops, the nodes' steps, losses, delays, pauses), each
/// group whole or not at all within 64 indices. A step outside them never sleeps (which
/// is sound: a smaller sleep set only prunes less).
#[derive(Debug)]
pub(super) struct Numbering {
    clients: usize,
    nodes: usize,
    /// The first index of each group, `None` for a group left out.
    starts: [Option<u8>; 6],
    /// Each index's step.
    actions: Vec<Action>,
}

const DELIVER: usize = 0;
const TIMER: usize = 1;
const NODE: usize = 2;
const DROP: usize = 3;
const DELAY: usize = 4;
const PAUSE: usize = 5;

fn link_index(link: Link) -> usize {
    match link {
        Link::ToNode => 0,
        Link::ToClient => 1,
        Link::Notice => 2,
    }
}

const LINKS: [Link; 3] = [Link::ToNode, Link::ToClient, Link::Notice];

impl Numbering {
    pub(super) fn new(clients: usize, nodes: usize) -> Self {
        let sizes = [
            3 * clients * nodes,
            2 * clients,
            3 * nodes,
            3 * clients * nodes,
            2 * clients * nodes,
            clients,
        ];
        let mut numbering = Self {
            clients,
            nodes,
            starts: [None; 6],
            actions: Vec::new(),
        };
        let mut next = 0;
        for (group, size) in sizes.into_iter().enumerate() {
            if clients <= MAX_CLIENTS && next + size <= 64 {
                numbering.starts[group] = Some(next as u8);
                next += size;
            }
        }
        numbering.actions = vec![Action::Fire(0); next];
        for action in numbering.every_action() {
            if let Some(i) = numbering.index(action) {
                numbering.actions[usize::from(i)] = action;
            }
        }
        numbering
    }

    /// Every step that has a group.
    fn every_action(&self) -> Vec<Action> {
        let mut all = Vec::new();
        for c in 0..self.clients as u8 {
            all.extend([Action::Fire(c), Action::StopWork(c), Action::Pause(c)]);
            for node in 0..self.nodes as u8 {
                for link in LINKS {
                    let at = (c, node, link);
                    all.push(Action::Deliver {
                        client: at.0,
                        node: at.1,
                        link: at.2,
                    });
                    all.push(Action::Drop {
                        client: at.0,
                        node: at.1,
                        link: at.2,
                    });
                    if link != Link::ToClient {
                        all.push(Action::Delay {
                            client: at.0,
                            node: at.1,
                            link: at.2,
                        });
                    }
                }
            }
        }
        for n in 0..self.nodes as u8 {
            all.extend([Action::Restart(n), Action::Crash(n), Action::Jump(n)]);
        }
        all
    }

    /// A step's index, if it may sleep.
    fn index(&self, action: Action) -> Option<u8> {
        let per_link = |client: u8, node: u8| usize::from(client) * self.nodes + usize::from(node);
        let (group, offset) = match action {
            Action::Deliver { client, node, link } => {
                (DELIVER, per_link(client, node) * 3 + link_index(link))
            }
            Action::Fire(c) => (TIMER, usize::from(c) * 2),
            Action::StopWork(c) => (TIMER, usize::from(c) * 2 + 1),
            Action::Restart(n) => (NODE, usize::from(n) * 3),
            Action::Crash(n) => (NODE, usize::from(n) * 3 + 1),
            Action::Jump(n) => (NODE, usize::from(n) * 3 + 2),
            Action::Drop { client, node, link } => {
                (DROP, per_link(client, node) * 3 + link_index(link))
            }
            // A delayed reply (a rare fault) has no index, so that two clients at three
            // nodes keep the delays of commands and notifications within 64.
            Action::Delay {
                link: Link::ToClient,
                ..
            } => return None,
            Action::Delay { client, node, link } => (
                DELAY,
                per_link(client, node) * 2 + usize::from(link == Link::Notice),
            ),
            Action::Pause(c) => (PAUSE, usize::from(c)),
            // A restart with a delivery is taken whole, never put to sleep.
            Action::Tick { .. } | Action::Start(_) | Action::Resume(_) | Action::Revive { .. } => {
                return None;
            }
        };
        Some(self.starts[group]? + offset as u8)
    }

    /// `mask` with every client's step named by `naming.clients[client]` and every node's
    /// by `naming.nodes[node]` instead.
    fn rename(&self, mask: u64, naming: &Naming) -> u64 {
        let c = |client: u8| naming.clients[usize::from(client)];
        let n = |node: u8| naming.nodes[usize::from(node)];
        let mut out = 0;
        for i in bits(mask) {
            let action = match self.actions[usize::from(i)] {
                Action::Fire(client) => Action::Fire(c(client)),
                Action::StopWork(client) => Action::StopWork(c(client)),
                Action::Pause(client) => Action::Pause(c(client)),
                Action::Deliver { client, node, link } => Action::Deliver {
                    client: c(client),
                    node: n(node),
                    link,
                },
                Action::Drop { client, node, link } => Action::Drop {
                    client: c(client),
                    node: n(node),
                    link,
                },
                Action::Delay { client, node, link } => Action::Delay {
                    client: c(client),
                    node: n(node),
                    link,
                },
                Action::Crash(node) => Action::Crash(n(node)),
                Action::Restart(node) => Action::Restart(n(node)),
                Action::Jump(node) => Action::Jump(n(node)),
                other => other,
            };
            if let Some(j) = self.index(action) {
                out |= 1 << j;
            }
        }
        out
    }
}

fn bits(mask: u64) -> impl Iterator<Item = u8> {
    let mut rest = mask;
    std::iter::from_fn(move || {
        if rest == 0 {
            return None;
        }
        let i = rest.trailing_zeros() as u8;
        rest &= rest - 1;
        Some(i)
    })
}

/// What a step reads or writes of the clients and nodes (bit sets), whether it spends the
/// fault budget, and whether it performs a release at a node; `None` for the steps
/// dependent on every other (true time moving on, a start, a resume: each reads or keeps
/// whether the tick is fresh).
#[derive(Clone, Copy, Debug)]
struct Footprint {
    clients: u8,
    nodes: u8,
    fault: bool,
    release: bool,
}

/// The step's footprint in `state`. A release performed at a node notifies every client
/// acquiring then (a client becomes one only by a start or by a new acquisition, which
/// takes a token: see [`independent`]); a crash breaks every client's connection to the
/// node (all clients).
fn footprint(model: &Model, state: &CheckState, action: Action) -> Option<Footprint> {
    let all = u8::MAX;
    let one = |i: u8| 1u8 << i;
    let acquiring = state
        .clients
        .iter()
        .enumerate()
        .filter(|(_, c)| c.is_acquiring())
        .fold(0u8, |set, (c, _)| set | one(c as u8));
    let performs = |client: u8, node: u8| {
        let link = &state.clients[usize::from(client)].links[usize::from(node)];
        let release = matches!(
            link.to_node.front(),
            Some(Msg::Request {
                cmd: NodeOp::ReleaseIfOwner { .. },
                ..
            })
        );
        if release {
            (one(client) | acquiring, true)
        } else {
            (one(client), false)
        }
    };
    let (clients, nodes, fault, release) = match action {
        Action::Tick { .. } | Action::Start(_) | Action::Resume(_) => return None,
        Action::Fire(c) | Action::StopWork(c) => (one(c), 0, false, false),
        Action::Pause(c) => (one(c), 0, true, false),
        Action::Deliver {
            client,
            node,
            link: Link::ToNode,
        } => {
            let (clients, release) = performs(client, node);
            (clients, one(node), false, release)
        }
        // Performed, with the reply lost or delayed.
        Action::Drop {
            client,
            node,
            link: Link::ToClient,
        }
        | Action::Delay {
            client,
            node,
            link: Link::ToClient,
        } => {
            let (clients, release) = performs(client, node);
            (clients, one(node), true, release)
        }
        Action::Deliver { client, .. } => (one(client), 0, false, false),
        Action::Drop { client, .. } | Action::Delay { client, .. } => (one(client), 0, true, false),
        Action::Crash(n) => (all, one(n), true, false),
        // Taken lazily once no fault can follow (`Model::actions`), a restart is enabled
        // only while true time may move on, which a step that sends a command ends: then
        // it is dependent on every step, as a tick is.
        Action::Restart(_) if !model.budget_left(state) => return None,
        // Before, it is enabled as its node allows; the fault that spends the budget's last
        // may disable it (true time may then not move on): it counts as a fault here, so
        // that it is dependent on every fault.
        Action::Restart(n) => (0, one(n), true, false),
        Action::Jump(n) => (0, one(n), true, false),
        Action::Revive { client, node } => {
            let (clients, release) = performs(client, node);
            (clients, one(node), false, release)
        }
    };
    Some(Footprint {
        clients,
        nodes,
        fault,
        release,
    })
}

/// Whether a pause may still be taken from `state`: then the last actor is part of the
/// state (a pause follows its client's own step), and steps of different actors are
/// dependent.
fn pause_possible(model: &Model, state: &CheckState) -> bool {
    model.spec.pause != PauseKind::None && state.faults_used < model.spec.fault_budget
}

/// Whether steps `a` and `b`, both enabled in `state`, with the effects they have there,
/// are independent in `state`.
fn independent(model: &Model, state: &CheckState, a: (Action, u8), b: (Action, u8)) -> bool {
    if effects_conflict(a.1, b.1) {
        return false;
    }
    let (Some(fa), Some(fb)) = (footprint(model, state, a.0), footprint(model, state, b.0)) else {
        return false;
    };
    if fa.fault && fb.fault {
        return false;
    }
    // A client that begins an acquisition (a token) may be notified by a release or not,
    // as the release comes after it or before.
    if (fa.release && b.1 & TOKENS != 0) || (fb.release && a.1 & TOKENS != 0) {
        return false;
    }
    if a.0.client() != b.0.client() && pause_possible(model, state) {
        return false;
    }
    fa.clients & fb.clients == 0 && fa.nodes & fb.nodes == 0
}

/// The reduction for one exploration, or its absence.
pub(super) struct Reduction<'a> {
    model: &'a Model,
    numbering: Numbering,
    pub(super) on: bool,
    /// The fingerprints' hash seed (0, or a swarm member's).
    seed: u64,
}

impl<'a> Reduction<'a> {
    pub(super) fn new(model: &'a Model, on: bool, seed: u64) -> Self {
        Self {
            model,
            numbering: Numbering::new(model.spec.clients, model.spec.nodes),
            on,
            seed,
        }
    }

    /// The steps that may sleep (none when off), as a mask.
    pub(super) fn steps(&self) -> u64 {
        match self.numbering.actions.len() {
            _ if !self.on => 0,
            64 => u64::MAX,
            n => (1 << n) - 1,
        }
    }

    /// Leaves in `actions` the steps `pending` takes.
    pub(super) fn select(&self, actions: &mut Vec<Action>, pending: &Pending) {
        if !self.on {
            return;
        }
        actions.retain(|&a| match (self.numbering.index(a), pending.only) {
            (Some(i), Some(only)) => only >> i & 1 != 0,
            (None, Some(_)) => false,
            (Some(i), None) => pending.sleep.members >> i & 1 == 0,
            (None, None) => true,
        });
    }

    /// The state after `action` from `state`, judged, and the sleep set it is reached
    /// with; `asleep` (the steps asleep in `state` and those already taken from it) gains
    /// `action`.
    pub(super) fn successor(
        &self,
        state: &CheckState,
        action: Action,
        asleep: &mut Sleep,
    ) -> (CheckState, u8, Sleep) {
        let (next, reached, happened) = self.model.successor_happened(state, action);
        if !self.on {
            return (next, reached, Sleep::default());
        }
        let effect = effect(state, &next, &happened);
        let mut keep = 0;
        for i in bits(asleep.members) {
            let u = (self.numbering.actions[usize::from(i)], asleep.effect(i));
            if independent(self.model, state, u, (action, effect)) {
                keep |= 1 << i;
            }
        }
        let child = asleep.keep(keep);
        if let Some(i) = self.numbering.index(action)
            && effect & VIOLATION == 0
        {
            asleep.add(i, effect);
        }
        (next, reached, child)
    }

    /// Records `next`, reached with `sleep`, in `visited`: what it is still to take.
    pub(super) fn visit(
        &self,
        visited: &impl Seen,
        next: &CheckState,
        sleep: Sleep,
        symmetry: Symmetry,
    ) -> Next {
        if !self.on {
            let fp = next.fingerprint(symmetry, self.seed);
            return if visited.insert(fp) {
                Next::New(Pending::default())
            } else {
                Next::Seen
            };
        }
        let (fp, naming) = next.fingerprint_ranked(symmetry, self.seed);
        // Steps are recorded by the clients' places in the fingerprint's order and the
        // nodes' numbers in its renumbering; where no one naming is the fingerprint's (two
        // clients hash alike, or the state is its own image under a renumbering), nothing
        // sleeps.
        let (sleep, canonical) = match &naming {
            Some(naming) => (sleep, self.numbering.rename(sleep.members, naming)),
            None => (Sleep::default(), 0),
        };
        match visited.visit(fp, canonical) {
            Visit::New => Next::New(Pending { sleep, only: None }),
            Visit::Seen => Next::Seen,
            Visit::Again(canonical) => {
                let mut back = Naming {
                    clients: [0; MAX_CLIENTS],
                    nodes: [0; MAX_NODES],
                };
                if let Some(naming) = naming {
                    for (c, &rank) in naming.clients.iter().enumerate().take(next.clients.len()) {
                        back.clients[usize::from(rank)] = c as u8;
                    }
                    for (n, &rank) in naming.nodes.iter().enumerate().take(next.nodes.len()) {
                        back.nodes[usize::from(rank)] = n as u8;
                    }
                }
                let only = self.numbering.rename(canonical, &back);
                Next::Again(Pending {
                    sleep,
                    only: Some(only),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Walks `file`'s model depth first over up to `limit` distinct states and, in each, for
    /// every two enabled steps the relation calls independent, takes both orders: each step
    /// stays enabled after the other, both orders reach the same state having reached the
    /// same *sometimes* properties, and each step has the same effect after the other as
    /// before it. Returns the pairs so checked.
    fn diamonds(file: &str, limit: usize) -> usize {
        let model = super::super::model::catalogue_model(file);
        let mut seen = HashSet::new();
        let mut stack = vec![model.initial()];
        let (mut actions, mut after) = (Vec::new(), Vec::new());
        let mut pairs = 0;
        while let Some(s) = stack.pop() {
            if seen.len() >= limit || !seen.insert(s.fingerprint(Symmetry::NONE, 0)) {
                continue;
            }
            model.actions(&s, &mut actions);
            let steps: Vec<_> = actions
                .iter()
                .map(|&a| {
                    let (next, reached, happened) = model.successor_happened(&s, a);
                    let e = effect(&s, &next, &happened);
                    (a, next, reached, e)
                })
                .collect();
            for (i, (u, su, ru, eu)) in steps.iter().enumerate() {
                for (t, st, rt, et) in &steps[i + 1..] {
                    let one = independent(&model, &s, (*u, *eu), (*t, *et));
                    let other = independent(&model, &s, (*t, *et), (*u, *eu));
                    assert_eq!(one, other, "{file}: {u} and {t}: not symmetric");
                    if !one {
                        continue;
                    }
                    pairs += 1;
                    let what = format!("{file}: {u} and {t} in {}", model.describe(&s));
                    model.actions(su, &mut after);
                    assert!(after.contains(t), "{what}: {u} disables {t}");
                    model.actions(st, &mut after);
                    assert!(after.contains(u), "{what}: {t} disables {u}");
                    let (sut, rut, hut) = model.successor_happened(su, *t);
                    let (stu, rtu, htu) = model.successor_happened(st, *u);
                    assert!(sut == stu, "{what}: the orders differ");
                    assert_eq!(ru | rut, rt | rtu, "{what}: reached");
                    assert_eq!(effect(su, &sut, &hut), *et, "{what}: {t}'s effect");
                    assert_eq!(effect(st, &stu, &htu), *eu, "{what}: {u}'s effect");
                }
            }
            stack.extend(steps.into_iter().map(|(_, next, _, _)| next));
        }
        pairs
    }

    #[test]
    fn steps_called_independent_commute_in_the_catalogues_models() {
        // Between them: drift, crashes with and without quarantine, pauses, losses and
        // delays, keep-alive, fencing, clock jumps, three clients, five nodes, a release
        // before the stop.
        let files = [
            "shipped-drift.toml",
            "shipped-crash.toml",
            "no-restart-quarantine.toml",
            "shipped-pause-loss.toml",
            "teeth-s3-pause-loss.toml",
            "keep-alive-never-stops-delayed.toml",
            "stop-first.toml",
            "release-first.toml",
            "fencing-drift.toml",
            "fencing-crash-mutation.toml",
            "no-elapsed-check.toml",
            "teeth-s5-three-clients.toml",
            "teeth-s6-five-nodes.toml",
            "plain-del-release.toml",
        ];
        for file in files {
            let pairs = diamonds(file, 3_000);
            assert!(pairs > 0, "{file}: no independent pair met");
        }
    }

    #[test]
    fn numbering_renames_and_keeps_whole_groups() {
        let n = Numbering::new(2, 3);
        // 18 deliveries, 4 timers, 9 node steps, 18 losses, 12 delays, 2 pauses.
        assert_eq!(n.actions.len(), 63);
        for (i, &a) in n.actions.iter().enumerate() {
            assert_eq!(n.index(a), Some(i as u8), "{a}");
        }
        let identity = [0, 1, 2, 3, 4, 5, 6, 7];
        let swap = Naming {
            clients: [1, 0, 2, 3, 4, 5, 6, 7],
            nodes: identity,
        };
        let fire0 = 1 << n.index(Action::Fire(0)).unwrap();
        let fire1 = 1 << n.index(Action::Fire(1)).unwrap();
        assert_eq!(n.rename(fire0, &swap), fire1);
        let rotate = Naming {
            clients: identity,
            nodes: [1, 2, 0, 3, 4, 5, 6, 7],
        };
        let crash0 = 1 << n.index(Action::Crash(0)).unwrap();
        let crash1 = 1 << n.index(Action::Crash(1)).unwrap();
        assert_eq!(n.rename(crash0, &rotate), crash1);
        // Three clients and five nodes: the nodes' steps, losses and delays do not fit (a
        // group is whole or left out); the pauses do.
        let big = Numbering::new(3, 5);
        assert_eq!(big.actions.len(), 45 + 6 + 3);
        let drop = Action::Drop {
            client: 0,
            node: 0,
            link: Link::ToNode,
        };
        assert_eq!((big.index(drop), big.index(Action::Crash(0))), (None, None));
        assert_eq!(big.index(Action::Pause(2)), Some(53));
    }
}
