//! One writer per node connection: the single-command requests of every operation queued on
//! a connection go out together, as one pipeline, and their answers come back by position.
//!
//! On a connection of the client's own (plain TCP, `socket.rs`) the connection does this
//! itself, and the pipe hands it each command ([`Pipe::Socket`]). The rest of this comment
//! is about the queue in front of redis-rs' multiplexed connection (TLS, Unix sockets).
//!
//! redis-rs' multiplexed connection costs each request a message to the connection's task and
//! a reply channel, and writes what is queued when its task runs: with many operations on two
//! worker threads, the commands of different operations mostly reach a node one at a time.
//! Here a connection's requests are queued ([`Pipe::send`]), and the connection's driver task
//! takes everything queued, sends it as one pipeline (`send_packed_commands`: one message,
//! one write, one reply channel for the whole batch) and hands each answer to its request.
//! Before it takes a batch the driver lets every other ready task run once (`yield_now`), so
//! under load the commands of a pass of every task travel, and are read by Redis, as one
//! pipeline. Batches do not wait for each other's answers: a slow node delays no command by
//! more than its own round trip.
//!
//! A command sent while the connection has nothing else queued or unanswered goes straight to
//! the connection, as before the queue: with one operation at a time there is nothing to
//! coalesce, and the driver's hops (a wake-up, a pass of the runtime, a reply channel) would
//! only add to its cost. The commands that follow it while it is out are queued.
//!
//! A request's answer goes to a reply slot of its own ([`Pipe::send`], for a request that is a
//! future awaiting it), or to its operation's [`Inbox`] under the request's number
//! ([`Pipe::place`], for a direct request, `direct.rs`, which is no future at all; and
//! [`Pipe::follow`] for the script a direct release sends whole after `NOSCRIPT`). A direct
//! request that finds itself alone is handed back with its claim on the connection
//! ([`Placed::Alone`]): it goes straight, as the call its operation polls in place of a
//! request future.
//!
//! Order: the lanes (`lanes.rs`) see to the order of one resource's commands on a node (a
//! command starts only once the previous one of its resource has its answer), so the order
//! between a straight command and a batch does not matter; batches are written in the order
//! they were queued. A command once queued is always written, even if its request gave
//! up meanwhile (its answer is then dropped): for the core that is a request cut after it was
//! sent, which it already expects of a node that left one unanswered (`Eligibility`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::task::AtomicWaker;
use redis::aio::MultiplexedConnection;
use redis::{RedisError, RedisResult, Value};
use tokio::sync::oneshot;

use super::direct::Inbox;
use super::lock;
use super::socket::{Socket, Write};
use super::transport::Transport;
use super::wire;
use redlock_core::Command;

/// The queue of one connection, shared by its requests and its driver task; or, on a
/// connection of the client's own (`socket.rs`), that connection, which gathers its
/// commands itself.
#[derive(Clone)]
pub(crate) enum Pipe {
    /// A queue with its driver task, over redis-rs' multiplexed connection.
    Queue(Arc<Shared>),
    /// The client's own connection.
    Socket(Socket),
}

pub(crate) struct Shared {
    queue: Mutex<Queue>,
    /// The driver task, waiting for work.
    driver: AtomicWaker,
    /// The straight call out on the connection, if any (at most one: [`Straight`]).
    straight: StraightWake,
}

/// Whether the connection's straight call was woken since its operation last polled it,
/// and that operation's task: the call is polled with the connection's own waker (this
/// `Shared`, [`Wake`]), so that its operation polls it only when it may have moved, not at
/// every wake-up of the operation.
#[derive(Default)]
struct StraightWake {
    woken: AtomicBool,
    task: AtomicWaker,
}

/// Wakes the operation of the connection's straight call, marking the call woken.
impl Wake for Shared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.straight.woken.store(true, Ordering::Release);
        self.straight.task.wake();
    }
}

#[derive(Default)]
struct Queue {
    pipeline: redis::Pipeline,
    answers: Vec<Answer>,
    /// The driver waits for work, its waker registered: the next request wakes it. Only
    /// then: waking it while it waits for a batch's answers would poll it for nothing.
    idle: bool,
    /// No driver takes from this queue any more: requests go straight to the connection.
    closed: bool,
    /// Requests sent and not yet answered (or given up), queued, in a batch or straight (a
    /// straight one counts from its claim, before its first poll sends it, until its call
    /// is gone): a request that finds none goes straight to the connection.
    unanswered: usize,
}

