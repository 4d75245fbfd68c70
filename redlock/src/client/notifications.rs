//! The nodes' release notifications: one subscription connection per node, shared by every
//! waiter of the client.
//!
//! The release scripts `PUBLISH` the released token on the lock key's name when they delete
//! a key that a waiter marked (see [`waiting`](super::waiting); with `redis.pcall`, so that a
//! user whose ACL forbids the channel still releases).
//! A waiter subscribes to its keys for as long as it waits; each message whose payload is a
//! token goes into the key's [`Freed`](super::freed::Freed) log, with the node it came
//! from. Nothing here trusts a message: Pub/Sub channels belong to the whole server, not to
//! a database (a lease of the same name in another database of the node publishes on the
//! same channel), and anyone the ACL lets publish there can send anything. A waiter's core
//! [`Waiting`](redlock_core::Waiting) counts a message only as the release of the holder its
//! lost round saw on that node. The connection is a plain RESP2 or RESP3
//! subscriber (redis-rs' `PubSub`), opened on first use and reopened with a back-off when it
//! breaks. Notifications are a shortcut and nothing more: while a node's subscription is
//! down, or when the ACL refuses the channel, waiters fall back on their retry timers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{Notify, mpsc};

use super::freed::Freed;
use super::lock;
use super::registry::WeakMap;
use super::wire::classify;
use redlock_core::{NodeFailure, NodeId};

/// The first wait before reconnecting a broken subscription, doubled up to the last.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// How long a subscription connection must have stayed up for its break to be reconnected
/// at once, with the back-off started again; one that broke sooner waits the back-off.
const HEALTHY: Duration = BACKOFF.1;

/// The subscription connections of one client.
pub(crate) struct Notifications {
    nodes: Arc<[Subscriber]>,
    freed: Arc<WeakMap<String, Freed>>,
    /// Raised whenever a node's task settles a subscription (see [`Subscription::settled`]).
    settled: Arc<Settling>,
}

/// Counts the subscriptions the nodes settled, and wakes those who wait for the next.
#[derive(Default)]
struct Settling {
    count: AtomicU64,
    raised: Notify,
}

/// One node's subscription connection.
struct Subscriber {
    node: NodeId,
    client: redis::Client,
    address: Arc<str>,
    connect_timeout: Duration,
    /// Shared with the node's task, which holds it weakly: the task ends with the client.
    state: Arc<Mutex<Channels>>,
    /// Whether the node refused a subscription (its ACL has no `&` rule for the keys);
    /// reported once.
    refused_reported: Arc<AtomicBool>,
}

/// The channels wanted on one node, with how many waiters want each, and the task that
/// keeps them subscribed.
#[derive(Default)]
struct Channels {
    wanted: HashMap<String, usize>,
    /// The channels whose `SUBSCRIBE` the node answered on the current connection (or
    /// refused: nothing will come for those, and nothing is gained by waiting): a release
    /// published from then on reaches the task. Emptied when the connection breaks.
    settled: HashSet<String>,
    task: Option<mpsc::UnboundedSender<Change>>,
}

enum Change {
    Subscribe(String),
    Unsubscribe(String),
}

