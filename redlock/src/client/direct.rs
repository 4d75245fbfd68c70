//! Direct requests: a lock request or a release queued straight on its connection's batch,
//! with no future, task node or reply slot of its own.
//!
//! A request that is a future costs its operation a boxed future (its lane, admission and
//! deadline: 1.6 KB), a node in the operation's `FuturesUnordered`, a reply slot and the
//! wake-ups through each. The routine case needs none of it: a `SET … NX` or a release whose
//! lane is free, whose connection is open, and which the core admits as it is. Such a
//! request is admitted and queued on the spot, while its operation sends ([`Direct::send`]);
//! its answer comes back, by the request's number, into one [`Inbox`] per operation, and its
//! deadline is one entry here, which the operation's one timer covers (`flight.rs`). A
//! request alone on its connection is not queued (the queue's driver would only add hops,
//! `pipe.rs`): it goes straight to redis-rs, as a call its entry holds and the operation
//! polls, a future of a few hundred bytes in place of the request future's 1.6 KB and its
//! node in the operation's `FuturesUnordered`. A lock request or a release with a lane to
//! wait for waits here too, parked ([`Direct::park`]), and is queued once its lane is free;
//! a release behind a lock request still unanswered on the client's own connection is
//! written behind it there at once (see `Gate::followable_on`): its deadline runs once the
//! lock request has ended, and if the connection is lost before it is answered, it goes
//! again as a request future, as it would have gone from its lane. Any direct release lost
//! with its connection so goes again, on a new one. Anything else (a connection to open or
//! identify, a probe, a command of several calls) stays a request future, as before.
//!
//! What the lanes, the core and the queue guarantee holds unchanged. The lane's gate is
//! installed before the command is queued and opens when the request ends (answered, cut by
//! its deadline, or dropped with its operation's requests) and the command before it has,
//! as a request future's does. The admission is the core's, at the pass's reading of the
//! clock, as for a request future that waits for nothing. A command once queued is always
//! written: a request cut by its deadline is one the node left unanswered, as the core is
//! told. A straight call is handed to redis-rs at its first poll, which drops it unsent if
//! the call is gone before it reached the socket (a node that stalls its connection): a
//! lock request so dropped set nothing, and a straight release cut by its deadline is kept,
//! its call going on, until the node answers or its connect timeout has passed since the
//! cut (as a release by hash, below).
//!
//! A release by the script's hash needs two things more, which its request future gives it
//! otherwise (`wire.rs`, `Nodes::execute`). An answer `NOSCRIPT` (the node's script cache was
//! emptied under the connection) is followed, on the same connection, by the script sent
//! whole, and the request ends with that call's answer: its gate stays closed until then.
//! And a release cut by its deadline may still be answered `NOSCRIPT` later: its entry stays
//! (its operation has its completion, its gate is open) until the node answers or the
//! node's connect timeout has passed since the cut, so that the `EVAL` still follows, and the
//! operation's requests, which the client's background work finishes, wait for it (as
//! `Redlock::settle` then does).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::task::AtomicWaker;
use redis::{RedisResult, Value};
use tokio::time::Instant;

use super::expiry::Expiry;
use super::flight::{Completion, Pass, request};
use super::lanes::{Gate, OpensOnDrop};
use super::lock;
use super::node::{Decided, Nodes, QueuedOn};
use super::pipe::StraightCall;
use super::wire::{self, LockAnswer, OneCall};
use redlock_core::{
    Command, ConnectionId, NodeFailure, NodeId, Reply, RequestId, Timestamp, Transmit,
};

/// Where the connections' drivers put the answers to an operation's direct requests.
pub(crate) struct Inbox {
    answers: Mutex<Vec<(u64, RedisResult<Value>)>>,
    /// The operation's task, when it waits.
    waker: AtomicWaker,
}

