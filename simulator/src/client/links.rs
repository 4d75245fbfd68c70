//! A client's connections to its nodes, and the core's rule of which nodes may vote.
//!
//! As in the tokio client, each node has one connection at a time, numbered, and every new
//! connection is identified (`INFO`: `run_id` and uptime) before it carries anything but a
//! release; the core's [`Eligibility`] decides from those identities whether the node is in
//! its restart quarantine. A connection is tied to the server incarnation that first
//! answers on it: when that server restarts, or another one answers at the address after a
//! failover, the connection breaks (the reply is a failure) and the next command opens a new
//! one, identified again.
//!
//! Commands to one node go out in the order they were issued (the tokio client's lanes): a
//! release waits behind a `SET` that waits for its connection's identity, so that a cleanup
//! never overtakes what it cleans up. A command whose per-node budget runs out while it
//! waits is never written, as redis-rs never writes a request whose caller has gone.
//!
//! As in the tokio client, a request left unanswered past the per-node timeout is reported to
//! the core, which then holds back new `SET`s on that connection until a `PING` probe, sent
//! behind everything already written, answers.

use std::collections::VecDeque;
use std::time::Duration;

use redlock_core::{
    Admission, ConnectionId, Eligibility, EligibilityEvent, NodeFailure, NodeId, NodeIdentity,
    RequestId, RestartPolicy, Timestamp, Transmit,
};

use super::faults::{Faults, Keys};
use crate::net::message::{Conn, Msg, NodeOp, NodeReply, ServerId, Tag};

/// A command waiting for its turn on a connection.
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) op: u64,
    pub(super) transmit: Transmit,
    /// When it was issued: it is given up once the per-node timeout has passed.
    pub(super) at: Timestamp,
}

impl Queued {
    fn alive(&self, now: Timestamp, patience: Duration) -> bool {
        now < self.at.saturating_add(patience)
    }
}

/// What the client must do: send a message, or feed a failure back to a machine.
#[derive(Debug)]
pub(super) enum Out {
    Send {
        index: usize,
        msg: Msg,
    },
    Fail {
        op: u64,
        request: RequestId,
        failure: NodeFailure,
    },
}

#[derive(Debug)]
struct Link {
    id: ConnectionId,
    bound: Option<ServerId>,
    /// When the identification was last sent, while its answer is awaited.
    identifying: Option<Timestamp>,
    /// When the probe was sent, while its answer is awaited.
    probing: Option<Timestamp>,
    /// When each request written on the connection and not answered yet was sent, oldest
    /// first (a connection answers in order).
    outstanding: VecDeque<Timestamp>,
    queued: VecDeque<Queued>,
}

/// The connections of one client.
#[derive(Debug)]
pub(super) struct Links {
    client: usize,
    links: Vec<Option<Link>>,
    opened: u64,
    eligibility: Eligibility,
    /// The per-node timeout: how long a request (identification included) may take.
    patience: Duration,
    faults: Faults,
    keys: Keys,
}

impl Links {
    pub(super) fn new(
        client: usize,
        nodes: usize,
        policy: RestartPolicy,
        patience: Duration,
        faults: Faults,
        keys: Keys,
    ) -> Self {
        Self {
            client,
            links: (0..nodes).map(|_| None).collect(),
            opened: 0,
            eligibility: Eligibility::new(nodes, policy),
            patience,
            faults,
            keys,
        }
    }

    /// The current connection to node `index`, opening one if there is none.
    fn link(&mut self, index: usize) -> &mut Link {
        let opened = &mut self.opened;
        self.links[index].get_or_insert_with(|| {
            *opened += 1;
            Link {
                id: ConnectionId(*opened),
                bound: None,
                identifying: None,
                probing: None,
                outstanding: VecDeque::new(),
                queued: VecDeque::new(),
            }
        })
    }

