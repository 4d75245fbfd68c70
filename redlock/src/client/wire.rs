//! The wire: each core [`Command`] as one Redis call, each answer as a core [`Reply`], and
//! each redis-rs error as a core [`NodeFailure`].

use std::sync::OnceLock;
use std::time::Duration;

use futures::future::BoxFuture;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use super::pipe::Pipe;
use super::resp;
use super::transport::Transport;
use crate::lua::LuaScript;
use crate::lua::lock as scripts;
use redlock_core::{Command, KeyReading, KeyValue, LockKey, NodeFailure, Reply, Token};

/// Sends `command` on `connection` and reads the node's answer. A script goes by its hash
/// when `by_hash` (the connection has loaded the lock scripts), whole otherwise. With a
/// `pipe`, a command that is one Redis call goes with the connection's next batch
/// ([`Pipe`]); the requests of several calls go straight to the connection, in one message.
pub(crate) async fn run(
    command: &Command,
    connection: &mut Transport,
    pipe: Option<&Pipe>,
    by_hash: bool,
) -> Result<Reply, NodeFailure> {
    let link = &mut Link { connection, pipe };
    match command {
        Command::SetIfAbsent { key, token, ttl } => {
            LockAnswer::WithHolder.read(link.query(set_if_absent(key, token, *ttl)).await)
        }
        Command::SetIfAbsentReportHolder { key, token, ttl } => {
            set_then_report_holder(key, token, *ttl, link.connection).await
        }
        Command::SetIfAbsentNoGet { key, token, ttl } => {
            LockAnswer::Unread.read(link.query(set_if_absent_no_get(key, token, *ttl)).await)
        }
        Command::SetIfAbsentThenReadHolder { key, token, ttl } => {
            set_then_read_holder(key, token, *ttl, link.connection).await
        }
        Command::SetIfAbsentReadFence { key, token, ttl } => {
            acquire_fenced(key, token, *ttl, link, by_hash).await
        }
        Command::RaiseFence { key, token, fence } => {
            raise_fence(key, token, *fence, link, by_hash).await
        }
        Command::ReleaseIfOwner { key, token } => {
            let script = Owned::new(&scripts::RELEASE, token, None);
            let keys = [key.as_str(), &key.wait_key()];
            release_reply(script.call(link, &keys, by_hash).await?)
        }
        Command::ExtendIfOwner { key, token, ttl } => {
            let script = Owned::new(&scripts::EXTEND, token, Some(*ttl));
            let value = script.call(link, &[key.as_str()], by_hash).await?;
            owner_reply(value, Reply::Extended, "extend")
        }
        Command::SetAllIfAbsent { keys, token, ttl } => {
            let script = Owned::new(&scripts::ACQUIRE_ALL, token, Some(*ttl));
            match script.call_all(link, keys, by_hash).await? {
                Value::Int(1) => Ok(Reply::Acquired),
                Value::Int(0) => Ok(Reply::Taken),
                other => Err(unexpected("the multi-key SET NX", &other)),
            }
        }
        Command::ReleaseAllIfOwner { keys, token } => {
            let script = Owned::new(&scripts::RELEASE_ALL, token, None);
            // The lock keys, then their marks in the same order.
            let marks: Vec<String> = keys.iter().map(LockKey::wait_key).collect();
            let all: Vec<&str> = keys
                .iter()
                .map(LockKey::as_str)
                .chain(marks.iter().map(String::as_str))
                .collect();
            let value = script.call(link, &all, by_hash).await?;
            owner_reply(value, Reply::Released, "multi-key release")
        }
        Command::ExtendAllIfOwner { keys, token, ttl } => {
            let script = Owned::new(&scripts::EXTEND_ALL, token, Some(*ttl));
            let value = script.call_all(link, keys, by_hash).await?;
            owner_reply(value, Reply::Extended, "multi-key extend")
        }
        Command::ReadHolder { key } => read_holder(key, link.connection).await,
        Command::MarkWaiting { key, waiter, ttl } => {
            mark_waiting(key, waiter, *ttl, link, by_hash).await
        }
        Command::UnmarkWaiting { key, waiter } => unmark_waiting(key, waiter, link).await,
        // The core is its own package: a command added there needs its wire form here.
        other => Err(NodeFailure::Protocol(format!(
            "this client does not know how to send {other:?}"
        ))),
    }
}

