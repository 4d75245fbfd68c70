//! The nodes: one connection each (`transport.rs`), opened on first use and replaced when it
//! breaks, with every new connection identified before it carries anything but a release.
//!
//! Which node may vote is the core's decision ([`Eligibility`]); this module only opens
//! connections, numbers them, reads their identity when the core asks, and sends commands.
//! Connections are managed here rather than by a reconnecting wrapper: a wrapper that
//! reconnects on its own (as redis-rs' `ConnectionManager` does for RESP3) would let a
//! restarted node vote through a connection nobody identified.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use redis::AsyncConnectionConfig;
use tokio::sync::OnceCell;

use super::background::Background;
use super::clock::Clock;
use super::direct::{Inbox, Spares};
use super::expiry::Expiry;
use super::identity;
use super::lanes::Gate;
use super::lock;
use super::pipe::{Closer, Pipe, Placed, StraightCall};
use super::transport::Transport;
use super::wire::{self, OneCall, classify, connection_lost};
use redlock_core::{
    Admission, Command, ConnectionId, Eligibility, EligibilityEvent, NodeFailure, NodeId,
    RememberedServer, Reply, RestartPolicy, RoundFailure, ServerGeneration, Timestamp,
};

/// What a command has waited for before [`Nodes::execute`] is asked to send it.
pub(crate) enum Start<'a> {
    /// Nothing: the clock read when it was handed over (`now`) holds for its admission,
    /// unless it must wait for a connection.
    At(Timestamp),
    /// It must first wait for the lane's previous command to the node.
    After(&'a Gate),
    /// It has waited already (a release waits for its lane itself): the clock is read again.
    Waited,
    /// A direct attempt ([`Nodes::queue_direct`]) had it admitted on a connection, and the
    /// core asked for more than sending it: the request continues from that admission.
    // Boxed: rare, and a `Connection` inline would grow every request future.
    Decided(Box<Decided>),
}

/// The admission a direct attempt got, on the connection it got it for.
pub(crate) struct Decided {
    connection: Connection,
    admission: Admission,
}

/// A command a direct attempt did not queue, and what the attempt decided, if anything.
pub(crate) type NotQueued = (Command, Option<Box<Decided>>);

/// A command a direct attempt queued: the connection it went out on, how to read its answer,
/// the command itself (in the form its server takes), which a release by hash needs
/// again if the node answers `NOSCRIPT`, and the call that sends it straight when it was
/// alone on the connection.
pub(crate) type Queued = (QueuedOn, OneCall, Command, Option<StraightCall>);

/// The connection a direct request was queued on. Held, it keeps the connection's driver
/// running (`pipe.rs`): a release by hash holds it until it ends, so that a `NOSCRIPT`
/// answer can be followed on the same connection by the script sent whole.
pub(crate) struct QueuedOn {
    id: ConnectionId,
    state: Arc<ConnectionState>,
}

impl QueuedOn {
    pub(crate) fn id(&self) -> ConnectionId {
        self.id
    }

    /// Whether the connection writes its commands in the order they were placed on it, so
    /// that one placed later is run after (the client's own connection; see
    /// [`Pipe::keeps_order`]).
    pub(crate) fn keeps_order(&self) -> bool {
        self.state.pipe.keeps_order()
    }

    /// Queues `cmd` on the connection for `inbox` under `number`, alone or not; refused
    /// only when the connection's driver has stopped (its runtime is shutting down).
    pub(crate) fn follow(
        &self,
        cmd: redis::Cmd,
        inbox: &Arc<Inbox>,
        number: u64,
    ) -> Result<(), redis::Cmd> {
        self.state.pipe.follow(cmd, inbox, number)
    }
}

/// Every configured node, the rule of which may vote, and the clock that rule runs on.
pub(crate) struct Nodes {
    nodes: Box<[Node]>,
    eligibility: Mutex<Eligibility>,
    clock: Clock,
    /// Where a release by hash cut by its deadline finishes (`settle` waits for it).
    background: Background,
    /// What ended operations' direct requests left for the next ones.
    spares: Spares,
}