impl Inbox {
    /// An inbox with room for `answers` answers before it grows.
    pub(crate) fn with_room(answers: usize) -> Self {
        Self {
            answers: Mutex::new(Vec::with_capacity(answers)),
            waker: AtomicWaker::new(),
        }
    }

    /// The answer to the request numbered `number`.
    pub(crate) fn deliver(&self, number: u64, answer: RedisResult<Value>) {
        lock(&self.answers).push((number, answer));
        self.waker.wake();
    }
}

/// One direct request, until its answer or its deadline.
struct Entry {
    /// The number its current call's answer comes back under.
    number: u64,
    request: RequestId,
    node: usize,
    connection: ConnectionId,
    deadline: Instant,
    reading: Reading,
    /// Opens the lane's gate when the request ends; `None` once it has ended for its
    /// operation and only a release's `NOSCRIPT` fallback is still awaited.
    done: Option<OpensOnDrop>,
    /// The call that sent it straight, alone on its connection, until it has its answer
    /// (which then comes from here, not from the inbox).
    straight: Option<StraightCall>,
    /// A release written behind its lane's previous command, a lock request still
    /// unanswered on the same connection (`Gate::followable_on`): that command's gate.
    behind: Option<Behind>,
}

/// What a release written behind an unanswered lock request keeps of it.
struct Behind {
    /// The lock request's gate.
    previous: Arc<Gate>,
    /// Whether the lock request has ended, and the release's own deadline runs: until then,
    /// as a release that waits in its lane, it waits however long the lock request takes.
    timed: bool,
}

/// A lock request or a release whose lane's previous command to its node has not ended:
/// queued once that one has, as a request future waits in its lane, but with no future.
struct Parked {
    transmit: Transmit,
    /// The lane's previous command.
    previous: Arc<Gate>,
    done: OpensOnDrop,
    /// The pass that sent it.
    pass: Pass,
    /// A lock request gives up when its round does, its wait in the lane included (unsent,
    /// it wrote nothing); a release waits however long, and its deadline runs once sent.
    deadline: Option<Instant>,
}

impl Entry {
    /// Whether its deadline runs (see [`Behind`]).
    fn timed(&self) -> bool {
        self.behind.as_ref().is_none_or(|behind| behind.timed)
    }
}

/// How a direct request's answer is read.
enum Reading {
    Lock(LockAnswer),
    Release(Release),
}

/// What a direct release keeps until it ends.
struct Release {
    /// To send the script whole after `NOSCRIPT`.
    command: Command,
    /// The connection it went out on, for that call.
    on: QueuedOn,
    /// Whether its call now out is by the script's hash (it may be answered `NOSCRIPT`).
    by_hash: bool,
    /// Whether, cut by its deadline, it stays until answered (its `EVALSHA`, or the `EVAL`
    /// that followed it) or the connect timeout after the cut: when it went out by hash at
    /// first (a late `NOSCRIPT` must still be followed, as a request future's release by
    /// hash finishes in the background, `Nodes::execute`), or straight (redis-rs drops a
    /// request whose caller has gone before it reached the socket: kept, its call goes on,
    /// so that a release cut while its node stalls is still written).
    trails: bool,
}

/// A command [`Direct::send`] did not queue, its gate, and the admission the attempt got if
/// it asked the core: it goes out as a request future.
pub(crate) type Declined = (Transmit, OpensOnDrop, Option<Box<Decided>>);