/// How to read the answer to a lock request (`SET … NX [GET] PX`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum LockAnswer {
    /// `SET … NX GET PX`: a refusal names the holder.
    WithHolder,
    /// `SET … NX PX`, for a server before Redis 7.0: a refusal says nothing more.
    Unread,
}

impl LockAnswer {
    /// The core's reply to `answer` (server errors as errors).
    pub(crate) fn read(self, answer: RedisResult<Value>) -> Result<Reply, NodeFailure> {
        let value = answer.and_then(Value::extract_error).map_err(classify)?;
        match self {
            Self::WithHolder => Ok(match taken_by(value)? {
                None => Reply::Acquired,
                Some(Some(holder)) => Reply::TakenBy {
                    holder,
                    remaining: None,
                },
                Some(None) => Reply::Taken,
            }),
            Self::Unread => match value {
                Value::Okay => Ok(Reply::Acquired),
                Value::Nil => Ok(Reply::TakenUnread),
                other => Err(unexpected("SET NX", &other)),
            },
        }
    }
}

/// How to read the answer to a direct request (`direct.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum OneCall {
    /// A lock request.
    Lock(LockAnswer),
    /// A release, by the script's hash (`EVALSHA`: a `NOSCRIPT` answer must be followed by
    /// the script sent whole, [`wants_whole`]) or whole (`EVAL`).
    Release { by_hash: bool },
}

/// How to read the answer of `command` as one Redis call a direct request can carry: a
/// lock request, or a release (by the script's hash when `by_hash`); `None` for every other
/// command. `command` is in the form its server takes (`Command::for_server`). The call
/// itself is [`one_call_cmd`] for redis-rs' connection, or packed by [`pack_one_call`]
/// into the client's own.
pub(crate) fn one_call(command: &Command, by_hash: bool) -> Option<OneCall> {
    match command {
        Command::SetIfAbsent { .. } => Some(OneCall::Lock(LockAnswer::WithHolder)),
        Command::SetIfAbsentNoGet { .. } => Some(OneCall::Lock(LockAnswer::Unread)),
        Command::ReleaseIfOwner { .. } => Some(OneCall::Release { by_hash }),
        _ => None,
    }
}

/// The call of a command [`one_call`] takes, as a `redis::Cmd`.
///
/// # Panics
///
/// On a command [`one_call`] does not take.
pub(crate) fn one_call_cmd(command: &Command, by_hash: bool) -> redis::Cmd {
    match command {
        Command::SetIfAbsent { key, token, ttl } => set_if_absent(key, token, *ttl),
        Command::SetIfAbsentNoGet { key, token, ttl } => set_if_absent_no_get(key, token, *ttl),
        Command::ReleaseIfOwner { key, token } => {
            let script = Owned::new(&scripts::RELEASE, token, None);
            let keys = [key.as_str(), &key.wait_key()];
            script.command(&keys, by_hash)
        }
        _ => unreachable!("not one call: {command:?}"),
    }
}

