//! A node's TCP connection driven by the client itself: commands are written into the socket
//! by the task that sends them, and one reader task per connection reads the replies and hands
//! each to its request, in order.
//!
//! redis-rs' multiplexed connection gives every request a message to its connection's task,
//! which writes it, and a reply channel back: a command crosses two tasks before it reaches
//! the node. Here the sender writes it at once when nothing else waits to be written (with one
//! operation at a time, every command), so a command costs the write alone; under load,
//! commands that find others unanswered are left in the connection's buffer, and the reader
//! task writes all of them together after letting the other ready tasks run once (their
//! commands join the same write, one pipeline, which Redis reads and answers in one pass).
//! Replies are matched to requests by position; each goes where its request said
//! ([`Answer`]): an operation's inbox (`direct.rs`) needs no future or channel of its own.
//!
//! redis-rs stays the RESP layer for all but the lock commands: each complete reply (`resp.rs`
//! finds where it ends) that is not one of theirs is parsed by [`redis::parse_redis_value`],
//! commands other than a direct request's call (`wire::pack_one_call`) are packed by
//! [`redis::Cmd`], and errors are [`RedisError`]s of the kinds its own connections give
//! (`wire.rs` classifies them the same way). TLS and Unix-socket nodes keep redis-rs'
//! connection (`transport.rs`).
//!
//! A connection that breaks (a read or write error, the node closing it, a reply that cannot
//! be read or that no request waits for) fails every request waiting on it with the error, and
//! refuses every later one with an I/O error: the client then opens another (`node.rs`).

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::task::AtomicWaker;
use redis::aio::ConnectionLike;
use redis::io::tcp::TcpSettings;
use redis::{ErrorKind, ProtocolVersion, RedisConnectionInfo, RedisError, RedisResult, Value};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::oneshot;

use super::lock;
use super::pipe::Answer;
use super::resp::{parse, reply_len};

/// The library's name the connection gives the node (`CLIENT SETINFO`), unless the node's
/// settings name another.
const LIB_NAME: &str = "redlock-quorum";

/// One node connection of the client's own (cheap to clone: every clone is the same
/// connection).
#[derive(Clone)]
pub(crate) struct Socket(Arc<Inner>);

struct Inner {
    /// Written by every sender; the reader task owns the read half.
    stream: OwnedWriteHalf,
    state: Mutex<State>,
    /// The reader task, woken to write what was left for it, or to stop.
    reader: AtomicWaker,
    db: i64,
}

#[derive(Default)]
struct State {
    /// Commands packed and not yet written, in order.
    out: Vec<u8>,
    /// Requests written or to be written, in order: each takes the next replies.
    waiting: VecDeque<Waiter>,
    /// The reader waits for replies with its waker registered, and nothing left to write:
    /// a command left for it must wake it.
    idle: bool,
    /// The last write could not take everything: the rest waits until the socket can take it.
    blocked: bool,
    /// Why the connection can no longer be used, once it cannot.
    broken: Option<RedisError>,
    /// No handle on the connection is left: the reader stops once every request is answered.
    closed: bool,
}

/// The node's TCP options on `stream`, as redis-rs sets them on its own connections:
/// `TCP_NODELAY`, keepalive probes and `TCP_USER_TIMEOUT`. (Not `SO_LINGER`: `TcpSettings`
/// gives no way to read it back.)
fn apply(stream: &TcpStream, tcp: &TcpSettings) -> io::Result<()> {
    stream.set_nodelay(tcp.nodelay())?;
    let socket = socket2::SockRef::from(stream);
    if let Some(keepalive) = tcp.keepalive() {
        socket.set_tcp_keepalive(keepalive)?;
    }
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    socket.set_tcp_user_timeout(tcp.user_timeout())?;
    Ok(())
}

/// A connection being opened: abandoned if dropped before it is ready.
struct Opening(Option<Socket>);

impl Opening {
    fn socket(&self) -> &Socket {
        self.0.as_ref().expect("held until ready")
    }

    fn ready(mut self) -> Socket {
        self.0.take().expect("held until ready")
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(socket) = self.0.take() {
            socket.abandon();
        }
    }
}

