//! Where a lease's fencing token comes from.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The future a [`FenceSource`] returns.
pub type FenceFuture<'a> = Pin<
    Box<dyn Future<Output = Result<u64, Box<dyn std::error::Error + Send + Sync>>> + Send + 'a>,
>;

/// Mints fencing tokens from an authoritative store, such as a database sequence or a
/// consensus system, instead of the Redis nodes.
///
/// Each call must return a token larger than every token it returned before for the same
/// resource, even across crashes of the store: that is what makes the protected resource's
/// check (`UPDATE … WHERE fence <= $token`) sound. The call is bounded by the lease's
/// remaining validity; a failure or a timeout releases the lease and fails the acquisition.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use redlock::client::{FenceFuture, FenceSource};
///
/// /// A sequence in PostgreSQL would do `SELECT nextval('fence_' || $1)` here.
/// #[derive(Debug, Default)]
/// struct InProcessSequence(AtomicU64);
///
/// impl FenceSource for InProcessSequence {
///     fn next_fence<'a>(&'a self, _resource: &'a str) -> FenceFuture<'a> {
///         Box::pin(async move { Ok(self.0.fetch_add(1, Ordering::SeqCst) + 1) })
///     }
/// }
/// ```
pub trait FenceSource: Send + Sync + fmt::Debug + 'static {
    /// A token for a new lease on `resource`, larger than every one returned before.
    fn next_fence<'a>(&'a self, resource: &'a str) -> FenceFuture<'a>;
}

/// Whether and how leases carry fencing tokens. See [`Redlock::with_fencing`].
///
/// [`Redlock::with_fencing`]: super::Redlock::with_fencing
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Fencing {
    /// No token (the default).
    #[default]
    None,
    /// Tokens minted on the nodes themselves, by the two-phase acquisition of
    /// [`LockConfig::with_fencing`](redlock_core::LockConfig::with_fencing): strictly
    /// increasing across leases as long as no node loses its counter (a crash without
    /// `appendfsync always`, or a failover to a lagging replica, can make tokens repeat).
    Quorum,
    /// Tokens from an authoritative source.
    Source(Arc<dyn FenceSource>),
}