/// What the task asks the node.
enum Request<'a> {
    Subscribe(&'a [String]),
    Unsubscribe(&'a str),
}

/// Subscriptions to some keys on every node, until dropped.
pub(crate) struct Subscription {
    nodes: Arc<[Subscriber]>,
    keys: Vec<String>,
    settled: Arc<Settling>,
}

impl Notifications {
    /// Notifications from the nodes behind `clients` (with their addresses, in
    /// configuration order), raising the signals in `freed`.
    pub(crate) fn new(
        clients: Vec<(redis::Client, Arc<str>)>,
        connect_timeout: Duration,
        freed: Arc<WeakMap<String, Freed>>,
    ) -> Self {
        let nodes = clients
            .into_iter()
            .enumerate()
            .map(|(index, (client, address))| Subscriber {
                node: NodeId::new(index),
                client,
                address,
                connect_timeout,
                state: Arc::default(),
                refused_reported: Arc::default(),
            })
            .collect();
        Self {
            nodes,
            freed,
            settled: Arc::default(),
        }
    }

    /// Subscribes to `keys` on every node until the returned guard is dropped. Must be
    /// called within a tokio runtime (the first subscription starts the node's task).
    pub(crate) fn subscribe(&self, keys: Vec<String>) -> Subscription {
        for node in self.nodes.iter() {
            let mut channels = lock(&node.state);
            for key in &keys {
                let count = channels.wanted.entry(key.clone()).or_default();
                *count += 1;
                if *count == 1 {
                    let change = Change::Subscribe(key.clone());
                    node.send(&mut channels, change, &self.freed, &self.settled);
                }
            }
        }
        Subscription {
            nodes: Arc::clone(&self.nodes),
            keys,
            settled: Arc::clone(&self.settled),
        }
    }
}

impl Subscription {
    /// Whether `node` answered the `SUBSCRIBE` of every key (or refused it): a release
    /// published there from now on is heard (or never will be). A waiter marks its interest
    /// on a node only then, so that no announced release falls between its mark and its
    /// subscription; one before the mark, the mark itself reads.
    pub(crate) fn settled(&self, node: NodeId) -> bool {
        self.nodes.get(node.index()).is_none_or(|subscriber| {
            let channels = lock(&subscriber.state);
            self.keys.iter().all(|key| channels.settled.contains(key))
        })
    }

    /// How many times the nodes settled a subscription: read it before looking at
    /// [`settled`](Self::settled), then wait with [`settled_after`](Self::settled_after).
    pub(crate) fn epoch(&self) -> u64 {
        self.settled.count.load(Ordering::Acquire)
    }

    /// Returns once a node settled a subscription after [`epoch`](Self::epoch) read `seen`.
    pub(crate) async fn settled_after(&self, seen: u64) {
        loop {
            let raised = self.settled.raised.notified();
            tokio::pin!(raised);
            // Registered before the look, so a settlement in between still wakes us.
            raised.as_mut().enable();
            if self.epoch() != seen {
                return;
            }
            raised.await;
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        for node in self.nodes.iter() {
            let mut channels = lock(&node.state);
            for key in &self.keys {
                let Some(count) = channels.wanted.get_mut(key) else {
                    continue;
                };
                *count -= 1;
                if *count == 0 {
                    channels.wanted.remove(key);
                    channels.settled.remove(key);
                    if let Some(task) = &channels.task {
                        // A task that has ended has nothing subscribed any more.
                        let _ = task.send(Change::Unsubscribe(key.clone()));
                    }
                }
            }
        }
    }
}

impl Subscriber {
    /// Hands `change` to the node's task, starting the task if it is not running.
    fn send(
        &self,
        channels: &mut Channels,
        change: Change,
        freed: &Arc<WeakMap<String, Freed>>,
        settled: &Arc<Settling>,
    ) {
        if let Some(task) = &channels.task
            && !task.is_closed()
        {
            let _ = task.send(change);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // A new task subscribes to everything wanted when it connects: no need to send.
        let (sender, receiver) = mpsc::unbounded_channel();
        channels.task = Some(sender);
        let task = Task {
            node: self.node,
            client: self.client.clone(),
            address: Arc::clone(&self.address),
            connect_timeout: self.connect_timeout,
            state: Arc::downgrade(&self.state),
            freed: Arc::clone(freed),
            refused_reported: Arc::clone(&self.refused_reported),
            settled: Arc::clone(settled),
        };
        runtime.spawn(task.run(receiver));
    }
}

/// The task that keeps one node's subscriptions.
struct Task {
    /// The node's place in the configuration: a release is checked against what the
    /// waiter's round saw on this node.
    node: NodeId,
    client: redis::Client,
    address: Arc<str>,
    connect_timeout: Duration,
    state: Weak<Mutex<Channels>>,
    freed: Arc<WeakMap<String, Freed>>,
    refused_reported: Arc<AtomicBool>,
    settled: Arc<Settling>,
}

impl Task {
    async fn run(self, mut changes: mpsc::UnboundedReceiver<Change>) {
        let mut backoff = BACKOFF.0;
        // Whether to connect without waiting: the first time, and after a connection that
        // stayed up (see `HEALTHY`). A node that accepts a connection and drops it at once
        // (a proxy that takes no `SUBSCRIBE`, `CLIENT KILL TYPE pubsub`, an output buffer
        // limit) is otherwise reconnected to in a loop as fast as it drops them.
        let mut at_once = true;
        loop {
            if !at_once {
                // Changes meanwhile are read when connected, from the shared state.
                if !self.pause(&mut changes, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF.1);
            }
            at_once = false;
            let connected =
                tokio::time::timeout(self.connect_timeout, self.client.get_async_pubsub()).await;
            let pubsub = match connected {
                Ok(Ok(pubsub)) => pubsub,
                failed => {
                    let failure = failed.map_or(NodeFailure::TimedOut, |r| {
                        r.err().map_or(NodeFailure::TimedOut, classify)
                    });
                    tracing::debug!(node = %self.address, error = %failure, "no release notifications from the node for now");
                    continue;
                }
            };
            let opened = tokio::time::Instant::now();
            let (mut sink, mut stream) = pubsub.split();
            let Some(wanted) = self.wanted() else {
                return;
            };
            if !wanted.is_empty() && !self.request(&mut sink, Request::Subscribe(&wanted)).await {
                continue;
            }
            self.settle(&wanted);
            // A release while the subscription was down went unnoticed: the waiters keep
            // to their retry timers for it (a wake-up without a token to check would be
            // exactly what a flood could trigger).
            loop {
                tokio::select! {
                    change = changes.recv() => {
                        let request = match &change {
                            Some(Change::Subscribe(key)) => Request::Subscribe(std::slice::from_ref(key)),
                            Some(Change::Unsubscribe(key)) => Request::Unsubscribe(key),
                            None => return, // The client is gone.
                        };
                        if !self.request(&mut sink, request).await {
                            break;
                        }
                        if let Some(Change::Subscribe(key)) = &change {
                            self.settle(std::slice::from_ref(key));
                        }
                    }
                    message = stream.next() => {
                        let Some(message) = message else {
                            tracing::debug!(node = %self.address, "release notifications connection closed; reconnecting");
                            break;
                        };
                        // Anyone allowed to publish on the channel can send anything, from any
                        // database of the node: the message is only a candidate release,
                        // which the waiters' core `Waiting` checks against the holders
                        // they saw.
                        if let Some(freed) = self.freed.get(message.get_channel_name()) {
                            freed.notified(self.node, message.get_payload_bytes());
                        }
                    }
                }
            }
            // Nothing is subscribed until the next connection subscribes again.
            self.forget();
            if opened.elapsed() >= HEALTHY {
                backoff = BACKOFF.0;
                at_once = true;
            }
        }
    }

    /// The channels wanted now; `None` once the client is gone. Called on each new
    /// connection: nothing is subscribed on it yet.
    fn wanted(&self) -> Option<Vec<String>> {
        let state = self.state.upgrade()?;
        let mut channels = lock(&state);
        channels.settled.clear();
        Some(channels.wanted.keys().cloned().collect())
    }

    /// The connection is gone, and its subscriptions with it.
    fn forget(&self) {
        if let Some(state) = self.state.upgrade() {
            lock(&state).settled.clear();
        }
    }

    /// The node answered the `SUBSCRIBE` of `keys`: records it (for those still wanted) and
    /// tells the waiters.
    fn settle(&self, keys: &[String]) {
        let Some(state) = self.state.upgrade() else {
            return;
        };
        let mut channels = lock(&state);
        for key in keys {
            if channels.wanted.contains_key(key) {
                channels.settled.insert(key.clone());
            }
        }
        drop(channels);
        self.settled.count.fetch_add(1, Ordering::AcqRel);
        self.settled.raised.notify_waiters();
    }

    /// Sends `request`; `false` when the connection must be reopened. A refusal by the
    /// node's ACL is reported once and otherwise ignored (the waiters have their timers).
    async fn request(&self, sink: &mut redis::aio::PubSubSink, request: Request<'_>) -> bool {
        let sent = async {
            match request {
                Request::Subscribe(keys) => sink.subscribe(keys).await,
                Request::Unsubscribe(key) => sink.unsubscribe(key).await,
            }
        };
        match tokio::time::timeout(self.connect_timeout, sent).await {
            Ok(Ok(())) => true,
            Ok(Err(error)) => {
                let failure = classify(error);
                if matches!(failure, NodeFailure::Denied(_) | NodeFailure::Server(_)) {
                    if !self.refused_reported.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            node = %self.address,
                            error = %failure,
                            "the node refuses the release notifications; waiters fall back on their retry timers (grant the user the lock keys' channels, e.g. &redlock:*)"
                        );
                    }
                    true
                } else {
                    tracing::debug!(node = %self.address, error = %failure, "release notifications connection failed; reconnecting");
                    false
                }
            }
            Err(_) => false,
        }
    }

    /// Waits `backoff`; `false` if the client went away meanwhile.
    async fn pause(
        &self,
        changes: &mut mpsc::UnboundedReceiver<Change>,
        backoff: Duration,
    ) -> bool {
        let sleep = tokio::time::sleep(backoff);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                () = &mut sleep => return true,
                change = changes.recv() => if change.is_none() {
                    return false;
                },
            }
        }
    }
}
