//! A blocking facade over the async client, for synchronous code: each call blocks the
//! calling thread until the client's answer, as `redis::Connection` does beside redis-rs'
//! async connections.
//!
//! A [`Redlock`] here owns a small tokio runtime (one worker thread) on which the async
//! [`crate::Redlock`] runs. The worker keeps going between calls, so everything the async
//! client does in the background still happens while the caller's thread does its own work:
//! the slower nodes' answers after a quorum, the cleanup of failed rounds and dropped
//! leases, the release notifications that wake waiters, and the extensions of
//! [`with_lock`](Redlock::with_lock)'s lease.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock::AcquireOptions;
//!
//! fn main() -> Result<(), redlock::Error> {
//!     let redlock = redlock::Redlock::builder()
//!         .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
//!         .build_blocking()?;
//!
//!     let mut lease = redlock.acquire_with(
//!         "stock-sync:warehouse-42",
//!         AcquireOptions::new().ttl(Duration::from_secs(60)).wait(Duration::from_secs(5)),
//!     )?;
//!     // ... the critical section; check lease.is_valid() before each external effect ...
//!     lease.extend()?;
//!     println!("{}", lease.release()?); // released on 3 of 3 nodes
//!
//!     // Or with the lease kept alive while the closure runs:
//!     let rows = redlock.with_lock("nightly-report", |signal| {
//!         // ... long work, checking signal.is_valid() between steps ...
//!         42
//!     })?;
//!     Ok(())
//! }
//! ```
//!
//! # Inside an async runtime
//!
//! Blocking a runtime's thread stalls every task on it, and waiting there for this client's
//! own runtime can deadlock. Every method that would block therefore refuses, with
//! [`Error::InsideAsyncRuntime`], when called from a thread of a tokio runtime (inside
//! `block_on`, a task, or `spawn_blocking`, which tokio does not let this facade tell apart
//! from a task without risking a panic); it never panics. An async program uses the async
//! [`crate::Redlock`] (from `spawn_blocking` through `Handle::block_on`), or calls the facade
//! from a thread of its own (`std::thread::spawn`). Dropping a handle or a lease there is
//! fine: nothing waits.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};

use crate::client::{
    AcquireOptions, ConnectReport, Fencing, KeepAlive, LeaseSignal, RedlockBuilder, Stats,
    StopsWithWork,
};
use crate::core::{Holder, LeaseLost, LockConfig, ReleaseReport, RetryPolicy, Token};
use crate::error::Error;

/// How long [`Redlock::with_lock`] waits for the keeper's reason once the loss deadline has
/// passed.
const LOSS_REPORT_GRACE: Duration = Duration::from_secs(1);

/// A blocking Redlock client: the async [`crate::Redlock`] on a runtime of its own.
///
/// Cheap to clone; clones share the runtime and the connections. Build one with
/// [`RedlockBuilder::build_blocking`](crate::RedlockBuilder::build_blocking) or wrap an
/// async handle with [`Redlock::new`]. The runtime stops when the last clone and the last
/// [`Lease`] are dropped, after the background requests finish (each bounded by the
/// per-node timeout).
#[derive(Clone)]
pub struct Redlock {
    inner: crate::Redlock,
    runtime: Arc<Owner>,
}

/// The runtime, shut down when the last handle or lease lets go of it.
struct Owner {
    runtime: Option<Runtime>,
    /// What to settle before the runtime stops.
    redlock: crate::Redlock,
}

impl Owner {
    fn runtime(&self) -> &Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime is taken only in Drop")
    }

    /// Runs `future` to its end on the client's runtime, unless the calling thread runs an
    /// async runtime itself.
    fn block_on<F: Future>(&self, call: &'static str, future: F) -> Result<F::Output, Error> {
        refuse_inside_runtime(call)?;
        Ok(self.runtime().block_on(future))
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        // Let the background requests (releases of the last leases, the slower nodes'
        // answers) finish, each bounded by the per-node timeout, so that no key is left to
        // its TTL; inside an async runtime nothing may block, and they are cut off.
        if Handle::try_current().is_err() {
            runtime.block_on(self.redlock.settle());
        }
        // Release-notification subscriptions run forever: stop without waiting for them.
        runtime.shutdown_background();
    }
}

pub(crate) fn refuse_inside_runtime(call: &'static str) -> Result<(), Error> {
    match Handle::try_current() {
        Ok(_) => Err(Error::InsideAsyncRuntime { call }),
        Err(_) => Ok(()),
    }
}

