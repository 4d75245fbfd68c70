//! The model: every node and client, the messages between them, true time, and the steps
//! the explorer may take from any state.
//!
//! True time advances in ticks, only when no running client has something due (a process
//! does not sleep through its own timer). Between ticks, any order of the enabled steps is
//! explored: each link's next message delivered (or lost, within the fault budget), a
//! client's due timers, a work reaching its stop, a client's start (at the beginning of any
//! tick up to `start_within_ticks`), and the faults.

use std::fmt;

use redlock_core::{LockKey, Reply};

use super::client::{Client, Env, Happened, Msg, model_keys};
use super::judge::judge;
use super::node::{Node, SharedNode};
use super::shared::Shared;
use super::spec::{CheckSpec, PauseKind, WaiterMarks};
use super::state::{CheckState, SharedClient};
use crate::client::faults::Keys;
use crate::net::message::{NodeOp, NodeReply};

/// Which link a message travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// A client's commands to a node.
    ToNode,
    /// A node's replies to a client.
    ToClient,
    /// A node's release notifications to a client.
    Notice,
}

impl Link {
    const ALL: [Self; 3] = [Self::ToNode, Self::ToClient, Self::Notice];

    pub(super) fn bit(self) -> u8 {
        1 << (self as u8)
    }

    fn queue(self, client: &Client, node: usize) -> &std::collections::VecDeque<Msg> {
        match self {
            Self::ToNode => &client.links[node].to_node,
            Self::ToClient => &client.links[node].from_node,
            Self::Notice => &client.links[node].notices,
        }
    }

    fn queue_mut(self, client: &mut Client, node: usize) -> &mut std::collections::VecDeque<Msg> {
        match self {
            Self::ToNode => &mut client.links[node].make_mut().to_node,
            Self::ToClient => &mut client.links[node].make_mut().from_node,
            Self::Notice => &mut client.links[node].make_mut().notices,
        }
    }
}

/// One step of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// True time advances a tick; the clients in `slow` lose it, the nodes in `fast` gain
    /// one (bit sets).
    Tick {
        /// Clients whose clocks do not advance.
        slow: u8,
        /// Nodes whose clocks advance two ticks.
        fast: u8,
    },
    /// A client starts its first acquisition.
    Start(u8),
    /// A client's due timers fire.
    Fire(u8),
    /// A client's work, told to stop, reaches the end of its step.
    StopWork(u8),
    /// The next message on a link arrives.
    Deliver {
        /// The client.
        client: u8,
        /// The node.
        node: u8,
        /// Which way.
        link: Link,
    },
    /// The messages on a link may arrive after the next tick (a fault): without it, every
    /// message arrives before true time moves on. Named with [`Link::ToClient`], the next
    /// command on the link to the node is performed now and its reply is the one delayed.
    Delay {
        /// The client.
        client: u8,
        /// The node.
        node: u8,
        /// Which way.
        link: Link,
    },
    /// The next message on a link is lost (a fault).
    Drop {
        /// The client.
        client: u8,
        /// The node.
        node: u8,
        /// Which way.
        link: Link,
    },
    /// A node crashes (a fault).
    Crash(u8),
    /// A crashed node starts again.
    Restart(u8),
    /// A crashed node starts again, and the next command on a link to it arrives there:
    /// once no fault can follow, the only place a restart is taken besides the end of a
    /// tick (docs/simulator.md, "A restart is taken where it is seen").
    Revive {
        /// The client whose command arrives.
        client: u8,
        /// The node.
        node: u8,
    },
    /// A client's process stops (a fault).
    Pause(u8),
    /// A paused client's process goes on.
    Resume(u8),
    /// A node's clock jumps forward (a fault).
    Jump(u8),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let link =
            |f: &mut fmt::Formatter<'_>, verb: &str, client: u8, node: u8, link: Link| match link {
                Link::ToNode => write!(f, "{verb} c{client}->n{node}"),
                Link::ToClient => write!(f, "{verb} n{node}->c{client}"),
                Link::Notice => write!(f, "{verb} notice n{node}->c{client}"),
            };
        match *self {
            Self::Tick { slow, fast } => {
                f.write_str("tick")?;
                for c in bits(slow) {
                    write!(f, " slow=c{c}")?;
                }
                // Gains a tick, or loses one in a check whose node clocks are slow.
                for n in bits(fast) {
                    write!(f, " stray=n{n}")?;
                }
                Ok(())
            }
            Self::Start(c) => write!(f, "start c{c}"),
            Self::Fire(c) => write!(f, "fire c{c}"),
            Self::StopWork(c) => write!(f, "stop-work c{c}"),
            Self::Deliver {
                client,
                node,
                link: l,
            } => link(f, "deliver", client, node, l),
            Self::Delay {
                client,
                node,
                link: l,
            } => link(f, "delay", client, node, l),
            Self::Drop {
                client,
                node,
                link: l,
            } => link(f, "drop", client, node, l),
            Self::Crash(n) => write!(f, "crash n{n}"),
            Self::Restart(n) => write!(f, "restart n{n}"),
            Self::Revive { client, node } => {
                write!(f, "restart n{node}, deliver c{client}->n{node}")
            }
            Self::Pause(c) => write!(f, "pause c{c}"),
            Self::Resume(c) => write!(f, "resume c{c}"),
            Self::Jump(n) => write!(f, "jump n{n}"),
        }
    }
}

