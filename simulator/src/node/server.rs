//! A simulated Redis server: keys with absolute expiry on the server's own clock, the same
//! conditional operations as the client's scripts, persistence, crashes and replication.

use redlock_core::Token;

use crate::net::message::{NodeOp, NodeReply, ServerId};
pub(crate) use crate::node::store::{Effect, Store};
use crate::scenario::{Persistence, ServerSpec};
use crate::time::clock::ClockModel;
use crate::time::{MS, Nanos};

pub(crate) struct Server {
    pub(crate) name: String,
    pub(crate) clock: ClockModel,
    persistence: Persistence,
    pub(crate) up: bool,
    /// Which server this is, and how many times it has started: its `run_id`.
    id: ServerId,
    /// When the current incarnation started, true time.
    started_at: Nanos,
    /// How long it had run when the scenario began (the first incarnation only).
    uptime_before: Nanos,
    keys: Store,
    /// What the last fsync wrote (persistence `everysec`).
    durable: Store,
    /// Whether writes still flow to the replica (a failover stops them).
    pub(crate) replicating: bool,
}

impl Server {
    pub(crate) fn new(index: usize, spec: &ServerSpec) -> Self {
        Self {
            name: spec.name.clone(),
            clock: spec.clock.clone(),
            persistence: spec.persistence,
            up: true,
            id: ServerId {
                server: index,
                incarnation: 1,
            },
            started_at: 0,
            uptime_before: spec.uptime,
            keys: Store::default(),
            durable: Store::default(),
            replicating: spec.replica.is_some(),
        }
    }

    /// The current incarnation.
    pub(crate) fn id(&self) -> ServerId {
        self.id
    }

    /// How long the current incarnation has run at `t`, in milliseconds: `uptime_in_seconds`
    /// as Redis computes it, the difference of two whole-second readings of the server's clock
    /// (up to a second more than the truth).
    pub(crate) fn uptime_ms(&self, t: Nanos) -> u64 {
        const SECOND: Nanos = 1_000 * MS;
        let now_s = (self.clock.read(t) + self.uptime_before) / SECOND;
        let started_s = self.clock.read(self.started_at) / SECOND;
        now_s.saturating_sub(started_s) * 1_000
    }

    /// The server's clock in whole milliseconds, as Redis's `mstime()`.
    pub(crate) fn now_ms(&self, t: Nanos) -> u64 {
        self.clock.read(t) / MS
    }

    /// Performs `op` at true time `t`: the reply, and the change to replicate if any.
    pub(crate) fn execute(&mut self, op: &NodeOp, t: Nanos) -> (NodeReply, Option<Effect>) {
        match op {
            NodeOp::Ping => (NodeReply::Pong, None),
            NodeOp::Identify => {
                let reply = NodeReply::Identity {
                    server: self.id,
                    uptime_ms: self.uptime_ms(t),
                };
                (reply, None)
            }
            _ => {
                let now = self.now_ms(t);
                self.keys.execute(op, now)
            }
        }
    }

    /// Applies a replicated change (on a replica).
    pub(crate) fn apply(&mut self, effect: &Effect) {
        self.keys.apply(effect);
    }

    /// The once-a-second fsync of `appendfsync everysec`.
    pub(crate) fn fsync(&mut self) {
        if self.persistence == Persistence::Everysec {
            self.durable.clone_from(&self.keys);
        }
    }

    /// A crash (`kill -9`): the server stops, and loses what its persistence did not keep.
    pub(crate) fn crash(&mut self) {
        self.up = false;
        match self.persistence {
            Persistence::None => self.keys = Store::default(),
            Persistence::Everysec => self.keys.clone_from(&self.durable),
            Persistence::Always => {}
        }
    }

    /// Starts again at `t`: a new incarnation (a new `run_id`), with whatever the crash left.
    pub(crate) fn restart(&mut self, t: Nanos) {
        self.up = true;
        self.id.incarnation += 1;
        self.started_at = t;
        self.uptime_before = 0;
    }

    /// Whether `op`, performed next at `t`, makes the release script publish (a release
    /// of its key while some waiter's mark is there). Asked before `op` is performed.
    pub(crate) fn announces(&self, op: &NodeOp, t: Nanos) -> bool {
        self.keys.announces(op, self.now_ms(t))
    }

    /// The token holding `key` at `t`, if any (for the space-time diagram).
    pub(crate) fn holder(&self, key: &str, t: Nanos) -> Option<Token> {
        self.keys.holder(key, self.now_ms(t))
    }
}

#[cfg(test)]
mod tests {
    use crate::net::name::Name;

    use redlock_core::Reply;

    use super::*;
    use crate::time::clock::ClockModel;

    fn server(persistence: Persistence, clock: ClockModel) -> Server {
        Server::new(
            0,
            &ServerSpec {
                name: "n0".into(),
                clock,
                persistence,
                uptime: 0,
                crashes: vec![],
                replica: None,
                failover: None,
            },
        )
    }