/// Where the replies of one request go.
pub(crate) struct Waiter {
    /// Replies to read past before the request's own (a transaction's `MULTI` and `QUEUED`s).
    skip: usize,
    /// The request's own replies, still to come.
    count: usize,
    to: To,
    /// The first server error among the skipped replies (a transaction's).
    aborted: Option<RedisError>,
}

enum To {
    /// One reply.
    One(Answer),
    /// Several, gathered into one answer.
    Many(Vec<Value>, oneshot::Sender<RedisResult<Vec<Value>>>),
}

impl Waiter {
    /// A request with one reply.
    pub(crate) fn one(answer: Answer) -> Self {
        Self {
            skip: 0,
            count: 1,
            to: To::One(answer),
            aborted: None,
        }
    }

    /// A request that skips `skip` replies and gathers the `count` after them.
    fn many(skip: usize, count: usize) -> (Self, oneshot::Receiver<RedisResult<Vec<Value>>>) {
        let (answer, answered) = oneshot::channel();
        let to = To::Many(Vec::with_capacity(count), answer);
        let waiter = Self {
            skip,
            count,
            to,
            aborted: None,
        };
        (waiter, answered)
    }
}

/// A request's answer, to hand over once the connection's lock is let go (an inbox wakes
/// its operation).
enum Done {
    One(Answer, RedisResult<Value>),
    Many(
        oneshot::Sender<RedisResult<Vec<Value>>>,
        RedisResult<Vec<Value>>,
    ),
}

impl Done {
    fn give(self) {
        match self {
            Self::One(answer, result) => answer.give(result),
            // A request that gave up has dropped its receiver: nobody waits for the answer.
            Self::Many(answer, result) => {
                let _ = answer.send(result);
            }
        }
    }

    /// `waiter` failed with `error`.
    fn failed(waiter: Waiter, error: &RedisError) -> Self {
        match waiter.to {
            To::One(answer) => Self::One(answer, Err(error.clone())),
            To::Many(_, answer) => Self::Many(answer, Err(error.clone())),
        }
    }
}

/// Whether a command is written by its sender at once, or may wait for others.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Write {
    /// At once, unless something is already waiting to be written (it then goes with that).
    Now,
    /// At once only when the connection has nothing else unanswered; else with the next
    /// write of the reader task, which lets the other ready tasks add theirs first.
    Gathered,
}

