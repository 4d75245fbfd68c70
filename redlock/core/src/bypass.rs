//! How often one client's own waiters may pass a lease among themselves while a waiter of
//! another process waits: the bound on the local hand-off.
//!
//! Within one client, a release hands the lease to the client's next waiter without the
//! nodes' notification: that waiter's round starts when the release returns, about when the
//! nodes' `PUBLISH` reaches another process's waiter, whose round then has one more trip to
//! make. A client whose tasks take one lease in a loop would keep it for as long as they
//! loop. So the release script says, node by node, whether a waiter of another client had
//! marked its interest there ([`Reply::ReleasedOthersWaiting`](crate::Reply)), and only a
//! release that says so on a quorum of the nodes where it deleted the key counts as a
//! hand-off past another process (of those, not of all: a release that returns at a quorum
//! hears from fewer, and against all nodes it never counted one).
//! After [`LOCAL_HAND_OFFS`] of those (since the last yield, while this client's line never
//! emptied), the next one yields: this client's next waiter starts its round only
//! [`YIELD_ROUND_TRIPS`] times the release's own round trip after the release returned (at
//! least [`MIN_YIELD`], at most [`MAX_YIELD`]), by which time the other process's round,
//! started by the notification, has reached the nodes. A release that no other process
//! waits for costs nothing: the next waiter starts at once, however many hand-offs came
//! before.
//!
//! Nothing here decides anything about the lease: it only says when a round starts, so a
//! yield that is too short or too long costs time, never safety. A waiting mark that lives
//! on after its waiter crashed (until its expiry) costs a yield every
//! [`LOCAL_HAND_OFFS`] + 1 hand-offs, no more.

use std::time::Duration;

use super::{ReleaseReport, Timestamp, quorum};

/// How many hand-offs past another process's waiter this client's own waiters may make
/// before one yields.
pub const LOCAL_HAND_OFFS: u32 = 4;

/// How long a yield lasts, in round trips of the release that yields: one for the
/// notification's way to the other waiter and its round's way back to the nodes, and one
/// for the scheduling on both sides.
pub const YIELD_ROUND_TRIPS: u32 = 2;

/// The shortest yield: on a loopback a round trip is a fifth of a millisecond, shorter than
/// a loaded machine takes to wake the other process's task.
pub const MIN_YIELD: Duration = Duration::from_millis(1);

/// The longest yield: a release slowed by one late node says little about the notification's
/// way.
pub const MAX_YIELD: Duration = Duration::from_millis(20);

/// The count of one client's hand-offs of one resource past another process's waiter, and
/// when the next of its own waiters may start its round. Pure: `now` and the release's
/// start come in, a start time goes out.
///
/// ```
/// use std::time::Duration;
/// use redlock_core::*;
///
/// let ms = |n| Timestamp::ZERO.saturating_add(Duration::from_millis(n));
/// let released = |others_waiting| {
///     let mut report = ReleaseReport::default();
///     report.nodes = vec![NodeStatus::Replied(Reply::Released); 3];
///     report.others_waiting = others_waiting;
///     report
/// };
/// let mut bypass = Bypass::new();
/// // Nobody else waits: every hand-off at once.
/// for n in 0..10 {
///     assert_eq!(bypass.released(&released(0), ms(n), ms(n), true), ms(n));
/// }
/// // Another process waits on a quorum: four hand-offs at once, then a yield of two of the
/// // release's round trips (here 5 ms each).
/// for n in 0..LOCAL_HAND_OFFS as u64 {
///     assert_eq!(bypass.released(&released(2), ms(100 + n), ms(105 + n), true), ms(105 + n));
/// }
/// assert_eq!(bypass.released(&released(2), ms(200), ms(205), true), ms(215));
/// // And the count starts over.
/// assert_eq!(bypass.released(&released(2), ms(300), ms(305), true), ms(305));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bypass {
    /// Hand-offs past another process allowed before a yield (`None`: no bound).
    limit: Option<u32>,
    /// Hand-offs past another process since the last yield.
    past_others: u32,
}

impl Default for Bypass {
    fn default() -> Self {
        Self::new()
    }
}

impl Bypass {
    /// The bound of [`LOCAL_HAND_OFFS`] hand-offs.
    pub const fn new() -> Self {
        Self {
            limit: Some(LOCAL_HAND_OFFS),
            past_others: 0,
        }
    }

    /// No bound: every hand-off at once, whoever else waits. What the client did before the
    /// bound, kept to show what the bound changes.
    pub const fn unbounded() -> Self {
        Self {
            limit: None,
            past_others: 0,
        }
    }

    /// This client released the resource (`report`; the release started at `sent_at` and
    /// returned at `now`) and `successor` says whether one of its own waiters stands next in
    /// line. Returns when that waiter may start its round: `now`, or after a yield.
    pub fn released(
        &mut self,
        report: &ReleaseReport,
        sent_at: Timestamp,
        now: Timestamp,
        successor: bool,
    ) -> Timestamp {
        if !successor {
            // Nobody here to hand over to: the lease goes through the nodes.
            self.past_others = 0;
            return now;
        }
        // Judged on the nodes where the release deleted the key (the script answered with
        // or without another's mark), not on all of them: a release that returns at a
        // quorum hears from fewer, spared nodes never answer, and against every node another
        // process was never counted there. (A quorum is at least 1: no mark, no hand-off.)
        if report.others_waiting < quorum(report.released()) {
            return now;
        }
        match self.limit {
            Some(limit) if self.past_others >= limit => {
                self.past_others = 0;
                now.saturating_add(Self::yield_after(sent_at, now))
            }
            _ => {
                self.past_others = self.past_others.saturating_add(1);
                now
            }
        }
    }