    #[test]
    fn ownership_expiry_and_persistence() {
        let key: Name = "k".into();
        let (a, b) = (Token::from_bytes([1; 16]), Token::from_bytes([2; 16]));
        let mut s = server(Persistence::None, ClockModel::ideal());
        let set = |token| NodeOp::SetNx {
            key: key.clone(),
            token,
            ttl_ms: 1_000,
        };
        let taken_by = |holder| {
            NodeReply::Core(Reply::TakenBy {
                holder,
                remaining: None,
            })
        };
        assert_eq!(s.execute(&set(a), 0).0, NodeReply::Core(Reply::Acquired));
        assert_eq!(s.execute(&set(b), 0).0, taken_by(a));
        let release = |token| NodeOp::ReleaseIfOwner {
            key: key.clone(),
            wait_key: "k\0wait".into(),
            token,
        };
        assert_eq!(
            s.execute(&release(b), 0).0,
            NodeReply::Core(Reply::HeldByOther)
        );
        // Redis keeps a key until its clock is *past* the expiry.
        assert_eq!(s.execute(&set(b), 1_000 * MS).0, taken_by(a));
        assert_eq!(
            s.execute(&set(b), 1_001 * MS).0,
            NodeReply::Core(Reply::Acquired)
        );
        let extend = NodeOp::ExtendIfOwner {
            key: key.clone(),
            token: a,
            ttl_ms: 5,
        };
        assert_eq!(
            s.execute(&extend, 1_001 * MS).0,
            NodeReply::Core(Reply::HeldByOther)
        );
        s.crash();
        s.restart(1_002 * MS);
        assert_eq!(
            s.execute(&release(b), 1_002 * MS).0,
            NodeReply::Core(Reply::NotHeld)
        );

        let mut always = server(Persistence::Always, ClockModel::ideal());
        always.execute(&set(a), 0);
        always.crash();
        always.restart(0);
        assert_eq!(always.execute(&set(b), 0).0, taken_by(a));

        let mut everysec = server(Persistence::Everysec, ClockModel::ideal());
        everysec.execute(&set(a), 0);
        everysec.fsync();
        everysec.execute(
            &NodeOp::SetNx {
                key: "other".into(),
                token: a,
                ttl_ms: 1_000,
            },
            0,
        );
        everysec.crash();
        assert!(everysec.holder("k", 0).is_some() && everysec.holder("other", 0).is_none());
    }

    #[test]
    fn a_restart_is_a_new_identity_with_a_new_uptime() {
        let mut s = server(Persistence::None, ClockModel::ideal());
        let NodeReply::Identity { server, uptime_ms } = s.execute(&NodeOp::Identify, 5_000 * MS).0
        else {
            panic!()
        };
        assert_eq!((server.incarnation, uptime_ms), (1, 5_000));
        s.crash();
        s.restart(6_900 * MS);
        // Whole seconds on both ends, as Redis: started at 6.9 s, asked at 7.1 s, "up 1 s".
        let NodeReply::Identity { server, uptime_ms } = s.execute(&NodeOp::Identify, 7_100 * MS).0
        else {
            panic!()
        };
        assert_eq!((server.incarnation, uptime_ms), (2, 1_000));
        assert_ne!(server.run_id(), s.id().run_id().replace("-2", "-1"));
    }

    #[test]
    fn a_clock_step_forward_expires_keys_early() {
        let key: Name = "k".into();
        let stepped = ClockModel::new(0, 0, vec![(1_000 * MS, 15_000 * MS as i64)]);
        let mut s = server(Persistence::None, stepped);
        s.execute(
            &NodeOp::SetNx {
                key: key.clone(),
                token: Token::from_bytes([1; 16]),
                ttl_ms: 10_000,
            },
            0,
        );
        let other = NodeOp::SetNx {
            key,
            token: Token::from_bytes([2; 16]),
            ttl_ms: 10_000,
        };
        assert_eq!(
            s.execute(&other, 1_000 * MS).0,
            NodeReply::Core(Reply::Acquired)
        );
    }

    #[test]
    fn set_or_extend_recreates_and_incr_counts() {
        let key: Name = "k".into();
        let mut s = server(Persistence::None, ClockModel::ideal());
        let op = NodeOp::SetOrExtend {
            key,
            token: Token::from_bytes([1; 16]),
            ttl_ms: 10,
        };
        assert_eq!(s.execute(&op, 0).0, NodeReply::Core(Reply::Extended));
        assert!(s.holder("k", 0).is_some());
        let incr = NodeOp::Incr { key: "f".into() };
        assert_eq!(s.execute(&incr, 0).0, NodeReply::Counter(1));
        assert_eq!(s.execute(&incr, 0).0, NodeReply::Counter(2));
    }
}