impl Socket {
    /// Connects to `host:port` and prepares the connection as `settings` ask (credentials,
    /// protocol, database), all within `timeout`; its reader task runs on the current runtime.
    pub(crate) async fn connect(
        host: &str,
        port: u16,
        tcp: &TcpSettings,
        settings: &RedisConnectionInfo,
        timeout: Duration,
    ) -> RedisResult<Self> {
        let open = async {
            let stream = TcpStream::connect((host, port)).await?;
            apply(&stream, tcp)?;
            // Until it is ready, a connection that fails or is given up (its time ran out)
            // is closed at once, not left to its reader.
            let opening = Opening(Some(Self::start(stream, settings.db())));
            if let Err(error) = opening.socket().prepare(settings).await {
                // What broke the connection before it was ready (a node that is no Redis
                // server may speak first), rather than the refusal of the set-up that came
                // after it: an I/O error would only send the client to connect again.
                let broken = lock(&opening.socket().0.state).broken.clone();
                return Err(broken.unwrap_or(error));
            }
            Ok(opening.ready())
        };
        match tokio::time::timeout(timeout, open).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connecting to the node timed out",
            )
            .into()),
        }
    }

    fn start(stream: TcpStream, db: i64) -> Self {
        let (read_half, write_half) = stream.into_split();
        let inner = Arc::new(Inner {
            stream: write_half,
            state: Mutex::new(State::default()),
            reader: AtomicWaker::new(),
            db,
        });
        tokio::spawn(read(Arc::clone(&inner), read_half));
        Self(inner)
    }

    /// What redis-rs sends on a new connection before its first command, as one pipeline:
    /// `HELLO 3` for RESP3 (with the credentials), else `AUTH` if there are credentials;
    /// `SELECT` for a database other than 0; and `CLIENT SETINFO` with the library's name
    /// and version (unless the settings say not to), whose errors are ignored as the
    /// command asks (servers before 7.2 do not know it). Its answers are one round trip:
    /// a connection is ready once the node has answered on it.
    async fn prepare(&self, settings: &RedisConnectionInfo) -> RedisResult<()> {
        let mut setup = redis::pipe();
        let resp3 = settings.protocol() == ProtocolVersion::RESP3;
        if resp3 {
            let hello = setup.cmd("HELLO").arg(3);
            if let Some(password) = settings.password() {
                let username = settings.username().unwrap_or("default");
                hello.arg("AUTH").arg(username).arg(password);
            }
        } else if let Some(password) = settings.password() {
            let auth = setup.cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            auth.arg(password);
        }
        // The first command authenticates when there are credentials.
        let authenticates = settings.password().is_some();
        let checked = setup.len();
        if settings.db() != 0 {
            setup.cmd("SELECT").arg(settings.db());
        }
        let checked = checked + usize::from(settings.db() != 0);
        if !settings.skip_set_lib_name() {
            let name = settings.lib_name().unwrap_or(LIB_NAME);
            let version = settings.lib_ver().unwrap_or(env!("CARGO_PKG_VERSION"));
            setup.cmd("CLIENT").arg("SETINFO").arg("LIB-NAME").arg(name);
            setup
                .cmd("CLIENT")
                .arg("SETINFO")
                .arg("LIB-VER")
                .arg(version);
        }
        if setup.is_empty() {
            // Nothing to set: a `PING`, so that the node has answered once.
            setup.cmd("PING");
        }
        let answers = self.clone().query_pipeline(&setup).await?;
        let checked = answers.into_iter().take(checked);
        match check_setup(checked, authenticates) {
            // A server before Redis 6 knows `AUTH password` alone: asked with the user, it
            // refuses the arguments, and the user's password is tried alone, as redis-rs does.
            Err(error)
                if authenticates
                    && !resp3
                    && settings.username().is_some()
                    && refuses_arguments(&error) =>
            {
                let mut again = redis::pipe();
                again.cmd("AUTH").arg(settings.password());
                if settings.db() != 0 {
                    again.cmd("SELECT").arg(settings.db());
                }
                let answers = self.clone().query_pipeline(&again).await?;
                check_setup(answers.into_iter(), authenticates)
            }
            checked => checked,
        }
    }

    /// Sends `pipeline` and returns each of its answers.
    async fn query_pipeline(mut self, pipeline: &redis::Pipeline) -> RedisResult<Vec<Value>> {
        self.req_packed_commands(pipeline, 0, pipeline.len()).await
    }

    /// Sends `cmd`, its reply going to `answer`: written now or with the reader's next write,
    /// as `write` says. Refused (the error handed back with the answer) once the connection is
    /// broken.
    pub(crate) fn send(
        &self,
        cmd: &redis::Cmd,
        answer: Answer,
        write: Write,
    ) -> Result<(), (RedisError, Answer)> {
        self.send_packed(|out| cmd.write_packed_command(out), answer, write)
    }

    /// Sends `cmd`, written as `write` says, and returns the future of its reply (a server
    /// error as a value, as redis-rs' connections give it). The command is sent now, not at
    /// the future's first poll.
    pub(crate) fn request(
        &self,
        cmd: &redis::Cmd,
        write: Write,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'static {
        let (answer, answered) = oneshot::channel();
        let sent = self.send(cmd, Answer::Slot(answer), write);
        async move {
            sent.map_err(|(error, _)| error)?;
            answered.await.unwrap_or_else(|_| Err(stopped()))
        }
    }

    /// Sends the command `pack` writes into the connection's buffer, as [`Socket::send`].
    pub(crate) fn send_packed(
        &self,
        pack: impl FnOnce(&mut Vec<u8>),
        answer: Answer,
        write: Write,
    ) -> Result<(), (RedisError, Answer)> {
        self.submit(pack, Waiter::one(answer), write)
            .map_err(|(error, waiter)| match waiter.to {
                To::One(answer) => (error, answer),
                To::Many(..) => unreachable!("a single command's waiter"),
            })
    }

    /// Packs a request into the connection's buffer and writes it, as `write` says.
    fn submit(
        &self,
        pack: impl FnOnce(&mut Vec<u8>),
        waiter: Waiter,
        write: Write,
    ) -> Result<(), (RedisError, Waiter)> {
        let inner = &*self.0;
        let wake = {
            let mut state = lock(&inner.state);
            if let Some(error) = &state.broken {
                return Err((refused(error), waiter));
            }
            let alone = state.out.is_empty() && (write == Write::Now || state.waiting.is_empty());
            let pending = !state.out.is_empty();
            pack(&mut state.out);
            state.waiting.push_back(waiter);
            if alone {
                if let Err(error) = inner.write_out(&mut state) {
                    let failed = inner.break_off(&mut state, error);
                    drop(state);
                    failed.into_iter().for_each(Done::give);
                    return Ok(());
                }
                state.blocked && std::mem::take(&mut state.idle)
            } else {
                // Already waiting to be written: it goes with the rest.
                !pending && std::mem::take(&mut state.idle)
            }
        };
        if wake {
            inner.reader.wake();
        }
        Ok(())
    }

    /// Breaks the connection off now: what waits on it fails, and its reader stops and
    /// lets go of the socket.
    fn abandon(&self) {
        let error = io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the connection was given up",
        );
        self.0.fail(error);
        self.0.reader.wake();
    }

    /// Marks the connection closed: its reader stops once every request is answered.
    pub(crate) fn close(&self) {
        lock(&self.0.state).closed = true;
        self.0.reader.wake();
    }
}