/// The call of a command [`one_call`] takes, packed into `out` as [`one_call_cmd`]'s
/// command would be: without the `Cmd`, the token's text or the waiting marks' key made on
/// the heap first (unit test `a_call_is_packed_as_its_cmd_is`).
///
/// # Panics
///
/// On a command [`one_call`] does not take.
pub(crate) fn pack_one_call(command: &Command, by_hash: bool, out: &mut Vec<u8>) {
    // The arguments that never change are written as whole runs of bytes, packed once:
    // packing each argument on its own cost a tenth of an acquire + release's
    // instructions (docs/benchmarks.md).
    match command {
        Command::SetIfAbsent { key, token, ttl }
        | Command::SetIfAbsentNoGet { key, token, ttl } => {
            let hex = token.to_hex();
            let mut digits = [0u8; 20];
            let ttl = resp::decimal(Command::px(*ttl), &mut digits);
            let key = key.as_str().as_bytes();
            let (head, options): (&[u8], &[u8]) = match command {
                Command::SetIfAbsent { .. } => (
                    b"*7\r\n$3\r\nSET\r\n",
                    b"$2\r\nNX\r\n$3\r\nGET\r\n$2\r\nPX\r\n",
                ),
                _ => (b"*6\r\n$3\r\nSET\r\n", b"$2\r\nNX\r\n$2\r\nPX\r\n"),
            };
            // Each bulk string's length line and CRLF: at most 24 bytes.
            out.reserve(head.len() + options.len() + key.len() + hex.len() + ttl.len() + 72);
            out.extend_from_slice(head);
            resp::push_bulk(out, &[key]);
            resp::push_bulk(out, &[&hex]);
            out.extend_from_slice(options);
            resp::push_bulk(out, &[ttl]);
        }
        Command::ReleaseIfOwner { key, token } => {
            let hex = token.to_hex();
            let [key, wait, tag, close] = key.wait_key_parts().map(str::as_bytes);
            if !by_hash {
                let body = scripts::RELEASE.source().as_bytes();
                let args: [&[&[u8]]; 6] = [
                    &[b"EVAL"],
                    &[body],
                    &[b"2"],
                    &[key],
                    &[key, wait, tag, close],
                    &[&hex],
                ];
                resp::pack(out, &args);
                return;
            }
            static HEAD: OnceLock<Vec<u8>> = OnceLock::new();
            let head = HEAD.get_or_init(|| {
                let hash = scripts::RELEASE.hash().as_bytes();
                resp::head(6, &[b"EVALSHA", hash, b"2"])
            });
            let marks = wait.len() + tag.len() + close.len();
            out.reserve(head.len() + 2 * key.len() + marks + hex.len() + 72);
            out.extend_from_slice(head);
            resp::push_bulk(out, &[key]);
            resp::push_bulk(out, &[key, wait, tag, close]);
            resp::push_bulk(out, &[&hex]);
        }
        _ => unreachable!("not one call: {command:?}"),
    }
}

/// The core's reply to the answer of a release (`ReleaseIfOwner`) that came back on its
/// own, a server error as an error (a direct release's, `direct.rs`).
pub(crate) fn read_release(answer: RedisResult<Value>) -> Result<Reply, NodeFailure> {
    let value = answer.and_then(Value::extract_error).map_err(classify)?;
    release_reply(value)
}

/// Whether `answer`, to a script called by its hash, asks for the script sent whole: the
/// node does not have it (`NOSCRIPT`: its cache was emptied under this connection) or
/// refuses `EVALSHA` to this user (`NOPERM`). Among a batch's answers a server error is a
/// value in place; from a request of its own, an error.
pub(crate) fn wants_whole(answer: &RedisResult<Value>) -> bool {
    let kind = match answer {
        Ok(Value::ServerError(error)) => error.kind(),
        Err(error) => match error.kind() {
            ErrorKind::Server(kind) => Some(kind),
            _ => None,
        },
        Ok(_) => None,
    };
    matches!(
        kind,
        Some(ServerErrorKind::NoScript | ServerErrorKind::NoPerm)
    )
}

/// A connection, and its queue when its one-call requests go in batches.
struct Link<'a> {
    connection: &'a mut Transport,
    pipe: Option<&'a Pipe>,
}

impl Link<'_> {
    /// Sends `cmd` (one Redis call) and reads its answer, a server error as an error.
    async fn query(&mut self, cmd: redis::Cmd) -> RedisResult<Value> {
        match self.pipe {
            Some(pipe) => pipe.send(cmd, self.connection).await,
            None => cmd.query_async(self.connection).await,
        }
    }
}

/// One of the ownership scripts (release, extend, and their multi-key forms) with its
/// arguments: the owner's token, then the new expiry for those that set one.
struct Owned<'a> {
    script: &'a LuaScript,
    token: &'a Token,
    ttl: Option<Duration>,
}

