//! The core's names that the client's own API speaks in: what a user of [`Redlock`] (or a
//! program that sends its own commands with [`send_command`]) needs to name.
//!
//! [`Redlock`]: crate::Redlock
//! [`send_command`]: crate::client::send_command
//!
//! Each name here is the [`redlock-core`](redlock_core) item itself (re-exported, not
//! copied) and falls under this crate's semver: it changes only with a breaking release of
//! `redlock-quorum`. The rest of the core (the state machines `Acquire`, `Extend`,
//! `Release`, `HolderQuery`, `Keeper`, `Supervisor`, `Eligibility`, `Waiting`, the
//! `Machine` trait, the wire's `Transmit` and `RequestId`, and the helper functions) is
//! what a driver of the machines uses: depend on `redlock-core` directly for it, under that
//! package's own version.
//!
//! | group | names |
//! |---|---|
//! | a lease and its owner | [`Token`], [`Timestamp`], [`Target`], [`ReleaseReport`] |
//! | configuration | [`LockConfig`], [`RetryPolicy`], [`KeepAlive`], [`DriftFactor`], [`RestartPolicy`], [`RememberedServer`], [`ConfigError`], [`ConfigWarning`] |
//! | limits and defaults of the builder | [`MAX_TTL`], [`MAX_RETRY_DELAY`], [`MAX_RESOURCE_LEN`], [`MAX_RESOURCES`], [`MAX_PREFIX_LEN`], [`DEFAULT_TTL`], [`DEFAULT_NODE_TIMEOUT`], [`DEFAULT_MAX_HOLD`], [`DEFAULT_KEY_PREFIX`] |
//! | who holds a resource | [`Holder`], [`Verdict`], [`KeyReading`], [`KeyValue`] |
//! | what went wrong, per node and per round | [`NodeId`], [`NodeStatus`], [`NodeFailure`], [`FailureReason`], [`RoundFailure`], [`ResourceError`], [`LeaseLost`] |
//! | one command on one node ([`send_command`]) | [`Command`], [`Reply`], [`LockKey`] |

pub use redlock_core::{
    Command, ConfigError, ConfigWarning, DEFAULT_KEY_PREFIX, DEFAULT_MAX_HOLD,
    DEFAULT_NODE_TIMEOUT, DEFAULT_TTL, DriftFactor, FailureReason, Holder, KeepAlive, KeyReading,
    KeyValue, LeaseLost, LockConfig, LockKey, MAX_PREFIX_LEN, MAX_RESOURCE_LEN, MAX_RESOURCES,
    MAX_RETRY_DELAY, MAX_TTL, NodeFailure, NodeId, NodeStatus, ReleaseReport, RememberedServer,
    Reply, ResourceError, RestartPolicy, RetryPolicy, RoundFailure, Target, Timestamp, Token,
    Verdict,
};