impl Inner {
    /// Writes what the buffer holds, as far as the socket takes it now.
    fn write_out(&self, state: &mut State) -> io::Result<()> {
        while !state.out.is_empty() {
            match self.stream.as_ref().try_write(&state.out) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    state.out.drain(..written);
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                    state.blocked = true;
                    return Ok(());
                }
                Err(error) => return Err(error),
            }
        }
        state.blocked = false;
        Ok(())
    }

    /// What the reader must write, if anything: the rest of a blocked write once the socket
    /// can take it (else `cx` is woken when it can), or what senders left for it.
    fn write_step(&self, state: &State, cx: &mut std::task::Context<'_>) -> Option<Step> {
        if state.blocked {
            let ready = self.stream.as_ref().poll_write_ready(cx).is_ready();
            ready.then_some(Step::WriteRest)
        } else {
            (!state.out.is_empty()).then_some(Step::Write)
        }
    }

    /// Breaks the connection with `error` (see [`Inner::break_off`]) and gives the requests
    /// that were waiting on it their failure.
    fn fail(&self, error: impl Into<RedisError>) {
        let failed = self.break_off(&mut lock(&self.state), error);
        failed.into_iter().for_each(Done::give);
    }

    /// Breaks the connection with `error`: every request waiting on it fails with it (the
    /// answers returned, to be given once the lock is let go), and every later one is refused.
    fn break_off(&self, state: &mut State, error: impl Into<RedisError>) -> Vec<Done> {
        let error = state.broken.get_or_insert(error.into()).clone();
        state.out.clear();
        state
            .waiting
            .drain(..)
            .map(|waiter| Done::failed(waiter, &error))
            .collect()
    }

    /// Hands each complete reply at the start of `buf` to its request; how many bytes they
    /// took.
    fn hand_out(&self, buf: &[u8], done: &mut Vec<Done>) -> RedisResult<usize> {
        let mut at = 0;
        let mut state = lock(&self.state);
        while let Some(len) = reply_len(&buf[at..])? {
            let value = parse(&buf[at..at + len])?;
            at += len;
            // A push (RESP3) is no request's reply: nothing here subscribes to any.
            if let Value::Push { .. } = value {
                continue;
            }
            let Some(front) = state.waiting.front_mut() else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the node sent a reply that no request waits for",
                )
                .into());
            };
            if front.skip > 0 {
                front.skip -= 1;
                // A transaction's command the server refused to queue aborts it: the first
                // such error is the transaction's, as redis-rs reports it.
                if let (Value::ServerError(error), To::Many(_, _)) = (&value, &front.to)
                    && front.aborted.is_none()
                {
                    front.aborted = Some(error.clone().into());
                }
                continue;
            }
            front.count -= 1;
            if let To::Many(values, _) = &mut front.to {
                values.push(value);
                if front.count > 0 {
                    continue;
                }
                if let Some(Waiter {
                    to: To::Many(values, answer),
                    aborted,
                    ..
                }) = state.waiting.pop_front()
                {
                    done.push(Done::Many(answer, aborted.map_or(Ok(values), Err)));
                }
            } else if let Some(Waiter {
                to: To::One(answer),
                ..
            }) = state.waiting.pop_front()
            {
                done.push(Done::One(answer, Ok(value)));
            }
        }
        Ok(at)
    }
}