/// The direct requests of one operation.
pub(crate) struct Direct {
    nodes: Arc<Nodes>,
    /// The per-node timeout: a release written behind a lock request gets it once that one
    /// has ended, and so does one sent again.
    timeout: Duration,
    /// Commands that wait in their lanes (see [`Parked`]).
    parked: Vec<Parked>,
    /// Commands to go on as request futures (see [`Direct::resend`]), each with its lane's
    /// previous command, if it must wait for one, and the pass that sent it: a parked
    /// command declined once its lane was free, and a release whose connection was lost
    /// before it was answered (behind the lock request it was written after, if any).
    resends: Vec<(Declined, Option<Arc<Gate>>, Pass)>,
    /// Made with the first direct request: an operation without one allocates nothing here.
    inbox: Option<Arc<Inbox>>,
    entries: Vec<Entry>,
    /// The next request's number: never reused within the operation, so that the late
    /// answer of a request cut by its deadline cannot be taken for another's. Numbers start
    /// again at zero in each operation, also on an inbox kept from an ended one: it is kept
    /// only once no connection holds it, so no late answer can reach it ([`Spares`]).
    next: u64,
    /// Answers taken from the inbox and not handed on yet (and the inbox's spare buffer).
    taken: Vec<(u64, RedisResult<Value>)>,
    /// The earliest deadline recorded since the flight last asked ([`Direct::sooner`]).
    sooner: Option<Instant>,
}

/// What an operation's direct requests allocated, kept for another operation once they
/// have all ended: the inbox (once no connection holds it any more) and the buffers, empty.
/// With them, an operation's direct requests allocate nothing in the routine case.
#[derive(Default)]
pub(crate) struct Spares(Mutex<Vec<Spare>>);

struct Spare {
    inbox: Arc<Inbox>,
    entries: Vec<Entry>,
    taken: Vec<(u64, RedisResult<Value>)>,
    parked: Vec<Parked>,
}

/// At most this many spares are kept: as many operations as ran at once, up to this.
const MAX_SPARES: usize = 256;

impl Spares {
    fn take(&self) -> Option<Spare> {
        lock(&self.0).pop()
    }

    fn give(&self, spare: Spare) {
        let mut spares = lock(&self.0);
        if spares.len() < MAX_SPARES {
            spares.push(spare);
        }
    }
}

impl Direct {
    /// The direct requests of an operation, in what an ended one left ([`Spares`]) if any.
    pub(crate) fn new(nodes: Arc<Nodes>, timeout: Duration) -> Self {
        let spare = nodes.spares().take();
        let mut direct = Self::empty(nodes, timeout);
        if let Some(spare) = spare {
            direct.inbox = Some(spare.inbox);
            direct.entries = spare.entries;
            direct.taken = spare.taken;
            direct.parked = spare.parked;
        }
        direct
    }

    /// Direct requests with nothing allocated (for a flight whose requests have moved on).
    pub(crate) fn empty(nodes: Arc<Nodes>, timeout: Duration) -> Self {
        Self {
            nodes,
            timeout,
            parked: Vec::new(),
            resends: Vec::new(),
            inbox: None,
            entries: Vec::new(),
            next: 0,
            taken: Vec::new(),
            sooner: None,
        }
    }

