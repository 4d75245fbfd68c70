//! A Redis server's keyspace: keys with absolute expiry on the server's own clock, and the
//! same conditional operations as the client's `SET NX GET PX` and scripts. The simulated
//! servers and the model checker's nodes both keep their keys in one.

use crate::net::name::Name;
use std::collections::BTreeMap;

use redlock_core::{NodeFailure, Reply, Token};

use crate::net::message::{NodeOp, NodeReply};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Value {
    Token(Token),
    Counter(i64),
    /// A hash of waiting marks: its fields (the waiters' ids), in order.
    Marks(Vec<Token>),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub(crate) value: Value,
    /// Absolute expiry in milliseconds of the server's clock, as Redis stores it.
    pub(crate) expire_at_ms: Option<u64>,
}

/// A change to replicate: Redis propagates absolute expiry times to replicas.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Effect {
    Set { key: Name, entry: Entry },
    Del { key: Name },
}

/// The keys of one server (or what its last fsync wrote).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Store {
    keys: BTreeMap<Name, Entry>,
}

impl Store {
    /// Feeds `h` what the derived `Hash` of this store would with every token renamed by
    /// `rename` (the model checker's client symmetry renames the tokens' owners): the
    /// waiting marks, a set kept sorted, sorted again after the renaming, so that the
    /// words are those of the store the renamed operations would have built. Allocates
    /// only for marks.
    pub(crate) fn hash_renamed<H: std::hash::Hasher>(
        &self,
        rename: impl Fn(Token) -> Token,
        h: &mut H,
    ) {
        use std::hash::Hash;
        // As a map hashes: its length, then each (key, entry).
        h.write_usize(self.keys.len());
        for (name, entry) in &self.keys {
            name.hash(h);
            match &entry.value {
                Value::Token(token) => Value::Token(rename(*token)).hash(h),
                Value::Marks(marks) => {
                    let mut renamed: Vec<Token> = marks.iter().map(|&t| rename(t)).collect();
                    renamed.sort_unstable();
                    Value::Marks(renamed).hash(h);
                }
                Value::Counter(_) => entry.value.hash(h),
            }
            entry.expire_at_ms.hash(h);
        }
    }

    /// The live entry under `key`; an expired one is removed first (Redis expires lazily on
    /// access: a key is gone once the clock is past its expiry).
    fn live(&mut self, key: &Name, now_ms: u64) -> Option<&mut Entry> {
        let expired = self
            .keys
            .get(key)
            .is_some_and(|e| e.expire_at_ms.is_some_and(|at| now_ms > at));
        if expired {
            self.keys.remove(key);
        }
        self.keys.get_mut(key)
    }

    fn owned_by(&mut self, key: &Name, token: Token, now_ms: u64) -> Option<bool> {
        self.live(key, now_ms)
            .map(|e| e.value == Value::Token(token))
    }

    /// Performs the key operation `op` when the server's clock reads `now` milliseconds: the
    /// reply, and the change to replicate if any. (`PING` and `INFO` are the server's.)
    pub(crate) fn execute(&mut self, op: &NodeOp, now: u64) -> (NodeReply, Option<Effect>) {
        let (reply, effect) = match op {
            NodeOp::SetNx { key, token, ttl_ms } => self.set_nx(key, *token, *ttl_ms, now),
            NodeOp::SetNxReportHolder { key, token, ttl_ms } => {
                self.set_nx_report_holder(key, *token, *ttl_ms, now)
            }
            NodeOp::SetNxReadFence {
                key,
                fence_key,
                token,
                ttl_ms,
            } => self.set_nx_read_fence(key, fence_key, *token, *ttl_ms, now),
            NodeOp::RaiseFence {
                key,
                fence_key,
                token,
                fence,
            } => self.raise_fence(key, fence_key, *token, *fence, now),
            NodeOp::ReleaseIfOwner {
                key,
                wait_key,
                token,
            } => self.release_if_owner(key, wait_key, *token, now),
            NodeOp::ExtendIfOwner { key, token, ttl_ms } => {
                self.extend_if_owner(key, *token, *ttl_ms, now)
            }
            NodeOp::Del { key } => self.del(key, now),
            NodeOp::SetOrExtend { key, token, ttl_ms } => {
                self.set_or_extend(key, *token, *ttl_ms, now)
            }
            NodeOp::Ping | NodeOp::Identify => {
                let failure = NodeFailure::Protocol("not a key operation".into());
                return (NodeReply::Failure(failure), None);
            }
            // The only operation whose reply is not a lock reply.
            NodeOp::MarkWaiting {
                key,
                wait_key,
                waiter,
                ttl_ms,
            } => self.mark_waiting(key, wait_key, *waiter, *ttl_ms, now),
            NodeOp::UnmarkWaiting { wait_key, waiter } => {
                self.unmark_waiting(wait_key, *waiter, now)
            }
            NodeOp::Incr { key } => {
                let (next, effect) = self.incr(key, now);
                return (NodeReply::Counter(next), Some(effect));
            }
        };
        (NodeReply::Core(reply), effect)
    }