/// What the reader task does next.
enum Step {
    /// Bytes were read (how many; none: the node closed the connection).
    Read(usize),
    /// Commands were left to write: let the other ready tasks add theirs, then write.
    Write,
    /// The socket can take the rest of a write.
    WriteRest,
    /// Reading failed.
    Failed(io::Error),
    /// Closed, and every request answered; or broken.
    Stop,
}

/// Fails what the connection still holds if its reader ends or is dropped (a runtime shut
/// down): nothing would answer it any more.
struct Stopped(Arc<Inner>);

impl Drop for Stopped {
    fn drop(&mut self) {
        self.0.fail(stopped());
    }
}

/// The reader task: reads replies and hands them out, writes what senders left for it, and
/// ends once the connection is closed and answered, or broken.
async fn read(inner: Arc<Inner>, mut read_half: OwnedReadHalf) {
    let _stopped = Stopped(Arc::clone(&inner));
    let mut received = Received::new();
    let mut done = Vec::new();
    loop {
        let step = poll_fn(|cx| {
            {
                let state = lock(&inner.state);
                if state.broken.is_some() {
                    return Poll::Ready(Step::Stop);
                }
                if let Some(write) = inner.write_step(&state, cx) {
                    return Poll::Ready(write);
                }
            }
            // Read without the lock (senders take it to write). A read that takes less
            // than it had room for leaves the socket drained: tokio then waits for the
            // next reply without another read first.
            let mut room = ReadBuf::new(received.room());
            match Pin::new(&mut read_half).poll_read(cx, &mut room) {
                Poll::Ready(Ok(())) => return Poll::Ready(Step::Read(room.filled().len())),
                Poll::Ready(Err(error)) => return Poll::Ready(Step::Failed(error)),
                Poll::Pending => {}
            }
            let mut state = lock(&inner.state);
            if state.closed && state.waiting.is_empty() {
                return Poll::Ready(Step::Stop);
            }
            // Left, or blocked, while the lock was let go: the sender found the reader not
            // idle, so woke nobody.
            if let Some(write) = inner.write_step(&state, cx) {
                return Poll::Ready(write);
            }
            // Registered under the lock: a command left after it sees `idle` and wakes it.
            inner.reader.register(cx.waker());
            state.idle = true;
            Poll::Pending
        })
        .await;
        let result = match step {
            Step::Stop => break,
            Step::Read(0) => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the node closed the connection",
            )
            .into()),
            Step::Read(read) => received.hand_out(read, &inner, &mut done),
            Step::Failed(error) => Err(error.into()),
            Step::Write => {
                tokio::task::yield_now().await;
                inner.write_out(&mut lock(&inner.state)).map_err(Into::into)
            }
            Step::WriteRest => inner.write_out(&mut lock(&inner.state)).map_err(Into::into),
        };
        done.drain(..).for_each(Done::give);
        if let Err(error) = result {
            inner.fail(error);
        }
    }
}

/// What the reader has read and not yet handed out: `bytes[start..end]`, the start of a
/// reply whose end has not arrived. Its bytes are zeroed once, not at every read.
struct Received {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Received {
    fn new() -> Self {
        Self {
            bytes: vec![0; READ_SIZE],
            start: 0,
            end: 0,
        }
    }

