//! Redlock quorum leases on N independent Redis masters.
//!
//! ```no_run
//! # #[cfg(feature = "tokio")]
//! use std::time::Duration;
//! # #[cfg(feature = "tokio")]
//! use redlock::Redlock;
//!
//! # #[cfg(feature = "tokio")]
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), redlock::Error> {
//!     let redlock = Redlock::builder()
//!         .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
//!         .ttl(Duration::from_secs(30))
//!         .build()?;
//!
//!     let mut lease = redlock.acquire("stock-sync:warehouse-42").await?;
//!     // ... the critical section; check `lease.is_valid()` before each external effect ...
//!     lease.extend().await?; // long work: extend before the validity runs out
//!     let report = lease.release().await; // compare-and-delete, waiting for every node
//!     println!("{report}"); // released on 3 of 3 nodes
//!     Ok(())
//! }
//! # #[cfg(not(feature = "tokio"))]
//! # fn main() {}
//! ```
//!
//! The example needs tokio with the `macros` and `rt` features (`cargo add tokio --features
//! macros,rt`). `acquire` retries (3 times by default, at most 100–200 ms apart: a waiter wakes
//! as soon as the holder releases or its keys expire); `acquire_timeout` waits up to a given
//! time; `try_acquire` makes one round; [`Redlock::acquire_with`] takes this call's TTL and
//! wait budget ([`AcquireOptions`]). [`Lease::release`] waits for every node (each bounded by
//! the per-node timeout), so a program may end right after it without leaving a key;
//! [`Lease::release_at_quorum`] returns as soon as a quorum no longer holds the key (the
//! slower nodes are reported [in flight](core::ReleaseReport::in_flight), and
//! [`Redlock::settle`] waits for them). Synchronous code uses [`blocking`], the same
//! client on a runtime of its own. Errors say what happened on each node, and [`Error::is_retryable`] tells busy
//! from broken.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `tokio` | yes | [`client`]: the async client over tokio and the `redis` crate, and [`blocking`], its blocking facade. Without it only [`core`], the core's names this API speaks in, is built, with no runtime and no Redis client (the `redlock-sim` simulator depends on `redlock-core` itself) |
//! | `metrics` | no | counters and histograms through the `metrics` facade (the Observability section of [`client`]) |
//! | `tls-rustls` | no | `rediss://` node URLs through rustls, with ring as its crypto provider and the webpki root store; a private CA or a client certificate (mutual TLS) through [`RedlockBuilder::node_client`] and `redis::Client::build_with_tls` (below) |
//! | `tls-native-tls` | no | `rediss://` node URLs through the platform's TLS library (OpenSSL on Linux, which needs its development files and `pkg-config` to build) |
//!
//! With `tls-rustls` in a program where another crate also enables rustls' `aws-lc-rs`
//! provider, rustls cannot pick one by itself: install one first, e.g.
//! `rustls::crypto::ring::default_provider().install_default()`.
//!
//! A node whose certificate comes from a private CA, with a client certificate (the
//! `redis` crate, with the same TLS feature, as a dependency of your own):
//!
//! ```no_run
//! # #[cfg(feature = "tls-rustls")]
//! # fn build() -> Result<redlock::Redlock, Box<dyn std::error::Error>> {
//! use redis::{ClientTlsConfig, TlsCertificates};
//!
//! let mut builder = redlock::Redlock::builder();
//! for url in ["rediss://10.0.0.1:6380", "rediss://10.0.0.2:6380", "rediss://10.0.0.3:6380"] {
//!     let certificates = TlsCertificates {
//!         root_cert: Some(std::fs::read("/etc/redlock/ca.crt")?),
//!         // `None` when the servers do not ask for one (`tls-auth-clients no`).
//!         client_tls: Some(ClientTlsConfig {
//!             client_cert: std::fs::read("/etc/redlock/client.crt")?,
//!             client_key: std::fs::read("/etc/redlock/client.key")?,
//!         }),
//!     };
//!     builder = builder.node_client(redis::Client::build_with_tls(url, certificates)?);
//! }
//! Ok(builder.build()?)
//! # }
//! ```
//!
//! A certificate the client does not trust fails the connection, and every error names the
//! node: `127.0.0.1:6380 I/O error: invalid peer certificate: UnknownIssuer`.
//!
//! # The crate
//!
//! This crate takes a lease on one resource across several independent Redis servers, as
//! the Redlock algorithm describes, and is explicit about what that lease guarantees.
//!
//! - The algorithm is the `redlock-core` package: pure state machines with no I/O, no clock
//!   and no random generator of their own, driven by the client below and by the
//!   `redlock-sim` deterministic simulator alike. [`core`] re-exports the part of it this
//!   crate's API speaks in (tokens, configuration, verdicts, node failures); a program that
//!   drives the machines itself depends on `redlock-core`.
//! - [`client`] (feature `tokio`, on by default) drives the core over the `redis` crate:
//!   one multiplexed connection per node, reopened when it breaks, every node asked in
//!   parallel.
//!
//! # Safety: what a lease does and does not guarantee
//!
//! While [`Lease::is_valid`](client::Lease::is_valid) holds, no other client of the same
//! nodes holds a lease on the same resource, **provided** that clocks count elapsed time
//! within the drift factor (1 % by default), that a node which crashes does not vote again
//! without the keys it had, and that no node fails over to a replica. For the second, either
//! the nodes persist every write before acknowledging it (`appendfsync always`), or a
//! restarted node stays out of quorums for at least the longest TTL of *every* client of
//! those nodes: this client applies that itself (the restart quarantine, by default its
//! longest TTL; [`RedlockBuilder::restart_quarantine`]), from each connection's `run_id` and
//! uptime. The client measures validity on a clock that keeps counting while the machine is
//! suspended (`CLOCK_BOOTTIME` on Linux), so a holder that wakes from a suspend sees its
//! lease as over. A holder that pauses (garbage collection, a stopped VM) or whose messages
//! are delayed can still act after its lease ended; only fencing tokens checked by the
//! protected resource stop that. The `redlock doctor` command (crate `redlock-cli`) checks a
//! fleet of nodes against these conditions.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![deny(rustdoc::broken_intra_doc_links)]

pub mod core;

#[cfg(feature = "tokio")]
pub mod blocking;
#[cfg(feature = "tokio")]
pub mod client;
#[cfg(feature = "tokio")]
mod error;
#[cfg(feature = "tokio")]
pub mod fencing;
#[cfg(feature = "tokio")]
mod lua;

// The names most programs need, at the root; each is also under its module.
pub use crate::core::{Holder, ReleaseReport, Token, Verdict};
#[cfg(feature = "tokio")]
pub use client::{
    AcquireOptions, FenceSource, Fencing, KeepAlive, Lease, LeaseSignal, Redlock, RedlockBuilder,
};
#[cfg(feature = "tokio")]
pub use error::Error;
#[cfg(feature = "tokio")]
pub use fencing::Fence;

/// The README's example is compiled as a doc-test so that it cannot rot.
#[cfg(all(doctest, feature = "tokio"))]
#[doc = include_str!("../README.md")]
struct ReadmeExample;