    /// Stores `value` under `key`, expiring at `expire_at_ms` (never when `None`), and returns
    /// the change to replicate.
    fn insert(&mut self, key: &Name, value: Value, expire_at_ms: Option<u64>) -> Effect {
        let entry = Entry {
            value,
            expire_at_ms,
        };
        self.keys.insert(key.clone(), entry.clone());
        Effect::Set {
            key: key.clone(),
            entry,
        }
    }

    /// `SET key token NX GET PX ttl`: the holder's value comes back with a refusal.
    fn set_nx(
        &mut self,
        key: &Name,
        token: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        if let Some(entry) = self.live(key, now) {
            let reply = match entry.value {
                Value::Token(holder) => Reply::TakenBy {
                    holder,
                    remaining: None,
                },
                Value::Counter(_) | Value::Marks(_) => Reply::Taken,
            };
            (reply, None)
        } else {
            let effect = self.insert(key, Value::Token(token), Some(now + ttl_ms));
            (Reply::Acquired, Some(effect))
        }
    }

    /// `SET NX GET PX` followed by `PTTL key`: a refusal also says how long the key has left
    /// (`Duration::MAX` for a key without expiry), which a waiter's rounds need.
    fn set_nx_report_holder(
        &mut self,
        key: &Name,
        token: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        let (reply, effect) = self.set_nx(key, token, ttl_ms, now);
        let mut remaining = || {
            self.live(key, now)
                .and_then(|entry| entry.expire_at_ms)
                .map_or(std::time::Duration::MAX, |at| {
                    std::time::Duration::from_millis(at.saturating_sub(now))
                })
        };
        let reply = match reply {
            Reply::TakenBy { holder, .. } => Reply::TakenBy {
                holder,
                remaining: Some(remaining()),
            },
            Reply::Taken => Reply::TakenFor {
                remaining: remaining(),
            },
            other => other,
        };
        (reply, effect)
    }

    /// The fenced acquisition script: the fence counter as it was before the `SET NX`, with
    /// either outcome.
    fn set_nx_read_fence(
        &mut self,
        key: &Name,
        fence_key: &Name,
        token: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        let counter = self.counter(fence_key, now);
        let (reply, effect) = self.set_nx(key, token, ttl_ms, now);
        let reply = match reply {
            Reply::Acquired => Reply::AcquiredWithFence { counter },
            _ => Reply::TakenWithFence { counter },
        };
        (reply, effect)
    }

    /// The fence-raising script: `counter = max(counter, fence)`, only while `key` holds
    /// `token`; a counter already at or above `fence` is left as it is (nothing to replicate).
    fn raise_fence(
        &mut self,
        key: &Name,
        fence_key: &Name,
        token: Token,
        fence: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        match self.owned_by(key, token, now) {
            None => return (Reply::NotHeld, None),
            Some(false) => return (Reply::HeldByOther, None),
            Some(true) => {}
        }
        let current = self.counter(fence_key, now);
        if fence <= current {
            (Reply::FenceRaised { counter: current }, None)
        } else {
            let value = Value::Counter(i64::try_from(fence).unwrap_or(i64::MAX));
            let effect = self.insert(fence_key, value, None);
            (Reply::FenceRaised { counter: fence }, Some(effect))
        }
    }