// Here rather than beside `build` so that the async client does not depend on its facade.
impl RedlockBuilder {
    /// Builds a [blocking client](Redlock) for synchronous code: the
    /// client [`build`](RedlockBuilder::build) makes, on a tokio runtime of its own.
    ///
    /// ```no_run
    /// # fn demo() -> Result<(), redlock::Error> {
    /// let redlock = redlock::Redlock::builder()
    ///     .nodes(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"])
    ///     .build_blocking()?;
    /// let lease = redlock.acquire("nightly-report")?;
    /// // ... the job ...
    /// lease.release()?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`build`](RedlockBuilder::build), and
    /// [`Error::InsideAsyncRuntime`] when called from inside an async runtime.
    pub fn build_blocking(self) -> Result<Redlock, Error> {
        refuse_inside_runtime("RedlockBuilder::build_blocking")?;
        Redlock::new(self.build()?)
    }
}

impl Redlock {
    /// Wraps an async handle (with its TTL, retry policy, fencing and keep-alive policy) in a
    /// runtime of its own.
    ///
    /// The async handle's background work runs on the runtime current where it starts: on
    /// this facade's runtime for everything started through it, which stops with the last
    /// handle. Wrap a handle that async code does not use as well (a fresh one, from
    /// [`RedlockBuilder::build_blocking`](crate::RedlockBuilder::build_blocking)): its
    /// release-notification subscriptions, once started here, stop with this runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InsideAsyncRuntime`] when called from inside an async runtime;
    /// [`Error::Internal`] if the operating system refuses the runtime's thread.
    pub fn new(redlock: crate::Redlock) -> Result<Self, Error> {
        refuse_inside_runtime("Redlock::new")?;
        // One worker: the background work between calls is light, and every call's own
        // work runs on the caller's thread inside `block_on`.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("redlock-blocking")
            .enable_all()
            .build()
            .map_err(|_| Error::Internal("the blocking client's runtime could not start"))?;
        Ok(Self {
            runtime: Arc::new(Owner {
                runtime: Some(runtime),
                redlock: redlock.clone(),
            }),
            inner: redlock,
        })
    }

    /// The async handle underneath: its configuration, addresses and clock.
    pub fn as_async(&self) -> &crate::Redlock {
        &self.inner
    }

    /// The lock parameters of this handle.
    pub fn config(&self) -> &LockConfig {
        self.inner.config()
    }

    /// The counters of this client since it was built (see [`crate::Redlock::stats`]).
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// A handle sharing this runtime and these connections whose leases last `ttl` (see
    /// [`crate::Redlock::with_ttl`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the TTL is refused.
    pub fn with_ttl(&self, ttl: Duration) -> Result<Self, Error> {
        Ok(self.derived(self.inner.with_ttl(ttl)?))
    }

    /// A handle sharing this runtime and these connections with another retry policy (see
    /// [`crate::Redlock::with_retry`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the policy is refused.
    pub fn with_retry(&self, retry: RetryPolicy) -> Result<Self, Error> {
        Ok(self.derived(self.inner.with_retry(retry)?))
    }

    /// A handle sharing this runtime and these connections whose leases may be held through
    /// extensions for at most `max_hold` (see [`crate::Redlock::with_max_hold`]).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if the duration is refused (zero).
    pub fn with_max_hold(&self, max_hold: Duration) -> Result<Self, Error> {
        Ok(self.derived(self.inner.with_max_hold(max_hold)?))
    }

    /// A handle sharing this runtime and these connections whose leases carry fencing
    /// tokens (see [`crate::Redlock::with_fencing`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::with_fencing`].
    pub fn with_fencing(&self, fencing: Fencing) -> Result<Self, Error> {
        Ok(self.derived(self.inner.with_fencing(fencing)?))
    }

    /// A handle sharing this runtime and these connections whose
    /// [`with_lock`](Redlock::with_lock) and
    /// [`with_lock_signalled`](Redlock::with_lock_signalled) calls keep their leases alive
    /// under `policy` (see [`crate::Redlock::with_keep_alive`]).
    pub fn with_keep_alive(&self, policy: KeepAlive) -> Self {
        self.derived(self.inner.with_keep_alive(policy))
    }

    fn derived(&self, inner: crate::Redlock) -> Self {
        Self {
            inner,
            runtime: Arc::clone(&self.runtime),
        }
    }

