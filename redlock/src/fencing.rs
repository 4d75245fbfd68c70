//! The protected side of fencing: checking tokens where the data lives.
//!
//! A fencing token is only useful if the resource compares it on **every** access and
//! rejects an access whose token is older than one it has already seen. This module does
//! that for a Redis key, with Lua scripts that check and write atomically; for a relational
//! database, the same rule is one `UPDATE`:
//!
//! ```sql
//! -- The row carries the highest token that wrote it. A write from an older lease matches
//! -- no row: treat "0 rows updated" as "rejected, someone newer holds the resource".
//! UPDATE stock
//!    SET quantity = $1, fence = $2
//!  WHERE warehouse = $3 AND fence <= $2;
//! ```
//!
//! Reads must register their token too when the critical section reads, then writes
//! (read-modify-write): otherwise an old holder's write can land between a new holder's read
//! and its write, and the new holder's update is computed from a value that no longer exists.
//! [`FencedKey::read`] does that (strict fencing); `SELECT … FOR UPDATE` plus the same
//! `fence <= $token` condition does it in SQL.
//!
//! Tokens travel as decimal numbers and are compared in Lua, exactly up to 2⁵³.

use redis::aio::ConnectionLike;
use redis::{RedisResult, ToRedisArgs, Value};

use crate::lua::resource::{READ, WRITE};

/// What a fenced write did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum FencedWrite {
    /// Written, and the token registered.
    Applied,
    /// Refused: a newer lease (token `highest`) has already used the key.
    Rejected {
        /// The highest token the key has seen.
        highest: u64,
    },
}

/// What a fenced read found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum FencedRead {
    /// The value (none if the key is empty); the token is registered, so an older lease can
    /// no longer write.
    Value(Option<Vec<u8>>),
    /// Refused: a newer lease (token `highest`) has already used the key.
    Rejected {
        /// The highest token the key has seen.
        highest: u64,
    },
}

/// A Redis key protected by fencing tokens: every access carries the lease's token, and an
/// access with a token below the highest seen is rejected.
///
/// The highest token lives next to the data, under the data key followed by a NUL byte and
/// `fence` (or a key of your choice), without a TTL.
///
/// ```no_run
/// # async fn demo(lease: redlock::Lease, mut target: redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use redlock::fencing::{FencedKey, FencedWrite};
///
/// let stock = FencedKey::new("stock:warehouse-42");
/// let token = lease.fence().expect("a fenced lease");
/// match stock.write(&mut target, token, "17 pallets").await? {
///     FencedWrite::Applied => {}
///     FencedWrite::Rejected { highest } => {
///         // Our lease is over: lease `highest` has used the resource since. Stop.
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedKey {
    key: String,
    fence_key: String,
}

impl FencedKey {
    /// Protects `key`; the highest token is kept under `key` + NUL + `fence`.
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        let fence_key = format!("{key}\0fence");
        Self { key, fence_key }
    }

    /// Protects `key`, keeping the highest token under `fence_key`.
    pub fn with_fence_key(key: impl Into<String>, fence_key: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            fence_key: fence_key.into(),
        }
    }

    /// The data key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key holding the highest token seen.
    pub fn fence_key(&self) -> &str {
        &self.fence_key
    }

    /// Writes `value` unless a newer lease has used the key; registers `token`.
    ///
    /// # Errors
    ///
    /// The connection's error, or a type error when the reply is not the script's.
    pub async fn write<C: ConnectionLike>(
        &self,
        connection: &mut C,
        token: u64,
        value: impl ToRedisArgs,
    ) -> RedisResult<FencedWrite> {
        let reply: Value = WRITE
            .eval(&[&self.key, &self.fence_key])
            .arg(token)
            .arg(value)
            .query_async(connection)
            .await?;
        match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), _] => Ok(FencedWrite::Applied),
                [Value::Int(0), Value::Int(highest)] => Ok(FencedWrite::Rejected {
                    highest: highest.unsigned_abs(),
                }),
                _ => Err(unexpected()),
            },
            _ => Err(unexpected()),
        }
    }

    /// Reads the value unless a newer lease has used the key; registers `token`, so that an
    /// older lease's write can no longer land after this read (strict fencing).
    ///
    /// # Errors
    ///
    /// The connection's error, or a type error when the reply is not the script's.
    pub async fn read<C: ConnectionLike>(
        &self,
        connection: &mut C,
        token: u64,
    ) -> RedisResult<FencedRead> {
        let reply: Value = READ
            .eval(&[&self.key, &self.fence_key])
            .arg(token)
            .query_async(connection)
            .await?;
        match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), Value::BulkString(bytes)] => {
                    Ok(FencedRead::Value(Some(bytes.clone())))
                }
                [Value::Int(1), Value::Nil] | [Value::Int(1)] => Ok(FencedRead::Value(None)),
                [Value::Int(0), Value::Int(highest)] => Ok(FencedRead::Rejected {
                    highest: highest.unsigned_abs(),
                }),
                _ => Err(unexpected()),
            },
            _ => Err(unexpected()),
        }
    }
}

fn unexpected() -> redis::RedisError {
    redis::RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply from the fencing script",
    ))
}
