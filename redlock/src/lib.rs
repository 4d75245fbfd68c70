//! Redlock quorum leases on N independent Redis masters.
//!
//! This crate takes a lease on one resource across several independent Redis servers, as
//! the Redlock algorithm describes, and is explicit about what that lease guarantees.
//!
//! - [`core`] is the algorithm: pure state machines with no I/O, no clock and no random
//!   generator of their own, driven by the client below and by the `redlock-sim`
//!   deterministic simulator alike.
//! - [`client`] (feature `tokio`, on by default) drives the core over the `redis` crate:
//!   one auto-reconnecting multiplexed connection per node, every node asked in parallel.
//!
//! # Safety: what a lease does and does not guarantee
//!
//! While [`Lease::is_valid`](client::Lease::is_valid) holds, no other client of the same
//! nodes holds a lease on the same resource, **provided** that clocks count elapsed time
//! within the drift factor (1 % by default), that a node which crashes does not come back
//! without the keys it had (persistence with `appendfsync always`, or a restart delayed by
//! more than the TTL), and that no node fails over to a replica. A holder that pauses
//! (garbage collection, a stopped VM) or whose messages are delayed can still act after its
//! lease ended; only fencing tokens checked by the protected resource stop that.
//!
//! # Quick start
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! # async fn demo() -> Result<(), redlock::Error> {
//! use std::time::Duration;
//!
//! let redlock = redlock::Redlock::builder()
//!     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
//!     .ttl(Duration::from_secs(30))
//!     .build()?;
//!
//! let lease = redlock.acquire("stock-sync:warehouse-42").await?;
//! // ... the critical section; check `lease.is_valid()` before each external effect ...
//! let report = lease.release().await;
//! assert!(report.is_quorum_free());
//! # Ok(())
//! # }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod core;

#[cfg(feature = "tokio")]
pub mod client;
#[cfg(feature = "tokio")]
mod error;
#[cfg(feature = "tokio")]
pub mod fencing;
#[cfg(feature = "tokio")]
mod lua;

#[cfg(feature = "tokio")]
pub use client::{Lease, Redlock, RedlockBuilder};
#[cfg(feature = "tokio")]
pub use error::Error;

/// The README's example is compiled as a doc-test so that it cannot rot.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