    /// Connects to every node now rather than on first use (see
    /// [`crate::Redlock::connect`]).
    ///
    /// # Errors
    ///
    /// [`Error::InsideAsyncRuntime`] only: unreachable nodes are in the report.
    pub fn connect(&self) -> Result<ConnectReport, Error> {
        self.runtime
            .block_on("Redlock::connect", self.inner.connect())
    }

    /// Acquires a lease on `resource`, retrying as the retry policy allows (see
    /// [`crate::Redlock::acquire`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::acquire`], and [`Error::InsideAsyncRuntime`].
    pub fn acquire(&self, resource: &str) -> Result<Lease, Error> {
        self.lease("Redlock::acquire", self.inner.acquire(resource))
    }

    /// One round, no retry (see [`crate::Redlock::try_acquire`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::try_acquire`], and [`Error::InsideAsyncRuntime`].
    pub fn try_acquire(&self, resource: &str) -> Result<Lease, Error> {
        self.lease("Redlock::try_acquire", self.inner.try_acquire(resource))
    }

    /// Waits up to `wait` for the lease (see [`crate::Redlock::acquire_timeout`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::acquire_timeout`], and [`Error::InsideAsyncRuntime`].
    pub fn acquire_timeout(&self, resource: &str, wait: Duration) -> Result<Lease, Error> {
        self.lease(
            "Redlock::acquire_timeout",
            self.inner.acquire_timeout(resource, wait),
        )
    }

    /// Acquires with this call's TTL and wait budget (see
    /// [`crate::Redlock::acquire_with`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::acquire_with`], and [`Error::InsideAsyncRuntime`].
    pub fn acquire_with(&self, resource: &str, options: AcquireOptions) -> Result<Lease, Error> {
        self.lease(
            "Redlock::acquire_with",
            self.inner.acquire_with(resource, options),
        )
    }

