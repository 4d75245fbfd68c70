//! How long one client's waiters may hand a lease to each other before letting others in.
//!
//! Inside one client, the next waiter in line need not hear of a release from the nodes: it
//! starts its round the moment its own client's release returns, a round trip before a
//! waiter of another process can hear of it (the release reaches the nodes, their
//! notifications reach that waiter, its `SET`s go back). Left alone, a busy client hands the
//! lease to itself again and again, and the other process's waiter loses every round: it
//! was seen to wait over 4 s while the busy client took 189 leases.
//!
//! So the bypass is bounded: after [`LocalTurns::LIMIT`] hand-offs in a row inside the
//! client, the next in line starts its round only after the time a notification takes to
//! travel and be answered (twice the release's own round trip), which lets a waiter of
//! another process that heard the release (see [`Waiting`](super::Waiting), which wakes it on
//! each release that hands the key on) win the race. Then the count starts again. Nothing
//! here decides anything about the lease: the round that follows is an ordinary quorum
//! round, so the delay costs time, never safety.

use std::time::Duration;

use super::Timestamp;

/// The hand-offs of one resource inside one client: a pure value, fed each release of a
/// lease that one of the client's own waiters stands next in line for.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::{LocalTurns, Timestamp};
///
/// let ms = |n| Timestamp::ZERO.saturating_add(Duration::from_millis(n));
/// let mut turns = LocalTurns::new();
/// // Releases that took 1 ms (a round trip): the first hand-offs start at once...
/// for n in 0..LocalTurns::LIMIT {
///     let released = ms(10 * u64::from(n) + 1);
///     assert_eq!(turns.handed_off(ms(10 * u64::from(n)), released), released);
/// }
/// // ...then the next in line waits two round trips.
/// assert_eq!(turns.handed_off(ms(100), ms(101)), ms(103));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LocalTurns {
    /// Hand-offs inside the client since the last that yielded.
    in_a_row: u32,
}

impl LocalTurns {
    /// How many hand-offs in a row inside one client start their round at once; the next
    /// one yields.
    pub const LIMIT: u32 = 4;

    /// No hand-off yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A lease of this client was released (its release round started at `started` and
    /// returned at `returned`) and one of the client's own waiters is next in line: when that
    /// waiter's round may start. At `returned` for the first [`LIMIT`](Self::LIMIT) hand-offs
    /// in a row; the next waits two release round trips more, the time another process's
    /// waiter needs to hear of the release and have its `SET`s land first, and the count
    /// starts again.
    pub fn handed_off(&mut self, started: Timestamp, returned: Timestamp) -> Timestamp {
        if self.in_a_row < Self::LIMIT {
            self.in_a_row += 1;
            return returned;
        }
        self.in_a_row = 0;
        let round_trip = returned.saturating_duration_since(started);
        returned.saturating_add(round_trip.saturating_mul(2).max(MIN_YIELD))
    }

    /// A release with nobody of this client next in line: the lease goes through the nodes
    /// anyway, and the count starts again.
    pub fn nobody_next(&mut self) {
        self.in_a_row = 0;
    }
}

/// The least a yielding waiter waits: a release that returned within a clock tick still
/// leaves the other process's waiter the time to answer a notification.
const MIN_YIELD: Duration = Duration::from_micros(200);

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_micros(us))
    }

    #[test]
    fn every_run_of_local_hand_offs_is_bounded_then_yields_two_round_trips() {
        let mut turns = LocalTurns::new();
        let mut yielded = Vec::new();
        for n in 0..20u64 {
            let (started, returned) = (at(1_000 * n), at(1_000 * n + 300));
            let start = turns.handed_off(started, returned);
            if start > returned {
                assert_eq!(start, at(1_000 * n + 900), "two round trips of 300 µs");
                yielded.push(n);
            }
        }
        // Never more than LIMIT in a row start at once.
        assert_eq!(yielded, [4, 9, 14, 19]);
        // A release with nobody next here starts the count again.
        let mut turns = LocalTurns::new();
        for _ in 0..LocalTurns::LIMIT {
            turns.handed_off(at(0), at(1));
        }
        turns.nobody_next();
        assert_eq!(turns.handed_off(at(0), at(1)), at(1));
        // A release that took no measurable time still yields a little.
        let mut turns = LocalTurns::new();
        for _ in 0..LocalTurns::LIMIT {
            turns.handed_off(at(5), at(5));
        }
        assert_eq!(turns.handed_off(at(5), at(5)), at(205));
    }
}