impl Action {
    /// The client whose step it is, if one's.
    pub(super) fn client(self) -> Option<usize> {
        match self {
            Self::Start(c)
            | Self::Fire(c)
            | Self::StopWork(c)
            | Self::Pause(c)
            | Self::Resume(c) => Some(usize::from(c)),
            Self::Deliver { client, .. }
            | Self::Delay { client, .. }
            | Self::Drop { client, .. }
            | Self::Revive { client, .. } => Some(usize::from(client)),
            Self::Tick { .. } | Self::Crash(_) | Self::Restart(_) | Self::Jump(_) => None,
        }
    }
}

fn bits(set: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |i| set & (1 << i) != 0)
}

/// The fixed parts of a check: its specification and the key every client locks.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) spec: CheckSpec,
    key: LockKey,
    keys: Keys,
    /// Once no fault can follow, a restart is taken only where something sees it: with a
    /// command that reaches the node ([`Action::Revive`]) or as true time may move on
    /// (docs/simulator.md, "A restart is taken where it is seen"). Off only in the test
    /// that compares the two.
    lazy_restarts: bool,
}

impl Model {
    pub(crate) fn new(spec: CheckSpec) -> Self {
        let (key, keys) = model_keys();
        Self {
            spec,
            key,
            keys,
            lazy_restarts: true,
        }
    }

    /// The one initial state: every client starts its first acquisition at time zero, or,
    /// with `start_within_ticks`, none has started yet.
    pub(crate) fn initial(&self) -> CheckState {
        let mut nodes: Vec<Node> = (0..self.spec.nodes).map(|_| Node::new()).collect();
        let mut clients: Vec<Client> = (0..self.spec.clients)
            .map(|_| Client::new(&self.spec))
            .collect();
        let identities: Vec<_> = nodes
            .iter_mut()
            .enumerate()
            .map(|(n, node)| node.execute(n, &NodeOp::Identify, &self.spec))
            .collect();
        for client in &mut clients {
            client.connect(&identities, &self.spec);
        }
        let starts_now = self.spec.start_within_ticks == 0;
        for (c, client) in clients.iter_mut().enumerate() {
            if starts_now {
                client.start(&mut self.env(c as u8, 0));
            }
        }
        CheckState {
            time: 0,
            nodes: nodes.into_iter().map(Shared::new).collect(),
            clients: clients.into_iter().map(Shared::new).collect(),
            faults_used: 0,
            grants: 0,
            tick_fresh: true,
            max_fence: 0,
            violation: None,
        }
    }