    /// One lease on several resources at once (see [`crate::Redlock::acquire_many`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::acquire_many`], and [`Error::InsideAsyncRuntime`].
    pub fn acquire_many<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a str>,
    ) -> Result<Lease, Error> {
        self.lease("Redlock::acquire_many", self.inner.acquire_many(resources))
    }

    /// [`acquire_many`](Redlock::acquire_many) with this call's TTL and wait budget (see
    /// [`crate::Redlock::acquire_many_with`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::acquire_many_with`], and [`Error::InsideAsyncRuntime`].
    pub fn acquire_many_with<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a str>,
        options: AcquireOptions,
    ) -> Result<Lease, Error> {
        self.lease(
            "Redlock::acquire_many_with",
            self.inner.acquire_many_with(resources, options),
        )
    }

    fn lease(
        &self,
        call: &'static str,
        acquisition: impl Future<Output = Result<crate::Lease, Error>>,
    ) -> Result<Lease, Error> {
        let inner = self.runtime.block_on(call, acquisition)??;
        Ok(Lease {
            inner: Some(inner),
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// Runs `work` on the calling thread while holding `resource`, the lease kept alive in
    /// the background under the handle's [`KeepAlive`] policy,
    /// and releases it afterwards.
    ///
    /// A blocking closure cannot be cancelled: it runs to its end even if the lease is lost
    /// meanwhile, and should check [`LeaseSignal::is_valid`] between its steps (and pass
    /// [`LeaseSignal::fence`] with its writes). If the lease was lost before `work`
    /// returned, the call returns [`Error::LeaseLost`] rather than `work`'s output, which
    /// may rest on effects made without the lease.
    ///
    /// ```no_run
    /// # fn demo(redlock: redlock::blocking::Redlock) -> Result<(), redlock::Error> {
    /// let written = redlock.with_lock("nightly-report", |signal| {
    ///     let mut written = 0;
    ///     for _chunk in 0..10 {
    ///         if !signal.is_valid() {
    ///             break; // lost: stop before the next effect
    ///         }
    ///         written += 1; // ... one step, with signal.fence() ...
    ///     }
    ///     written
    /// })?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire), and [`Error::LeaseLost`].
    pub fn with_lock<T>(
        &self,
        resource: &str,
        work: impl FnOnce(&LeaseSignal) -> T,
    ) -> Result<T, Error> {
        let kept = self.kept("Redlock::with_lock", resource)?;
        let signal = kept.signal();
        let value = work(&signal);
        // Past its loss deadline the lease is lost, whether or not the keeper (whose timer
        // may fire a moment late) has said why yet.
        let lost = if signal.is_valid() {
            None
        } else {
            let reason = async {
                tokio::time::timeout(LOSS_REPORT_GRACE, signal.lost())
                    .await
                    .unwrap_or(LeaseLost::Expired { last_failure: None })
            };
            Some(self.runtime.block_on("Redlock::with_lock", reason)?)
        };
        self.runtime
            .block_on("Redlock::with_lock", kept.release())?;
        match lost {
            Some(reason) => Err(Error::LeaseLost {
                resource: resource.to_owned(),
                reason,
            }),
            None => Ok(value),
        }
    }

    /// Who holds `resource`, as every node answers a read-only query (see
    /// [`crate::Redlock::holder`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Redlock::holder`], and [`Error::InsideAsyncRuntime`].
    pub fn holder(&self, resource: &str) -> Result<Holder, Error> {
        self.runtime
            .block_on("Redlock::holder", self.inner.holder(resource))?
    }

    /// Like [`with_lock`](Redlock::with_lock), but returns `work`'s output even when the
    /// lease was lost while it ran: `work` watches the [`LeaseSignal`] itself (as
    /// [`crate::Redlock::with_lock_signalled`]). The lease is released once `work` returns.
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire).
    pub fn with_lock_signalled<T>(
        &self,
        resource: &str,
        work: impl FnOnce(&LeaseSignal) -> T,
    ) -> Result<T, Error> {
        let kept = self.kept("Redlock::with_lock_signalled", resource)?;
        let value = work(&kept.signal());
        self.runtime
            .block_on("Redlock::with_lock_signalled", kept.release())?;
        Ok(value)
    }

    /// Acquires `resource` and keeps the lease alive on this client's worker under the
    /// handle's keep-alive policy, until the returned guard is released or dropped.
    fn kept(&self, call: &'static str, resource: &str) -> Result<StopsWithWork, Error> {
        let mut lease = self.lease(call, self.inner.acquire(resource))?;
        let inner = lease.inner.take().expect("a lease is taken only once");
        // The keep-alive task runs on this client's worker while the work runs here.
        let _runtime = self.runtime.runtime().enter();
        // Dropped after the work (a panic unwinds through it): the work has stopped then.
        Ok(StopsWithWork::new(
            inner.keep_alive(self.inner.keep_alive_policy()),
        ))
    }

    /// Waits until nothing this client started runs in the background any more (see
    /// [`crate::Redlock::settle`]). Dropping the last handle does this too.
    ///
    /// # Errors
    ///
    /// [`Error::InsideAsyncRuntime`] only.
    pub fn settle(&self) -> Result<(), Error> {
        self.runtime
            .block_on("Redlock::settle", self.inner.settle())
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Redlock")
            .field(&self.inner)
            .finish()
    }
}

/// A lease held through the [blocking facade](self): the async [`crate::Lease`] with
/// blocking [`extend`](Lease::extend), [`release`](Lease::release) and
/// [`release_at_quorum`](Lease::release_at_quorum).
///
/// Dropped without a release, it is released in the background on the client's runtime
/// (a warning is logged), as the async lease is.
#[must_use = "a dropped lease is only released on a best-effort basis; call `release()`"]
pub struct Lease {
    /// `None` only once handed to a keep-alive or released.
    inner: Option<crate::Lease>,
    runtime: Arc<Owner>,
}

impl Lease {
    /// The async lease underneath: every accessor of [`crate::Lease`].
    pub fn as_async(&self) -> &crate::Lease {
        self.inner.as_ref().expect("a lease is taken only once")
    }

    /// The resource name (the first, in sorted order, of a multi-resource lease).
    pub fn resource(&self) -> &str {
        self.as_async().resource()
    }

    /// The Redis key that holds the lease on every node.
    pub fn key(&self) -> &str {
        self.as_async().key()
    }

    /// The owner token stored under the key.
    pub fn token(&self) -> Token {
        self.as_async().token()
    }

    /// The fencing token, on a handle made with fencing (see [`crate::Lease::fence`]).
    pub fn fence(&self) -> Option<u64> {
        self.as_async().fence()
    }

    /// The validity left now; zero once it has ended.
    pub fn remaining(&self) -> Duration {
        self.as_async().remaining()
    }

    /// Whether the validity has not ended yet.
    pub fn is_valid(&self) -> bool {
        self.as_async().is_valid()
    }

    /// When the lease stops being valid (see [`crate::Lease::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.as_async().valid_until()
    }

    /// Extends the lease by its TTL, measured from now (see [`crate::Lease::extend`]).
    ///
    /// # Errors
    ///
    /// As [`crate::Lease::extend`], and [`Error::InsideAsyncRuntime`] (the lease is then
    /// unchanged).
    pub fn extend(&mut self) -> Result<Duration, Error> {
        let runtime = Arc::clone(&self.runtime);
        let inner = self.inner.as_mut().expect("a lease is taken only once");
        runtime.block_on("Lease::extend", inner.extend())?
    }

    /// Releases the lease and waits for every node, each bounded by the per-node timeout
    /// (see [`crate::Lease::release`]).
    ///
    /// # Errors
    ///
    /// [`Error::InsideAsyncRuntime`] only; the lease is then released in the background.
    pub fn release(mut self) -> Result<ReleaseReport, Error> {
        refuse_inside_runtime("Lease::release")?;
        let inner = self.inner.take().expect("a lease is taken only once");
        self.runtime.block_on("Lease::release", inner.release())
    }

    /// Releases the lease, returning at a quorum (see [`crate::Lease::release_at_quorum`]);
    /// the client's runtime finishes the other requests, and dropping the last handle waits
    /// for them.
    ///
    /// # Errors
    ///
    /// [`Error::InsideAsyncRuntime`] only; the lease is then released in the background.
    pub fn release_at_quorum(mut self) -> Result<ReleaseReport, Error> {
        refuse_inside_runtime("Lease::release_at_quorum")?;
        let inner = self.inner.take().expect("a lease is taken only once");
        self.runtime
            .block_on("Lease::release_at_quorum", inner.release_at_quorum())
    }
}