impl<'a> Owned<'a> {
    fn new(script: &'a LuaScript, token: &'a Token, ttl: Option<Duration>) -> Self {
        Self { script, token, ttl }
    }

    /// The script's call on `keys`: by its hash (`EVALSHA`) when `by_hash`, whole otherwise.
    fn command(&self, keys: &[&str], by_hash: bool) -> redis::Cmd {
        let mut cmd = if by_hash {
            self.script.evalsha(keys)
        } else {
            self.script.eval(keys)
        };
        self.args(&mut cmd);
        cmd
    }

    /// Appends the script's arguments.
    fn args(&self, cmd: &mut redis::Cmd) {
        cmd.arg(&self.token.to_hex()[..]);
        if let Some(ttl) = self.ttl {
            cmd.arg(Command::px(ttl));
        }
    }

    /// Runs the script on `keys` (see [`call`]).
    async fn call(
        &self,
        link: &mut Link<'_>,
        keys: &[&str],
        by_hash: bool,
    ) -> Result<Value, NodeFailure> {
        call(link, self.script, keys, |cmd| self.args(cmd), by_hash).await
    }

    /// Runs the script on every key of a multi-key command.
    async fn call_all(
        &self,
        link: &mut Link<'_>,
        keys: &[LockKey],
        by_hash: bool,
    ) -> Result<Value, NodeFailure> {
        let keys: Vec<&str> = keys.iter().map(LockKey::as_str).collect();
        self.call(link, &keys, by_hash).await
    }
}

/// A waiter's round: `SET .. NX GET` and the key's `PTTL`, in one request, so that the
/// holder's remaining time is read right after the `SET` that found its key (and said whose
/// it is). A PTTL the user's ACL refuses costs only the remaining time, not the vote.
async fn set_then_report_holder(
    key: &LockKey,
    token: &Token,
    ttl: Duration,
    connection: &mut Transport,
) -> Result<Reply, NodeFailure> {
    let (set, pttl): (RedisResult<Value>, RedisResult<i64>) = redis::pipe()
        .ignore_errors()
        .add_command(set_if_absent(key, token, ttl))
        .cmd("PTTL")
        .arg(key.as_str())
        .query_async(connection)
        .await
        .map_err(classify)?;
    let Some(holder) = taken_by(set.map_err(classify)?)? else {
        return Ok(Reply::Acquired);
    };
    Ok(taken_reply(holder, pttl))
}

/// A waiter's mark on `key` (the mark script): the lock key's holder as the script read it,
/// [`Reply::NotHeld`] when the key was free.
async fn mark_waiting(
    key: &LockKey,
    waiter: &Token,
    ttl: Duration,
    link: &mut Link<'_>,
    by_hash: bool,
) -> Result<Reply, NodeFailure> {
    let script = Owned::new(&scripts::MARK_WAITING, waiter, Some(ttl));
    let keys = [key.as_str(), &key.wait_key()];
    let value = script.call(link, &keys, by_hash).await?;
    Ok(match taken_by(value)? {
        None => Reply::NotHeld,
        Some(Some(holder)) => Reply::TakenBy {
            holder,
            remaining: None,
        },
        Some(None) => Reply::Taken,
    })
}

/// `HDEL` of a waiter's mark: [`Reply::Released`] when it was there.
async fn unmark_waiting(
    key: &LockKey,
    waiter: &Token,
    link: &mut Link<'_>,
) -> Result<Reply, NodeFailure> {
    let mut hdel = redis::cmd("HDEL");
    hdel.arg(key.wait_key()).arg(&waiter.to_hex()[..]);
    match link.query(hdel).await.map_err(classify)? {
        Value::Int(1) => Ok(Reply::Released),
        Value::Int(0) => Ok(Reply::NotHeld),
        other => Err(unexpected("HDEL", &other)),
    }
}

