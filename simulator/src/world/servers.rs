//! The servers' side of the world: a request executed (or refused by a server that is down
//! or by a broken connection) and its reply sent back, at once or after the replica has the
//! write (`WAIT 1`); and the servers' scripted events: crashes and restarts, `everysec`
//! fsyncs, replication, and failovers.

use std::sync::Arc;

use redlock_core::{NodeFailure, Reply};

use super::{Event, World};
use crate::net::message::{Msg, NodeOp, NodeReply, ServerId};
use crate::node::server::Effect;
use crate::scenario::Endpoint;
use crate::time::{MS, Nanos, fmt_duration};

impl World<'_> {
    /// Server `s` takes a request that came over a connection `bound` to a server instance
    /// (if any yet): the reply and the write to replicate, or `None` when the server is down
    /// and the request is dropped.
    pub(super) fn serve(
        &mut self,
        s: usize,
        bound: Option<ServerId>,
        cmd: &NodeOp,
    ) -> Option<(NodeReply, Option<Effect>)> {
        if !self.servers[s].up {
            let name = self.servers[s].name.clone();
            self.log(&name, format_args!("down: drops {cmd:?}"));
            return None;
        }
        if bound.is_some_and(|bound| bound != self.servers[s].id()) {
            // The connection was opened to another incarnation (the server restarted)
            // or another server (a failover): it is broken, nothing is executed.
            let reply = NodeReply::Failure(NodeFailure::Io(
                "connection reset: another server instance answers here".into(),
            ));
            return Some((reply, None));
        }
        let announces = self.servers[s].announces(cmd, self.now);
        let (reply, effect) = self.servers[s].execute(cmd, self.now);
        self.track_spans(s, cmd, &reply);
        if let (
            NodeOp::ReleaseIfOwner { key, token, .. },
            NodeReply::Core(Reply::Released | Reply::ReleasedOthersWaiting),
        ) = (cmd, &reply)
            && announces
        {
            // The release script publishes the released token on the key's channel, when
            // some waiter had marked its interest there.
            self.publish(s, key, Arc::from(&token.to_hex()[..]));
        }
        Some((reply, effect))
    }

    /// Server `s` answers `client` (at `to`): at once, or, when the write is replicated with
    /// `WAIT 1`, once the replica has it.
    pub(super) fn answer(
        &mut self,
        s: usize,
        to: Endpoint,
        client: usize,
        effect: Option<Effect>,
        reply: Msg,
    ) {
        let from = Endpoint::Server(s);
        let replication = self.scenario.servers[s].replica.clone();
        match (effect, replication) {
            (Some(effect), Some(replication)) if self.servers[s].replicating => {
                let ack = replication.wait.then(|| (client, reply.clone()));
                let waits = ack.is_some();
                let replicate = Event::Replicate {
                    master: s,
                    replica: replication.replica,
                    effect,
                    ack,
                };
                self.at(self.now + replication.lag, replicate);
                if !waits {
                    self.send(from, to, reply);
                }
            }
            _ => self.send(from, to, reply),
        }
    }

    pub(super) fn crash_server(&mut self, server: usize, restart_after: Option<Nanos>) {
        let name = self.servers[server].name.clone();
        let text = match restart_after {
            Some(after) => format!("crashes; restarts after {}", fmt_duration(after)),
            None => "crashes for good".into(),
        };
        self.note(&name, text);
        self.servers[server].crash();
        self.close_lost_spans(server);
        if let Some(after) = restart_after {
            self.at(self.now + after, Event::ServerRestart(server));
        }
    }

    pub(super) fn restart_server(&mut self, server: usize) {
        let name = self.servers[server].name.clone();
        self.note(&name, "restarts".into());
        self.servers[server].restart(self.now);
    }

    /// An `everysec` fsync, and the next one while some client still works.
    pub(super) fn fsync(&mut self, server: usize) {
        self.servers[server].fsync();
        if self.clients.iter().any(|c| !c.is_done()) {
            self.at(self.now + 1_000 * MS, Event::ServerFsync(server));
        }
    }

    /// The master ships a write to its replica, and sends the reply that waited for it.
    pub(super) fn replicate(
        &mut self,
        master: usize,
        replica: usize,
        effect: Effect,
        ack: Option<(usize, Msg)>,
    ) {
        // The lag is the time until the master ships the write: a master that died
        // or was cut off before then never ships it.
        if !(self.servers[master].up && self.servers[master].replicating) {
            let name = self.servers[master].name.clone();
            self.log(
                &name,
                format_args!("write never reached the replica: {effect:?}"),
            );
            return;
        }
        self.servers[replica].apply(&effect);
        if let Some((client, msg)) = ack {
            self.send(Endpoint::Server(master), Endpoint::Client(client), msg);
        }
    }

    /// The failover starts: the master stops replicating, crashed or cut off.
    pub(super) fn failover_stop(&mut self, server: usize) {
        let spec = &self.scenario.servers[server];
        let crash = spec.failover.as_ref().is_some_and(|f| f.crash_master);
        let name = spec.name.clone();
        self.servers[server].replicating = false;
        if crash {
            self.note(&name, "master crashes before the failover".into());
            self.servers[server].crash();
            self.close_lost_spans(server);
        } else {
            self.note(
                &name,
                "master cut off from its replica and the sentinels".into(),
            );
        }
    }

    /// The replica is promoted: the failover's clients now reach it at the master's address.
    pub(super) fn failover_promote(&mut self, server: usize) {
        let spec = &self.scenario.servers[server];
        let (Some(failover), Some(replication)) = (&spec.failover, &spec.replica) else {
            return;
        };
        let replica = replication.replica;
        let moved: Vec<usize> = failover
            .clients
            .clone()
            .unwrap_or_else(|| (0..self.clients.len()).collect());
        for &c in &moved {
            self.routes[c][server] = replica;
        }
        let names: Vec<String> = moved
            .iter()
            .map(|&c| self.scenario.clients[c].name.clone())
            .collect();
        let name = self.servers[replica].name.clone();
        self.note(
            &name,
            format!("promoted; clients now sent here: {}", names.join(", ")),
        );
    }
}
