//! The simulated servers' keyspace as a library: core [`Command`]s in, core [`Reply`]s out,
//! on a clock the caller sets.
//!
//! The simulator and the model checker never run the client's Lua scripts: their nodes
//! keep keys in a re-implementation of what `SET … NX GET PX` and each script do. This is
//! that re-implementation, opened up so that it can be held against the real thing: the
//! repository's differential test sends the same random command sequences to a real
//! redis-server (through the client's own wire, so the shipped scripts) and to a
//! [`Keyspace`], and compares every reply and the keys left. Multi-resource commands are
//! not modelled (the simulated servers do not model them either): they are refused.

use crate::net::name::Name;
use std::time::Duration;

use redlock_core::{Command, NodeFailure, Reply};

use crate::client::faults::{Faults, Keys};
use crate::net::message::{NodeOp, NodeReply};
use crate::node::store::{Store, Value};
use crate::scenario::{ExtendImpl, LossOrder, ReleaseImpl, TimingImpl};

/// One server's keys, driven by core commands.
#[derive(Clone, Debug, Default)]
pub struct Keyspace {
    store: Store,
    release: ReleaseImpl,
    extend: ExtendImpl,
    /// How many `PUBLISH`es the release scripts made.
    published: u64,
    /// Whether every release publishes, marks or not (the release before the marks).
    publish_always: bool,
}

/// A live key, as `GET` (or `HKEYS`, for a hash) and `PTTL` would show it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyState {
    /// The key's name.
    pub key: String,
    /// Its value: a token in hex, or a counter in decimal (as `GET` answers both), or for
    /// a hash of waiting marks `hash:` and its fields in order, comma-separated.
    pub value: String,
    /// Its remaining time to live, `None` for a key without expiry.
    pub expires_in: Option<Duration>,
}

impl Keyspace {
    /// An empty keyspace that performs the shipped client's operations.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty keyspace that performs the operations of a client with these faults (a
    /// plain `DEL` for a release, an extension that re-creates a missing key): what the
    /// simulator's faulty clients send for the same core commands.
    pub fn with_faults(release: ReleaseImpl, extend: ExtendImpl) -> Self {
        Self {
            store: Store::default(),
            release,
            extend,
            published: 0,
            publish_always: false,
        }
    }

    /// Performs `command` when the server's clock reads `now_ms` milliseconds.
    ///
    /// # Errors
    ///
    /// The commands the simulated servers do not model (multi-resource ones, the holder
    /// query): a [`NodeFailure::Protocol`] naming the command.
    pub fn execute(&mut self, command: &Command, now_ms: u64) -> Result<Reply, NodeFailure> {
        let Some(key) = command.keys().first() else {
            return Err(NodeFailure::Protocol(format!("no key in {command:?}")));
        };
        let keys = Keys {
            key: Name::from(key.as_str()),
            fence_key: Name::from(key.fence_key()),
            wait_key: Name::from(key.wait_key()),
        };
        let faults = Faults::new(
            TimingImpl::Correct,
            self.release,
            self.extend,
            LossOrder::StopFirst,
        );
        // The older servers' forms of the lock request (`SET … NX` without `GET`) are the
        // same operations; only the plain one's refusal does not read the holder.
        let (command, names_holder) = match command.clone() {
            Command::SetIfAbsentNoGet { key, token, ttl } => {
                (Command::SetIfAbsent { key, token, ttl }, false)
            }
            Command::SetIfAbsentThenReadHolder { key, token, ttl } => {
                (Command::SetIfAbsentReportHolder { key, token, ttl }, true)
            }
            command => (command, true),
        };
        let op: NodeOp = faults.node_op(command, &keys)?;
        let releases = self.publish_always
            && matches!(&op, NodeOp::ReleaseIfOwner { key, token, .. }
                if self.store.holder(key, now_ms) == Some(*token));
        if releases || self.store.announces(&op, now_ms) {
            self.published += 1;
        }
        let reply = self.store.execute(&op, now_ms).0;
        match reply {
            NodeReply::Core(Reply::TakenBy { .. }) if !names_holder => Ok(Reply::TakenUnread),
            NodeReply::Core(reply) => Ok(reply),
            other => Err(NodeFailure::Protocol(format!(
                "not a core reply: {other:?}"
            ))),
        }
    }

    /// The keyspace of the release before the waiting marks, which publishes on every
    /// release, marks or not: a faulty keyspace the differential test must tell apart.
    #[must_use]
    pub fn publishing_every_release(mut self) -> Self {
        self.publish_always = true;
        self
    }

    /// How many `PUBLISH`es the release scripts have made so far: one per release that
    /// deleted the key while a waiter's mark was there.
    pub fn published(&self) -> u64 {
        self.published
    }

    /// The live keys when the server's clock reads `now_ms` milliseconds, by name.
    pub fn keys(&self, now_ms: u64) -> Vec<KeyState> {
        self.store
            .entries()
            .filter(|(_, entry)| entry.expire_at_ms.is_none_or(|at| now_ms <= at))
            .map(|(key, entry)| KeyState {
                key: key.to_string(),
                value: match &entry.value {
                    Value::Token(token) => String::from_utf8_lossy(&token.to_hex()).into_owned(),
                    Value::Counter(n) => n.to_string(),
                    // A hash of waiting marks: its fields, in order, after `hash:`.
                    Value::Marks(marks) => {
                        let fields: Vec<String> = marks
                            .iter()
                            .map(|m| String::from_utf8_lossy(&m.to_hex()).into_owned())
                            .collect();
                        format!("hash:{}", fields.join(","))
                    }
                },
                expires_in: entry
                    .expire_at_ms
                    .map(|at| Duration::from_millis(at.saturating_sub(now_ms))),
            })
            .collect()
    }
}
