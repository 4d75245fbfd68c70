//! Per-call options of an acquisition: its TTL and how long it may wait, each falling back
//! to the handle's when unset.

use std::time::Duration;

use super::acquire::Wait;
use super::{Lease, Redlock};
use crate::error::Error;
use redlock_core::Target;

/// The options of one acquisition ([`Redlock::acquire_with`]): what differs from the
/// handle's defaults for this call only.
///
/// Unset, the TTL is the handle's ([`RedlockBuilder::ttl`](crate::RedlockBuilder::ttl),
/// [`Redlock::with_ttl`]) and the waiting follows the handle's retry policy, as
/// [`Redlock::acquire`] does. A TTL set here also governs the lease's extensions, as the
/// handle's would; everything else (per-node timeout if set explicitly, drift factor,
/// fencing, hold limit) stays the handle's.
///
/// ```
/// use std::time::Duration;
/// use redlock::client::AcquireOptions;
///
/// // Redisson's `tryLock(10, 300, SECONDS)`: wait up to 10 s for a lease of 300 s.
/// let options = AcquireOptions::new()
///     .ttl(Duration::from_secs(300))
///     .wait(Duration::from_secs(10));
/// assert_eq!(options.ttl_override(), Some(Duration::from_secs(300)));
/// assert_eq!(options.wait_budget(), Some(Duration::from_secs(10)));
///
/// // One round, no retry, the handle's TTL (rslock's `lock(resource, ttl)` with no retries).
/// let once = AcquireOptions::new().once();
/// assert!(once.is_once());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[must_use]
pub struct AcquireOptions {
    ttl: Option<Duration>,
    wait: Wait,
}

impl AcquireOptions {
    /// The handle's defaults: its TTL, its retry policy.
    pub fn new() -> Self {
        Self::default()
    }

    /// This acquisition's lease lasts `ttl` (and each of its extensions pushes the expiry
    /// `ttl` from then). Checked when the acquisition starts, as
    /// [`Redlock::with_ttl`] checks it: a refused TTL fails the call with
    /// [`Error::Config`] before any node is asked.
    ///
    /// A TTL longer than the handle's raises the client's default restart quarantine to
    /// cover it, as [`Redlock::with_ttl`] does: a node that restarts empty stays out of
    /// quorums until a lease of that length it may have forgotten has expired.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// This acquisition waits up to `wait` for the lease, whatever the retry policy's count
    /// ([`Redlock::acquire_timeout`]): rounds follow each other as long as one can start
    /// within `wait`, so the call returns within `wait` plus one round. `Duration::ZERO`
    /// makes a single round. Replaces an earlier [`once`](Self::once).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Wait::For(wait);
        self
    }

    /// This acquisition makes a single round, without retrying or standing in line behind
    /// this client's other waiters ([`Redlock::try_acquire`]). Replaces an earlier
    /// [`wait`](Self::wait).
    pub fn once(mut self) -> Self {
        self.wait = Wait::OneRound;
        self
    }

    /// The TTL set for this call, if any.
    pub fn ttl_override(&self) -> Option<Duration> {
        self.ttl
    }

    /// The wait budget set for this call, if any.
    pub fn wait_budget(&self) -> Option<Duration> {
        match self.wait {
            Wait::For(wait) => Some(wait),
            Wait::Policy | Wait::OneRound => None,
        }
    }

    /// Whether this call makes a single round.
    pub fn is_once(&self) -> bool {
        self.wait == Wait::OneRound
    }
}

