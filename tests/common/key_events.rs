//! One key's keyspace notifications on every node of a fleet, each with the `Instant` the test
//! received it: what happened to the key on each node, in each node's own order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redlock_tests::RedisFleet;
use tokio::task::JoinHandle;

use super::eventually;

/// An event of the key on one node (`"del"`, `"expired"`, `"set"`, `"expire"`, ...) and when
/// the test received it: after the node raised it, never before.
pub type KeyEvent = (Instant, String);

/// The events of one key on every node, from the moment [`KeyEvents::watch`] returned.
pub struct KeyEvents {
    nodes: Arc<Mutex<Vec<Vec<KeyEvent>>>>,
    readers: Vec<JoinHandle<()>>,
}

impl KeyEvents {
    /// Turns on keyspace notifications for `classes` (`CONFIG SET notify-keyspace-events`)
    /// on every node of `fleet` and subscribes to `key`'s channel on each, over a plain
    /// connection per node. Returns once every subscription is confirmed: no event of the
    /// key after that is missed.
    pub async fn watch(fleet: &RedisFleet, key: &str, classes: &str) -> Self {
        let nodes = Arc::new(Mutex::new(vec![Vec::new(); fleet.len()]));
        let mut readers = Vec::with_capacity(fleet.len());
        for index in 0..fleet.len() {
            let client = redis::Client::open(fleet.url(index)).expect("the node's URL");
            let mut admin = client
                .get_multiplexed_async_connection()
                .await
                .expect("connect to the node");
            let () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("notify-keyspace-events")
                .arg(classes)
                .query_async(&mut admin)
                .await
                .expect("CONFIG SET notify-keyspace-events");
            let mut pubsub = client
                .get_async_pubsub()
                .await
                .expect("a subscriber connection");
            pubsub
                .subscribe(format!("__keyspace@0__:{key}"))
                .await
                .expect("SUBSCRIBE");
            let mut messages = pubsub.into_on_message();
            let nodes = Arc::clone(&nodes);
            readers.push(tokio::spawn(async move {
                while let Some(message) = messages.next().await {
                    let received = Instant::now();
                    let event: String = message.get_payload().expect("an event's name");
                    nodes.lock().expect("no reader panics")[index].push((received, event));
                }
            }));
        }
        Self { nodes, readers }
    }

    /// Every node's events so far, in the order each node raised them.
    pub fn nodes(&self) -> Vec<Vec<KeyEvent>> {
        self.nodes.lock().expect("no reader panics").clone()
    }

    /// Waits until `done` holds of the events or `within` elapses ([`eventually`]); returns
    /// the events then.
    pub async fn until(
        &self,
        within: Duration,
        done: impl Fn(&[Vec<KeyEvent>]) -> bool,
    ) -> Vec<Vec<KeyEvent>> {
        eventually(within, || std::future::ready(done(&self.nodes()))).await;
        self.nodes()
    }
}

impl Drop for KeyEvents {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}