    /// Queues `transmit` as a direct request admitted at `now` and cut at `deadline`, if it
    /// is a lock request or a release and everything is ready ([`Nodes::queue_direct`]); hands it back
    /// otherwise, with its gate and what the attempt decided. Its lane must have nothing to
    /// wait for, or be `behind` a lock request it may follow on that request's connection
    /// (`Gate::followable_on`): `done` is the gate the next command on the lane waits for.
    /// A lock request queued on a connection that keeps order marks `done` followable.
    pub(crate) fn send(
        &mut self,
        transmit: Transmit,
        now: Timestamp,
        deadline: Instant,
        done: OpensOnDrop,
        behind: Option<Arc<Gate>>,
    ) -> Result<(), Declined> {
        let Transmit {
            request,
            node,
            command,
        } = transmit;
        if !goes_direct(&command) {
            let transmit = Transmit {
                request,
                node,
                command,
            };
            return Err((transmit, done, None));
        }
        let number = self.next;
        let index = node.index();
        let follow_on = behind
            .as_ref()
            .and_then(|previous| previous.followable_on());
        match self
            .nodes
            .queue_direct(index, command, now, &mut self.inbox, number, follow_on)
        {
            Ok((on, call, command, straight)) => {
                if self.entries.capacity() == 0 {
                    // Room for one request per node, and as many answers taken at once: the
                    // two buffers of the operation's direct requests, allocated once.
                    self.entries.reserve_exact(self.nodes.len());
                    self.taken.reserve_exact(self.nodes.len());
                }
                self.next += 1;
                // Behind a lock request, its deadline runs only once that one has ended.
                if behind.is_none() {
                    self.note_deadline(deadline);
                }
                let connection = on.id();
                let went_straight = straight.is_some();
                let reading = match call {
                    // A lock request needs neither its command nor its connection again.
                    OneCall::Lock(answer) => {
                        if on.keeps_order() && !went_straight {
                            done.gate().mark_followable(connection);
                        }
                        Reading::Lock(answer)
                    }
                    OneCall::Release { by_hash } => Reading::Release(Release {
                        command,
                        on,
                        by_hash,
                        trails: by_hash || went_straight,
                    }),
                };
                self.entries.push(Entry {
                    number,
                    request,
                    node: index,
                    connection,
                    deadline,
                    reading,
                    done: Some(done),
                    straight,
                    behind: behind.map(|previous| Behind {
                        previous,
                        timed: false,
                    }),
                });
                Ok(())
            }
            Err((command, decided)) => {
                let transmit = Transmit {
                    request,
                    node,
                    command,
                };
                Err((transmit, done, decided))
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len() + self.parked.len() + self.resends.len()
    }

    /// Records `deadline` for the flight's timer (see [`Direct::sooner`]).
    fn note_deadline(&mut self, deadline: Instant) {
        self.sooner = Some(self.sooner.map_or(deadline, |at| at.min(deadline)));
    }

    /// The earliest deadline recorded since the last call, if any.
    pub(crate) fn sooner(&mut self) -> Option<Instant> {
        self.sooner.take()
    }

    /// The earliest deadline after `reached`, if any request waits for one.
    pub(crate) fn earliest_after(&self, reached: Instant) -> Option<Instant> {
        let parked = self.parked.iter().filter_map(|parked| parked.deadline);
        self.entries
            .iter()
            .filter(|entry| entry.timed())
            .map(|entry| entry.deadline)
            .chain(parked)
            .filter(|at| *at > reached)
            .min()
    }

    /// The next request that has ended: answered, or (once the flight's timer has `reached`
    /// its deadline, and no answer came first) cut. Registers the task for the next answer.
    pub(crate) fn poll(
        &mut self,
        reached: Option<Instant>,
        cx: &mut Context<'_>,
    ) -> Option<Completion> {
        if self.entries.is_empty() && self.parked.is_empty() {
            return None;
        }
        // First, so that a command queued now has its straight call polled (which sends it)
        // and the inbox it may have made watched, below.
        if let Some(done) = self.unpark(reached, cx) {
            return Some(done);
        }
        // The straight calls (at most one per connection), each polled only when its
        // connection's waker says it may have moved (`StraightCall::poll`). The first poll
        // of one sends it.
        let mut at = 0;
        while at < self.entries.len() {
            let answer = match &mut self.entries[at].straight {
                Some(call) => match call.poll(cx) {
                    Poll::Ready(answer) => answer,
                    Poll::Pending => {
                        at += 1;
                        continue;
                    }
                },
                None => {
                    at += 1;
                    continue;
                }
            };
            self.entries[at].straight = None;
            if let Some(done) = self.answered(at, answer) {
                return Some(done);
            }
            // `at` now holds the next entry (this one was removed), or this one without its
            // call (it waits for the script sent whole): either way, looked at again.
        }
        if let Some(inbox) = &self.inbox {
            // Registered before the look: an answer delivered after it wakes the task.
            inbox.waker.register(cx.waker());
            if self.taken.is_empty() {
                std::mem::swap(&mut *lock(&inbox.answers), &mut self.taken);
            }
        }
        while let Some((number, answer)) = self.taken.pop() {
            // A request cut by its deadline has left: its late answer is dropped.
            if let Some(at) = self.entries.iter().position(|e| e.number == number)
                && let Some(done) = self.answered(at, answer)
            {
                return Some(done);
            }
        }
        self.start_deadlines(cx);
        let reached = reached?;
        while let Some(at) = self
            .entries
            .iter()
            .position(|e| e.timed() && e.deadline <= reached)
        {
            if let Some(done) = self.cut(at) {
                return Some(done);
            }
        }
        None
    }

    /// Keeps `transmit`, a lock request or a release, until `previous` (its lane's previous
    /// command to its node) has ended, then queues it as a direct request, or hands it on as
    /// a request future when it cannot be queued then (see [`Direct::unpark`]). A lock
    /// request is cut at `deadline`, its wait included.
    pub(crate) fn park(
        &mut self,
        transmit: Transmit,
        previous: Arc<Gate>,
        done: OpensOnDrop,
        pass: Pass,
        deadline: Instant,
    ) {
        let deadline = (!transmit.command.is_release()).then_some(deadline);
        if let Some(deadline) = deadline {
            self.note_deadline(deadline);
        }
        self.parked.push(Parked {
            transmit,
            previous,
            done,
            pass,
            deadline,
        });
    }

    /// Sends the parked commands whose lanes are free: queued as direct requests when they
    /// can be, at the clock read now, as a request future that waited in its lane reads it
    /// (a release gets its deadline from now); else handed on as request futures. A lock
    /// request still parked at its deadline ends, unsent: the node is not told to have
    /// left it unanswered. Registers the task with the lanes still closed.
    fn unpark(&mut self, reached: Option<Instant>, cx: &mut Context<'_>) -> Option<Completion> {
        let mut at = 0;
        while at < self.parked.len() {
            let parked = &self.parked[at];
            if let (Some(deadline), Some(reached)) = (parked.deadline, reached)
                && deadline <= reached
            {
                let Parked { transmit, done, .. } = self.parked.swap_remove(at);
                drop(done);
                let node = transmit.node.index();
                return Some(self.ended(node, transmit.request, Err(NodeFailure::TimedOut)));
            }
            if parked.previous.poll_open(cx).is_pending() {
                at += 1;
                continue;
            }
            let Parked {
                transmit,
                previous,
                done,
                pass,
                deadline,
            } = self.parked.swap_remove(at);
            // A release is admitted whatever the time: only a lock request reads the clock.
            let (now, deadline) = match deadline {
                Some(deadline) => (self.nodes.clock().now(), deadline),
                None => (pass.now, Instant::now() + self.timeout),
            };
            if let Err(declined) = self.send(transmit, now, deadline, done, None) {
                self.resends.push((declined, Some(previous), pass));
            }
        }
        None
    }

    /// Starts the deadline of each release written behind a lock request that has ended
    /// since the last look (the per-node timeout from now, as a release that waited in its
    /// lane gets it once it is sent); registers the task with the lock requests still out.
    fn start_deadlines(&mut self, cx: &mut Context<'_>) {
        // One reading of the clock for every deadline started in this look.
        let mut started = None;
        for entry in &mut self.entries {
            let Some(behind) = &mut entry.behind else {
                continue;
            };
            if behind.timed || behind.previous.poll_open(cx).is_pending() {
                continue;
            }
            behind.timed = true;
            entry.deadline = *started.get_or_insert_with(|| Instant::now() + self.timeout);
        }
        if let Some(deadline) = started {
            self.note_deadline(deadline);
        }
    }

    /// The next command to go on as a request future on `expiry` (made if need be): a
    /// parked command that could not be queued once its lane was free (its connection must
    /// be opened or identified, or the core asked for a probe), or a release whose
    /// connection was lost before it was answered. The latter goes again on whatever
    /// connection the node has then, so that the key is still deleted; written behind a
    /// lock request, it waits for that one to end first, as a release waiting in its lane
    /// would have.
    pub(crate) fn resend(
        &mut self,
        expiry: &mut Option<Arc<Expiry>>,
    ) -> Option<BoxFuture<'static, Completion>> {
        let (declined, previous, pass) = self.resends.pop()?;
        let expiry = Arc::clone(expiry.get_or_insert_with(Arc::default));
        let nodes = Arc::clone(&self.nodes);
        Some(request(
            nodes,
            expiry,
            self.timeout,
            pass,
            declined,
            previous,
        ))
    }

    /// Entry `at` has its answer: its completion, unless the answer asks for the script sent
    /// whole (the entry then waits for that call's answer) or the request has ended already.
    fn answered(&mut self, at: usize, answer: RedisResult<Value>) -> Option<Completion> {
        let entry = &mut self.entries[at];
        if let Reading::Release(release) = &mut entry.reading
            && release.by_hash
            && wire::wants_whole(&answer)
            && let whole = wire::one_call_cmd(&release.command, false)
            // A straight call's operation may have no inbox yet: the script sent whole is
            // answered through it.
            && let inbox = self
                .inbox
                .get_or_insert_with(|| Arc::new(Inbox::with_room(self.nodes.len())))
            // Refused only when the driver has stopped: the answer is then read as it is.
            && release.on.follow(whole, inbox, self.next).is_ok()
        {
            entry.number = self.next;
            self.next += 1;
            release.by_hash = false;
            return None;
        }
        let entry = self.entries.swap_remove(at);
        // A release that trails its deadline: its operation has its completion.
        let done = entry.done?;
        let (result, release) = match entry.reading {
            Reading::Lock(reading) => (reading.read(answer), None),
            Reading::Release(release) => (wire::read_release(answer), Some(release)),
        };
        if let Err(failure) = &result {
            self.nodes.failed(entry.node, entry.connection, failure);
            // A release on a connection lost before it was answered: the node may not have
            // run it, and it goes again, on a new connection. Written behind a lock request,
            // it goes once that one has ended (the lock request may have set its key), as
            // one that waited in its lane would have gone after it failed. (A release runs
            // again safely: it deletes only its own token's key.)
            if let Some(release) = release
                && wire::connection_lost(failure)
            {
                let transmit = Transmit {
                    request: entry.request,
                    node: NodeId::new(entry.node),
                    command: release.command,
                };
                let pass = Pass {
                    sent_at: Instant::now(),
                    now: self.nodes.clock().now(),
                };
                let previous = entry.behind.map(|behind| behind.previous);
                self.resends.push(((transmit, done, None), previous, pass));
                return None;
            }
        }
        drop(done);
        Some(self.ended(entry.node, entry.request, result))
    }

    /// Entry `at` has reached its deadline: cut, it ends for its operation (its gate opens),
    /// and a release that trails (by hash, or straight) stays until its answer or the
    /// connect timeout (see the module's description). An entry that only trailed is dropped.
    /// A lock request cut while it went straight may not have been written (redis-rs drops
    /// it unsent once its call is gone): for the core it is unanswered all the same, and
    /// one never written set nothing.
    fn cut(&mut self, at: usize) -> Option<Completion> {
        let entry = &mut self.entries[at];
        let Some(done) = entry.done.take() else {
            // The node has not answered in the connect timeout after the cut: given up, as
            // a request future's background finish is.
            self.entries.swap_remove(at);
            return None;
        };
        let (node, request) = (entry.node, entry.request);
        // Queued means written (`pipe.rs`); straight, it was handed to redis-rs: either way
        // the node may have it, and left it unanswered.
        self.nodes.unanswered(node, entry.connection);
        if matches!(&entry.reading, Reading::Release(release) if release.trails) {
            let bound = Instant::now() + self.nodes.connect_timeout(node);
            entry.deadline = bound;
            self.note_deadline(bound);
        } else {
            self.entries.swap_remove(at);
        }
        drop(done);
        Some(self.ended(node, request, Err(NodeFailure::TimedOut)))
    }

    /// The request's completion.
    fn ended(
        &self,
        node: usize,
        request: RequestId,
        result: Result<Reply, NodeFailure>,
    ) -> Completion {
        if let Err(failure) = &result {
            self.nodes.trace_failure(node, failure);
        }
        Completion { request, result }
    }
}

impl Drop for Direct {
    /// Keeps the inbox and the buffers for another operation when every request has ended
    /// and no connection holds the inbox: no late answer can then reach it, so the numbers,
    /// which start again from zero, cannot be mistaken.
    fn drop(&mut self) {
        let Some(mut inbox) = self.inbox.take() else {
            return;
        };
        if !self.entries.is_empty() || !self.parked.is_empty() || !self.resends.is_empty() {
            return;
        }
        let Some(unique) = Arc::get_mut(&mut inbox) else {
            return;
        };
        let Ok(answers) = unique.answers.get_mut() else {
            return;
        };
        answers.clear();
        drop(unique.waker.take());
        self.taken.clear();
        let spare = Spare {
            inbox,
            entries: std::mem::take(&mut self.entries),
            taken: std::mem::take(&mut self.taken),
            parked: std::mem::take(&mut self.parked),
        };
        self.nodes.spares().give(spare);
    }
}

/// Whether `command` can go as a direct request: a lock request or a release, each one call.
pub(crate) fn goes_direct(command: &Command) -> bool {
    matches!(
        command,
        Command::SetIfAbsent { .. } | Command::ReleaseIfOwner { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::background::Background;
    use crate::client::clock::Clock;
    use crate::client::node::Node;
    use redlock_core::RestartPolicy;

    fn nodes() -> Arc<Nodes> {
        let client = redis::Client::open("redis://127.0.0.1:1/").expect("a node URL");
        let node = Node::new(0, client, Duration::from_secs(1));
        let policy = RestartPolicy::Persistent;
        Arc::new(Nodes::new(
            vec![node],
            policy,
            Clock::new(),
            Background::default(),
        ))
    }

    fn spares(nodes: &Nodes) -> usize {
        lock(&nodes.spares().0).len()
    }

    #[test]
    fn an_ended_operations_inbox_is_kept_only_once_no_connection_holds_it() {
        let nodes = nodes();
        let timeout = Duration::from_millis(50);
        let mut direct = Direct::new(Arc::clone(&nodes), timeout);
        assert!(direct.inbox.is_none());
        let inbox = Arc::new(Inbox::with_room(1));
        direct.inbox = Some(Arc::clone(&inbox));
        // A connection still holds the inbox (an answer may still come): not kept.
        drop(direct);
        assert_eq!(spares(&nodes), 0);

        let mut direct = Direct::new(Arc::clone(&nodes), timeout);
        direct.inbox = Some(inbox);
        direct.taken.reserve(4);
        if let Some(inbox) = &direct.inbox {
            inbox.deliver(7, Ok(Value::Okay));
        }
        drop(direct);
        assert_eq!(spares(&nodes), 1);
        // The next operation starts with it, emptied, and its buffers.
        let direct = Direct::new(Arc::clone(&nodes), timeout);
        assert_eq!(spares(&nodes), 0);
        let inbox = direct.inbox.as_ref().expect("the kept inbox");
        assert!(lock(&inbox.answers).is_empty());
        assert!(direct.taken.capacity() >= 4 && direct.taken.is_empty());
        // A flight whose requests have moved on takes nothing.
        drop(Direct::empty(Arc::clone(&nodes), timeout));
        assert_eq!(spares(&nodes), 0);
    }
}