/// One node and its current connection.
pub(crate) struct Node {
    id: NodeId,
    address: Arc<str>,
    client: redis::Client,
    config: AsyncConnectionConfig,
    /// How long establishing a connection may take (the builder's connect timeout).
    connect_timeout: Duration,
    current: Mutex<Option<Connection>>,
    /// One connection attempt at a time: concurrent commands wait for it instead of opening
    /// connections of their own.
    connecting: tokio::sync::Mutex<()>,
    opened: AtomicU64,
}

/// An open connection, numbered, with its identification done at most once.
#[derive(Clone)]
struct Connection {
    id: ConnectionId,
    transport: Transport,
    /// Shared by every clone of the connection (one per request): one `Arc` to count.
    state: Arc<ConnectionState>,
}

/// A release by hash, which can outlive its request (see [`Nodes::execute`]).
type ReleaseCall = BoxFuture<'static, Result<Reply, NodeFailure>>;

impl Connection {
    /// Sends `command` on the connection, through its queue where it is one call; a release
    /// by hash goes into `release`, which owns it, so that it can finish in the background.
    async fn send(
        self,
        command: Command,
        by_hash: bool,
        release: &mut Option<ReleaseCall>,
    ) -> Result<Reply, NodeFailure> {
        let pipe = &self.state.pipe;
        if by_hash && command.is_release() {
            let call = wire::release_by_hash(command, self.transport, pipe.clone());
            return release.insert(call).await;
        }
        let mut transport = self.transport;
        wire::run(&command, &mut transport, Some(pipe), by_hash).await
    }
}

/// What is learned about a connection once, on its first command that needs it, and the
/// queue its one-call requests share (`pipe.rs`).
struct ConnectionState {
    pipe: Pipe,
    /// Ends the queue's driver when the connection's last handle is gone.
    _closer: Closer,
    identified: OnceCell<()>,
    /// Whether the lock scripts were loaded with the identification: the connection then
    /// calls them by hash. Until then (a release before the identification, a node whose
    /// ACL refuses `SCRIPT`) it sends them whole.
    scripts_loaded: AtomicBool,
    /// The server's generation, read with the identification: which form of the lock
    /// request it takes. Every command that can create a key waits for the identification,
    /// so it is known by then; a release, which may go first, is the same on every server.
    generation: OnceLock<ServerGeneration>,
}

