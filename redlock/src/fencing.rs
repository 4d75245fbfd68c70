//! The protected side of fencing: checking tokens where the data lives.
//!
//! A fencing token is only useful if the resource compares it on **every** access and
//! rejects an access whose token is older than one it has already seen. This module does
//! that for a Redis key, with Lua scripts that check and write atomically.
//!
//! An access with the **same** token as the highest seen is accepted only from the lease
//! that registered it: each access carries the lease's owner token too ([`Fence`]), and an
//! equal fencing token from another owner is reported as [`FenceError::Repeated`]. Two leases
//! never share a token while the token source keeps its promise; when it does not (quorum-
//! minted tokens after a node lost its counter), the repeat is detected instead of letting
//! both leases write.
//!
//! For a relational database, the same rule is one `UPDATE`:
//!
//! ```sql
//! -- The row carries the highest token that wrote it and the owner token of that lease.
//! -- "0 rows updated" means rejected: a newer lease has written, or another lease holds
//! -- the same token (a repeat: read the row to tell which).
//! UPDATE stock
//!    SET quantity = $1, fence = $2, owner = $3
//!  WHERE warehouse = $4
//!    AND (fence < $2 OR (fence = $2 AND owner = $3));
//! ```
//!
//! Reads must register their token too when the critical section reads, then writes
//! (read-modify-write): otherwise an old holder's write can land between a new holder's read
//! and its write, and the new holder's update is computed from a value that no longer exists.
//! [`FencedKey::read`] does that (strict fencing); `SELECT … FOR UPDATE` plus the same
//! condition does it in SQL.
//!
//! Tokens travel as decimal numbers and are compared in Lua, exactly up to 2⁵³.

use redis::aio::ConnectionLike;
use redis::{RedisError, ToRedisArgs, Value};

use crate::client::{KeptLease, Lease, LeaseSignal};
use crate::lua::resource::{READ, WRITE};
use redlock_core::Token;

/// What every access to a fenced resource carries: the lease's fencing token, and its owner
/// token (the 128-bit value stored under the lock key, [`Lease::token`]), which tells two
/// leases apart if they were ever given the same fencing token.
///
/// ```no_run
/// # fn demo(lease: &redlock::Lease) {
/// use redlock::fencing::Fence;
///
/// let fence = Fence::of(lease).expect("a fenced lease");
/// assert_eq!(fence, Fence::new(lease.fence().unwrap(), lease.token()));
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    token: u64,
    owner: Token,
}

impl Fence {
    /// The fencing token `token` of the lease whose owner token is `owner`.
    pub fn new(token: u64, owner: Token) -> Self {
        Self { token, owner }
    }

    /// The fence of `lease`: `None` when the handle that acquired it had no fencing.
    pub fn of(lease: &Lease) -> Option<Self> {
        lease.fence().map(|token| Self::new(token, lease.token()))
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lease's owner token.
    pub fn owner(&self) -> Token {
        self.owner
    }
}

impl From<(u64, Token)> for Fence {
    fn from((token, owner): (u64, Token)) -> Self {
        Self::new(token, owner)
    }
}

/// What a fenced access can take its [`Fence`] from: a lease (async or blocking), a kept
/// lease or its [`LeaseSignal`], a `Fence`, or a `(fencing token, owner token)` pair.
///
/// A lease acquired without fencing has none: the access then fails with
/// [`FenceError::Unfenced`] before anything is sent.
pub trait AsFence {
    /// The fence, or `None` when there is no fencing token.
    fn as_fence(&self) -> Option<Fence>;
}

impl AsFence for Fence {
    fn as_fence(&self) -> Option<Fence> {
        Some(*self)
    }
}

impl AsFence for (u64, Token) {
    fn as_fence(&self) -> Option<Fence> {
        Some(Fence::from(*self))
    }
}

impl AsFence for Lease {
    fn as_fence(&self) -> Option<Fence> {
        Fence::of(self)
    }
}

impl AsFence for crate::blocking::Lease {
    fn as_fence(&self) -> Option<Fence> {
        Fence::of(self.as_async())
    }
}

impl AsFence for KeptLease {
    fn as_fence(&self) -> Option<Fence> {
        self.fence().map(|token| Fence::new(token, self.token()))
    }
}

impl AsFence for LeaseSignal {
    fn as_fence(&self) -> Option<Fence> {
        self.fence().map(|token| Fence::new(token, self.token()))
    }
}

impl<T: AsFence + ?Sized> AsFence for &T {
    fn as_fence(&self) -> Option<Fence> {
        (**self).as_fence()
    }
}

/// Why a fenced access did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// Another lease has already used this fencing token on the key: the token source gave
    /// two leases the same token (for quorum-minted tokens, a lock node lost its counter).
    /// Nothing was written or read. Stop, and check the token source.
    #[error(
        "fencing token {token} was already used by another lease: the token source repeated it"
    )]
    Repeated {
        /// The repeated token.
        token: u64,
    },
    /// The connection failed, or the reply was not the script's.
    #[error(transparent)]
    Redis(#[from] RedisError),
    /// The lease carries no fencing token: it was acquired through a handle without
    /// fencing (see [`Redlock::with_fencing`](crate::Redlock::with_fencing)). Nothing was
    /// sent.
    #[error("the lease carries no fencing token: acquire it through a handle with fencing")]
    Unfenced,
}

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