/// The fenced lock request: `SET NX PX` and a read of the fence counter, in one script.
async fn acquire_fenced(
    key: &LockKey,
    token: &Token,
    ttl: Duration,
    link: &mut Link<'_>,
    by_hash: bool,
) -> Result<Reply, NodeFailure> {
    let script = Owned::new(&scripts::ACQUIRE_FENCED, token, Some(ttl));
    let keys = [key.as_str(), &key.fence_key()];
    match script.call(link, &keys, by_hash).await? {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(taken), Value::Int(counter)] if *counter >= 0 => {
                let counter = counter.unsigned_abs();
                Ok(if *taken == 1 {
                    Reply::AcquiredWithFence { counter }
                } else {
                    Reply::TakenWithFence { counter }
                })
            }
            _ => Err(unexpected("the fenced SET NX", &Value::Array(items))),
        },
        other => Err(unexpected("the fenced SET NX", &other)),
    }
}

/// Raises the fence counter to `fence` if the key still holds `token`.
async fn raise_fence(
    key: &LockKey,
    token: &Token,
    fence: u64,
    link: &mut Link<'_>,
    by_hash: bool,
) -> Result<Reply, NodeFailure> {
    let keys = [key.as_str(), &key.fence_key()];
    let args = |cmd: &mut redis::Cmd| {
        cmd.arg(&token.to_hex()[..]);
        cmd.arg(fence);
    };
    match call(link, &scripts::RAISE_FENCE, &keys, args, by_hash).await? {
        Value::Int(-1) => Ok(Reply::HeldByOther),
        Value::Int(-2) => Ok(Reply::NotHeld),
        Value::Int(counter) if counter >= 0 => Ok(Reply::FenceRaised {
            counter: counter.unsigned_abs(),
        }),
        other => Err(unexpected("the fence raise", &other)),
    }
}

/// Sends one core [`Command`] on `connection` exactly as the client sends it to a lock node
/// (`SET … NX GET PX`, or the same Lua script, sent whole with `EVAL`) and reads the answer
/// as the core's [`Reply`]. Nothing else the client does around a command happens here (no
/// identification, quarantine, timeout or retry): this is the wire alone, for holding
/// another implementation of the node side, such as the simulator's keyspace, against a
/// real server.
///
/// # Errors
///
/// The node's failure, as the client classifies it.
pub async fn send_command(
    connection: &mut redis::aio::MultiplexedConnection,
    command: &Command,
) -> Result<Reply, NodeFailure> {
    let mut connection = Transport::Multiplexed(connection.clone());
    run(command, &mut connection, None, false).await
}

/// Runs `script` on `keys` with the arguments `args` appends: by its hash when `by_hash`,
/// and whole (`EVAL`) otherwise or when the node answers that it does not have it
/// (`NOSCRIPT`: its cache was emptied under this connection) or refuses `EVALSHA` to this
/// user. The `EVAL` then goes out (or joins the connection's queue) in the same poll that read
/// the answer: nothing can cut the call between the two.
async fn call(
    link: &mut Link<'_>,
    script: &LuaScript,
    keys: &[&str],
    args: impl Fn(&mut redis::Cmd),
    by_hash: bool,
) -> Result<Value, NodeFailure> {
    if by_hash {
        let mut cmd = script.evalsha(keys);
        args(&mut cmd);
        let answer = link.query(cmd).await;
        if !wants_whole(&answer) {
            return answer.map_err(classify);
        }
    }
    let mut cmd = script.eval(keys);
    args(&mut cmd);
    link.query(cmd).await.map_err(classify)
}

/// A release that goes by hash, as a request that owns what it needs: cut by its deadline,
/// it can still finish in the background, so that a `NOSCRIPT` answering late is still
/// followed by the `EVAL` (a release is never left unsent).
pub(crate) fn release_by_hash(
    command: Command,
    mut connection: Transport,
    pipe: Pipe,
) -> BoxFuture<'static, Result<Reply, NodeFailure>> {
    Box::pin(async move { run(&command, &mut connection, Some(&pipe), true).await })
}