impl Nodes {
    pub(crate) fn new(
        nodes: Vec<Node>,
        policy: RestartPolicy,
        clock: Clock,
        background: Background,
    ) -> Self {
        let eligibility = Eligibility::new(nodes.len(), policy);
        Self {
            nodes: nodes.into_boxed_slice(),
            eligibility: Mutex::new(eligibility),
            clock,
            background,
            spares: Spares::default(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter()
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What ended operations' direct requests left for the next ones.
    pub(crate) fn spares(&self) -> &Spares {
        &self.spares
    }

    /// Raises the restart quarantine to cover `ttl` (a handle with a longer TTL).
    pub(crate) fn cover(&self, ttl: Duration) {
        lock(&self.eligibility).cover(ttl);
    }

    /// Gives the core what an earlier process met behind the nodes' names.
    pub(crate) fn remember(&self, servers: impl IntoIterator<Item = (NodeId, RememberedServer)>) {
        let now = self.clock.now();
        let mut eligibility = lock(&self.eligibility);
        for (node, server) in servers {
            eligibility.remember(node, server, now);
        }
    }

    /// How long the restart quarantine still leaves node `index` out, if it does.
    pub(crate) fn quarantined(&self, index: usize) -> Option<Duration> {
        let now = self.clock.now();
        lock(&self.eligibility)
            .quarantined_until(NodeId::new(index), now)
            .map(|until| until.saturating_duration_since(now))
    }

    /// What this process met behind node `index`'s name, to remember for the next one.
    pub(crate) fn met(&self, index: usize) -> Option<RememberedServer> {
        lock(&self.eligibility).met(NodeId::new(index), self.clock.now())
    }

    /// Warns, once per node, where a lost round read another owner's key that lives longer
    /// than the restart quarantine (the rule is [`Eligibility::other_leases`]).
    pub(crate) fn other_leases(&self, failure: &RoundFailure) {
        let events = lock(&self.eligibility).other_leases(failure);
        for event in events {
            self.report(event);
        }
    }

    /// Queues `command`, a lock request (`SET … NX`) or a release, for node `index`'s next
    /// batch, its answer going to `inbox` (made here on first use) under `number`: the direct
    /// request of `direct.rs`, with no future of its own. A command that would be alone on
    /// the connection goes straight instead, as the call handed back ([`StraightCall`]),
    /// which the operation polls (its answer is its own, not the inbox's). Only when
    /// everything is ready and routine: the connection open, and the core admitting the
    /// command at `now` as it is. Anything else hands the command back, with the admission
    /// the core gave if it gave one (it may have handed out a probe, which the request must
    /// then send). A release goes by the script's hash once the connection has loaded the
    /// scripts, as a request future's. With `behind`, only on that connection, and only
    /// if it keeps the order of what is placed on it (the lane's previous command is still
    /// unanswered there: see `Gate::followable_on`).
    pub(crate) fn queue_direct(
        &self,
        index: usize,
        command: Command,
        now: Timestamp,
        inbox: &mut Option<Arc<Inbox>>,
        number: u64,
        behind: Option<ConnectionId>,
    ) -> Result<Queued, NotQueued> {
        let Some((node, connection)) = self
            .nodes
            .get(index)
            .and_then(|node| Some((node, node.open()?)))
        else {
            return Err((command, None));
        };
        // Written behind its lane's previous command, it must go on that command's
        // connection, still open, and that connection must keep their order.
        if let Some(on) = behind
            && (connection.id != on || !connection.state.pipe.keeps_order())
        {
            return Err((command, None));
        }
        let admission = lock(&self.eligibility).admit(node.id, connection.id, &command, now);
        if !matches!(admission, Admission::Send) {
            let decided = Decided {
                connection,
                admission,
            };
            return Err((command, Some(Box::new(decided))));
        }
        let generation = connection.state.generation.get().copied();
        let command = command.for_server(generation.unwrap_or_default());
        let by_hash = connection.state.scripts_loaded.load(Ordering::Acquire);
        let Some(call) = wire::one_call(&command, by_hash) else {
            return Err((command, Some(Box::new(sent(connection)))));
        };
        let inbox = || {
            let made = inbox.get_or_insert_with(|| Arc::new(Inbox::with_room(self.nodes.len())));
            Arc::clone(made)
        };
        let placed = connection
            .state
            .pipe
            .place(&command, by_hash, inbox, number);
        let straight = match placed {
            Ok(Placed::Queued) => None,
            Ok(Placed::Alone(cmd, claim)) => {
                let mut transport = connection.transport;
                let call = Box::pin(async move { cmd.query_async(&mut transport).await });
                Some(StraightCall::new(claim, call))
            }
            // Behind the lane's previous command, on a connection found broken: not sent on
            // it, it waits in its lane, and goes once that command has ended (whose failure
            // makes the node forget the connection first).
            Err(()) if behind.is_some() => return Err((command, None)),
            // The driver stopped: the request sends it straight, as the queue's own does then.
            Err(()) => return Err((command, Some(Box::new(sent(connection))))),
        };
        let on = QueuedOn {
            id: connection.id,
            state: connection.state,
        };
        Ok((on, call, command, straight))
    }

    /// How long opening a connection to node `index` may take: the bound on a release by
    /// hash that goes on after its deadline (see [`Nodes::execute`]).
    pub(crate) fn connect_timeout(&self, index: usize) -> Duration {
        self.nodes
            .get(index)
            .map_or(Duration::ZERO, |node| node.connect_timeout)
    }

    /// A direct request on `connection` to node `index` was cut by its deadline: the core
    /// learns that the node left it unanswered.
    pub(crate) fn unanswered(&self, index: usize, connection: ConnectionId) {
        if let Some(node) = self.nodes.get(index) {
            lock(&self.eligibility).unanswered(node.id, connection);
        }
    }

    /// Says at debug level that a request to node `index` failed (the event
    /// `node request failed`, documented in `client/mod.rs`).
    pub(crate) fn trace_failure(&self, index: usize, failure: &NodeFailure) {
        let node = self.nodes.get(index).map_or("?", |n| &**n.address());
        tracing::debug!(node, error = %failure, "node request failed");
    }

    /// A direct request on `connection` to node `index` failed with `failure`: a connection
    /// that is gone is dropped, and the next command opens another.
    pub(crate) fn failed(&self, index: usize, connection: ConnectionId, failure: &NodeFailure) {
        if connection_lost(failure)
            && let Some(node) = self.nodes.get(index)
        {
            node.forget(connection);
        }
    }

    /// Runs `command` on node `index` once the lane's previous command (see [`Start`]) has
    /// finished and the core admits it there, giving up at `deadline` (on the flight's
    /// `expiry`, once the command is sent; a wait for the connection has its own timer).
    /// A command cut before it was sent wrote nothing; one cut while it waits for its answer
    /// may have been written, and the core learns that the node left it unanswered.
    ///
    /// A release is the exception: the wait for its connection may last the node's connect
    /// timeout (at least until `deadline`), and the release itself then gets
    /// `release_budget` from the moment the connection is ready (at least until `deadline`).
    pub(crate) async fn execute(
        &self,
        index: usize,
        command: Command,
        start: Start<'_>,
        expiry: &Expiry,
        deadline: Instant,
        release_budget: Option<Duration>,
    ) -> Result<Reply, NodeFailure> {
        let node = self
            .nodes
            .get(index)
            .ok_or_else(|| NodeFailure::Protocol(format!("no node #{index}")))?;
        let pass_reading = match start {
            Start::At(now) => Some(now),
            _ => None,
        };
        let (connection, read_at, decided) = match start {
            Start::Decided(decided) => {
                let Decided {
                    connection,
                    admission,
                } = *decided;
                (connection, None, Some(admission))
            }
            Start::After(previous) => {
                let ready = ready(node, Some(previous), deadline, release_budget);
                (ready.await?, None, None)
            }
            // Nothing to wait for (the common case): no timer either. The pass's reading of
            // the clock holds only while nothing has been waited for.
            Start::At(_) | Start::Waited => match node.open() {
                Some(open) => (open, pass_reading, None),
                None => (
                    ready(node, None, deadline, release_budget).await?,
                    None,
                    None,
                ),
            },
        };
        let deadline = release_budget.map_or(deadline, |budget| deadline.max(after(budget)));
        // The connection the command went out on, once it has.
        let mut sent_on = None;
        // A release by hash, which finishes in the background if its deadline cuts it.
        let mut release_call = None;
        let (sent_on_slot, release_slot) = (&mut sent_on, &mut release_call);
        // Owns the command and the connection's clone, so that a release by hash can take
        // them along rather than copy them.
        let request = async move {
            // Releases are admitted at once (they never wait for an identification).
            self.admit(node, &connection, &command, read_at, decided)
                .await?;
            let id = connection.id;
            *sent_on_slot = Some(id);
            let generation = connection.state.generation.get().copied();
            // The form of the request this server takes: the core's decision.
            let command = command.for_server(generation.unwrap_or_default());
            let by_hash = connection.state.scripts_loaded.load(Ordering::Acquire);
            let result = connection.send(command, by_hash, release_slot).await;
            if let Err(failure) = &result
                && connection_lost(failure)
            {
                node.forget(id);
            }
            result
        };
        match expiry.timeout_at(deadline, request).await {
            Ok(result) => result,
            Err(_) => {
                if let Some(connection) = sent_on {
                    lock(&self.eligibility).unanswered(node.id, connection);
                }
                // Its `EVALSHA` may be answered `NOSCRIPT` after the deadline: the `EVAL`
                // that must follow is still sent, as the client's background work, which
                // `settle` waits for. It ends with the node's answer, with the connection, or
                // a connect timeout after the cut (a node that answers nothing for that long
                // is given up, and its key expires with the TTL).
                if let Some(release) = release_call
                    && let Ok(runtime) = tokio::runtime::Handle::try_current()
                {
                    let bound = node.connect_timeout;
                    self.background.spawn(&runtime, async move {
                        let _ = tokio::time::timeout(bound, release).await;
                    });
                }
                Err(NodeFailure::TimedOut)
            }
        }
    }

    /// Opens `index`'s connection and identifies it now rather than on the first command.
    pub(crate) async fn connect(&self, index: usize) -> Result<(), NodeFailure> {
        let node = self
            .nodes
            .get(index)
            .ok_or_else(|| NodeFailure::Protocol(format!("no node #{index}")))?;
        let mut connection = node.connection().await?;
        if let Err(failure) = wire::ping(&mut connection.transport).await {
            if !connection_lost(&failure) {
                return Err(failure);
            }
            // An old connection to a node that went away: try a new one, once.
            node.forget(connection.id);
            connection = node.connection().await?;
        }
        self.identify(node, &connection).await?;
        match lock(&self.eligibility).duplicate_of(node.id) {
            Some(of) => Err(NodeFailure::Duplicate { of }),
            None => Ok(()),
        }
    }

    /// Waits until the core lets `command` go out on `connection`, identifying it and
    /// probing it as often as asked to: a new connection whose first command (a release,
    /// which needs no identity) went unanswered is identified *and then* probed before its
    /// first `SET`. Every step is a round trip inside the request's own deadline. The first
    /// look is `decided` when a direct attempt already asked the core, else at `read_at`
    /// when given (see [`Nodes::execute`]); every later one, after a round trip, reads the
    /// clock.
    async fn admit(
        &self,
        node: &Node,
        connection: &Connection,
        command: &Command,
        mut read_at: Option<Timestamp>,
        mut decided: Option<Admission>,
    ) -> Result<(), NodeFailure> {
        let mut identified = false;
        loop {
            let admission = match decided.take() {
                Some(admission) => admission,
                None => {
                    let now = read_at.take().unwrap_or_else(|| self.clock.now());
                    lock(&self.eligibility).admit(node.id, connection.id, command, now)
                }
            };
            match admission {
                Admission::Send => return Ok(()),
                Admission::Refuse(failure) => return Err(failure),
                // Identified, yet another connection's identity is the one on record: this
                // one was replaced meanwhile and must not carry a vote.
                Admission::Identify if identified => {
                    return Err(NodeFailure::Io("the connection was replaced".into()));
                }
                // Boxed, as rare steps: the request's future stays small.
                Admission::Identify => {
                    Box::pin(self.identify(node, connection)).await?;
                    identified = true;
                }
                Admission::Probe => Box::pin(self.probe(node, connection)).await?,
            }
        }
    }

    /// Sends the probe the core asked for on `connection`, queued behind whatever was
    /// written there before, and reports whether it answered. A probe cut by its caller's
    /// timeout is reported as given up, so that a later write sends another.
    async fn probe(&self, node: &Node, connection: &Connection) -> Result<(), NodeFailure> {
        struct Outstanding<'a> {
            nodes: &'a Nodes,
            node: NodeId,
            connection: ConnectionId,
            answered: bool,
        }
        impl Drop for Outstanding<'_> {
            fn drop(&mut self) {
                lock(&self.nodes.eligibility).probed(self.node, self.connection, self.answered);
            }
        }
        let mut outstanding = Outstanding {
            nodes: self,
            node: node.id,
            connection: connection.id,
            answered: false,
        };
        let mut transport = connection.transport.clone();
        match wire::ping(&mut transport).await {
            // Any answer will do, a refusal by the user's ACL included: the node has worked
            // through everything written before the probe.
            Ok(()) | Err(NodeFailure::Denied(_) | NodeFailure::Server(_)) => {
                outstanding.answered = true;
                Ok(())
            }
            Err(failure) => {
                if connection_lost(&failure) {
                    node.forget(connection.id);
                }
                Err(failure)
            }
        }
    }

    /// Reads the identity of `connection` once and hands it to the core; loads the lock
    /// scripts in the same round trip.
    async fn identify(&self, node: &Node, connection: &Connection) -> Result<(), NodeFailure> {
        connection
            .state
            .identified
            .get_or_try_init(|| async {
                // Before the identity: the name resolved first keeps the vote, and no lock
                // write goes out on this connection before its identification is done.
                let addresses = identity::resolve(
                    node.client.get_connection_info().addr(),
                    node.connect_timeout,
                )
                .await;
                let events = lock(&self.eligibility).resolved(node.id, &addresses);
                for event in events {
                    self.report(event);
                }
                let mut transport = connection.transport.clone();
                let greeting = match identity::read(&mut transport).await {
                    Ok(greeting) => greeting,
                    Err(failure) => {
                        if connection_lost(&failure) {
                            node.forget(connection.id);
                        }
                        return Err(failure);
                    }
                };
                connection
                    .state
                    .scripts_loaded
                    .store(greeting.scripts_loaded, Ordering::Release);
                // Set once: this is the connection's only identification.
                let _ = connection.state.generation.set(greeting.generation);
                let events = lock(&self.eligibility).identified(
                    node.id,
                    connection.id,
                    greeting.identity,
                    self.clock.now(),
                );
                for event in events {
                    self.report(event);
                }
                Ok(())
            })
            .await?;
        Ok(())
    }

    fn report(&self, event: EligibilityEvent) {
        let address = |id: NodeId| self.nodes.get(id.index()).map_or("?", |n| &*n.address);
        match event {
            EligibilityEvent::Quarantined {
                node,
                until,
                reason,
            } => tracing::warn!(
                node = address(node),
                quarantine_ms = until.saturating_duration_since(self.clock.now()).as_millis(),
                %reason,
                "node left out of quorums by the restart quarantine"
            ),
            EligibilityEvent::Unidentifiable { node, why } => tracing::warn!(
                node = address(node),
                error = %why,
                "cannot read the node's identity (INFO); restarts cannot be detected, so every \
                 reconnection quarantines it: grant +info or declare the nodes persistent"
            ),
            EligibilityEvent::Evicting { node, policy } => tracing::warn!(
                node = address(node),
                policy = %policy,
                "the node may evict keys (maxmemory-policy); an evicted lock key or fence \
                 counter is forgotten: use noeviction on lock nodes"
            ),
            EligibilityEvent::OutlivesQuarantine {
                node,
                remaining,
                quarantine,
            } => tracing::warn!(
                node = address(node),
                remaining_ms = remaining.as_millis(),
                quarantine_ms = quarantine.as_millis(),
                "another client's lease outlives this client's restart quarantine: after a \
                 restart without persistence the node would be counted again while such a \
                 lease may still be valid; set the restart quarantine to the longest TTL of \
                 any client of these nodes"
            ),
            EligibilityEvent::Duplicate { node, of } => tracing::error!(
                node = address(node),
                of = address(of),
                "two configured nodes are the same server (same run_id, or names that resolve to the same address); the one met second is refused"
            ),
            other => tracing::debug!(event = ?other, "node eligibility"),
        }
    }
}

/// A command that a direct attempt admitted, and then could not queue after all: it is sent
/// as a request of its own.
fn sent(connection: Connection) -> Decided {
    Decided {
        connection,
        admission: Admission::Send,
    }
}

/// Waits for `previous` (the lane's previous command), if any, then for the node's
/// connection, opening one if needed: nothing has been sent yet when this wait is cut.
///
/// A release that has to reopen the connection would otherwise pay the connect out of its
/// per-node timeout: a connect slower than that cuts the release before it is sent, and the
/// key stays until its TTL. A release delays no round (nothing waits for its answer to
/// decide), so it may take the time a connect is allowed. Every other command keeps one
/// deadline: a round must not wait for a slow connect.
async fn ready(
    node: &Node,
    previous: Option<&Gate>,
    deadline: Instant,
    release_budget: Option<Duration>,
) -> Result<Connection, NodeFailure> {
    let connect_until = match release_budget {
        Some(_) => deadline.max(after(node.connect_timeout)),
        None => deadline,
    };
    let ready = async {
        if let Some(previous) = previous {
            previous.wait().await;
        }
        node.connection().await
    };
    tokio::time::timeout_at(connect_until, ready)
        .await
        .map_err(|_| NodeFailure::TimedOut)?
}

/// `duration` from now; a duration too long for the clock (a configured timeout is any
/// `Duration`) means no limit in practice rather than a panic.
fn after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

impl Node {
    pub(crate) fn new(index: usize, client: redis::Client, connect_timeout: Duration) -> Self {
        let address = client.get_connection_info().addr().to_string().into();
        // The per-request budget is enforced by the driver (a timeout far below the TTL, per
        // command), so the connection itself has no response timeout: a slow reply must not
        // tear down the connection that later commands to this node are ordered on.
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None);
        Self {
            id: NodeId::new(index),
            address,
            client,
            config,
            connect_timeout,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            opened: AtomicU64::new(0),
        }
    }