/// Stops the connection's driver once the last handle on the connection is gone (it sends
/// what is queued first).
pub(crate) struct Closer(Pipe);

impl Drop for Closer {
    fn drop(&mut self) {
        match &self.0 {
            Pipe::Queue(shared) => {
                lock(&shared.queue).closed = true;
                shared.driver.wake();
            }
            Pipe::Socket(socket) => socket.close(),
        }
    }
}

/// Marks the queue closed if the driver task ends or is dropped (a runtime shut down), and
/// fails what it still holds with an error. (The answers of batches already on the wire are
/// dropped with the driver: a request waiting on its own slot then fails, a direct request
/// ends at its deadline.)
struct Stopped(Arc<Shared>);

impl Drop for Stopped {
    fn drop(&mut self) {
        let answers = {
            let mut queue = lock(&self.0.queue);
            queue.closed = true;
            let dropped = queue.answers.len();
            queue.unanswered -= dropped;
            queue.pipeline.clear();
            std::mem::take(&mut queue.answers)
        };
        // Outside the lock: an inbox wakes its operation.
        for answer in answers {
            answer.give(Err(stopped()));
        }
    }
}

impl Pipe {
    /// A queue for `connection`, with its driver task spawned on the current runtime; the
    /// driver ends when the returned [`Closer`] is dropped.
    pub(crate) fn start(connection: MultiplexedConnection) -> (Self, Closer) {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            driver: AtomicWaker::new(),
            straight: StraightWake::default(),
        });
        tokio::spawn(drive(Arc::clone(&shared), connection));
        let pipe = Self::Queue(shared);
        (pipe.clone(), Closer(pipe))
    }

    /// The client's own connection as a pipe: it gathers its commands itself.
    pub(crate) fn over(socket: Socket) -> (Self, Closer) {
        let pipe = Self::Socket(socket);
        (pipe.clone(), Closer(pipe))
    }

    /// Whether a command placed after another is written after it, always: on the client's
    /// own connection, every command is packed into its one buffer in the order it is
    /// placed. Not so over the queue, where a command alone goes straight to redis-rs at its
    /// first poll, and one placed meanwhile may be written before it by the driver.
    pub(crate) fn keeps_order(&self) -> bool {
        matches!(self, Self::Socket(_))
    }

    /// Queues the call of `command` (one that [`wire::one_call`] takes) for the next batch,
    /// its answer for `inbox` (taken only then) under `number`; or, when it would be alone on
    /// the connection, hands its `Cmd` back with the claim that makes it the one unanswered
    /// request ([`Placed::Alone`]): its caller sends it straight. On the client's own
    /// connection the call is packed straight into the connection's buffer (no `Cmd`), and
    /// the connection writes it. Refused when the driver has stopped or the connection is
    /// broken: the caller then sends it as a request of its own.
    pub(crate) fn place(
        &self,
        command: &Command,
        by_hash: bool,
        inbox: impl FnOnce() -> Arc<Inbox>,
        number: u64,
    ) -> Result<Placed, ()> {
        match self {
            Self::Socket(socket) => {
                let pack = |out: &mut Vec<u8>| wire::pack_one_call(command, by_hash, out);
                gather(socket, pack, inbox, number).ok_or(())
            }
            Self::Queue(_) => {
                let cmd = wire::one_call_cmd(command, by_hash);
                self.push(cmd, inbox, number, true).map_err(drop)
            }
        }
    }

    /// Queues `cmd` for the next batch, its answer for `inbox` under `number`, even when it
    /// is alone on the connection: for a direct request's second call (a release's script
    /// sent whole after `NOSCRIPT`), which has no straight call of its own. Refused only
    /// when the driver has stopped (the caller holds the connection, so it is not closed
    /// otherwise).
    pub(crate) fn follow(
        &self,
        cmd: redis::Cmd,
        inbox: &Arc<Inbox>,
        number: u64,
    ) -> Result<(), redis::Cmd> {
        self.push(cmd, || Arc::clone(inbox), number, false)
            .map(|_| ())
    }

    /// Queues `cmd` for the next batch (see [`Pipe::place`]); alone on the connection, it is
    /// handed back to go straight only when `may_go_straight`.
    fn push(
        &self,
        cmd: redis::Cmd,
        inbox: impl FnOnce() -> Arc<Inbox>,
        number: u64,
        may_go_straight: bool,
    ) -> Result<Placed, redis::Cmd> {
        let shared = match self {
            Self::Queue(shared) => shared,
            Self::Socket(socket) => {
                let pack = |out: &mut Vec<u8>| cmd.write_packed_command(out);
                return gather(socket, pack, inbox, number).ok_or(cmd);
            }
        };
        let wake = {
            let mut queue = lock(&shared.queue);
            if queue.closed {
                return Err(cmd);
            }
            queue.unanswered += 1;
            if may_go_straight && queue.unanswered == 1 {
                return Ok(Placed::Alone(cmd, Straight(Arc::clone(shared))));
            }
            queue.pipeline.add_command(cmd);
            queue.answers.push(Answer::Inbox(inbox(), number));
            std::mem::take(&mut queue.idle)
        };
        if wake {
            shared.driver.wake();
        }
        Ok(Placed::Queued)
    }

    /// Sends `cmd` and returns its answer, server errors as errors (as `query_async` gives
    /// them): straight to `connection` when nothing else is unanswered on it (or its driver
    /// has stopped), else with the next batch.
    pub(crate) async fn send(
        &self,
        cmd: redis::Cmd,
        connection: &mut Transport,
    ) -> RedisResult<Value> {
        let shared = match self {
            Self::Queue(shared) => shared,
            Self::Socket(socket) => {
                let answer = socket.request(&cmd, Write::Gathered).await;
                return answer.and_then(Value::extract_error);
            }
        };
        let queued = {
            let mut queue = lock(&shared.queue);
            queue.unanswered += 1;
            if queue.closed || queue.unanswered == 1 {
                Err(cmd)
            } else {
                let (answer, answered) = oneshot::channel();
                queue.pipeline.add_command(cmd);
                queue.answers.push(Answer::Slot(answer));
                Ok((answered, std::mem::take(&mut queue.idle)))
            }
        };
        let (answered, wake) = match queued {
            Ok(queued) => queued,
            Err(cmd) => {
                let _answered = Straight(Arc::clone(shared));
                return cmd.query_async(connection).await;
            }
        };
        if wake {
            shared.driver.wake();
        }
        match answered.await {
            Ok(answer) => answer.and_then(Value::extract_error),
            Err(_) => Err(stopped()),
        }
    }
}