/// `GET key` and `PTTL key` in one `MULTI`, so that the two describe one moment (a key
/// cannot expire between its value and its TTL), then `GET` of the fence counter in the
/// same request. The counter stays out of the transaction: it lies in another hash slot
/// than an untagged lock key, and a Redis Cluster member refuses a transaction across two
/// slots (`CROSSSLOT`), which left waiters on servers before Redis 7.0 (whose lost rounds
/// read the holders this way) without a holder to wait for. Read after the key, the
/// counter is at least the fence of the lease read (it only grows). Read-only commands
/// only: the query never creates or changes a key.
async fn read_holder(key: &LockKey, connection: &mut Transport) -> Result<Reply, NodeFailure> {
    type Answers = ((Option<Vec<u8>>, i64), Option<Vec<u8>>);
    let ((value, pttl), fence): Answers = redis::pipe()
        .cmd("MULTI")
        .ignore()
        .get(key.as_str())
        .ignore()
        .pttl(key.as_str())
        .ignore()
        .cmd("EXEC")
        .get(key.fence_key())
        .query_async(connection)
        .await
        .map_err(classify)?;
    reading(value.as_deref(), pttl, fence.as_deref()).map(Reply::Read)
}

/// Reads the three answers of [`read_holder`].
fn reading(
    value: Option<&[u8]>,
    pttl: i64,
    fence: Option<&[u8]>,
) -> Result<KeyReading, NodeFailure> {
    let value = value.map(|held| Token::from_hex(held).map_or(KeyValue::Foreign, KeyValue::Token));
    // -1: no expiry; -2: no key (PTTL in the same transaction as the GET, so only when
    // `value` is `None` too).
    let expires_in = match (&value, pttl) {
        (Some(_), ms) if ms >= 0 => Some(Duration::from_millis(ms.unsigned_abs())),
        _ => None,
    };
    let fence = match fence {
        None => None,
        Some(bytes) => Some(
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| text.parse::<u64>().ok())
                .ok_or_else(|| {
                    NodeFailure::Protocol(format!(
                        "the fence counter is not a whole number ({} bytes)",
                        bytes.len()
                    ))
                })?,
        ),
    };
    Ok(KeyReading {
        value,
        expires_in,
        fence,
    })
}

/// `SET key token NX GET PX ttl`: the lock request. `GET` makes a refused `SET` answer with
/// the holder's value, in the same command (so an uncontended acquisition pays nothing for
/// it but the three bytes of the argument); Redis 7.0 is the first to take `NX` with `GET`.
fn set_if_absent(key: &LockKey, token: &Token, ttl: Duration) -> redis::Cmd {
    // Room for every argument at once: the buffer is not grown argument by argument.
    let mut cmd = redis::Cmd::with_capacity(7, key.as_str().len() + 64);
    cmd.arg("SET")
        .arg(key.as_str())
        .arg(&token.to_hex()[..])
        .arg("NX")
        .arg("GET")
        .arg("PX")
        .arg(Command::px(ttl));
    cmd
}

/// `SET key token NX PX ttl`: the lock request for a server before Redis 7.0.
fn set_if_absent_no_get(key: &LockKey, token: &Token, ttl: Duration) -> redis::Cmd {
    let mut cmd = redis::Cmd::with_capacity(6, key.as_str().len() + 64);
    cmd.arg("SET")
        .arg(key.as_str())
        .arg(&token.to_hex()[..])
        .arg("NX")
        .arg("PX")
        .arg(Command::px(ttl));
    cmd
}

/// A waiter's round on a server before Redis 7.0: `SET NX PX`, then `GET` and `PTTL` of the
/// key, in one request. As on Redis 7, a read the user's ACL refuses costs only what it
/// would have told, not the vote.
async fn set_then_read_holder(
    key: &LockKey,
    token: &Token,
    ttl: Duration,
    connection: &mut Transport,
) -> Result<Reply, NodeFailure> {
    type Answers = (
        RedisResult<Value>,
        RedisResult<Option<Vec<u8>>>,
        RedisResult<i64>,
    );
    let (set, held, pttl): Answers = redis::pipe()
        .ignore_errors()
        .add_command(set_if_absent_no_get(key, token, ttl))
        .get(key.as_str())
        .pttl(key.as_str())
        .query_async(connection)
        .await
        .map_err(classify)?;
    match set.map_err(classify)? {
        Value::Okay => return Ok(Reply::Acquired),
        Value::Nil => {}
        other => return Err(unexpected("SET NX", &other)),
    }
    let holder = held.ok().flatten().and_then(|held| Token::from_hex(&held));
    Ok(taken_reply(holder, pttl))
}