    /// Room for the next read: the unread part moved to the front, and the buffer grown
    /// when a reply does not fit in it.
    fn room(&mut self) -> &mut [u8] {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.start > 0 && self.bytes.len() - self.end < READ_SIZE / 4 {
            self.bytes.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.end == self.bytes.len() {
            self.bytes.resize(self.bytes.len() * 2, 0);
        }
        &mut self.bytes[self.end..]
    }

    /// `read` more bytes have come: hands out the replies they complete.
    fn hand_out(&mut self, read: usize, inner: &Inner, done: &mut Vec<Done>) -> RedisResult<()> {
        self.end += read;
        self.start += inner.hand_out(&self.bytes[self.start..self.end], done)?;
        Ok(())
    }
}

/// How much one read takes at least, unless a reply's end is a long way off.
const READ_SIZE: usize = 16 * 1024;

/// Requests through redis-rs' interface: the connection set-up, the identification, and
/// the requests of several calls (`wire.rs`).
impl ConnectionLike for Socket {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(self.request(cmd, Write::Now))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        if count == 0 {
            // Nothing to read (an empty pipeline): nothing to send either.
            let nothing = if pipeline.is_empty() {
                Ok(Vec::new())
            } else {
                Err(RedisError::from((
                    ErrorKind::Client,
                    "a pipeline whose replies are all skipped",
                )))
            };
            return Box::pin(async move { nothing });
        }
        let (waiter, answered) = Waiter::many(offset, count);
        let pack = |out: &mut Vec<u8>| out.extend_from_slice(&pipeline.get_packed_pipeline());
        let sent = self.submit(pack, waiter, Write::Now);
        Box::pin(async move {
            sent.map_err(|(error, _)| error)?;
            answered.await.unwrap_or_else(|_| Err(stopped()))
        })
    }