    fn request(&self, op: u64, tag: Tag, index: usize, cmd: NodeOp) -> Msg {
        let link = self.links[index].as_ref();
        Msg::Request {
            client: self.client,
            op,
            tag,
            conn: Conn {
                id: link.map_or(ConnectionId(0), |l| l.id),
                bound: link.and_then(|l| l.bound),
            },
            cmd,
        }
    }

    /// Issues `transmit` (of operation `op`) at `now`: it goes out in turn on its node's
    /// connection, once the core admits it there.
    pub(super) fn issue(&mut self, op: u64, transmit: Transmit, now: Timestamp) -> Vec<Out> {
        self.requeue(
            Queued {
                op,
                transmit,
                at: now,
            },
            now,
        )
    }

    fn requeue(&mut self, queued: Queued, now: Timestamp) -> Vec<Out> {
        let index = queued.transmit.node.index();
        if index >= self.links.len() {
            return vec![Out::Fail {
                op: queued.op,
                request: queued.transmit.request,
                failure: NodeFailure::Protocol(format!("no {}", queued.transmit.node)),
            }];
        }
        self.link(index).queued.push_back(queued);
        self.flush(index, now)
    }

    /// Tells the core what node `index` left unanswered by `now`: its oldest request, and a
    /// probe, once older than the per-node timeout.
    fn note_silence(&mut self, index: usize, now: Timestamp) {
        let node = NodeId::new(index);
        let patience = self.patience;
        let Some(Some(link)) = self.links.get_mut(index) else {
            return;
        };
        let overdue = |sent: &Timestamp| now >= sent.saturating_add(patience);
        if link.probing.as_ref().is_some_and(overdue) {
            link.probing = None;
            self.eligibility.probed(node, link.id, false);
        }
        if link.outstanding.front().is_some_and(overdue) {
            self.eligibility.unanswered(node, link.id);
        }
    }

    /// Sends what can go out on node `index`'s connection, in order.
    fn flush(&mut self, index: usize, now: Timestamp) -> Vec<Out> {
        let mut out = Vec::new();
        let node = NodeId::new(index);
        self.note_silence(index, now);
        while let Some(link) = self.links[index].as_mut() {
            let Some(front) = link.queued.front() else {
                break;
            };
            if link.probing.is_some() {
                // The front holds the probe out and waits for it; the rest wait behind it
                // (the tokio client refuses them at once: either way no SET goes out).
                break;
            }
            let admission = self
                .eligibility
                .admit(node, link.id, &front.transmit.command, now);
            if admission == Admission::Probe {
                if !front.alive(now, self.patience) {
                    // Its budget ran out: the probe it was handed is given up with it.
                    link.queued.pop_front();
                    self.eligibility.probed(node, link.id, false);
                    continue;
                }
                link.probing = Some(now);
                link.outstanding.push_back(now);
                let msg = self.request(0, Tag::Probe(index), index, NodeOp::Ping);
                out.push(Out::Send { index, msg });
                break;
            }
            if admission == Admission::Identify {
                if !front.alive(now, self.patience) {
                    link.queued.pop_front();
                    continue;
                }
                let patience = self.patience;
                if link
                    .identifying
                    .is_none_or(|sent| now >= sent.saturating_add(patience))
                {
                    link.identifying = Some(now);
                    link.outstanding.push_back(now);
                    let msg = self.request(0, Tag::Identify(index), index, NodeOp::Identify);
                    out.push(Out::Send { index, msg });
                }
                break;
            }
            let Queued { op, transmit, .. } = link.queued.pop_front().expect("a front");
            let failure = match admission {
                Admission::Refuse(failure) => failure,
                _ => match self.faults.node_op(transmit.command.clone(), &self.keys) {
                    Ok(cmd) => {
                        let tag = Tag::Core {
                            request: transmit.request,
                            node: index,
                        };
                        link.outstanding.push_back(now);
                        let msg = self.request(op, tag, index, cmd);
                        out.push(Out::Send { index, msg });
                        continue;
                    }
                    Err(failure) => failure,
                },
            };
            out.push(Out::Fail {
                op,
                request: transmit.request,
                failure,
            });
        }
        out
    }

