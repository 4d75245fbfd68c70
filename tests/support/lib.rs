//! Real `redis-server` fleets on loopback, for the integration tests, benchmarks and
//! examples of `redlock-quorum`.
//!
//! A [`RedisFleet`] starts N `redis-server` processes on free `127.0.0.1` ports, each in its
//! own temporary directory, and can pause (`SIGSTOP`), resume, kill and restart any of
//! them. It only ever signals the processes it started, by pid, and kills them all when
//! dropped.
//!
//! The binary is `redis-server` from `PATH`, or the path in the `REDLOCK_REDIS_SERVER`
//! environment variable. When neither exists, [`RedisFleet::start`] fails with a message
//! saying how to install it: a test that needs Redis never skips silently.
//!
//! ```no_run
//! let fleet = redlock_tests::RedisFleet::start(3).expect("redis-server fleet");
//! println!("nodes: {:?}", fleet.urls());
//! ```
//!
//! [`proxy::FaultProxy`] puts a TCP proxy in front of a node that can delay, hold or reset
//! its traffic on command, and [`chaos`] runs clients against a fleet behind such proxies
//! while injecting random faults, checking that no two of them ever hold a lease at once.
//!
//! [`fake::FakeNode`] is a small RESP server that answers like a healthy master whose clock
//! runs at a chosen rate, for what a real server cannot be made to do.
//!
//! [`target_dir`] finds the workspace's target directory, where the benchmarks and their
//! report meet criterion's results.

pub mod chaos;
pub mod fake;
mod fleet;
pub mod proxy;
mod target_dir;

pub use fleet::{FleetError, FleetOptions, Persistence, RedisFleet, SERVER_ENV, TlsFiles};
pub use target_dir::target_dir;

// The repository's documents outside any published package, compiled as doc-tests here so
// that their examples cannot rot: this crate is never published, so it may reach outside its
// directory. (Each published crate doc-tests its own README.)
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadme;

#[cfg(doctest)]
#[doc = include_str!("../../docs/fencing.md")]
struct FencingGuide;

#[cfg(doctest)]
#[doc = include_str!("../../simulator/README.md")]
struct SimulatorReadme;