impl Redlock {
    /// Acquires a lease on `resource` with this call's [`AcquireOptions`]: a TTL and a wait
    /// budget of its own, the handle's where unset. Without options it is
    /// [`acquire`](Redlock::acquire); with [`wait`](AcquireOptions::wait) it is
    /// [`acquire_timeout`](Redlock::acquire_timeout); with [`once`](AcquireOptions::once)
    /// [`try_acquire`](Redlock::try_acquire).
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// use std::time::Duration;
    /// use redlock::client::AcquireOptions;
    ///
    /// // A five-minute lease, waiting up to ten seconds for it.
    /// let options = AcquireOptions::new()
    ///     .ttl(Duration::from_secs(300))
    ///     .wait(Duration::from_secs(10));
    /// let mut lease = redlock.acquire_with("nightly-report", options).await?;
    /// // ... work; extensions push the expiry five minutes from each ...
    /// lease.extend().await?;
    /// lease.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`acquire`](Redlock::acquire), plus [`Error::Config`] (field `ttl`) for a TTL the
    /// handle's [`LockConfig::validate`](redlock_core::LockConfig::validate) refuses.
    pub async fn acquire_with(
        &self,
        resource: &str,
        options: AcquireOptions,
    ) -> Result<Lease, Error> {
        let target = Target::one(&self.shared.key_prefix, resource)?;
        self.for_call(&options)?
            .acquire_target(target, options.wait)
            .await
    }

    /// [`acquire_many`](Redlock::acquire_many) with this call's [`AcquireOptions`], as
    /// node-redlock's `acquire(resources, duration)`.
    ///
    /// ```no_run
    /// # async fn demo(redlock: redlock::Redlock) -> Result<(), redlock::Error> {
    /// use std::time::Duration;
    /// use redlock::AcquireOptions;
    ///
    /// let options = AcquireOptions::new().ttl(Duration::from_secs(5));
    /// let lease = redlock.acquire_many_with(["account:1", "account:2"], options).await?;
    /// // ... move money between the two accounts ...
    /// lease.release().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`acquire_many`](Redlock::acquire_many) and [`acquire_with`](Redlock::acquire_with).
    pub async fn acquire_many_with<'a>(
        &self,
        resources: impl IntoIterator<Item = &'a str>,
        options: AcquireOptions,
    ) -> Result<Lease, Error> {
        let target = self.many_target(resources)?;
        self.for_call(&options)?
            .acquire_target(target, options.wait)
            .await
    }

    /// The handle this call's options make: this one, or one with the call's TTL.
    fn for_call(&self, options: &AcquireOptions) -> Result<Self, Error> {
        match options.ttl {
            // `with_ttl` validates the TTL and raises the default quarantine to cover it.
            Some(ttl) if ttl != self.config.ttl() => self.with_ttl(ttl),
            _ => Ok(self.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_options_are_the_handles_defaults() {
        let options = AcquireOptions::new();
        assert_eq!(options, AcquireOptions::default());
        assert_eq!(options.ttl_override(), None);
        assert_eq!(options.wait_budget(), None);
        assert!(!options.is_once());
        assert!(matches!(options.wait, Wait::Policy));
    }

    #[test]
    fn the_last_wait_setting_wins() {
        let secs = Duration::from_secs;
        let once_then_wait = AcquireOptions::new().once().wait(secs(3));
        assert!(matches!(once_then_wait.wait, Wait::For(d) if d == secs(3)));
        assert!(!once_then_wait.is_once());
        let wait_then_once = AcquireOptions::new().wait(secs(3)).once();
        assert!(matches!(wait_then_once.wait, Wait::OneRound));
        assert_eq!(wait_then_once.wait_budget(), None);
    }

    #[test]
    fn a_refused_ttl_fails_before_any_node_is_asked() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // Port 9 (discard): nothing may be sent; the refusal comes first.
        let redlock = Redlock::builder()
            .nodes(["redis://127.0.0.1:9"])
            .build()
            .unwrap();
        let err = runtime
            .block_on(redlock.acquire_with("r", AcquireOptions::new().ttl(Duration::ZERO)))
            .unwrap_err();
        assert!(
            matches!(&err, Error::Config(e) if e.field() == "ttl"),
            "{err}"
        );
        assert_eq!(redlock.stats().rounds, 0);
    }
}