    /// How long the next waiter yields after a release that took `sent_at` to `now`.
    fn yield_after(sent_at: Timestamp, now: Timestamp) -> Duration {
        now.saturating_duration_since(sent_at)
            .saturating_mul(YIELD_ROUND_TRIPS)
            .clamp(MIN_YIELD, MAX_YIELD)
    }

    /// Hand-offs past another process since the last yield.
    pub fn past_others(&self) -> u32 {
        self.past_others
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeStatus, Reply};

    fn at(ms: u64) -> Timestamp {
        Timestamp::ZERO.saturating_add(Duration::from_millis(ms))
    }

    fn report(nodes: usize, others_waiting: usize) -> ReleaseReport {
        ReleaseReport {
            nodes: vec![NodeStatus::Replied(Reply::Released); nodes],
            others_waiting,
        }
    }

    /// The passes another process's waiter sees in `hand_offs` hand-offs, each a release
    /// that finds its marks on `others` of 5 nodes: the longest run of hand-offs at once.
    fn longest_run(bypass: Bypass, others: usize, hand_offs: u64) -> u32 {
        longest_run_of(bypass, &report(5, others), hand_offs)
    }

    /// The longest run of hand-offs at once in `hand_offs` releases that each report
    /// `released`.
    fn longest_run_of(mut bypass: Bypass, released: &ReleaseReport, hand_offs: u64) -> u32 {
        let (mut run, mut longest) = (0, 0);
        for n in 0..hand_offs {
            let start = bypass.released(released, at(n * 10), at(n * 10 + 1), true);
            if start == at(n * 10 + 1) {
                run += 1;
                longest = longest.max(run);
            } else {
                run = 0;
            }
        }
        longest
    }

    #[test]
    fn another_process_on_a_quorum_is_passed_over_at_most_the_bound() {
        assert_eq!(longest_run(Bypass::new(), 3, 100), LOCAL_HAND_OFFS);
        assert_eq!(longest_run(Bypass::new(), 5, 100), LOCAL_HAND_OFFS);
    }

    /// The mutation: without the bound, the other process is passed over every time.
    #[test]
    fn without_the_bound_it_is_passed_over_every_time() {
        assert_eq!(longest_run(Bypass::unbounded(), 5, 100), 100);
    }

    /// A release that returns at a quorum (`release_at_quorum`, a dropped lease) hears from
    /// fewer nodes: those the grant's round saw in other hands are spared (answered
    /// `NotHeld` without a command), and it returns once a quorum is free. Here one node of
    /// three deleted the key and found another process's mark, the two others were spared:
    /// the other process was never counted, and was passed over every time.
    #[test]
    fn a_release_that_heard_from_fewer_nodes_still_counts_the_others_waiting() {
        let spared = ReleaseReport {
            nodes: vec![
                NodeStatus::Replied(Reply::Released),
                NodeStatus::Replied(Reply::NotHeld),
                NodeStatus::Replied(Reply::NotHeld),
            ],
            others_waiting: 1,
        };
        assert_eq!(longest_run_of(Bypass::new(), &spared, 100), LOCAL_HAND_OFFS);
    }

    #[test]
    fn nobody_else_waiting_or_a_minority_costs_no_yield() {
        assert_eq!(longest_run(Bypass::new(), 0, 100), 100);
        assert_eq!(longest_run(Bypass::new(), 2, 100), 100);
    }

    #[test]
    fn a_release_without_a_successor_here_starts_the_count_over() {
        let mut bypass = Bypass::new();
        for _ in 0..LOCAL_HAND_OFFS {
            bypass.released(&report(3, 3), at(0), at(1), true);
        }
        assert_eq!(bypass.past_others(), LOCAL_HAND_OFFS);
        bypass.released(&report(3, 3), at(0), at(1), false);
        assert_eq!(bypass.past_others(), 0);
        assert_eq!(bypass.released(&report(3, 3), at(2), at(3), true), at(3));
    }

    #[test]
    fn the_yield_is_two_round_trips_within_its_limits() {
        let mut bypass = Bypass::new();
        let mut yielded = |sent: Timestamp, now: Timestamp| {
            for _ in 0..LOCAL_HAND_OFFS {
                bypass.released(&report(3, 3), sent, now, true);
            }
            bypass
                .released(&report(3, 3), sent, now, true)
                .saturating_duration_since(now)
        };
        assert_eq!(yielded(at(0), at(3)), Duration::from_millis(6));
        let fast = Timestamp::from_nanos(200_000);
        assert_eq!(yielded(Timestamp::ZERO, fast), MIN_YIELD);
        assert_eq!(yielded(at(0), at(500)), MAX_YIELD);
    }
}
