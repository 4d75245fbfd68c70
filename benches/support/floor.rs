//! The round-trip floor: the least any Redlock client must do, written directly with the
//! `redis` crate — one parallel round of `SET key token NX PX ttl` to every node, then one
//! parallel round of the compare-and-delete script, over one multiplexed connection per node.
//!
//! `Decide::Quorum` returns from each round as soon as a quorum agreed and lets the
//! straggling requests finish in a background task (never dropped: a dropped request future
//! is never sent, which would leak keys). `Decide::All` waits for every reply. Each round
//! waits at most 50 ms (the client's default per-node timeout for a 10 s TTL); what has not
//! answered by then also finishes in the background. There is no validity arithmetic, no
//! per-node bookkeeping: only the network work, and a repeat of a round that a stall of the
//! machine made fail.

use std::future::Future;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

/// When a round returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decide {
    /// At a quorum of successes.
    Quorum,
    /// When every node answered.
    All,
}

pub const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
";

/// The same script with the `PUBLISH` this crate's release sends its waiters (through
/// `redis.pcall`, as this crate does), for measuring what the notification costs a node.
const RELEASE_PUBLISHING: &str = r"
local value = redis.call('GET', KEYS[1])
if value == ARGV[1] then
    redis.call('DEL', KEYS[1])
    redis.pcall('PUBLISH', KEYS[1], ARGV[1])
    return 1
elseif value == false then
    return 0
end
return -1
";

/// The floor's wire, and the variants that add one of this crate's choices at a time, so
/// that the CPU benchmark (`benches/cpu.rs`) can price each on the nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wire {
    /// The release script sent whole with `EVAL` on every call, rather than `EVALSHA`.
    pub eval_whole: bool,
    /// The release script also `PUBLISH`es the token on the key's channel.
    pub publish: bool,
    /// The lock request is `SET key token NX GET PX ttl` (the refused `SET` names the holder).
    pub set_get: bool,
}

/// The floor over a set of nodes.
pub struct Floor {
    connections: Vec<MultiplexedConnection>,
    release: Script,
    decide: Decide,
    wire: Wire,
}

/// How long a round waits, as the client's default per-node timeout for a 10 s TTL.
const ROUND_TIMEOUT: Duration = Duration::from_millis(50);

/// Rounds after which a contender that never acquires fails the benchmark.
const ATTEMPTS: usize = 100;

impl Floor {
    /// Connects to every node (inside the runtime that will drive it).
    pub async fn connect(urls: &[String], decide: Decide) -> Self {
        Self::connect_with(urls, decide, Wire::default()).await
    }

    /// Connects to every node, speaking `wire`.
    pub async fn connect_with(urls: &[String], decide: Decide, wire: Wire) -> Self {
        let mut connections = Vec::new();
        for url in urls {
            connections.push(connect_node(url).await);
        }
        Self {
            connections,
            release: Script::new(if wire.publish {
                RELEASE_PUBLISHING
            } else {
                RELEASE
            }),
            decide,
            wire,
        }
    }

