//! What a lease needs to know: how many nodes, how long, how much drift, how long to wait.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::validity::{DriftFactor, drift_allowance};
use super::{Readable, RetryPolicy, quorum};

/// The longest TTL accepted. A lease this long costs a full day of unavailability when its
/// holder dies; longer work should extend a shorter lease instead.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest retry delay or jitter accepted.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60 * 60);

/// The per-node timeout used when none is set: 50 ms, or a twentieth of the TTL when that is
/// shorter, so that a dead or paused node costs a small fraction of the validity.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);

/// The TTL used when none is set.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);

/// How long a lease may be held through extensions when no limit is set. The Redlock
/// description asks for a limit so that a holder cannot keep a resource forever.
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(60 * 60);

/// The parameters of one lock: everything the acquire, extend and release machines need.
///
/// Build it with [`LockConfig::new`] and the `with_*` setters, then [`validate`] it once.
/// The machines accept any value without panicking, but only a validated configuration
/// carries Redlock's guarantees.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::LockConfig;
///
/// let config = LockConfig::new(5).with_ttl(Duration::from_secs(30));
/// let warnings = config.validate().expect("a valid configuration");
/// assert!(warnings.is_empty());
/// assert_eq!(config.quorum(), 3);
/// assert_eq!(config.node_timeout(), Duration::from_millis(50));
/// ```
///
/// [`validate`]: LockConfig::validate
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockConfig {
    nodes: usize,
    ttl: Duration,
    drift_factor: DriftFactor,
    node_timeout: Option<Duration>,
    retry: RetryPolicy,
    max_hold: Duration,
    fencing: bool,
}