/// A waiter's refused `SET`: the holder's token if it was read (`None` when the value is
/// not a token of this protocol, or unknown) and the key's `PTTL` answer.
fn taken_reply(holder: Option<Token>, pttl: RedisResult<i64>) -> Reply {
    let remaining = match pttl {
        // -1: no expiry (not a lease of this protocol); -2: gone meanwhile.
        Ok(-1) => Some(Duration::MAX),
        Ok(ms) => Some(Duration::from_millis(ms.max(0).unsigned_abs())),
        Err(_) => None,
    };
    match (holder, remaining) {
        (Some(holder), remaining) => Reply::TakenBy { holder, remaining },
        (None, Some(remaining)) => Reply::TakenFor { remaining },
        (None, None) => Reply::Taken,
    }
}

/// Reads the answer to [`set_if_absent`]: `None` when it set the key (nil: there was no
/// value), and the holder's token when it found the key taken (`Some(None)` when the value
/// there is not a token of this protocol).
fn taken_by(value: Value) -> Result<Option<Option<Token>>, NodeFailure> {
    match value {
        Value::Nil => Ok(None),
        Value::BulkString(held) => Ok(Some(Token::from_hex(&held))),
        other => Err(unexpected("SET NX GET", &other)),
    }
}

/// Reads the 1 / 0 / -1 answer of the ownership scripts.
fn owner_reply(value: Value, done: Reply, script: &str) -> Result<Reply, NodeFailure> {
    match value {
        Value::Int(1) => Ok(done),
        Value::Int(0) => Ok(Reply::NotHeld),
        Value::Int(-1) => Ok(Reply::HeldByOther),
        other => Err(unexpected(script, &other)),
    }
}

/// The release script's answer ([`scripts::RELEASE`]): as every ownership script's, and 2
/// when the key was deleted while a waiter of another client had marked it
/// ([`Reply::ReleasedOthersWaiting`]), which bounds this client's local hand-offs. The one
/// place where it is read, for a release sent as a request future ([`run`]) and for a
/// direct one ([`read_release`]).
fn release_reply(value: Value) -> Result<Reply, NodeFailure> {
    match value {
        Value::Int(2) => Ok(Reply::ReleasedOthersWaiting),
        other => owner_reply(other, Reply::Released, "release"),
    }
}

fn unexpected(what: &str, value: &Value) -> NodeFailure {
    // Replies are shown by kind and size only: a misbehaving peer's bytes stay out of logs.
    let shape = match value {
        Value::BulkString(bytes) => format!("a {}-byte bulk string", bytes.len()),
        Value::Array(items) => format!("an array of {}", items.len()),
        other => format!("{other:?}").chars().take(64).collect(),
    };
    NodeFailure::Protocol(format!("unexpected reply to {what}: {shape}"))
}

/// `PING`: whether the connection still answers.
pub(crate) async fn ping(connection: &mut Transport) -> Result<(), NodeFailure> {
    redis::cmd("PING")
        .query_async::<()>(connection)
        .await
        .map_err(classify)
}

/// Maps a redis-rs error to the core's failure kinds through its predicates, never by
/// matching message text.
pub(crate) fn classify(error: RedisError) -> NodeFailure {
    if error.is_timeout() {
        NodeFailure::TimedOut
    } else if error.is_connection_refusal() {
        NodeFailure::Refused
    } else if error.is_io_error() || error.is_connection_dropped() {
        NodeFailure::Io(one_line(&error.to_string()))
    } else if is_denial(&error) {
        NodeFailure::Denied(one_line(&error.to_string()))
    } else {
        match error.kind() {
            ErrorKind::Server(_) | ErrorKind::Extension => {
                NodeFailure::Server(one_line(&error.to_string()))
            }
            _ => NodeFailure::Protocol(one_line(&error.to_string())),
        }
    }
}