    /// Sends what waits on every connection (a timer moved time on).
    pub(super) fn flush_all(&mut self, now: Timestamp) -> Vec<Out> {
        (0..self.links.len())
            .flat_map(|index| self.flush(index, now))
            .collect()
    }

    /// A request outside the core's commands (the Redis-derived token strawman's `INCR`) on
    /// node `index`'s current connection, without asking the core: such a client does not.
    pub(super) fn raw(
        &mut self,
        op: u64,
        tag: Tag,
        index: usize,
        cmd: NodeOp,
        now: Timestamp,
    ) -> Msg {
        self.link(index).outstanding.push_back(now);
        self.request(op, tag, index, cmd)
    }

    /// The probe of connection `conn` to node `index` came back at `now`: the node worked
    /// through everything written before it. Returns what can go out now.
    pub(super) fn probed(
        &mut self,
        index: usize,
        conn: ConnectionId,
        reply: &NodeReply,
        now: Timestamp,
    ) -> Vec<Out> {
        let Some(Some(link)) = self.links.get_mut(index) else {
            return Vec::new();
        };
        let Some(sent) = link.probing else {
            return Vec::new();
        };
        if link.id != conn || *reply != NodeReply::Pong {
            return Vec::new();
        }
        link.probing = None;
        // Whatever was written before the probe and is still counted was lost on the way.
        while link.outstanding.front().is_some_and(|at| *at <= sent) {
            link.outstanding.pop_front();
        }
        self.eligibility.probed(NodeId::new(index), conn, true);
        self.flush(index, now)
    }

    /// Takes note of a reply from `server` on connection `conn` of node `index`. A failure,
    /// or a reply from another server than the one the connection was tied to, means the
    /// connection broke: it is dropped, and what waited on it goes out on a new one.
    pub(super) fn answered(
        &mut self,
        index: usize,
        conn: ConnectionId,
        server: ServerId,
        reply: &NodeReply,
        now: Timestamp,
    ) -> (bool, Vec<Out>) {
        let Some(Some(link)) = self.links.get_mut(index) else {
            return (false, Vec::new());
        };
        if link.id != conn {
            // A reply on an older connection: it answered what it was asked.
            return (false, Vec::new());
        }
        let broke = matches!(reply, NodeReply::Failure(_))
            || link.bound.is_some_and(|bound| bound != server);
        if !broke {
            link.bound = Some(server);
            link.outstanding.pop_front();
            return (false, Vec::new());
        }
        let queued = std::mem::take(&mut link.queued);
        self.links[index] = None;
        let out = queued
            .into_iter()
            .flat_map(|queued| self.requeue(queued, now))
            .collect();
        (true, out)
    }

    /// The identification of connection `conn` to node `index` came back at `now`. Returns
    /// the core's events worth tracing, and what can go out now.
    pub(super) fn identified(
        &mut self,
        index: usize,
        conn: ConnectionId,
        reply: &NodeReply,
        now: Timestamp,
    ) -> (Vec<EligibilityEvent>, Vec<Out>) {
        let Some(Some(link)) = self.links.get_mut(index) else {
            return (Vec::new(), Vec::new());
        };
        let NodeReply::Identity { server, uptime_ms } = reply else {
            return (Vec::new(), Vec::new());
        };
        if link.id != conn {
            return (Vec::new(), Vec::new());
        }
        link.identifying = None;
        let identity = Ok(NodeIdentity {
            run_id: server.run_id(),
            uptime: Duration::from_millis(*uptime_ms),
            maxmemory_policy: Some("noeviction".into()),
        });
        let events = self
            .eligibility
            .identified(NodeId::new(index), conn, identity, now);
        (events, self.flush(index, now))
    }