    /// The release script: deletes `key` only while it holds `token`, and the waiters'
    /// marks at `wait_key` with it (`DEL key wait_key`; whether it publishes is
    /// [`Self::announces`], asked before). [`Reply::ReleasedOthersWaiting`] when a mark
    /// of another client was there (a waiter id whose client prefix is not the token's). The replica is sent the lock key's deletion
    /// only: a mark left there costs a needless `PUBLISH` after a failover, until it expires.
    fn release_if_owner(
        &mut self,
        key: &Name,
        wait_key: &Name,
        token: Token,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        match self.owned_by(key, token, now) {
            None => (Reply::NotHeld, None),
            Some(false) => (Reply::HeldByOther, None),
            Some(true) => {
                let others_waiting = self.live(wait_key, now).is_some_and(|entry| {
                    matches!(&entry.value, Value::Marks(marks)
                        if marks.iter().any(|waiter| !waiter.same_client(&token)))
                });
                self.keys.remove(key);
                self.keys.remove(wait_key);
                let reply = if others_waiting {
                    Reply::ReleasedOthersWaiting
                } else {
                    Reply::Released
                };
                (reply, Some(Effect::Del { key: key.clone() }))
            }
        }
    }

    /// The extension script: a new expiry `ttl_ms` from now, only while `key` holds `token`.
    fn extend_if_owner(
        &mut self,
        key: &Name,
        token: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        match self.owned_by(key, token, now) {
            None => (Reply::NotHeld, None),
            Some(false) => (Reply::HeldByOther, None),
            Some(true) => self.pexpire(key, now + ttl_ms),
        }
    }

    /// A plain `DEL`, whoever holds the key.
    fn del(&mut self, key: &Name, now: u64) -> (Reply, Option<Effect>) {
        if self.live(key, now).is_some() {
            self.keys.remove(key);
            (Reply::Released, Some(Effect::Del { key: key.clone() }))
        } else {
            (Reply::NotHeld, None)
        }
    }

    /// An extension that re-creates a missing key (an implementation fault the simulator
    /// can inject): refused only when another token holds the key.
    fn set_or_extend(
        &mut self,
        key: &Name,
        token: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        match self.owned_by(key, token, now) {
            Some(false) => (Reply::HeldByOther, None),
            Some(true) => self.pexpire(key, now + ttl_ms),
            None => {
                let effect = self.insert(key, Value::Token(token), Some(now + ttl_ms));
                (Reply::Extended, Some(effect))
            }
        }
    }

    /// `INCR key`: the new value (a missing key, or one that holds a token, counts from 0),
    /// stored without expiry.
    fn incr(&mut self, key: &Name, now: u64) -> (i64, Effect) {
        let next = match self.live(key, now) {
            Some(Entry {
                value: Value::Counter(n),
                ..
            }) => *n + 1,
            _ => 1,
        };
        (next, self.insert(key, Value::Counter(next), None))
    }

    /// The counter under `key` (0 when absent), as the fencing scripts read it.
    fn counter(&mut self, key: &Name, now_ms: u64) -> u64 {
        match self.live(key, now_ms) {
            Some(Entry {
                value: Value::Counter(n),
                ..
            }) => u64::try_from(*n).unwrap_or(0),
            _ => 0,
        }
    }

    fn pexpire(&mut self, key: &Name, at_ms: u64) -> (Reply, Option<Effect>) {
        let Some(entry) = self.keys.get_mut(key) else {
            return (Reply::NotHeld, None);
        };
        entry.expire_at_ms = Some(at_ms);
        let effect = Effect::Set {
            key: key.clone(),
            entry: entry.clone(),
        };
        (Reply::Extended, Some(effect))
    }

