//! The Redlock algorithm as pure state machines: no sockets, no clock, no random generator.
//!
//! Everything Redlock decides lives here, once, as a package of its own with no I/O
//! dependency: the tokio client (`redlock::client`, in the `redlock-quorum` package, which
//! re-exports this crate as `redlock::core`), the `redlock` command and the simulator
//! (`redlock-sim`, which depends on this package alone) all drive these machines; none
//! re-implements any of it. A verdict of the simulator is therefore a verdict on the code the
//! client ships.
//!
//! # The machines
//!
//! Five types implement [`Machine`] and are driven by the same loop (below):
//!
//! | machine     | sends                               | produces                                  |
//! |-------------|-------------------------------------|-------------------------------------------|
//! | [`Acquire`] | `SET key token NX PX ttl` per node  | [`Grant`], retry windows, or a failure    |
//! | [`Extend`]  | compare-and-`PEXPIRE` per node      | a new deadline, or why not                |
//! | [`Release`] | compare-and-delete per node         | a [`ReleaseReport`] with one status/node  |
//! | [`Keeper`]  | an [`Extend`] round when one is due | [`KeeperEvent`]s: extended, failed, hold limit, lost, and last [`KeeperEvent::Release`] (the one moment the lease may be released) |
//! | [`HolderQuery`] | a read-only `GET`/`PTTL` of the key and its fence counter per node | a [`Holder`]: who holds the resource on a quorum, free, or unknown |
//!
//! The other decisions are values that send nothing; a driver feeds them events and `now`
//! and asks what to do:
//!
//! | value             | decides                                                                 |
//! |-------------------|-------------------------------------------------------------------------|
//! | [`Held`]          | a granted lease: its validity and hold limit; makes its [`Extend`] and [`Release`] machines; attaches a fence token only while valid |
//! | [`Waiting`]       | when an acquisition's next round starts: its retry timer, or earlier once the holder it lost to released |
//! | [`Eligibility`]   | which node may vote: restart quarantine ([`RestartPolicy`]), duplicates, a probe after silence |
//! | [`Supervisor`]    | when a command run under a lease (`redlock run`) gets `SIGTERM` and `SIGKILL` |
//!
//! # Call order
//!
//! Every machine implements [`Machine`]. After construction (which takes `now`), a driver
//! loops:
//!
//! 1. **drain [`Machine::poll_transmit`]** and send each [`Transmit`] to its node. Commands
//!    for one node must arrive in the order they were polled (one ordered connection per
//!    node, each command started once the previous one to that node finished);
//! 2. **take [`Machine::poll_outcome`]**; stop when it yields;
//! 3. **wait** for a reply or for [`Machine::poll_timeout`], whichever is first, then call
//!    [`Machine::handle_reply`] or [`Machine::handle_timeout`] with `now` freshly read.
//!
//! [`Acquire`] adds one step: after [`AcquireEvent::Retry`], draw a start with
//! [`RetryWindow::pick`], wait until then, call [`Acquire::retry`] with a fresh [`Token`] and
//! continue the loop. Randomness (tokens, jitter) is always an input. A driver that listens
//! to the nodes' release notifications feeds them to a [`Waiting`], which says when a round
//! may start before the picked start (the holder the lost round saw has released). Built
//! with [`Waiting::marking`], it also asks for the marks that make the release scripts
//! publish ([`Waiting::poll_transmit`], answers to [`Waiting::handle_reply`], told apart
//! from the rounds' by [`Waiting::sent`]), and removes them at [`Waiting::stop`].
//!
//! # Time
//!
//! Three clocks matter and are never confused. The **client's** monotonic clock measures the
//! round and the validity: every [`Timestamp`] given to or returned by a machine is a reading
//! of it. Each **node's** clock expires keys; the machines never see it. **True time** exists
//! only in the simulator's checker.
//!
//! # The rules, and the peer bugs they exclude
//!
//! - The quorum is `N/2 + 1` of the *configured* nodes ([`quorum`]).
//! - Validity is `ttl − elapsed − (ttl × drift_factor + 2 ms)` in saturating integer
//!   arithmetic, measured from the start of the *winning* round ([`validity`]).
//! - A round is decided as soon as the outcome is certain: won at a quorum of yes votes while
//!   validity remains; lost as soon as a quorum is impossible (an even split ends at once).
//!   Each node votes at most once per round.
//! - A lost round releases its token on every node that may hold it (answered or not; not
//!   where the `SET` was refused or never sent) before the next round, and every round
//!   writes a fresh token: a client never blocks itself.
//! - An extension needs a quorum and a validity recomputed from its own start, is refused
//!   once the lease has expired or reached its limit, never re-creates a key and never
//!   deletes one.
//! - A release is compare-and-delete, never a plain `DEL`; an expired lease releases cleanly.
//!
//! # Example: one acquisition driven by hand
//!
//! ```
//! use redlock_core::*;
//!
//! let config = LockConfig::new(3);
//! let key = LockKey::new(DEFAULT_KEY_PREFIX, "stock-sync:warehouse-42").unwrap();
//! let t0 = Timestamp::ZERO;
//! let mut acquire = Acquire::new(&config, key, Token::from_bytes([7; 16]), t0);
//!
//! let mut sent = Vec::new();
//! while let Some(transmit) = acquire.poll_transmit() {
//!     sent.push(transmit); // a real driver sends it to `transmit.node`
//! }
//! // Node 0 and node 2 answer OK after 2 ms; node 1 is still silent.
//! let t1 = t0.saturating_add(std::time::Duration::from_millis(2));
//! acquire.handle_reply(sent[0].request, Ok(Reply::Acquired), t1);
//! acquire.handle_reply(sent[2].request, Ok(Reply::Acquired), t1);
//!
//! match acquire.poll_outcome() {
//!     Some(AcquireEvent::Acquired(grant)) => {
//!         // 10 s TTL − 2 ms elapsed − 102 ms drift allowance.
//!         assert_eq!(grant.validity(), std::time::Duration::from_millis(9_896));
//!     }
//!     other => panic!("unexpected {other:?}"),
//! }
//! ```