    /// A trace line for an event of the core's eligibility rule.
    pub(super) fn describe(event: &EligibilityEvent) -> String {
        match event {
            EligibilityEvent::Quarantined {
                node,
                until,
                reason,
            } => format!("{node} left out until local {until}: {reason}"),
            other => format!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::net::name::Name;

    use redlock_core::{Acquire, LockConfig, LockKey, Machine, Token};

    use super::*;

    const PATIENCE: Duration = Duration::from_millis(50);

    fn ms(n: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_millis(n))
    }

    fn links() -> Links {
        let keys = Keys {
            key: Name::from("redlock:r"),
            fence_key: Name::from("redlock:r\0fence"),
            wait_key: Name::from("redlock:r\0wait"),
        };
        Links::new(
            0,
            1,
            RestartPolicy::Persistent,
            PATIENCE,
            Faults::none(),
            keys,
        )
    }

    /// The SET of a one-node acquisition's first round.
    fn set(token: u8) -> Transmit {
        let key = LockKey::new("redlock:", "r").unwrap();
        let mut acquire = Acquire::new(
            &LockConfig::new(1),
            key,
            Token::from_bytes([token; 16]),
            Timestamp::ZERO,
        );
        acquire.poll_transmit().unwrap()
    }

    fn sent(out: &[Out]) -> Vec<NodeOp> {
        out.iter()
            .filter_map(|out| match out {
                Out::Send {
                    msg: Msg::Request { cmd, .. },
                    ..
                } => Some(cmd.clone()),
                _ => None,
            })
            .collect()
    }

    /// Answers the identification at `now`; returns what went out then.
    fn identified(links: &mut Links, now: Timestamp) -> Vec<Out> {
        let conn = links.links[0].as_ref().unwrap().id;
        let server = ServerId {
            server: 0,
            incarnation: 1,
        };
        let reply = NodeReply::Identity {
            server,
            uptime_ms: 3_600_000,
        };
        links.answered(0, conn, server, &reply, now);
        links.identified(0, conn, &reply, now).1
    }

    /// The simulated client drives the core's rule as the tokio client does: after a request
    /// went unanswered past the per-node timeout, the next SET waits for a PING probe, and
    /// goes out once the probe answers.
    #[test]
    fn no_set_after_an_unanswered_request_until_a_probe_answers() {
        let mut links = links();
        let out = links.issue(1, set(1), ms(0));
        assert_eq!(sent(&out), [NodeOp::Identify]);
        // The SET goes out after the identification; it is never answered.
        let out = identified(&mut links, ms(1));
        assert!(matches!(sent(&out)[..], [NodeOp::SetNx { .. }]));
        // Within the timeout, the next SET goes out too.
        let out = links.issue(2, set(2), ms(20));
        assert!(matches!(sent(&out)[..], [NodeOp::SetNx { .. }]));
        // Past it, the next SET is held back and a probe goes out instead; one at a time.
        let out = links.issue(3, set(3), ms(100));
        assert_eq!(sent(&out), [NodeOp::Ping]);
        let out = links.issue(4, set(4), ms(110));
        assert!(sent(&out).is_empty());
        let conn = links.links[0].as_ref().unwrap().id;
        let server = ServerId {
            server: 0,
            incarnation: 1,
        };
        // The node catches up: the two SETs' answers, then the probe's. The SETs that waited
        // go out.
        for _ in 0..2 {
            let reply = NodeReply::Core(redlock_core::Reply::Acquired);
            links.answered(0, conn, server, &reply, ms(120));
        }
        links.answered(0, conn, server, &NodeReply::Pong, ms(120));
        let out = links.probed(0, conn, &NodeReply::Pong, ms(120));
        assert!(
            matches!(sent(&out)[..], [NodeOp::SetNx { .. }, NodeOp::SetNx { .. }]),
            "{out:?}"
        );
    }
}
