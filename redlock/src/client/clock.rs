//! The client's clock: elapsed time that keeps counting while the system is suspended,
//! translated to and from the core's [`Timestamp`]s.
//!
//! A lease is a promise about *elapsed* time: the nodes expire its keys a TTL after they were
//! set, whatever the holder was doing meanwhile. A clock that stops while the machine is
//! suspended (a laptop's lid closed, a virtual machine paused by its hypervisor) would let a
//! holder wake up believing it still holds a lease the nodes forgot long ago. So the client
//! measures with a clock that counts suspended time:
//!
//! | platform | clock |
//! |---|---|
//! | Linux, Android | `CLOCK_BOOTTIME` |
//! | macOS, iOS | `CLOCK_MONOTONIC`, which counts sleep there |
//! | elsewhere | [`std::time::Instant`], which may stop during a suspend (a documented limit) |
//!
//! None of them steps with the wall clock, so NTP or an administrator cannot stretch a lease
//! either.
//!
//! Timers are the other half. tokio's timers run on `Instant`, which on Linux does *not*
//! count a suspend: a deadline that passed while the machine slept would fire only once the
//! remaining `Instant` time has elapsed after it wakes. The timers that decide a loss or a
//! kill ([`Clock::sleep_until`]) therefore wait in steps of at most [`RECHECK`] and read this
//! clock after each, so they fire at most `RECHECK` after a resume; without a suspend they
//! fire when tokio's timer would. Round timeouts keep tokio's timers: firing late there
//! costs liveness, never safety (a reply is always judged with `now` read from this clock).

use std::time::{Duration, Instant};

use redlock_core::Timestamp;

/// The longest [`Clock::sleep_until`] sleeps before it reads the clock again: how late it
/// can fire after the system resumes from a suspend.
pub(crate) const RECHECK: Duration = Duration::from_millis(100);

/// Readings of the suspend-counting clock relative to an origin taken when the client was
/// built.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: Duration,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Self { origin: raw_now() }
    }

    /// Now, on this clock.
    pub(crate) fn now(&self) -> Timestamp {
        Timestamp::from_duration(raw_now().saturating_sub(self.origin))
    }

    /// The `Instant` that corresponds to `at` as seen from now (exact unless the system
    /// suspends in between). Far-future readings saturate.
    pub(crate) fn instant(&self, at: Timestamp) -> Instant {
        let now = self.now();
        let base = Instant::now();
        if at >= now {
            let ahead = at.saturating_duration_since(now);
            base.checked_add(ahead)
                .unwrap_or_else(|| base + Duration::from_secs(100 * 365 * 24 * 3600))
        } else {
            let behind = now.saturating_duration_since(at);
            base.checked_sub(behind).unwrap_or(base)
        }
    }

    /// Waits until this clock reads `at`, counting suspended time: a deadline that passed
    /// while the system was suspended is met at most [`RECHECK`] after it resumes.
    pub(crate) async fn sleep_until(&self, at: Timestamp) {
        loop {
            let left = at.saturating_duration_since(self.now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(RECHECK)).await;
        }
    }
}

/// The clock of the table above, where the platform has one.
#[cfg(any(target_os = "linux", target_os = "android"))]
const COUNTS_SUSPEND: nix::time::ClockId = nix::time::ClockId::CLOCK_BOOTTIME;
#[cfg(any(target_os = "macos", target_os = "ios"))]
const COUNTS_SUSPEND: nix::time::ClockId = nix::time::ClockId::CLOCK_MONOTONIC;

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
))]
fn raw_now() -> Duration {
    match nix::time::clock_gettime(COUNTS_SUSPEND) {
        Ok(spec) => Duration::new(
            u64::try_from(spec.tv_sec()).unwrap_or(0),
            u32::try_from(spec.tv_nsec()).unwrap_or(0),
        ),
        // Every Linux since 2.6.39 has CLOCK_BOOTTIME; a refusal would be a sandbox's doing.
        Err(_) => fallback_now(),
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios"
)))]
fn raw_now() -> Duration {
    fallback_now()
}

/// `Instant` since the first reading in this process: monotonic, but it may stop while the
/// system is suspended.
fn fallback_now() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_move_forward_and_map_to_instants() {
        let clock = Clock::new();
        let a = clock.now();
        std::thread::sleep(Duration::from_millis(2));
        let b = clock.now();
        assert!(b.saturating_duration_since(a) >= Duration::from_millis(2));
        let soon = b.saturating_add(Duration::from_millis(50));
        let until = clock
            .instant(soon)
            .saturating_duration_since(Instant::now());
        assert!(until <= Duration::from_millis(50) && until >= Duration::from_millis(40));
        assert!(clock.instant(Timestamp::MAX) > Instant::now());
    }

    /// The clock is `CLOCK_BOOTTIME`, which counts a suspend (CI cannot suspend a machine,
    /// so this checks the source; the simulator shows what a clock that stops does).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn the_clock_is_the_one_that_counts_suspended_time() {
        use nix::time::{ClockId, clock_gettime};
        let boottime = || {
            let spec = clock_gettime(ClockId::CLOCK_BOOTTIME).unwrap();
            Duration::new(spec.tv_sec() as u64, spec.tv_nsec() as u32)
        };
        let before = boottime();
        let ours = raw_now();
        let after = boottime();
        assert!(
            before <= ours && ours <= after,
            "{before:?} {ours:?} {after:?}"
        );
    }

    #[tokio::test]
    async fn sleeps_until_a_reading() {
        let clock = Clock::new();
        let at = clock.now().saturating_add(Duration::from_millis(30));
        clock.sleep_until(at).await;
        assert!(clock.now() >= at);
        // A reading in the past returns at once.
        clock.sleep_until(Timestamp::ZERO).await;
    }
}
