//! A client's connections: the messages between it and each node, one connection per node
//! (opened, identified before it carries anything but a release, its commands in the order
//! issued), what arrives on it, and a node's crash under it.

use std::collections::VecDeque;

use redlock_core::{
    Admission, ConnectionId, Eligibility, NodeFailure, NodeId, NodeIdentity, RequestId, Timestamp,
    Token, Transmit,
};

use super::{Client, ELIGIBILITY_MEMO, Env, Phase};
use crate::check::shared::Shared;
use crate::check::spec::CheckSpec;
use crate::net::message::{NodeOp, NodeReply};

/// A message between one client and one node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(in crate::check) enum Msg {
    /// A command; `request` is `None` for a connection's identification.
    Request {
        conn: u32,
        op: u16,
        request: Option<RequestId>,
        cmd: NodeOp,
    },
    /// Its answer.
    Reply {
        conn: u32,
        op: u16,
        request: Option<RequestId>,
        reply: NodeReply,
    },
    /// The release script's notification: the released token.
    Released(Token),
    /// The connection broke: the node crashed, or refused it while down.
    Closed { conn: u32 },
}

/// One connection to a node.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct Conn {
    pub(super) id: u32,
    /// Whether its identification is on its way.
    pub(super) identifying: bool,
    /// The node crashed under it: what is written is lost, and `Closed` is on its way.
    pub(super) broken: bool,
    /// Requests written and not answered: (operation, request; `None` for the
    /// identification).
    pub(super) outstanding: Vec<(u16, Option<RequestId>)>,
    /// Commands waiting for the identification, in the order issued.
    pub(super) waiting: VecDeque<(u16, Transmit)>,
}

/// What a client has with one node: its connection, the messages on their way either way,
/// and which links a fault delayed. Kept together so that a client's clone is one
/// allocation for all its nodes, not one per kind.
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub(in crate::check) struct NodeLink {
    pub(super) conn: Option<Conn>,
    /// Connections opened to the node so far: the next one's number is one more. Numbered
    /// per node (the core asks only that a node's connections be numbered in order), so
    /// that what happens at one node does not number the connections to another and the
    /// model stays symmetric in the nodes (`node_symmetry.rs`).
    pub(super) opened: u32,
    /// Commands to the node, in order.
    pub(in crate::check) to_node: VecDeque<Msg>,
    /// Replies (and connection closes) from the node, in order.
    pub(in crate::check) from_node: VecDeque<Msg>,
    /// Release notifications from the node (a subscription is a connection of its own).
    pub(in crate::check) notices: VecDeque<Msg>,
    /// The links whose messages may arrive after the next tick (a delay fault): bits of
    /// [`Link::bit`](super::model::Link::bit).
    pub(in crate::check) late: u8,
}

// A step copies the link it writes (`Shared::make_mut`), queues and all, and most of a
// link's queues are empty then: `VecDeque::clone` sets up its copy loop even for an empty
// one (copied empty here, the explorer runs 0.85 % fewer instructions on `shipped-drift`,
// docs/benchmarks.md). The copies are field for field what the derived `Clone` made.
impl Clone for Conn {
    fn clone(&self) -> Self {
        let Self {
            id,
            identifying,
            broken,
            outstanding,
            waiting,
        } = self;
        Self {
            id: *id,
            identifying: *identifying,
            broken: *broken,
            outstanding: outstanding.clone(),
            waiting: copied(waiting),
        }
    }
}

impl Clone for NodeLink {
    fn clone(&self) -> Self {
        let Self {
            conn,
            opened,
            to_node,
            from_node,
            notices,
            late,
        } = self;
        Self {
            conn: conn.clone(),
            opened: *opened,
            to_node: copied(to_node),
            from_node: copied(from_node),
            notices: copied(notices),
            late: *late,
        }
    }
}

/// `queue`'s copy; an empty queue's without the copy loop.
fn copied<T: Clone>(queue: &VecDeque<T>) -> VecDeque<T> {
    if queue.is_empty() {
        VecDeque::new()
    } else {
        queue.clone()
    }
}

impl Client {
    /// Opens and identifies a connection to every node, as a client that has been running
    /// for a while has: `identities[n]` is what node `n` answers to `INFO`.
    pub(in crate::check) fn connect(&mut self, identities: &[NodeReply], spec: &CheckSpec) {
        let now = self.now(spec);
        for (node, identity) in identities.iter().enumerate() {
            let NodeReply::Identity { server, uptime_ms } = identity else {
                continue;
            };
            let link = self.links[node].make_mut();
            link.opened += 1;
            let id = link.opened;
            link.conn = Some(Conn {
                id,
                identifying: false,
                broken: false,
                outstanding: Vec::new(),
                waiting: VecDeque::new(),
            });
            self.eligibility.make_mut().identified(
                NodeId::new(node),
                ConnectionId(u64::from(id)),
                Ok(NodeIdentity {
                    run_id: server.run_id(),
                    uptime: std::time::Duration::from_millis(*uptime_ms),
                    maxmemory_policy: None,
                }),
                now,
            );
        }
    }