    fn get_db(&self) -> i64 {
        self.0.db
    }
}

/// The set-up's answers that must not be errors; the first one's refusal is a failed
/// authentication when it `authenticates`, whatever the server's words (as redis-rs
/// reports it).
fn check_setup(answers: impl Iterator<Item = Value>, authenticates: bool) -> RedisResult<()> {
    for (at, answer) in answers.enumerate() {
        answer.extract_error().map_err(|error| {
            if at == 0 && authenticates {
                let detail = error.to_string();
                RedisError::from((
                    ErrorKind::AuthenticationFailed,
                    "authentication failed",
                    detail,
                ))
            } else {
                error
            }
        })?;
    }
    Ok(())
}

/// Whether `error` is a server's refusal of a command's arguments (`AUTH user password` on
/// a server before Redis 6).
fn refuses_arguments(error: &RedisError) -> bool {
    error.to_string().contains("wrong number of arguments")
}

/// The error of a request sent on a connection that broke with `error`: an I/O error
/// whatever `error` was (a reply that could not be read, a timeout of the kernel's), so that
/// the client opens another connection (`wire::connection_lost`); the requests that were
/// waiting when it broke got `error` itself.
fn refused(error: &RedisError) -> RedisError {
    let text = format!("the connection broke earlier: {error}");
    io::Error::new(io::ErrorKind::BrokenPipe, text).into()
}

/// The error of a request whose connection's reader stopped before its answer came.
fn stopped() -> RedisError {
    io::Error::new(io::ErrorKind::BrokenPipe, "the connection's reader stopped").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A connection to a scripted peer on a loopback port (no `HELLO` or `AUTH`), and the
    /// peer's end.
    async fn pair() -> (Socket, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (stream, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        (Socket::start(stream.unwrap(), 0), accepted.unwrap().0)
    }

    fn ping(socket: &Socket) -> oneshot::Receiver<RedisResult<Value>> {
        let (answer, answered) = oneshot::channel();
        let sent = socket.send(&redis::cmd("PING"), Answer::Slot(answer), Write::Now);
        assert!(sent.is_ok());
        answered
    }

    /// Reads from the peer's end until `count` commands (of one argument each) have come.
    async fn read_commands(peer: &mut TcpStream, count: usize) {
        let expected = b"*1\r\n$4\r\nPING\r\n".len() * count;
        let mut read = vec![0; expected];
        peer.read_exact(&mut read).await.unwrap();
    }

    #[tokio::test]
    async fn replies_split_across_reads_reach_their_requests_in_order() {
        let (socket, mut peer) = pair().await;
        let answers = [ping(&socket), ping(&socket), ping(&socket)];
        read_commands(&mut peer, 3).await;
        for byte in b"+OK\r\n:42\r\n$3\r\nabc\r\n" {
            peer.write_all(&[*byte]).await.unwrap();
            tokio::task::yield_now().await;
        }
        let mut values = Vec::new();
        for answer in answers {
            values.push(answer.await.unwrap().unwrap());
        }
        let expected = [
            Value::Okay,
            Value::Int(42),
            Value::BulkString(b"abc".to_vec()),
        ];
        assert_eq!(values, expected);
    }

    #[tokio::test]
    async fn a_pipeline_skips_and_gathers_its_replies() {
        let (mut socket, mut peer) = pair().await;
        let mut pipeline = redis::pipe();
        pipeline.cmd("PING").cmd("PING").cmd("PING");
        let answered = socket.req_packed_commands(&pipeline, 1, 2);
        let peer_side = async {
            read_commands(&mut peer, 3).await;
            peer.write_all(b"+QUEUED\r\n:1\r\n:2\r\n").await.unwrap();
        };
        let (values, ()) = tokio::join!(answered, peer_side);
        assert_eq!(values.unwrap(), vec![Value::Int(1), Value::Int(2)]);
    }

    #[tokio::test]
    async fn a_node_that_hangs_up_fails_what_waits_and_refuses_what_follows() {
        let (socket, mut peer) = pair().await;
        let answer = ping(&socket);
        read_commands(&mut peer, 1).await;
        drop(peer);
        let error = answer.await.unwrap().unwrap_err();
        assert!(error.is_connection_dropped(), "{error:?}");
        let (slot, _) = oneshot::channel();
        let refused = socket.send(&redis::cmd("PING"), Answer::Slot(slot), Write::Now);
        let Err((error, _)) = refused else {
            panic!("a broken connection takes no command");
        };
        assert!(error.is_connection_dropped(), "{error:?}");
    }

    #[tokio::test]
    async fn a_reply_that_no_request_waits_for_breaks_the_connection() {
        let (socket, mut peer) = pair().await;
        peer.write_all(b"+OK\r\n").await.unwrap();
        for _ in 0..100 {
            if lock(&socket.0.state).broken.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (slot, _) = oneshot::channel();
        let refused = socket.send(&redis::cmd("PING"), Answer::Slot(slot), Write::Now);
        assert!(
            refused.is_err(),
            "the stream can no longer be read in order"
        );
    }

    /// Reads from the peer's end until the client has closed the connection (or 5 s).
    async fn closed_by_client(peer: &mut TcpStream) -> bool {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest));
        matches!(read.await, Ok(Ok(_)))
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_nodes_tcp_settings_are_set_on_the_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let keepalive = socket2::TcpKeepalive::new().with_time(Duration::from_secs(7));
        let tcp = TcpSettings::default()
            .set_nodelay(true)
            .set_keepalive(keepalive)
            .set_user_timeout(Duration::from_millis(1500));
        apply(&stream, &tcp).unwrap();
        let socket = socket2::SockRef::from(&stream);
        assert!(stream.nodelay().unwrap());
        assert!(socket.keepalive().unwrap());
        assert_eq!(socket.tcp_keepalive_time().unwrap(), Duration::from_secs(7));
        assert_eq!(
            socket.tcp_user_timeout().unwrap(),
            Some(Duration::from_millis(1500))
        );
    }

    #[tokio::test]
    async fn a_connection_refused_at_its_authentication_is_closed_and_the_refusal_said() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let settings = RedisConnectionInfo::default().set_password("wrong");
        let tcp = TcpSettings::default();
        let connect = Socket::connect("127.0.0.1", port, &tcp, &settings, Duration::from_secs(5));
        let node = async {
            let (mut peer, _) = listener.accept().await.unwrap();
            // AUTH, then the library's name and version.
            let mut setup = vec![0; 256];
            let _ = peer.read(&mut setup).await.unwrap();
            let refusal = b"-WRONGPASS invalid username-password pair\r\n+OK\r\n+OK\r\n";
            peer.write_all(refusal).await.unwrap();
            closed_by_client(&mut peer).await
        };
        let (connected, closed) = tokio::join!(connect, node);
        let error = connected.err().expect("refused");
        assert_eq!(error.kind(), ErrorKind::AuthenticationFailed, "{error:?}");
        assert!(closed, "the refused connection is closed, not left open");
    }