    /// The mark script: `HSET wait_key waiter 1`, then `PEXPIRE wait_key ttl_ms` unless the
    /// hash already lives longer (`PTTL` is -1 for a new hash, which has no expiry yet), then
    /// `GET key`: [`Reply::NotHeld`] when free, the holder otherwise.
    fn mark_waiting(
        &mut self,
        key: &Name,
        wait_key: &Name,
        waiter: Token,
        ttl_ms: u64,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        let mut marks = match self.live(wait_key, now) {
            Some(Entry {
                value: Value::Marks(marks),
                expire_at_ms,
            }) => (std::mem::take(marks), *expire_at_ms),
            _ => (Vec::new(), None),
        };
        if let Err(at) = marks.0.binary_search(&waiter) {
            marks.0.insert(at, waiter);
        }
        let longer = marks.1.is_some_and(|at| at.saturating_sub(now) >= ttl_ms);
        let expire_at = if longer { marks.1 } else { Some(now + ttl_ms) };
        let effect = self.insert(wait_key, Value::Marks(marks.0), expire_at);
        let reply = match self.live(key, now).map(|entry| &entry.value) {
            None => Reply::NotHeld,
            Some(Value::Token(holder)) => Reply::TakenBy {
                holder: *holder,
                remaining: None,
            },
            Some(_) => Reply::Taken,
        };
        (reply, Some(effect))
    }

    /// `HDEL wait_key waiter`: [`Reply::Released`] when the field was there (the hash goes
    /// with its last field), [`Reply::NotHeld`] otherwise.
    fn unmark_waiting(
        &mut self,
        wait_key: &Name,
        waiter: Token,
        now: u64,
    ) -> (Reply, Option<Effect>) {
        let Some(Entry {
            value: Value::Marks(marks),
            ..
        }) = self.live(wait_key, now)
        else {
            return (Reply::NotHeld, None);
        };
        let Ok(at) = marks.binary_search(&waiter) else {
            return (Reply::NotHeld, None);
        };
        marks.remove(at);
        if marks.is_empty() {
            self.keys.remove(wait_key);
            return (
                Reply::Released,
                Some(Effect::Del {
                    key: wait_key.clone(),
                }),
            );
        }
        let entry = self.keys.get(wait_key).cloned().expect("a live hash");
        let effect = Effect::Set {
            key: wait_key.clone(),
            entry,
        };
        (Reply::Released, Some(effect))
    }

    /// Whether `op`, performed next when the server's clock reads `now` milliseconds, makes
    /// the release script publish: a release whose key holds its token while some waiter's
    /// mark is there (the script's `DEL` of both answers 2). Asked before `op` is performed,
    /// which deletes the marks.
    pub(crate) fn announces(&self, op: &NodeOp, now: u64) -> bool {
        let NodeOp::ReleaseIfOwner {
            key,
            wait_key,
            token,
        } = op
        else {
            return false;
        };
        self.holder(key, now) == Some(*token) && self.marked(wait_key, now)
    }

    /// Whether some waiter's mark is on the hash `wait_key` when the server's clock reads
    /// `now` milliseconds: the release scripts publish only then.
    pub(crate) fn marked(&self, wait_key: &str, now: u64) -> bool {
        self.keys.get(wait_key).is_some_and(|e| {
            matches!(&e.value, Value::Marks(marks) if !marks.is_empty())
                && e.expire_at_ms.is_none_or(|at| now <= at)
        })
    }

    /// Applies a replicated change.
    pub(crate) fn apply(&mut self, effect: &Effect) {
        match effect {
            Effect::Set { key, entry } => {
                self.keys.insert(key.clone(), entry.clone());
            }
            Effect::Del { key } => {
                self.keys.remove(key);
            }
        }
    }