    /// The next message from node `node` on the replies' connection arrives.
    pub(in crate::check) fn receive(&mut self, node: usize, msg: Msg, env: &mut Env<'_>) {
        let now = self.now(env.spec);
        match msg {
            Msg::Reply {
                conn,
                op,
                request,
                reply,
            } => {
                let Some(c) = self.links[node]
                    .make_mut()
                    .conn
                    .as_mut()
                    .filter(|c| c.id == conn)
                else {
                    return;
                };
                c.outstanding.retain(|&(o, r)| (o, r) != (op, request));
                match (request, reply) {
                    (None, NodeReply::Identity { server, uptime_ms }) => {
                        c.identifying = false;
                        let identity = NodeIdentity {
                            run_id: server.run_id(),
                            uptime: std::time::Duration::from_millis(uptime_ms),
                            maxmemory_policy: None,
                        };
                        self.eligibility.make_mut().identified(
                            NodeId::new(node),
                            ConnectionId(u64::from(conn)),
                            Ok(identity),
                            now,
                        );
                        let waiting = std::mem::take(&mut c.waiting);
                        for (op, transmit) in waiting {
                            self.issue(op, transmit, env);
                        }
                    }
                    (None, _) => {}
                    (Some(request), reply) => {
                        let result = match reply {
                            NodeReply::Core(reply) => Ok(reply),
                            NodeReply::Failure(failure) => Err(failure),
                            other => Err(NodeFailure::Protocol(format!("{other:?}"))),
                        };
                        self.feed(op, request, result, now);
                    }
                }
            }
            Msg::Closed { conn } => {
                // What else was written on it is lost with it.
                self.links[node]
                    .make_mut()
                    .to_node
                    .retain(|m| !matches!(m, Msg::Request { conn: on, .. } if *on == conn));
                if let Some(c) = self.links[node].make_mut().conn.take_if(|c| c.id == conn) {
                    let failure = || NodeFailure::Io("connection closed".into());
                    for (op, request) in c.outstanding {
                        if let Some(request) = request {
                            self.feed(op, request, Err(failure()), now);
                        }
                    }
                    for (op, transmit) in c.waiting {
                        self.feed(op, transmit.request, Err(failure()), now);
                    }
                }
            }
            Msg::Released(token) => {
                if let Phase::Acquiring(a) = self.phase.make_mut() {
                    a.waiting.notified(
                        NodeId::new(node),
                        env.keys.key.as_bytes(),
                        &token.to_hex(),
                        now,
                    );
                }
            }
            Msg::Request { .. } => {}
        }
        self.settle(env);
    }

    /// The node crashed under its connection: what is written to it is lost, and the close
    /// is on its way behind what the node had sent (replies on their way to a paused
    /// client or delayed in the network, notifications): over TCP the client reads those
    /// before the close. (Dropping them too left out a vote counted after its node forgot
    /// it; the fault `drop` still loses one.)
    pub(in crate::check) fn node_crashed(&mut self, node: usize) {
        let link = self.links[node].make_mut();
        link.late &= !crate::check::model::Link::ToNode.bit();
        link.to_node.clear();
        if let Some(conn) = &mut link.conn {
            conn.broken = true;
            link.from_node.push_back(Msg::Closed { conn: conn.id });
        }
    }

    /// Issues `transmit` of operation `op`: out on its node's connection in turn, once the
    /// core's eligibility admits it there.
    pub(super) fn issue(&mut self, op: u16, transmit: Transmit, env: &mut Env<'_>) {
        let now = self.now(env.spec);
        let node = transmit.node.index();
        let link = self.links[node].make_mut();
        let opened = &mut link.opened;
        let conn = link.conn.get_or_insert_with(|| {
            *opened += 1;
            Conn {
                id: *opened,
                identifying: false,
                broken: false,
                outstanding: Vec::new(),
                waiting: VecDeque::new(),
            }
        });
        if !conn.waiting.is_empty() {
            // Behind what waits for the identification: commands to a node keep their order.
            conn.waiting.push_back((op, transmit));
            return;
        }
        let connection = ConnectionId(u64::from(conn.id));
        match admit(&mut self.eligibility, &transmit, connection, now) {
            Admission::Send => match self.faults.node_op(transmit.command, env.keys) {
                Ok(cmd) => {
                    conn.outstanding.push((op, Some(transmit.request)));
                    if !conn.broken {
                        link.to_node.push_back(Msg::Request {
                            conn: conn.id,
                            op,
                            request: Some(transmit.request),
                            cmd,
                        });
                    }
                }
                Err(failure) => self.feed(op, transmit.request, Err(failure), now),
            },
            Admission::Identify => {
                if !conn.identifying {
                    conn.identifying = true;
                    conn.outstanding.push((0, None));
                    if !conn.broken {
                        link.to_node.push_back(Msg::Request {
                            conn: conn.id,
                            op: 0,
                            request: None,
                            cmd: NodeOp::Identify,
                        });
                    }
                }
                conn.waiting.push_back((op, transmit));
            }
            // No request times out unanswered in the model (the probe is not explored), so
            // the core never asks for one; were it to, the command is refused, never dropped.
            Admission::Probe => {
                self.feed(op, transmit.request, Err(NodeFailure::Unresponsive), now)
            }
            Admission::Refuse(failure) => self.feed(op, transmit.request, Err(failure), now),
        }
    }
}

/// [`Eligibility::admit`] of `transmit` on `connection`, the eligibility written only where
/// the admission changed it: most change nothing (only a probe's hand-out writes), and a
/// shared eligibility copied to be written forgets the fingerprints it remembers.
fn admit(
    eligibility: &mut Shared<Eligibility, ELIGIBILITY_MEMO>,
    transmit: &Transmit,
    connection: ConnectionId,
    now: Timestamp,
) -> Admission {
    let (node, command) = (transmit.node, &transmit.command);
    if eligibility.is_unique() {
        return eligibility.make_mut().admit(node, connection, command, now);
    }
    let mut copy = Eligibility::clone(eligibility);
    let admission = copy.admit(node, connection, command, now);
    if copy != **eligibility {
        *eligibility = Shared::new(copy);
    }
    admission
}