#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

mod acquire;
mod acquire_event;
mod bypass;
mod command;
mod config;
mod eligibility;
mod extend;
mod generation;
mod hash_renumbered;
mod holder;
mod holder_reads;
mod keep_alive;
mod key;
mod lease;
mod machine;
mod readable;
mod release;
mod renumber;
mod responsive;
mod retry;
mod round;
mod supervise;
mod time;
mod token;
mod validity;
mod waiting;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod renumber_proptests;

pub use acquire::Acquire;
pub use acquire_event::{AcquireEvent, AcquireFailure, Grant};
pub use bypass::{Bypass, LOCAL_HAND_OFFS, MAX_YIELD, MIN_YIELD, YIELD_ROUND_TRIPS};
pub use command::{
    Command, ConnectionId, NodeFailure, NodeId, NodeStatus, Reply, RequestId, Transmit,
};
pub use config::{
    ConfigError, ConfigWarning, DEFAULT_MAX_HOLD, DEFAULT_NODE_TIMEOUT, DEFAULT_TTL, LockConfig,
    MAX_RETRY_DELAY, MAX_TTL,
};
pub use eligibility::{
    Admission, Eligibility, EligibilityEvent, NodeIdentity, QuarantineReason, RememberedServer,
    RestartPolicy, UPTIME_SLACK, info_field, quarantine_left, quarantine_wait,
};
pub use extend::{Extend, ExtendFailure, ExtendOutcome, Extension};
pub use generation::ServerGeneration;
pub use hash_renumbered::HashRenumbered;
pub use holder::{Holder, HolderQuery, KeyReading, KeyValue, Verdict};
pub use keep_alive::{KeepAlive, Keeper, KeeperEvent, LeaseLost, ReleaseWhen};
pub use key::{
    DEFAULT_KEY_PREFIX, LockKey, MAX_PREFIX_LEN, MAX_RESOURCE_LEN, MAX_RESOURCES, ResourceError,
    Target,
};
pub use lease::{FenceTooLate, Held};
pub use machine::Machine;
pub use readable::Readable;
pub use release::{Release, ReleaseReport};
pub use renumber::{NodePermutation, NotAPermutation, RenumberNodes};
pub use retry::{RetryPolicy, RetryWindow};
pub use round::{FailureReason, RoundFailure, denies_quorum};
pub use supervise::{Ending, MAX_DEFAULT_GRACE, StopCause, Supervisor, SupervisorAction};
pub use time::Timestamp;
pub use token::{CLIENT_PREFIX_LEN, TOKEN_LEN, Token};
pub use validity::{
    DRIFT_FLOOR, DriftFactor, drift_allowance, quorum, validity, validity_deadline,
};
pub use waiting::Waiting;