    /// The median time of a parallel `PING` to every node, waiting for every answer, over
    /// 200 rounds: the unit of the hand-off gap.
    pub async fn round_trip(&self) -> Duration {
        let mut times = Vec::with_capacity(200);
        for _ in 0..200 {
            let started = tokio::time::Instant::now();
            let pings = self
                .connections
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    async move { redis::cmd("PING").query_async::<()>(&mut c).await }
                })
                .collect::<FuturesUnordered<_>>();
            pings.for_each(|_| async {}).await;
            times.push(started.elapsed());
        }
        times.sort();
        times[times.len() / 2]
    }

    fn quorum(&self) -> usize {
        self.connections.len() / 2 + 1
    }

    /// One acquire + release of `key`, repeated until the acquisition wins a quorum (a
    /// stall of a noisy machine past the round timeout can fail one); panics if it never does.
    pub async fn acquire_release(&self, key: &str) {
        for _ in 0..ATTEMPTS {
            if self.attempt(key).await {
                return;
            }
        }
        panic!("the floor did not acquire {key:?} in {ATTEMPTS} rounds");
    }

    /// One acquire + release of `key`; returns whether the acquisition won a quorum.
    async fn attempt(&self, key: &str) -> bool {
        let token = super::token();
        let sets = self
            .connections
            .iter()
            .map(|c| {
                let mut c = c.clone();
                let get = self.wire.set_get;
                let cmd = set_nx(key, &token, get);
                async move {
                    // With `GET`, nil means the key was absent (and is now set).
                    match cmd.query_async::<Value>(&mut c).await {
                        Ok(Value::Okay) => !get,
                        Ok(Value::Nil) => get,
                        _ => false,
                    }
                }
            })
            .collect::<FuturesUnordered<_>>();
        let won = self.round(sets).await;
        self.round(self.releases(key, &token, 0..self.connections.len()))
            .await;
        won
    }

    /// One round of `SET NX` on `key`, deciding at a quorum: the token when it won. A lost
    /// round releases the nodes that did not answer *taken* (the others wrote nothing),
    /// without waiting. The contended floor spins on this: no delay, no notification.
    pub async fn try_lock(&self, key: &str) -> Option<String> {
        let token = super::token();
        let mut sets = self
            .connections
            .iter()
            .enumerate()
            .map(|(index, c)| {
                let mut c = c.clone();
                let cmd = set_nx(key, &token, false);
                async move { (index, cmd.query_async::<Value>(&mut c).await) }
            })
            .collect::<FuturesUnordered<_>>();
        let nodes = self.connections.len();
        let quorum = self.quorum();
        let deadline = tokio::time::Instant::now() + ROUND_TIMEOUT;
        let mut taken = vec![false; nodes];
        let (mut won, mut lost) = (0, 0);
        while let Ok(Some((index, reply))) = tokio::time::timeout_at(deadline, sets.next()).await {
            match reply {
                Ok(Value::Okay) => won += 1,
                Ok(Value::Nil) => {
                    taken[index] = true;
                    lost += 1;
                }
                _ => lost += 1,
            }
            if won >= quorum || lost > nodes - quorum {
                break;
            }
        }
        if !sets.is_empty() {
            tokio::spawn(async move { while sets.next().await.is_some() {} });
        }
        if won >= quorum {
            return Some(token);
        }
        let owed: Vec<usize> = (0..nodes).filter(|&i| !taken[i]).collect();
        self.release_on(key, &token, &owed);
        None
    }

    /// Releases a lease taken with [`try_lock`](Floor::try_lock), deciding at a quorum.
    pub async fn unlock(&self, key: &str, token: &str) {
        self.round(self.releases(key, token, 0..self.connections.len()))
            .await;
    }

    /// Releases `token` on `nodes` in a background task (never cut: a release lost before
    /// it is written would leave its key).
    fn release_on(&self, key: &str, token: &str, nodes: &[usize]) {
        let mut releases = self.releases(key, token, nodes.iter().copied());
        tokio::spawn(async move { while releases.next().await.is_some() {} });
    }

    /// The release script for `token` on each of `nodes`: whether the node answered.
    fn releases(
        &self,
        key: &str,
        token: &str,
        nodes: impl Iterator<Item = usize>,
    ) -> FuturesUnordered<impl Future<Output = bool> + Send + 'static> {
        nodes
            .map(|i| {
                let mut c = self.connections[i].clone();
                let (script, key, token) = (self.release.clone(), key.to_owned(), token.to_owned());
                let eval_whole = self.wire.eval_whole.then(|| {
                    let source = if self.wire.publish {
                        RELEASE_PUBLISHING
                    } else {
                        RELEASE
                    };
                    redis::cmd("EVAL")
                        .arg(source)
                        .arg(1)
                        .arg(&key)
                        .arg(&token)
                        .clone()
                });
                async move {
                    if let Some(eval) = eval_whole {
                        return eval.query_async::<i64>(&mut c).await.is_ok();
                    }
                    let mut invocation = script.key(&key);
                    invocation.arg(&token);
                    invocation.invoke_async::<i64>(&mut c).await.is_ok()
                }
            })
            .collect()
    }

    /// Runs the requests until the decision or the round timeout, then leaves the rest to a
    /// background task. The requests themselves have no timeout: cut before redis-rs wrote
    /// it, a request would never be sent, and a release lost that way leaves its key.
    async fn round<F>(&self, mut requests: FuturesUnordered<F>) -> bool
    where
        F: Future<Output = bool> + Send + 'static,
    {
        let needed = match self.decide {
            Decide::Quorum => self.quorum(),
            Decide::All => self.connections.len(),
        };
        let deadline = tokio::time::Instant::now() + ROUND_TIMEOUT;
        let mut answered = 0;
        let mut succeeded = 0;
        while let Ok(Some(ok)) = tokio::time::timeout_at(deadline, requests.next()).await {
            answered += 1;
            succeeded += usize::from(ok);
            let decided = match self.decide {
                Decide::Quorum => {
                    succeeded >= needed || answered - succeeded > self.connections.len() - needed
                }
                Decide::All => answered == self.connections.len(),
            };
            if decided {
                break;
            }
        }
        if !requests.is_empty() {
            tokio::spawn(async move { while requests.next().await.is_some() {} });
        }
        succeeded >= self.quorum()
    }
}

/// `SET key token NX PX ttl`: the floor's lock request (`NX GET PX` with `get`: a refused
/// `SET` answers with the holder's value, a granted one with nil).
fn set_nx(key: &str, token: &str, get: bool) -> redis::Cmd {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(token).arg("NX");
    if get {
        cmd.arg("GET");
    }
    cmd.arg("PX").arg(super::TTL.as_millis() as u64);
    cmd
}

/// One multiplexed connection to the node at `url`, as the client under test opens it.
pub async fn connect_node(url: &str) -> MultiplexedConnection {
    // TCP_NODELAY, as the client under test sets it: the floor measures the same
    // transport, not redis-rs's default of Nagle's algorithm on.
    let info = redis::IntoConnectionInfo::into_connection_info(url).expect("a node URL");
    let tcp = info.tcp_settings().clone().set_nodelay(true);
    let client = redis::Client::open(info.set_tcp_settings(tcp)).expect("a node URL");
    // No response timeout in redis-rs either (its default is 500 ms): a request it
    // cuts before writing it is never sent, and a lost release leaves its key. The
    // rounds have their own deadline.
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .expect("connect")
}