    /// What client `client` needs from the world for a step.
    fn env(&self, client: u8, grants: u16) -> Env<'_> {
        Env {
            spec: &self.spec,
            key: &self.key,
            keys: &self.keys,
            client,
            grants,
            happened: Happened::default(),
        }
    }

    /// One line about `state`: true time, each node's clock and key holder, each client's
    /// clock and lease.
    pub(crate) fn describe(&self, state: &CheckState) -> String {
        let spec = &self.spec;
        let mut parts = vec![format!("t={}", state.time)];
        for (n, node) in state.nodes.iter().enumerate() {
            let now_ms = node.now_ms(spec);
            let keys = if node.up {
                node.keys
                    .holder(&self.keys.key, now_ms)
                    .map_or_else(|| "free".to_owned(), |t| format!("key {}", t.short()))
            } else {
                "down".to_owned()
            };
            parts.push(format!("n{n}(clock {}, {keys})", node.clock));
        }
        for (c, client) in state.clients.iter().enumerate() {
            let paused = if client.paused { ", paused" } else { "" };
            parts.push(format!(
                "c{c}(clock {}{paused}, {})",
                client.clock,
                client.summary(spec)
            ));
        }
        if let Some(property) = state.violation {
            parts.push(format!("BREAKS {}", property.name()));
        }
        parts.join(" ")
    }

    pub(crate) fn budget_left(&self, state: &CheckState) -> bool {
        state.faults_used < self.spec.fault_budget
    }

    /// Every step enabled in `state`, in a fixed order.
    pub(crate) fn actions(&self, state: &CheckState, out: &mut Vec<Action>) {
        out.clear();
        if state.violation.is_some() {
            return;
        }
        let spec = &self.spec;
        let budget = self.budget_left(state);
        // Once no fault can follow, a restart is taken only where something sees it: with
        // a command that reaches the node, or as true time may move on.
        let lazy_restart = !budget && self.lazy_restarts;
        let mut urgent = false;
        for (c, client) in state.clients.iter().enumerate() {
            let c8 = c as u8;
            if client.is_idle() {
                // A start at the beginning of a tick: what it sends may still arrive at any
                // point of it. By `start_within_ticks`, it must have started.
                let due = state.time >= spec.start_within_ticks;
                if state.tick_fresh || due {
                    out.push(Action::Start(c8));
                }
                urgent |= due;
                continue;
            }
            if !client.paused {
                if client.timer_due(spec) {
                    out.push(Action::Fire(c8));
                    urgent = true;
                }
                if let Some(due) = client.work_may_stop() {
                    out.push(Action::StopWork(c8));
                    urgent |= due;
                }
            }
            urgent |= self.link_actions(state, c, budget, lazy_restart, out);
            // A pause or a resume commutes with every step of the others: a pause is taken
            // only right after the client's own step (or as true time moves on), a resume only
            // as true time moves on. Every other placement reaches the same states, in an
            // order these cover.
            if client.paused {
                if state.tick_fresh {
                    out.push(Action::Resume(c8));
                }
            } else if spec.pause != PauseKind::None
                && budget
                && !client.is_done()
                && (state.tick_fresh || client.acted)
            {
                out.push(Action::Pause(c8));
            }
        }
        self.node_actions(state, budget, !lazy_restart, out);
        let all_done = state.clients.iter().all(|c| c.is_done());
        if urgent || state.time >= spec.horizon_ticks || all_done {
            return;
        }
        if lazy_restart {
            for (n, node) in state.nodes.iter().enumerate() {
                if self.may_restart(node) {
                    out.push(Action::Restart(n as u8));
                }
            }
        }
        self.tick_actions(state, out);
    }

    /// The steps of client `c`'s links: each link's next message arriving, and within the
    /// fault budget its loss or delay; with `lazy_restart`, a command arriving at a node
    /// that restarts for it. Whether one of them must happen before true time moves on.
    fn link_actions(
        &self,
        state: &CheckState,
        c: usize,
        budget: bool,
        lazy_restart: bool,
        out: &mut Vec<Action>,
    ) -> bool {
        let deliver = |(client, node, link)| Action::Deliver { client, node, link };
        let drop = |(client, node, link)| Action::Drop { client, node, link };
        let (spec, client, c8) = (&self.spec, &state.clients[c], c as u8);
        let mut urgent = false;
        for n in 0..spec.nodes {
            let n8 = n as u8;
            for link in Link::ALL {
                // A paused process reads nothing; what is sent to it waits.
                if link != Link::ToNode && client.paused {
                    continue;
                }
                let Some(msg) = link.queue(client, n).front() else {
                    continue;
                };
                let late = client.links[n].late & link.bit() != 0;
                if !late {
                    // An undelayed message arrives before true time moves on.
                    urgent = true;
                }
                let at = |link| (c8, n8, link);
                out.push(deliver(at(link)));
                if link == Link::ToNode && lazy_restart && self.may_restart(&state.nodes[n]) {
                    out.push(Action::Revive {
                        client: c8,
                        node: n8,
                    });
                }
                // A command's reply travels with it (see `step`): a delay or a loss of
                // either way is a fault of the command's link. A reply that waits for a
                // paused client, or a connection's close, is neither lost nor delayed.
                if link == Link::ToClient {
                    continue;
                }
                if budget && spec.delay && !late {
                    out.push(Action::Delay {
                        client: c8,
                        node: n8,
                        link,
                    });
                    let reply_late = client.links[n].late & Link::ToClient.bit() != 0;
                    if link == Link::ToNode && state.nodes[n].up && !reply_late {
                        // Performed now, its reply late.
                        out.push(Action::Delay {
                            client: c8,
                            node: n8,
                            link: Link::ToClient,
                        });
                    }
                }
                if budget && spec.drop && droppable(msg) {
                    out.push(drop(at(link)));
                    if link == Link::ToNode && state.nodes[n].up {
                        // Performed, and its reply lost.
                        out.push(drop(at(Link::ToClient)));
                    }
                }
            }
        }
        urgent
    }

    /// Whether `node` is down and may start again.
    fn may_restart(&self, node: &Node) -> bool {
        !node.up && node.down_for >= self.spec.restart_delay_ticks
    }

    /// The nodes' steps: crashes and clock jumps within the fault budget, restarts (unless
    /// `restarts` is false: taken lazily, see `actions`).
    fn node_actions(
        &self,
        state: &CheckState,
        budget: bool,
        restarts: bool,
        out: &mut Vec<Action>,
    ) {
        let spec = &self.spec;
        for (n, node) in state.nodes.iter().enumerate() {
            let n8 = n as u8;
            if node.up {
                if spec.crash && budget {
                    out.push(Action::Crash(n8));
                }
                if spec.clock_jump_ticks > 0 && budget {
                    out.push(Action::Jump(n8));
                }
            } else if restarts && self.may_restart(node) {
                out.push(Action::Restart(n8));
            }
        }
    }

    /// True time advances: every combination of the clocks that may stray now.
    fn tick_actions(&self, state: &CheckState, out: &mut Vec<Action>) {
        let spec = &self.spec;
        let mut may_slow = 0u8;
        for (c, client) in state.clients.iter().enumerate() {
            let frozen = client.paused && spec.pause == PauseKind::Frozen;
            if !frozen && client.strays.may_stray(spec.client_slow_ticks) {
                may_slow |= 1 << c;
            }
        }
        // A node's strays are gains, or losses when the check has slow node clocks (one or
        // the other: `file.rs`).
        let node_strays = spec.node_fast_ticks.max(spec.node_slow_ticks);
        let mut may_fast = 0u8;
        for (n, node) in state.nodes.iter().enumerate() {
            if node.strays.may_stray(node_strays) {
                may_fast |= 1 << n;
            }
        }
        for slow in subsets(may_slow) {
            for fast in subsets(may_fast) {
                out.push(Action::Tick { slow, fast });
            }
        }
    }

    /// The next message on `link` of `client`'s connection to `node` arrives. A command's
    /// reply reaches a running client in the same step: what could happen between is
    /// independent of it (another node's step, another client's), or a fault of its own (a
    /// lost or delayed command, a delayed reply: `reply_late`, which holds the reply past
    /// the next tick). Behind a reply still on its way (a paused client's, a delayed one),
    /// it waits its turn: a connection keeps its order.
    fn deliver(
        &self,
        nodes: &mut [SharedNode],
        clients: &mut [SharedClient],
        (c, n): (usize, usize),
        link: Link,
        reply_late: bool,
        env: &mut Env<'_>,
    ) {
        if link != Link::ToNode {
            let client = clients[c].make_mut();
            if let Some(msg) = link.queue_mut(client, n).pop_front() {
                client.receive(n, msg, env);
            }
            return;
        }
        let Some(reply) = self.to_node(nodes, clients, c, n, &mut env.happened) else {
            return;
        };
        let client = clients[c].make_mut();
        if reply_late || client.paused || !client.links[n].from_node.is_empty() {
            let link = client.links[n].make_mut();
            link.from_node.push_back(reply);
            if reply_late {
                link.late |= Link::ToClient.bit();
            }
        } else {
            client.receive(n, reply, env);
        }
    }

    /// The state after `action`, unjudged, and what the step did that the properties ask
    /// about. The successor shares with `state` every node and client the step does not
    /// write ([`Shared::make_mut`] copies the others).
    fn step(&self, state: &CheckState, action: Action) -> (CheckState, Happened) {
        if let Action::Revive { client, node } = action {
            let (restarted, _) = self.step(state, Action::Restart(node));
            let deliver = Action::Deliver {
                client,
                node,
                link: Link::ToNode,
            };
            return self.step(&restarted, deliver);
        }
        let mut next = state.clone();
        let spec = &self.spec;
        let happened = {
            let CheckState {
                nodes,
                clients,
                faults_used,
                time,
                grants,
                ..
            } = &mut next;
            let actor = action.client().map_or(0, |c| c as u8);
            let mut env = self.env(actor, *grants);
            match action {
                Action::Tick { slow, fast } => {
                    *time += 1;
                    self.advance_clocks(nodes, clients, slow, fast);
                }
                Action::Start(c) => clients[usize::from(c)].make_mut().start(&mut env),
                Action::Fire(c) => clients[usize::from(c)].make_mut().fire(&mut env),
                Action::StopWork(c) => clients[usize::from(c)].make_mut().stop_work(&mut env),
                Action::Deliver { client, node, link } => {
                    let (c, n) = (usize::from(client), usize::from(node));
                    self.deliver(nodes, clients, (c, n), link, false, &mut env);
                }
                Action::Delay {
                    client,
                    node,
                    link: Link::ToClient,
                } => {
                    let (c, n) = (usize::from(client), usize::from(node));
                    self.deliver(nodes, clients, (c, n), Link::ToNode, true, &mut env);
                    *faults_used += 1;
                }
                Action::Delay { client, node, link } => {
                    let client = clients[usize::from(client)].make_mut();
                    client.links[usize::from(node)].make_mut().late |= link.bit();
                    *faults_used += 1;
                }
                Action::Drop { client, node, link } => {
                    let (c, n) = (usize::from(client), usize::from(node));
                    if link == Link::ToClient {
                        // The command is performed; its reply is lost.
                        let _ = self.to_node(nodes, clients, c, n, &mut env.happened);
                    } else {
                        link.queue_mut(clients[c].make_mut(), n).pop_front();
                    }
                    *faults_used += 1;
                }
                Action::Crash(n) => {
                    nodes[usize::from(n)].make_mut().crash(spec.durability);
                    for client in clients.iter_mut() {
                        client.make_mut().node_crashed(usize::from(n));
                    }
                    *faults_used += 1;
                }
                Action::Restart(n) => nodes[usize::from(n)].make_mut().restart(),
                Action::Pause(c) => {
                    clients[usize::from(c)].make_mut().paused = true;
                    *faults_used += 1;
                }
                Action::Resume(c) => clients[usize::from(c)].make_mut().paused = false,
                Action::Jump(n) => {
                    nodes[usize::from(n)].make_mut().tick(spec.clock_jump_ticks);
                    *faults_used += 1;
                }
                Action::Revive { .. } => unreachable!("taken as its two steps above"),
            }
            env.happened
        };
        Self::mark_after_step(spec, state, action, &mut next);
        if happened.granted.is_some() {
            next.grants = next.grants.saturating_add(1);
        }
        (next, happened)
    }

    /// What a step leaves beside its own effect: whether the tick is still fresh, which
    /// client acted last, and the delays of links it emptied.
    fn mark_after_step(
        spec: &CheckSpec,
        state: &CheckState,
        action: Action,
        next: &mut CheckState,
    ) {
        next.tick_fresh = match action {
            Action::Tick { .. } => true,
            // Other clients may still start at the beginning of this tick.
            Action::Resume(_) | Action::Start(_) => state.tick_fresh,
            _ => false,
        };
        // Which client acted last matters only to a pause that may still follow (see
        // `actions`): elsewhere it is not kept, so that states told apart by it alone are one.
        let actor = action
            .client()
            .filter(|_| spec.pause != PauseKind::None && next.faults_used < spec.fault_budget);
        // Written only where they change, so that a client the step did not touch stays
        // shared.
        for (c, client) in next.clients.iter_mut().enumerate() {
            let acted = actor == Some(c);
            if client.acted != acted {
                client.make_mut().acted = acted;
            }
            if Self::delays_of_empty_links(client, spec.nodes) {
                Self::forget_delays_of_empty_links(client.make_mut(), spec.nodes);
            }
        }
    }

    /// A tick of true time on every clock: the clients in `slow` lose it (and a frozen
    /// client's stands still), the nodes in `fast` gain one (or lose it, where the check's
    /// node clocks are slow); a node down counts it.
    fn advance_clocks(
        &self,
        nodes: &mut [SharedNode],
        clients: &mut [SharedClient],
        slow: u8,
        fast: u8,
    ) {
        let spec = &self.spec;
        for (c, client) in clients.iter_mut().enumerate() {
            let client = client.make_mut();
            let frozen = client.paused && spec.pause == PauseKind::Frozen;
            let loses = slow & (1 << c) != 0;
            if !frozen && !loses {
                client.clock += 1;
            }
            client.strays.tick(loses, spec.ttl_ticks);
        }
        for (n, node) in nodes.iter_mut().enumerate() {
            let node = node.make_mut();
            let strays = fast & (1 << n) != 0;
            if !strays {
                node.tick(1);
            } else if spec.node_slow_ticks == 0 {
                node.tick(2);
            }
            // A tick lost: its clock stands still, and its milliseconds go on counting the
            // commands it performs, so that it never goes back.
            node.strays.tick(strays, spec.ttl_ticks);
            if !node.up {
                node.down_for += 1;
            }
        }
    }

    /// Whether a link of `client` is empty and still marked delayed (what
    /// [`Self::forget_delays_of_empty_links`] would change).
    fn delays_of_empty_links(client: &Client, nodes: usize) -> bool {
        (0..nodes).any(|n| {
            let late = client.links[n].late;
            late != 0
                && Link::ALL
                    .into_iter()
                    .any(|link| late & link.bit() != 0 && link.queue(client, n).is_empty())
        })
    }

    /// A delay applies to the messages on a link when it was taken: once the link is empty,
    /// what is sent next arrives before the next tick again.
    fn forget_delays_of_empty_links(client: &mut Client, nodes: usize) {
        for n in 0..nodes {
            for link in Link::ALL {
                if client.links[n].late & link.bit() != 0 && link.queue(client, n).is_empty() {
                    client.links[n].make_mut().late &= !link.bit();
                }
            }
        }
    }

    /// The state after `action`, judged: the *sometimes* properties it reached (bits of
    /// [`Property::bit`](super::Property::bit)), and the first *always* one it breaks recorded
    /// in it.
    pub(crate) fn successor(&self, state: &CheckState, action: Action) -> (CheckState, u8) {
        let (next, reached, _) = self.successor_happened(state, action);
        (next, reached)
    }

    /// [`Self::successor`], with what the step did.
    pub(super) fn successor_happened(
        &self,
        state: &CheckState,
        action: Action,
    ) -> (CheckState, u8, Happened) {
        let (mut next, happened) = self.step(state, action);
        let reached = judge(&self.spec, &mut next, happened);
        (next, reached, happened)
    }

    /// A command arrives at its node: performed there, and its reply (or the close of a
    /// connection to a node that is down); a release that removed the key notifies every
    /// client waiting for the lease. A release that removes a key of a lease whose work
    /// still runs, while the key would outlive the node's current tick, breaks
    /// stop-before-release: judged against the node's own store and clock (what the world
    /// knows of the key's expiry), not against the client's belief or its keeper's release
    /// deadline, which are what the property tests. (A tick is the model's resolution: a
    /// release in the tick the key expires counts as at its expiry.)
    fn to_node(
        &self,
        nodes: &mut [SharedNode],
        clients: &mut [SharedClient],
        c: usize,
        n: usize,
        happened: &mut Happened,
    ) -> Option<Msg> {
        let Some(Msg::Request {
            conn,
            op,
            request,
            cmd,
        }) = clients[c].make_mut().links[n]
            .make_mut()
            .to_node
            .pop_front()
        else {
            return None;
        };
        if !nodes[n].up {
            // Refused: the connection fails.
            return Some(Msg::Closed { conn });
        }
        let node = nodes[n].make_mut();
        let working = clients[c].released_while_working();
        let outlives_tick = |node: &Node| {
            let end_of_tick = node.next_tick_ms(&self.spec);
            working.is_some() && node.keys.holder(&self.keys.key, end_of_tick) == working
        };
        let live_before = outlives_tick(node);
        // What the property asks, read from the node before the release deletes them: whether
        // some waiter's mark is there.
        let now_ms = node.now_ms(&self.spec);
        let marked = self.spec.waiter_marks != WaiterMarks::Off
            && matches!(&cmd, NodeOp::ReleaseIfOwner { wait_key, .. }
                if node.keys.marked(wait_key, now_ms));
        // What the release script does, which the property judges: it publishes by the
        // store's rule (tied to the shipped script's by tests/store_differential.rs), asked
        // before it runs; without marks, every release publishes; with the fault that leaves
        // the release silent, none does.
        let script_publishes = match self.spec.waiter_marks {
            WaiterMarks::Off => true,
            WaiterMarks::On => node.keys.announces(&cmd, now_ms),
            WaiterMarks::Unannounced => false,
        };
        let reply = node.execute(n, &cmd, &self.spec);
        if live_before && !outlives_tick(node) {
            happened.released_live_key = true;
        }
        if let (
            NodeOp::ReleaseIfOwner { token, .. },
            NodeReply::Core(Reply::Released | Reply::ReleasedOthersWaiting),
        ) = (&cmd, &reply)
        {
            if marked && !script_publishes {
                happened.waiter_untold = true;
            }
            if script_publishes {
                // Only a client waiting for the lease is subscribed to its channel.
                for client in clients.iter_mut().filter(|c| c.is_acquiring()) {
                    client.make_mut().links[n]
                        .make_mut()
                        .notices
                        .push_back(Msg::Released(*token));
                }
            }
        }
        Some(Msg::Reply {
            conn,
            op,
            request,
            reply,
        })
    }
}