/// A Redis key protected by fencing tokens: every access carries the lease's [`Fence`]; an
/// access with a token below the highest seen is rejected, and one with the same token from
/// another lease is refused as a repeat.
///
/// The highest token lives next to the data, under the data key followed by a NUL byte and
/// `fence` (or a key of your choice), and the owner token of the lease that registered it
/// under the fence key followed by a NUL byte and `owner`; neither has a TTL.
///
/// ```no_run
/// # async fn demo(lease: redlock::Lease, mut target: redis::aio::MultiplexedConnection) -> Result<(), redlock::fencing::FenceError> {
/// use redlock::fencing::{FencedKey, FencedWrite};
///
/// let stock = FencedKey::new("stock:warehouse-42");
/// // The lease's fence goes with the write (`FenceError::Unfenced` without fencing).
/// match stock.write(&mut target, &lease, "17 pallets").await? {
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
    owner_key: String,
}

impl FencedKey {
    /// Protects `key`; the highest token is kept under `key` + NUL + `fence`.
    pub fn new(key: impl Into<String>) -> Self {
        let key = key.into();
        let fence_key = format!("{key}\0fence");
        Self::with_fence_key(key, fence_key)
    }

    /// Protects `key`, keeping the highest token under `fence_key` (and its owner under
    /// `fence_key` + NUL + `owner`).
    pub fn with_fence_key(key: impl Into<String>, fence_key: impl Into<String>) -> Self {
        let fence_key = fence_key.into();
        let owner_key = format!("{fence_key}\0owner");
        Self {
            key: key.into(),
            fence_key,
            owner_key,
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

    /// The key holding the owner token of the lease that registered the highest token.
    pub fn owner_key(&self) -> &str {
        &self.owner_key
    }

    /// Writes `value` unless a newer lease has used the key; registers the fence of `fence`
    /// (the lease itself, `&lease`, or its [`Fence`]; see [`AsFence`]). The same lease may
    /// write any number of times.
    ///
    /// # Errors
    ///
    /// [`FenceError::Repeated`] when another lease has used the same token;
    /// [`FenceError::Unfenced`] when `fence` is a lease without a fencing token;
    /// [`FenceError::Redis`] for the connection's error, or a reply that is not the script's.
    pub async fn write<C: ConnectionLike>(
        &self,
        connection: &mut C,
        fence: impl AsFence,
        value: impl ToRedisArgs,
    ) -> Result<FencedWrite, FenceError> {
        let fence = fence.as_fence().ok_or(FenceError::Unfenced)?;
        let reply: Value = WRITE
            .eval(&[&self.key, &self.fence_key, &self.owner_key].map(String::as_str))
            .arg(fence.token)
            .arg(&fence.owner.to_hex()[..])
            .arg(value)
            .query_async(connection)
            .await?;
        match reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), _] => Ok(FencedWrite::Applied),
                [Value::Int(0), Value::Int(highest)] => Ok(FencedWrite::Rejected {
                    highest: highest.unsigned_abs(),
                }),
                [Value::Int(2), Value::Int(token)] => Err(FenceError::Repeated {
                    token: token.unsigned_abs(),
                }),
                _ => Err(unexpected()),
            },
            _ => Err(unexpected()),
        }
    }

    /// Reads the value unless a newer lease has used the key; registers the fence, so that an
    /// older lease's write can no longer land after this read (strict fencing).
    ///
    /// # Errors
    ///
    /// [`FenceError::Repeated`] when another lease has used the same token;
    /// [`FenceError::Unfenced`] when `fence` is a lease without a fencing token;
    /// [`FenceError::Redis`] for the connection's error, or a reply that is not the script's.
    pub async fn read<C: ConnectionLike>(
        &self,
        connection: &mut C,
        fence: impl AsFence,
    ) -> Result<FencedRead, FenceError> {
        let fence = fence.as_fence().ok_or(FenceError::Unfenced)?;
        let reply: Value = READ
            .eval(&[&self.key, &self.fence_key, &self.owner_key].map(String::as_str))
            .arg(fence.token)
            .arg(&fence.owner.to_hex()[..])
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
                [Value::Int(2), Value::Int(token)] => Err(FenceError::Repeated {
                    token: token.unsigned_abs(),
                }),
                _ => Err(unexpected()),
            },
            _ => Err(unexpected()),
        }
    }
}

fn unexpected() -> FenceError {
    FenceError::Redis(RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply from the fencing script",
    )))
}