/// Hands the command `pack` writes to the client's own connection, gathered with others,
/// its answer for `inbox` under `number`; `None` when the connection is broken (the caller's
/// request of its own then meets the same error).
fn gather(
    socket: &Socket,
    pack: impl FnOnce(&mut Vec<u8>),
    inbox: impl FnOnce() -> Arc<Inbox>,
    number: u64,
) -> Option<Placed> {
    let answer = Answer::Inbox(inbox(), number);
    let sent = socket.send_packed(pack, answer, Write::Gathered);
    sent.ok().map(|()| Placed::Queued)
}

/// Where [`Pipe::place`] put a command.
pub(crate) enum Placed {
    /// In the next batch: its answer goes to the inbox.
    Queued,
    /// Nowhere: it is alone on the connection, and goes straight, holding the claim until it
    /// ends (the commands placed meanwhile are queued behind it).
    Alone(redis::Cmd, Straight),
}

/// A straight request's claim on its connection: while it is held, the request counts as
/// unanswered, and the commands placed meanwhile join a batch. Dropped when the request
/// ends, answered or given up.
pub(crate) struct Straight(Arc<Shared>);

/// A direct request sent straight to its connection, alone on it ([`Placed::Alone`]): the
/// call its operation polls (`direct.rs`), holding the connection's claim until it ends.
pub(crate) struct StraightCall {
    call: BoxFuture<'static, RedisResult<Value>>,
    /// The connection's waker ([`StraightWake`]), made once for the call.
    waker: Waker,
    /// Dropped after `call` (fields drop in order): the request counts as unanswered until
    /// its call is gone.
    claim: Straight,
}

impl StraightCall {
    /// `call`, sent under `claim`: its first poll sends it.
    pub(crate) fn new(claim: Straight, call: BoxFuture<'static, RedisResult<Value>>) -> Self {
        // Marked woken so that the first poll, which sends it, happens.
        claim.0.straight.woken.store(true, Ordering::Release);
        let waker = Waker::from(Arc::clone(&claim.0));
        Self { call, waker, claim }
    }