/// Whether a message may be lost: a command or its reply, not a connection's
/// identification (which the model does not retry) nor its close.
fn droppable(msg: &Msg) -> bool {
    matches!(
        msg,
        Msg::Request {
            request: Some(_),
            ..
        } | Msg::Reply {
            request: Some(_),
            ..
        } | Msg::Released(_)
    )
}

/// Every subset of `set`, the empty one first.
fn subsets(set: u8) -> impl Iterator<Item = u8> {
    let mut next = Some(0u8);
    std::iter::from_fn(move || {
        let current = next?;
        // The next subset of `set` in increasing order (Gosper-free: the masked increment).
        next = if current == set {
            None
        } else {
            Some((current.wrapping_sub(set)) & set)
        };
        Some(current)
    })
}

/// A model of the catalogue (`simulator/checks/FILE`), for the tests that walk one.
#[cfg(test)]
pub(crate) fn catalogue_model(file: &str) -> Model {
    let path = format!("{}/checks/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    Model::new(crate::check::parse(&text, file).unwrap())
}

/// Walks `model` depth first from its initial state over up to `limit` distinct states
/// (told apart without symmetry), handing each to `visit` once: the tests that check a
/// property of every state a model reaches first.
#[cfg(test)]
pub(crate) fn walk_first_states(model: &Model, limit: usize, visit: impl FnMut(&CheckState)) {
    walk(model, limit, false, visit);
}

/// As [`walk_first_states`], depth first or (`breadth_first`) level by level: a walk that
/// must reach a combination of faults, which depth first spends its states under the first.
#[cfg(test)]
pub(crate) fn walk(
    model: &Model,
    limit: usize,
    breadth_first: bool,
    mut visit: impl FnMut(&CheckState),
) {
    let mut seen = std::collections::HashSet::new();
    let mut stack = std::collections::VecDeque::from([model.initial()]);
    let mut actions = Vec::new();
    while let Some(state) = if breadth_first {
        stack.pop_front()
    } else {
        stack.pop_back()
    } {
        let naming = super::state::Symmetry::NONE;
        if seen.len() >= limit || !seen.insert(state.fingerprint(naming, 0)) {
            continue;
        }
        visit(&state);
        model.actions(&state, &mut actions);
        stack.extend(actions.iter().map(|&a| model.successor(&state, a).0));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::check::state::Symmetry;

    /// Every state `model` reaches (told apart without symmetry): the fingerprints of
    /// those that begin a tick, how many there are in all, and the properties broken.
    fn reach(model: &Model) -> (BTreeSet<u128>, usize, BTreeSet<&'static str>) {
        let (mut ticks, mut all, mut broken) = (BTreeSet::new(), 0, BTreeSet::new());
        walk_first_states(model, usize::MAX, |state| {
            all += 1;
            if state.tick_fresh {
                ticks.insert(state.fingerprint(Symmetry::NONE, 0));
            }
            if let Some(property) = state.violation {
                broken.insert(property.name());
            }
        });
        (ticks, all, broken)
    }

    /// A restart taken only with a command that reaches its node or as true time may move
    /// on (once no fault can follow) reaches, at the beginning of every tick, exactly the
    /// states a restart taken anywhere does, and breaks the same properties, from fewer
    /// states: a restart moved later past steps that do not touch its node reaches the same
    /// state by the next command to the node or the next tick.
    #[test]
    fn restarts_taken_where_they_are_seen_reach_the_same_states_at_every_tick() {
        let cases = [
            (
                "shipped-crash.toml",
                "horizon_ticks = 8",
                "horizon_ticks = 4",
            ),
            ("no-restart-quarantine.toml", "", ""),
            // Two crashes: restarts are eager until the second spends the budget.
            (
                "teeth-s4-two-crashes.toml",
                "horizon_ticks = 8\nwork_ticks = 3\nretries = 6",
                "horizon_ticks = 1\nwork_ticks = 3\nretries = 0",
            ),
        ];
        for (file, from, to) in cases {
            let path = format!("{}/checks/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replacen(from, to, 1);
            let spec = crate::check::parse(&text, file).unwrap();
            let lazy = Model::new(spec.clone());
            let eager = Model {
                lazy_restarts: false,
                ..Model::new(spec)
            };
            let (lazy, eager) = (reach(&lazy), reach(&eager));
            assert_eq!(lazy.0, eager.0, "{file}: the states at a tick's beginning");
            assert_eq!(lazy.2, eager.2, "{file}: the properties broken");
            assert!(
                lazy.1 < eager.1,
                "{file}: {} states against {}",
                lazy.1,
                eager.1
            );
            eprintln!(
                "{file}: {} states against {}, {} at a tick's beginning",
                lazy.1,
                eager.1,
                lazy.0.len()
            );
        }
    }

    /// A release notifies the clients acquiring then, and an acquisition's subscription
    /// ends with it: no client that is not acquiring has a notification on its way, while
    /// acquiring clients do have some (the walk reaches releases that notify).
    #[test]
    fn only_an_acquiring_client_has_notifications_on_their_way() {
        let model = catalogue_model("waiting-marks.toml");
        let mut notified = 0;
        walk_first_states(&model, 20_000, |state| {
            for client in &state.clients {
                let notices = client.links.iter().map(|l| l.notices.len()).sum::<usize>();
                assert!(
                    notices == 0 || client.is_acquiring(),
                    "{notices} notifications on their way to a client that is not acquiring: {}",
                    client.summary(&model.spec)
                );
                notified += notices;
            }
        });
        assert!(notified > 0, "the walk reached no notification");
    }

    /// A node that crashes has already sent the replies on their way to a client (to a
    /// paused client, or delayed in the network): over TCP they are read before the close.
    /// The crash keeps them ahead of it; it dropped them, so that a vote the node sent and
    /// then forgot was never counted after the crash (a budget of two: a pause or a delay,
    /// and a crash).
    #[test]
    fn a_crash_keeps_the_replies_its_node_had_sent() {
        let path = format!("{}/checks/shipped-crash.toml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "budget = 1",
            "budget = 2\npause = \"running\"",
            1,
        );
        let model = Model::new(crate::check::parse(&text, "crash-after-reply").unwrap());
        let replies = |state: &CheckState, c: usize, n: usize| -> Vec<Msg> {
            let link = &state.clients[c].links[n];
            let from_node = link.from_node.iter();
            from_node
                .filter(|m| matches!(m, Msg::Reply { .. }))
                .cloned()
                .collect()
        };
        let (mut actions, mut kept) = (Vec::new(), 0);
        walk(&model, 20_000, true, |state| {
            model.actions(state, &mut actions);
            for &action in &actions {
                let Action::Crash(n) = action else { continue };
                let (after, _) = model.successor(state, action);
                let n = usize::from(n);
                for c in 0..state.clients.len() {
                    let before = replies(state, c, n);
                    assert_eq!(replies(&after, c, n), before, "{}", model.describe(state));
                    kept += before.len();
                }
            }
        });
        assert!(
            kept > 0,
            "the walk reached no crash with a reply on its way"
        );
    }

    #[test]
    fn subsets_enumerates_each_once() {
        let all: Vec<u8> = subsets(0b1010).collect();
        assert_eq!(all, vec![0b0000, 0b0010, 0b1000, 0b1010]);
        assert_eq!(subsets(0).collect::<Vec<_>>(), vec![0]);
    }
}