    #[tokio::test]
    async fn a_server_before_redis_6_is_asked_for_the_password_alone() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let settings = RedisConnectionInfo::default()
            .set_username("default")
            .set_password("secret");
        let tcp = TcpSettings::default();
        let timeout = Duration::from_secs(5);
        let connect = Socket::connect("127.0.0.1", port, &tcp, &settings, timeout);
        let node = async {
            let (mut peer, _) = listener.accept().await.unwrap();
            let mut read = vec![0; 512];
            // AUTH with the user, and the library's name and version: refused as Redis 5.
            let _ = peer.read(&mut read).await.unwrap();
            let refusals = b"-ERR wrong number of arguments for 'auth' command\r\n\
                -NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n";
            peer.write_all(refusals).await.unwrap();
            let n = peer.read(&mut read).await.unwrap();
            peer.write_all(b"+OK\r\n").await.unwrap();
            read.truncate(n);
            read
        };
        let (connected, second) = tokio::join!(connect, node);
        assert!(connected.is_ok(), "{:?}", connected.err());
        assert_eq!(second, b"*2\r\n$4\r\nAUTH\r\n$6\r\nsecret\r\n");
    }

    #[tokio::test]
    async fn a_connection_whose_opening_times_out_is_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tcp, settings) = (TcpSettings::default(), RedisConnectionInfo::default());
        let timeout = Duration::from_millis(200);
        let connect = Socket::connect("127.0.0.1", port, &tcp, &settings, timeout);
        let node = async {
            // Accepts, and never answers.
            let (mut peer, _) = listener.accept().await.unwrap();
            closed_by_client(&mut peer).await
        };
        let (connected, closed) = tokio::join!(connect, node);
        assert!(connected.err().expect("timed out").is_timeout());
        assert!(closed, "the connection given up is closed, not left open");
    }

    #[tokio::test]
    async fn a_connection_broken_by_an_unreadable_reply_refuses_later_requests_with_an_io_error() {
        let (socket, mut peer) = pair().await;
        let answer = ping(&socket);
        read_commands(&mut peer, 1).await;
        peer.write_all(b"?what\r\n").await.unwrap();
        let error = answer.await.unwrap().unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Parse, "{error:?}");
        let (slot, _) = oneshot::channel();
        let Err((error, _)) = socket.send(&redis::cmd("PING"), Answer::Slot(slot), Write::Now)
        else {
            panic!("a broken connection takes no command");
        };
        // An I/O error: the client opens another connection.
        assert!(error.is_io_error(), "{error:?}");
    }

    #[tokio::test]
    async fn a_transaction_with_a_refused_command_fails_with_the_refusal() {
        let (mut socket, mut peer) = pair().await;
        let mut transaction = redis::pipe();
        transaction.atomic().cmd("PING");
        let answered = transaction.query_async::<Value>(&mut socket);
        let node = async {
            // MULTI, PING, EXEC.
            let mut commands = vec![0; 256];
            let _ = peer.read(&mut commands).await.unwrap();
            let replies = b"+OK\r\n-NOPERM no\r\n-EXECABORT discarded\r\n";
            peer.write_all(replies).await.unwrap();
        };
        let (answer, ()) = tokio::join!(answered, node);
        let error = answer.unwrap_err();
        assert_eq!(error.code(), Some("NOPERM"), "{error:?}");
    }

    #[tokio::test]
    async fn an_empty_pipeline_sends_nothing_and_reads_nothing() {
        let (mut socket, mut peer) = pair().await;
        let empty: Vec<Value> = redis::pipe().query_async(&mut socket).await.unwrap();
        assert!(empty.is_empty());
        // The next request still gets its own reply.
        let answer = ping(&socket);
        read_commands(&mut peer, 1).await;
        peer.write_all(b"+PONG\r\n").await.unwrap();
        assert_eq!(
            answer.await.unwrap().unwrap(),
            Value::SimpleString("PONG".into())
        );
    }

    #[tokio::test]
    async fn a_closed_connection_answers_what_waits_then_its_reader_ends() {
        let (socket, mut peer) = pair().await;
        let answer = ping(&socket);
        socket.close();
        read_commands(&mut peer, 1).await;
        peer.write_all(b"+PONG\r\n").await.unwrap();
        let pong = answer.await.unwrap().unwrap();
        assert_eq!(pong, Value::SimpleString("PONG".into()));
        // The reader ends, and with it its hold on the socket: the peer reads the end.
        drop(socket);
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), peer.read_to_end(&mut rest));
        assert_eq!(read.await.unwrap().unwrap(), 0);
    }
}