impl LockConfig {
    /// A configuration for `nodes` independent Redis masters with the defaults: a 10 s TTL,
    /// drift factor 0.01, the default per-node timeout, the default retry policy, and
    /// extensions for at most an hour after the grant.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            ttl: DEFAULT_TTL,
            drift_factor: DriftFactor::DEFAULT,
            node_timeout: None,
            retry: RetryPolicy::default(),
            max_hold: DEFAULT_MAX_HOLD,
            fencing: false,
        }
    }

    /// Sets the number of nodes.
    #[must_use]
    pub fn with_nodes(mut self, nodes: usize) -> Self {
        self.nodes = nodes;
        self
    }

    /// Sets the lease time-to-live written with `PX` on every node.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Sets the clock-drift factor.
    #[must_use]
    pub fn with_drift_factor(mut self, factor: DriftFactor) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Sets how long a round waits for a node's reply before counting it as a failure.
    #[must_use]
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// Sets the retry policy of acquisitions.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets how long one lease may be held through extensions: an extension that would
    /// start `max_hold` or later after the lease was acquired is refused, so a lease ends at
    /// most one TTL after that. This is the one bound on a lease's life; keep-alive obeys it
    /// too.
    #[must_use]
    pub fn with_max_hold(mut self, max_hold: Duration) -> Self {
        self.max_hold = max_hold;
        self
    }

    /// Mints a fencing token for every lease on the nodes themselves: the acquisition reads
    /// each node's fence counter with its `SET NX`, then raises the counter to the largest
    /// value read plus one on a quorum before it grants the lease (see [`Acquire`]).
    ///
    /// [`Acquire`]: super::Acquire
    #[must_use]
    pub fn with_fencing(mut self, fencing: bool) -> Self {
        self.fencing = fencing;
        self
    }

    /// The number of configured nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// The number of nodes that must agree.
    pub fn quorum(&self) -> usize {
        quorum(self.nodes)
    }

    /// The lease time-to-live.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The clock-drift factor.
    pub fn drift_factor(&self) -> DriftFactor {
        self.drift_factor
    }

    /// The drift allowance subtracted from every lease: `ttl × drift_factor + 2 ms`.
    pub fn drift(&self) -> Duration {
        drift_allowance(self.ttl, self.drift_factor)
    }

    /// The per-node timeout: the value set, or 50 ms capped at a twentieth of the TTL.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
            .unwrap_or_else(|| DEFAULT_NODE_TIMEOUT.min(self.ttl / 20))
    }

    /// The retry policy.
    pub fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// How long one lease may be held through extensions.
    pub fn max_hold(&self) -> Duration {
        self.max_hold
    }

    /// Whether acquisitions mint quorum fencing tokens.
    pub fn fencing(&self) -> bool {
        self.fencing
    }

    /// The longest an acquisition driven by the client can take, success or failure:
    /// `attempts × 3 × node_timeout + retries × (retry_delay + retry_jitter)`.
    ///
    /// Each round is decided within one per-node timeout, a fenced round within two (the
    /// lock phase, then the fence phase); the third per round is headroom for a loaded
    /// machine's scheduler. A failed acquisition returns at its decision: its cleanup
    /// releases finish in the background, ahead of the resource's next command on each node.
    ///
    /// ```
    /// use std::time::Duration;
    /// use redlock_core::LockConfig;
    /// // 4 attempts × 150 ms + 3 retries × 200 ms.
    /// assert_eq!(LockConfig::new(5).acquire_budget(), Duration::from_millis(1_200));
    /// ```
    pub fn acquire_budget(&self) -> Duration {
        let attempts = self.retry.attempts();
        let rounds = self
            .node_timeout()
            .saturating_mul(3)
            .saturating_mul(attempts);
        rounds.saturating_add(self.retry.max_wait())
    }

    /// Checks that the configuration can give Redlock's guarantees.
    ///
    /// Returns the warnings worth logging (configurations that are allowed but weaker than
    /// they look) or the first error, naming the field and the reason.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when there are no nodes, the TTL is zero, above [`MAX_TTL`] or not a
    /// whole number of milliseconds, the per-node timeout is zero or not below a tenth of the
    /// TTL, the TTL does not exceed the drift allowance plus the per-node timeout, a retry
    /// delay exceeds [`MAX_RETRY_DELAY`], or the longest hold is zero.
    pub fn validate(&self) -> Result<Vec<ConfigWarning>, ConfigError> {
        if self.nodes == 0 {
            return Err(ConfigError::new("nodes", "at least one node is required"));
        }
        let ttl = self.ttl;
        if ttl.is_zero() {
            return Err(ConfigError::new("ttl", "must be greater than zero"));
        }
        if ttl > MAX_TTL {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "is {}, above the maximum of {}; extend a shorter lease instead",
                    Readable(ttl),
                    Readable(MAX_TTL)
                ),
            ));
        }
        if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(ConfigError::new(
                "ttl",
                // Every digit, on purpose: the fraction of a millisecond is what is wrong.
                format!(
                    "is {ttl:?}; Redis expires keys in whole milliseconds, so it must be a whole number of milliseconds"
                ),
            ));
        }
        let node_timeout = self.node_timeout();
        if node_timeout.is_zero() {
            return Err(ConfigError::new(
                "node_timeout",
                "must be greater than zero",
            ));
        }
        if node_timeout >= ttl / 10 {
            return Err(ConfigError::new(
                "node_timeout",
                format!(
                    "is {}, not below a tenth of the ttl ({}); a slow node would eat the validity",
                    Readable(node_timeout),
                    Readable(ttl / 10)
                ),
            ));
        }
        let drift = self.drift();
        if ttl <= drift.saturating_add(node_timeout) {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "is {}, not above the drift allowance ({}) plus the per-node timeout ({}); no lease could ever be valid",
                    Readable(ttl),
                    Readable(drift),
                    Readable(node_timeout)
                ),
            ));
        }
        for (field, value) in [
            ("retry_delay", self.retry.delay),
            ("retry_jitter", self.retry.jitter),
        ] {
            if value > MAX_RETRY_DELAY {
                return Err(ConfigError::new(
                    field,
                    format!(
                        "is {}, above the maximum of {}",
                        Readable(value),
                        Readable(MAX_RETRY_DELAY)
                    ),
                ));
            }
        }
        if self.max_hold.is_zero() {
            return Err(ConfigError::new("max_hold", "must be greater than zero"));
        }
        let mut warnings = Vec::new();
        if self.drift_factor.ppm() == 0 {
            warnings.push(ConfigWarning::NoDrift);
        }
        if self.nodes < 3 {
            warnings.push(ConfigWarning::FewNodes { nodes: self.nodes });
        } else if self.nodes.is_multiple_of(2) {
            warnings.push(ConfigWarning::EvenNodes { nodes: self.nodes });
        }
        Ok(warnings)
    }
}

/// A configuration that is refused, naming the field and the reason.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::LockConfig;
///
/// let err = LockConfig::new(5).with_ttl(Duration::ZERO).validate().unwrap_err();
/// assert_eq!(err.field(), "ttl");
/// assert_eq!(err.to_string(), "invalid configuration: `ttl` must be greater than zero");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Hash)]
#[error("invalid configuration: `{field}` {reason}")]
pub struct ConfigError {
    field: Cow<'static, str>,
    reason: String,
}

