//! Direct requests: a lock request queued straight on its connection's batch, with no future,
//! task node or reply slot of its own.
//!
//! A request that is a future costs its operation a boxed future (its lane, admission and
//! deadline: 1.6 KB), a node in the operation's `FuturesUnordered`, a reply slot and the
//! wake-ups through each. The routine case needs none of it: a `SET … NX` whose lane is free,
//! whose connection is open and already carries other requests (a lone command goes straight
//! to redis-rs instead, `pipe.rs`), and which the core admits as it is. Such a request is
//! admitted and queued on the spot, while its operation sends ([`Direct::send`]); its answer
//! comes back, by the request's number, into one [`Inbox`] per operation, and its deadline
//! is one entry here, which the operation's one timer covers (`flight.rs`). Anything else (a
//! lane to wait for, a connection to open or identify, a probe, a release and its
//! `NOSCRIPT` fallback, a command of several calls) stays a request future, as before.
//!
//! What the lanes, the core and the queue guarantee holds unchanged. The lane's gate is
//! installed before the command is queued and opens when the request ends (answered, cut by
//! its deadline, or dropped with its operation's requests), as a request future's does. The
//! admission is the core's, at the pass's reading of the clock, as for a request future that
//! waits for nothing. A command once queued is always written: a request cut by its deadline
//! is one the node left unanswered, as the core is told.

use std::sync::{Arc, Mutex};
use std::task::Context;

use futures::task::AtomicWaker;
use redis::{RedisResult, Value};
use tokio::time::Instant;

use super::flight::Completion;
use super::lanes::OpensOnDrop;
use super::lock;
use super::node::{Decided, Nodes};
use super::wire::LockAnswer;
use redlock_core::{Command, ConnectionId, NodeFailure, RequestId, Timestamp, Transmit};

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
    number: u64,
    request: RequestId,
    node: usize,
    connection: ConnectionId,
    deadline: Instant,
    answer: LockAnswer,
    /// Opens the lane's gate when the request ends.
    _done: OpensOnDrop,
}

/// A command [`Direct::send`] did not queue, its gate, and the admission the attempt got if
/// it asked the core: it goes out as a request future.
pub(crate) type Declined = (Transmit, OpensOnDrop, Option<Box<Decided>>);

/// The direct requests of one operation.
pub(crate) struct Direct {
    nodes: Arc<Nodes>,
    /// Made with the first direct request: an operation without one allocates nothing here.
    inbox: Option<Arc<Inbox>>,
    entries: Vec<Entry>,
    /// The next request's number: never reused, so that the late answer of a request cut by
    /// its deadline cannot be taken for another's.
    next: u64,
    /// Answers taken from the inbox and not handed on yet (and the inbox's spare buffer).
    taken: Vec<(u64, RedisResult<Value>)>,
    /// The earliest deadline recorded since the flight last asked ([`Direct::sooner`]).
    sooner: Option<Instant>,
}

impl Direct {
    pub(crate) fn new(nodes: Arc<Nodes>) -> Self {
        Self {
            nodes,
            inbox: None,
            entries: Vec::new(),
            next: 0,
            taken: Vec::new(),
            sooner: None,
        }
    }

    /// Queues `transmit` as a direct request admitted at `now` and cut at `deadline`, if it
    /// is a lock request and everything is ready ([`Nodes::queue_direct`]); hands it back
    /// otherwise, with its gate and what the attempt decided. Its lane must have nothing to
    /// wait for: `done` is the gate the next command on the lane waits for.
    pub(crate) fn send(
        &mut self,
        transmit: Transmit,
        now: Timestamp,
        deadline: Instant,
        done: OpensOnDrop,
    ) -> Result<(), Declined> {
        let Transmit {
            request,
            node,
            command,
        } = transmit;
        if !matches!(command, Command::SetIfAbsent { .. }) {
            let transmit = Transmit {
                request,
                node,
                command,
            };
            return Err((transmit, done, None));
        }
        let number = self.next;
        let index = node.index();
        match self
            .nodes
            .queue_direct(index, command, now, &mut self.inbox, number)
        {
            Ok((connection, answer)) => {
                if self.entries.capacity() == 0 {
                    // Room for one request per node, and as many answers taken at once: the
                    // two buffers of the operation's direct requests, allocated once.
                    self.entries.reserve_exact(self.nodes.len());
                    self.taken.reserve_exact(self.nodes.len());
                }
                self.next += 1;
                self.sooner = Some(self.sooner.map_or(deadline, |at| at.min(deadline)));
                self.entries.push(Entry {
                    number,
                    request,
                    node: index,
                    connection,
                    deadline,
                    answer,
                    _done: done,
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
        self.entries.len()
    }

    /// The earliest deadline recorded since the last call, if any.
    pub(crate) fn sooner(&mut self) -> Option<Instant> {
        self.sooner.take()
    }

    /// The earliest deadline after `reached`, if any request waits for one.
    pub(crate) fn earliest_after(&self, reached: Instant) -> Option<Instant> {
        self.entries
            .iter()
            .map(|entry| entry.deadline)
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
        if self.entries.is_empty() {
            return None;
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
            if let Some(at) = self.entries.iter().position(|e| e.number == number) {
                let entry = self.entries.swap_remove(at);
                return Some(self.answered(entry, answer));
            }
        }
        let reached = reached?;
        let at = self.entries.iter().position(|e| e.deadline <= reached)?;
        let entry = self.entries.swap_remove(at);
        // Queued means written (`pipe.rs`): the node left it unanswered.
        self.nodes.unanswered(entry.node, entry.connection);
        Some(self.ended(entry, Err(NodeFailure::TimedOut)))
    }

    fn answered(&self, entry: Entry, answer: RedisResult<Value>) -> Completion {
        let result = entry.answer.read(answer);
        if let Err(failure) = &result {
            self.nodes.failed(entry.node, entry.connection, failure);
        }
        self.ended(entry, result)
    }

    /// The request's completion; its gate opens here.
    fn ended(&self, entry: Entry, result: Result<redlock_core::Reply, NodeFailure>) -> Completion {
        if let Err(failure) = &result {
            self.nodes.trace_failure(entry.node, failure);
        }
        Completion {
            request: entry.request,
            result,
        }
    }
}
