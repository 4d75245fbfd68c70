//! The pipelined floor: the wait-all floor's rounds with every operation of a pass
//! coalesced, one pipeline per node per round. `keys` operations run in lockstep: each pass
//! sends every node one pipeline of `keys` `SET key token NX PX ttl` (in one write), waits for
//! every node's answers, then one pipeline of `keys` release scripts by hash, and waits again.
//!
//! No deadlines, no quorum arithmetic, no per-operation bookkeeping: the physical limit of a
//! client that writes everything due on a node in one buffer and reads the answers back by
//! position, on the same redis-rs multiplexed connections as the other floors.

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use super::floor::{RELEASE, connect_node};

/// The pipelined floor over a set of nodes.
pub struct PipelinedFloor {
    connections: Vec<MultiplexedConnection>,
    release: Script,
}

impl PipelinedFloor {
    /// Connects to every node and loads the release script there.
    pub async fn connect(urls: &[String]) -> Self {
        let release = Script::new(RELEASE);
        let mut connections = Vec::new();
        for url in urls {
            let mut connection = connect_node(url).await;
            release
                .prepare_invoke()
                .load_async(&mut connection)
                .await
                .expect("SCRIPT LOAD");
            connections.push(connection);
        }
        Self {
            connections,
            release,
        }
    }

    /// One pass: `keys.len()` acquire + release, each node sent one pipeline of `SET`s and
    /// then one of releases. Panics if a `SET` was refused (every key is distinct and free)
    /// or a node failed, so the pass cannot silently do less work than it counts.
    pub async fn pass(&self, keys: &[String], tokens: &[String]) {
        let ttl = super::TTL.as_millis() as u64;
        let sets = self.connections.iter().map(|connection| {
            let mut pipe = redis::pipe();
            for (key, token) in keys.iter().zip(tokens) {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(token)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl);
            }
            let mut connection = connection.clone();
            async move { pipe.query_async::<Vec<Value>>(&mut connection).await }
        });
        for answers in join_all(sets).await {
            let answers = answers.expect("a node answers the SET pipeline");
            assert!(
                answers.iter().all(|a| *a == Value::Okay),
                "the pipelined floor's SET was refused: {answers:?}"
            );
        }
        let hash = self.release.get_hash();
        let releases = self.connections.iter().map(|connection| {
            let mut pipe = redis::pipe();
            for (key, token) in keys.iter().zip(tokens) {
                pipe.cmd("EVALSHA").arg(hash).arg(1).arg(key).arg(token);
            }
            let mut connection = connection.clone();
            async move { pipe.query_async::<Vec<i64>>(&mut connection).await }
        });
        for answers in join_all(releases).await {
            let answers = answers.expect("a node answers the release pipeline");
            assert!(
                answers.iter().all(|a| *a == 1),
                "the pipelined floor's release deleted nothing: {answers:?}"
            );
        }
    }
}