    /// Every entry, live or not yet removed after its expiry, by key.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Name, &Entry)> {
        self.keys.iter()
    }

    /// The token holding `key` when the server's clock reads `now` milliseconds, if any.
    pub(crate) fn holder(&self, key: &str, now: u64) -> Option<Token> {
        self.keys
            .get(key)
            .and_then(|e| match (&e.value, e.expire_at_ms) {
                (Value::Token(token), Some(at)) if now <= at => Some(*token),
                (Value::Token(token), None) => Some(*token),
                _ => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(n: u8) -> Token {
        Token::from_bytes([n; 16])
    }

    /// A mark of the releasing client's own waiter announces the release, but says no other
    /// process waits; one of another client beside it does.
    #[test]
    fn a_release_tells_another_clients_mark_from_its_own() {
        let (key, wait_key): (Name, Name) = ("k".into(), "k\0wait".into());
        let mut store = Store::default();
        let of = |client: u8, n: u8| {
            let mut bytes = [n; 16];
            bytes[..redlock_core::CLIENT_PREFIX_LEN].fill(client);
            Token::from_bytes(bytes)
        };
        let holder = of(1, 1);
        let mark = |waiter| NodeOp::MarkWaiting {
            key: key.clone(),
            wait_key: wait_key.clone(),
            waiter,
            ttl_ms: 1_000,
        };
        let set = NodeOp::SetNx {
            key: key.clone(),
            token: holder,
            ttl_ms: 1_000,
        };
        let release = NodeOp::ReleaseIfOwner {
            key: key.clone(),
            wait_key: wait_key.clone(),
            token: holder,
        };
        let reply = |store: &mut Store, op: &NodeOp| match store.execute(op, 0).0 {
            NodeReply::Core(reply) => reply,
            other => panic!("{other:?}"),
        };
        reply(&mut store, &set);
        reply(&mut store, &mark(of(1, 2)));
        assert!(store.announces(&release, 0));
        assert_eq!(reply(&mut store, &release), Reply::Released);
        reply(&mut store, &set);
        reply(&mut store, &mark(of(1, 2)));
        reply(&mut store, &mark(of(2, 3)));
        assert_eq!(reply(&mut store, &release), Reply::ReleasedOthersWaiting);
    }

    #[test]
    fn a_release_announces_only_where_a_mark_is_and_takes_the_marks_with_it() {
        let (key, wait_key): (Name, Name) = ("k".into(), "k\0wait".into());
        let mut store = Store::default();
        let set = NodeOp::SetNx {
            key: key.clone(),
            token: token(1),
            ttl_ms: 1_000,
        };
        let release = NodeOp::ReleaseIfOwner {
            key: key.clone(),
            wait_key: wait_key.clone(),
            token: token(1),
        };
        let mark = |waiter, ttl_ms| NodeOp::MarkWaiting {
            key: key.clone(),
            wait_key: wait_key.clone(),
            waiter: token(waiter),
            ttl_ms,
        };
        let reply = |store: &mut Store, op: &NodeOp, now| match store.execute(op, now).0 {
            NodeReply::Core(reply) => reply,
            other => panic!("{other:?}"),
        };
        // Nobody waits: the release announces nothing.
        reply(&mut store, &set, 0);
        assert!(!store.announces(&release, 1));
        assert_eq!(reply(&mut store, &release, 1), Reply::Released);
        // A mark on a free key says so; one on a held key names the holder.
        assert_eq!(reply(&mut store, &mark(7, 500), 2), Reply::NotHeld);
        reply(&mut store, &set, 3);
        let held = Reply::TakenBy {
            holder: token(1),
            remaining: None,
        };
        assert_eq!(reply(&mut store, &mark(8, 100), 4), held);
        // The shorter mark did not shorten the hash's life: still there at 400.
        assert!(store.marked(&wait_key, 400));
        assert!(store.announces(&release, 400));
        // Waiters 7 and 8 are of other clients (their prefixes are not the token's).
        assert_eq!(
            reply(&mut store, &release, 400),
            Reply::ReleasedOthersWaiting
        );
        // The release took the marks: the next one announces nothing.
        assert!(!store.marked(&wait_key, 401));
        // A waiter's own removal; the hash goes with its last field.
        reply(&mut store, &mark(7, 500), 410);
        let unmark = |waiter| NodeOp::UnmarkWaiting {
            wait_key: wait_key.clone(),
            waiter: token(waiter),
        };
        assert_eq!(reply(&mut store, &unmark(8), 411), Reply::NotHeld);
        assert_eq!(reply(&mut store, &unmark(7), 412), Reply::Released);
        assert!(!store.marked(&wait_key, 413));
        // A mark expires with its hash.
        reply(&mut store, &mark(7, 100), 500);
        assert!(store.marked(&wait_key, 600) && !store.marked(&wait_key, 601));
    }
}