    /// The call's answer, if it has come: polled only when it was woken since the last poll
    /// (or never polled); `cx`'s task is woken when it is.
    pub(crate) fn poll(&mut self, cx: &Context<'_>) -> Poll<RedisResult<Value>> {
        let wake = &self.claim.0.straight;
        // Registered before the look: a wake-up after it finds this task.
        wake.task.register(cx.waker());
        if !wake.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        self.call
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }
}

/// The connection keeps no operation's task past its straight call: a task's waker holds the
/// task's memory.
impl Drop for StraightCall {
    fn drop(&mut self) {
        self.claim.0.straight.task.take();
    }
}

impl Drop for Straight {
    fn drop(&mut self) {
        lock(&self.0.queue).unanswered -= 1;
    }
}

/// The error of a request whose driver stopped before its answer came.
fn stopped() -> RedisError {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "the connection's driver stopped",
    )
    .into()
}

/// What a batch holds: its commands, and where each one's answer goes.
type Batch = (redis::Pipeline, Vec<Answer>);

/// Where one request's answer goes.
pub(crate) enum Answer {
    /// The reply slot its request future awaits ([`Pipe::send`]).
    Slot(oneshot::Sender<RedisResult<Value>>),
    /// Its operation's inbox, under the request's number ([`Pipe::place`]).
    Inbox(Arc<Inbox>, u64),
}

impl Answer {
    pub(crate) fn give(self, answer: RedisResult<Value>) {
        match self {
            // A request that gave up has dropped its slot: nobody waits for the answer.
            Self::Slot(slot) => {
                let _ = slot.send(answer);
            }
            Self::Inbox(inbox, number) => inbox.deliver(number, answer),
        }
    }
}

/// What the driver does next.
enum Step {
    /// Requests are queued: gather, then send them.
    Send,
    /// A batch was answered.
    Answered(RedisResult<Vec<Value>>, Batch),
    /// The queue is closed, empty, and nothing is on the wire.
    Stop,
}

/// The driver: once requests are queued, lets every task that is ready run first (one
/// `yield_now`: what they queue meanwhile joins the batch), takes everything queued, sends it
/// as one pipeline, and hands out the answers in order. Batches are written in the order
/// they were taken: each one's send starts (its first poll hands it to the connection's
/// task) before the next is taken. Ends once the queue is closed, empty and answered.
async fn drive(shared: Arc<Shared>, connection: MultiplexedConnection) {
    let stopped = Stopped(Arc::clone(&shared));
    let mut on_wire = FuturesOrdered::new();
    // An answered batch's buffers, emptied, for the next one.
    let mut spare: Batch = (redis::Pipeline::new(), Vec::new());
    loop {
        let step = std::future::poll_fn(|cx| {
            if let Poll::Ready(Some((result, batch))) = on_wire.poll_next_unpin(cx) {
                return Poll::Ready(Step::Answered(result, batch));
            }
            let mut queue = lock(&shared.queue);
            if !queue.answers.is_empty() {
                return Poll::Ready(Step::Send);
            }
            if queue.closed && on_wire.is_empty() {
                return Poll::Ready(Step::Stop);
            }
            // Registered under the lock: a request queued after it sees `idle` and wakes it.
            shared.driver.register(cx.waker());
            queue.idle = true;
            Poll::Pending
        })
        .await;
        match step {
            Step::Stop => break,
            Step::Answered(result, (mut pipeline, mut answers)) => {
                lock(&shared.queue).unanswered -= answers.len();
                hand_out(result, &mut answers);
                pipeline.clear();
                spare = (pipeline, answers);
            }
            Step::Send => {
                tokio::task::yield_now().await;
                let (pipeline, answers) = {
                    let mut queue = lock(&shared.queue);
                    let pipeline =
                        std::mem::replace(&mut queue.pipeline, std::mem::take(&mut spare.0));
                    let answers =
                        std::mem::replace(&mut queue.answers, std::mem::take(&mut spare.1));
                    (pipeline, answers)
                };
                let mut connection = connection.clone();
                on_wire.push_back(async move {
                    let count = answers.len();
                    let result = connection.send_packed_commands(&pipeline, 0, count).await;
                    (result, (pipeline, answers))
                });
            }
        }
    }
    drop(stopped);
}