    /// Whether the node's TCP connection sends small writes at once.
    #[cfg(test)]
    pub(crate) fn nodelay(&self) -> bool {
        self.client.get_connection_info().tcp_settings().nodelay()
    }

    /// The node's `host:port` (or socket path), without credentials.
    pub(crate) fn address(&self) -> &Arc<str> {
        &self.address
    }

    fn open(&self) -> Option<Connection> {
        lock(&self.current).clone()
    }

    /// The current connection, opening one if there is none.
    async fn connection(&self) -> Result<Connection, NodeFailure> {
        match self.open() {
            Some(connection) => Ok(connection),
            // Boxed: opening a connection is a large future that every request would
            // otherwise carry (and allocate) for the rare time it is needed.
            None => Box::pin(self.reopen()).await,
        }
    }

    /// Opens a connection, one attempt at a time (another command's attempt may have
    /// opened one meanwhile).
    async fn reopen(&self) -> Result<Connection, NodeFailure> {
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(connection) = self.open() {
            return Ok(connection);
        }
        let transport = Transport::open(&self.client, &self.config, self.connect_timeout)
            .await
            .map_err(classify)?;
        let (pipe, closer) = match &transport {
            Transport::Own(socket) => Pipe::over(socket.clone()),
            Transport::Multiplexed(multiplexed) => Pipe::start(multiplexed.clone()),
        };
        let connection = Connection {
            id: ConnectionId(self.opened.fetch_add(1, Ordering::Relaxed) + 1),
            transport,
            state: Arc::new(ConnectionState {
                pipe,
                _closer: closer,
                identified: OnceCell::new(),
                scripts_loaded: AtomicBool::new(false),
                generation: OnceLock::new(),
            }),
        };
        *lock(&self.current) = Some(connection.clone());
        Ok(connection)
    }

    /// Drops connection `id` if it is still the current one: the next command opens another.
    fn forget(&self, id: ConnectionId) {
        let mut current = lock(&self.current);
        if current.as_ref().is_some_and(|c| c.id == id) {
            *current = None;
        }
    }
}