impl ConfigError {
    /// An error about `field`.
    pub fn new(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The name of the offending field (`nodes[2]` for the third node).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Why the value is refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// A configuration that is allowed but weaker than it may look.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// Fewer than three nodes: one or two nodes tolerate no node failure at all.
    FewNodes {
        /// The configured number of nodes.
        nodes: usize,
    },
    /// An even number of nodes tolerates no more failures than one node fewer.
    EvenNodes {
        /// The configured number of nodes.
        nodes: usize,
    },
    /// A drift factor of zero: only the fixed 2 ms allowance is left for clocks that run at
    /// different rates.
    NoDrift,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FewNodes { nodes } => write!(
                f,
                "{nodes} node(s): a lease needs all of them (quorum {}), so any node failure blocks locking; use 3 or more",
                quorum(*nodes)
            ),
            Self::EvenNodes { nodes } => write!(
                f,
                "{nodes} nodes tolerate {} failure(s), no more than {} nodes would; an odd number is cheaper",
                nodes - quorum(*nodes),
                nodes - 1
            ),
            Self::NoDrift => f.write_str(
                "drift factor 0: no allowance for clocks running at different rates beyond 2 ms; a client clock slower than the nodes' by more than that can overlap the next holder",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn defaults_are_valid_and_timeout_scales_with_short_ttls() {
        assert_eq!(LockConfig::new(5).validate(), Ok(vec![]));
        assert_eq!(LockConfig::new(5).node_timeout(), ms(50));
        assert_eq!(LockConfig::new(5).with_ttl(ms(200)).node_timeout(), ms(10));
        assert!(LockConfig::new(5).with_ttl(ms(200)).validate().is_ok());
    }

    #[test]
    fn each_limit_names_its_field() {
        let cases = [
            (LockConfig::new(0), "nodes"),
            (LockConfig::new(3).with_ttl(Duration::ZERO), "ttl"),
            (LockConfig::new(3).with_ttl(MAX_TTL + ms(1)), "ttl"),
            (
                LockConfig::new(3).with_ttl(Duration::from_micros(1_500_500)),
                "ttl",
            ),
            (
                LockConfig::new(3).with_node_timeout(Duration::ZERO),
                "node_timeout",
            ),
            (
                LockConfig::new(3)
                    .with_ttl(ms(1_000))
                    .with_node_timeout(ms(100)),
                "node_timeout",
            ),
            // 1 ms TTL: the drift floor alone is 2 ms.
            (
                LockConfig::new(3)
                    .with_ttl(ms(1))
                    .with_node_timeout(Duration::from_micros(50)),
                "ttl",
            ),
            (
                LockConfig::new(3).with_retry(RetryPolicy::new(1, MAX_RETRY_DELAY + ms(1), ms(0))),
                "retry_delay",
            ),
            (
                LockConfig::new(3).with_retry(RetryPolicy::new(1, ms(0), MAX_RETRY_DELAY + ms(1))),
                "retry_jitter",
            ),
            (LockConfig::new(3).with_max_hold(Duration::ZERO), "max_hold"),
        ];
        for (config, field) in cases {
            let err = config.validate().expect_err(field);
            assert_eq!(err.field(), field, "{err}");
        }
    }

    #[test]
    fn small_and_even_fleets_warn() {
        assert_eq!(
            LockConfig::new(1).validate(),
            Ok(vec![ConfigWarning::FewNodes { nodes: 1 }])
        );
        assert_eq!(
            LockConfig::new(4).validate(),
            Ok(vec![ConfigWarning::EvenNodes { nodes: 4 }])
        );
        let text = ConfigWarning::EvenNodes { nodes: 4 }.to_string();
        assert!(text.contains("tolerate 1 failure"), "{text}");
        let no_drift = DriftFactor::from_ppm(0).expect("zero is a factor");
        assert_eq!(
            LockConfig::new(3).with_drift_factor(no_drift).validate(),
            Ok(vec![ConfigWarning::NoDrift])
        );
    }

    #[test]
    fn zero_retry_delay_is_valid() {
        let config =
            LockConfig::new(3).with_retry(RetryPolicy::new(5, Duration::ZERO, Duration::ZERO));
        assert!(config.validate().is_ok());
    }
}