/// The lease's owner token, so that [`Holder::is_held_by`](crate::Holder::is_held_by) takes
/// `&lease`.
impl From<&Lease> for Token {
    fn from(lease: &Lease) -> Self {
        lease.token()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            // The async lease's drop spawns its release on the current runtime: ours.
            let _runtime = self.runtime.runtime().enter();
            drop(inner);
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Some(inner) => f.debug_tuple("blocking::Lease").field(inner).finish(),
            None => f.write_str("blocking::Lease(released)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable_client() -> crate::Redlock {
        // Port 9 (discard) on loopback: nothing is asked in these tests.
        crate::Redlock::builder()
            .nodes(["redis://127.0.0.1:9"])
            .build()
            .unwrap()
    }

    #[test]
    fn every_blocking_call_refuses_inside_an_async_runtime() {
        let redlock = Redlock::new(unreachable_client()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let refused = |result: Result<Lease, Error>, call: &str| match result {
                Err(Error::InsideAsyncRuntime { call: c }) => assert_eq!(c, call),
                other => panic!("{call}: {other:?}"),
            };
            refused(redlock.acquire("r"), "Redlock::acquire");
            refused(redlock.try_acquire("r"), "Redlock::try_acquire");
            refused(
                redlock.acquire_timeout("r", Duration::from_secs(1)),
                "Redlock::acquire_timeout",
            );
            refused(
                redlock.acquire_with("r", AcquireOptions::new()),
                "Redlock::acquire_with",
            );
            refused(redlock.acquire_many(["a", "b"]), "Redlock::acquire_many");
            let err = redlock.with_lock("r", |_| ()).unwrap_err();
            assert!(matches!(err, Error::InsideAsyncRuntime { .. }), "{err}");
            let err = redlock.with_lock_signalled("r", |_| ()).unwrap_err();
            assert!(matches!(err, Error::InsideAsyncRuntime { .. }), "{err}");
            let err = redlock.holder("r").unwrap_err();
            assert!(matches!(err, Error::InsideAsyncRuntime { .. }), "{err}");
            assert!(matches!(
                redlock.settle(),
                Err(Error::InsideAsyncRuntime { .. })
            ));
            assert!(matches!(
                redlock.connect(),
                Err(Error::InsideAsyncRuntime { .. })
            ));
            // Not even from `spawn_blocking`: tokio gives no safe way to tell its threads
            // apart from a task's.
            let handle = redlock.clone();
            let err = tokio::task::spawn_blocking(move || handle.acquire("r").unwrap_err())
                .await
                .unwrap();
            assert!(matches!(err, Error::InsideAsyncRuntime { .. }), "{err}");
            let err = Redlock::new(unreachable_client()).unwrap_err();
            assert!(err.to_string().contains("inside an async runtime"), "{err}");
        });
        assert_eq!(redlock.stats().rounds, 0, "nothing was sent");
    }

    #[test]
    fn a_handle_dropped_inside_an_async_runtime_does_not_panic() {
        let redlock = Redlock::new(unreachable_client()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move { drop(redlock) });
    }
}