/// Hands each request its answer, by position; a batch that failed as a whole (the
/// connection broke) fails each of its requests with the same error.
fn hand_out(result: RedisResult<Vec<Value>>, answers: &mut Vec<Answer>) {
    let error = match result {
        Ok(values) if values.len() == answers.len() => {
            for (answer, value) in answers.drain(..).zip(values) {
                answer.give(Ok(value));
            }
            return;
        }
        Ok(values) => RedisError::from((
            redis::ErrorKind::Parse,
            "a pipeline's answers do not match its commands",
            format!("{} answers to {} commands", values.len(), answers.len()),
        )),
        Err(error) => error,
    };
    for answer in answers.drain(..) {
        answer.give(Err(error.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue with no driver and no connection: what [`Pipe::place`] decides.
    fn queue() -> Pipe {
        Pipe::Queue(Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            driver: AtomicWaker::new(),
            straight: StraightWake::default(),
        }))
    }

    fn shared(pipe: &Pipe) -> &Shared {
        match pipe {
            Pipe::Queue(shared) => shared,
            Pipe::Socket(_) => unreachable!("a queue"),
        }
    }

    fn place(pipe: &Pipe, inbox: &Arc<Inbox>, number: u64) -> Result<Placed, redis::Cmd> {
        pipe.push(redis::cmd("PING"), || Arc::clone(inbox), number, true)
    }

    /// A fresh queue, an inbox, and the claim of a first command, which goes straight.
    fn first_alone() -> (Pipe, Arc<Inbox>, Straight) {
        let pipe = queue();
        let inbox = Arc::new(Inbox::with_room(4));
        let Ok(Placed::Alone(_, claim)) = place(&pipe, &inbox, 0) else {
            panic!("nothing is out: the first command goes straight");
        };
        (pipe, inbox, claim)
    }

    #[test]
    fn a_command_alone_goes_straight_and_those_placed_while_it_is_out_queue_behind_it() {
        let (pipe, inbox, claim) = first_alone();
        assert!(matches!(place(&pipe, &inbox, 1), Ok(Placed::Queued)));
        // The straight one answered: the queued one is still out, so the next joins it.
        drop(claim);
        assert!(matches!(place(&pipe, &inbox, 2), Ok(Placed::Queued)));
        assert_eq!(lock(&shared(&pipe).queue).answers.len(), 2);
        // Both queued ones answered (as the driver counts them): alone again.
        lock(&shared(&pipe).queue).unanswered -= 2;
        assert!(matches!(place(&pipe, &inbox, 3), Ok(Placed::Alone(..))));
        // The driver stopped: refused, whatever is out.
        lock(&shared(&pipe).queue).closed = true;
        assert!(place(&pipe, &inbox, 4).is_err());
    }

    /// Counts its wake-ups: an operation's task.
    #[derive(Default)]
    struct Task(std::sync::atomic::AtomicUsize);

    impl Wake for Task {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_straight_call_is_polled_only_when_woken_and_its_wake_up_wakes_the_task() {
        let (pipe, _inbox, claim) = first_alone();
        // A call that never answers, counting its polls and keeping its last waker.
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen: Arc<Mutex<Option<Waker>>> = Arc::default();
        let (counted, kept) = (Arc::clone(&polls), Arc::clone(&seen));
        let call = Box::pin(std::future::poll_fn(move |cx| {
            counted.fetch_add(1, Ordering::SeqCst);
            *lock(&kept) = Some(cx.waker().clone());
            Poll::<RedisResult<Value>>::Pending
        }));
        let mut straight = StraightCall::new(claim, call);
        let task = Arc::new(Task::default());
        let waker = Waker::from(Arc::clone(&task));
        let cx = Context::from_waker(&waker);
        assert!(straight.poll(&cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 1, "the first poll sends it");
        assert!(straight.poll(&cx).is_pending());
        assert_eq!(
            polls.load(Ordering::SeqCst),
            1,
            "not woken: not polled again"
        );
        let woken_by = lock(&seen).take().expect("the call kept a waker");
        woken_by.wake();
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            1,
            "its wake-up wakes the operation"
        );
        assert!(straight.poll(&cx).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 2, "woken: polled");
        drop(straight);
        assert_eq!(
            lock(&shared(&pipe).queue).unanswered,
            0,
            "the claim ends with the call"
        );
    }
}