/// Whether the node refused this client itself (credentials or permissions), by the error's
/// kind or code.
fn is_denial(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm)
    ) || matches!(error.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

/// Whether the failure means the connection itself is gone, so the next command needs a new
/// one (and a new identification).
pub(crate) fn connection_lost(error: &NodeFailure) -> bool {
    matches!(error, NodeFailure::Io(_) | NodeFailure::Refused)
}

/// The longest error detail kept from a node, in characters.
const MAX_DETAIL_CHARS: usize = 240;

/// An error detail fit for a one-line message: redis-rs parse errors span several lines,
/// and whatever a server (or something that only pretends to be one) puts in an error line
/// is its own choice of length and characters. Control characters become spaces, runs of
/// whitespace one space, and the text is cut at [`MAX_DETAIL_CHARS`].
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len().min(MAX_DETAIL_CHARS + 3));
    let mut chars = 0;
    for c in text.chars() {
        let c = if c.is_control() || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' && (line.is_empty() || line.ends_with(' ')) {
            continue;
        }
        if chars == MAX_DETAIL_CHARS {
            line.push('…');
            return line;
        }
        line.push(c);
        chars += 1;
    }
    line.truncate(line.trim_end().len());
    line
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_DETAIL_CHARS, one_call_cmd, one_line, pack_one_call, reading};
    use proptest::prelude::*;
    use redlock_core::{Command, KeyReading, KeyValue, LockKey, NodeFailure, Token};

    proptest! {
        /// Each call a direct request carries is packed into the client's own connection as
        /// redis-rs packs its `Cmd`: the same bytes reach the node either way.
        #[test]
        fn a_call_is_packed_as_its_cmd_is(
            resource in "[a-zA-Z0-9:{}é_ -]{1,40}",
            token in any::<[u8; 16]>(),
            ttl_ms in 1u64..10_000_000_000,
            by_hash in any::<bool>(),
        ) {
            let key = LockKey::new("redlock:", &resource).unwrap();
            let token = Token::from_bytes(token);
            let ttl = Duration::from_millis(ttl_ms);
            let commands = [
                Command::SetIfAbsent { key: key.clone(), token, ttl },
                Command::SetIfAbsentNoGet { key: key.clone(), token, ttl },
                Command::ReleaseIfOwner { key, token },
            ];
            for command in &commands {
                let mut packed = Vec::new();
                pack_one_call(command, by_hash, &mut packed);
                prop_assert_eq!(
                    &packed,
                    &one_call_cmd(command, by_hash).get_packed_command(),
                    "{:?}",
                    command
                );
            }
        }
    }

    #[test]
    fn holder_readings_parse_the_three_answers() {
        let token = Token::from_bytes([0xcd; 16]);
        assert_eq!(reading(None, -2, None), Ok(KeyReading::FREE));
        assert_eq!(
            reading(Some(&token.to_hex()), 1_500, Some(b"7")),
            Ok(KeyReading {
                value: Some(KeyValue::Token(token)),
                expires_in: Some(Duration::from_millis(1_500)),
                fence: Some(7),
            })
        );
        // Not a token, and without expiry.
        assert_eq!(
            reading(Some(b"someone else"), -1, None),
            Ok(KeyReading {
                value: Some(KeyValue::Foreign),
                expires_in: None,
                fence: None,
            })
        );
        // A fence counter that is not a number is reported, by size only.
        for bad in [&b"-1"[..], b"x", b"18446744073709551616", b"\xff"] {
            assert!(
                matches!(reading(None, -2, Some(bad)), Err(NodeFailure::Protocol(ref m)) if m.contains("bytes")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn details_are_one_bounded_line() {
        assert_eq!(
            one_line("Incompatible type - Parse error at 1\nUnexpected `72`\n"),
            "Incompatible type - Parse error at 1 Unexpected `72`"
        );
        assert_eq!(one_line("\x1b[31mred\r\n\tx "), "[31mred x");
        let long = one_line(&"e".repeat(100_000));
        assert_eq!(long.chars().count(), MAX_DETAIL_CHARS + 1);
        assert!(long.ends_with('…'));
        assert_eq!(one_line(""), "");
    }
}
