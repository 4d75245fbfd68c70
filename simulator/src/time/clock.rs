//! Per-process clocks: offset, rate error, steps and freezes, as functions of true time.
//!
//! A node expires keys by its own clock; a client measures elapsed time and validity by its
//! own clock. Both are modelled here as piecewise-linear functions of true time, so that the
//! world can ask both "what does this clock read at true time t?" and "when does it first
//! read at least L?" (to schedule a timer set on the local clock).

use crate::time::Nanos;

const PPM: i128 = 1_000_000;

/// A clock as a function of true time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClockModel {
    /// Reading at true time 0.
    offset: i64,
    /// Rate error in parts per million: +20,000 runs 2 % fast, −20,000 runs 2 % slow.
    rate_ppm: i64,
    /// `(true time, jump)`: the reading jumps by `jump` nanoseconds at that instant. Sorted.
    steps: Vec<(Nanos, i64)>,
    /// True-time intervals `[start, end)` during which the clock stands still (a suspended
    /// VM whose guest clock stops). Sorted, disjoint.
    freezes: Vec<(Nanos, Nanos)>,
}

impl ClockModel {
    /// A perfect clock: reads true time.
    pub fn ideal() -> Self {
        Self::default()
    }

    /// A clock with the given offset (ns), rate error (ppm) and steps.
    ///
    /// The rate error must exceed −1,000,000 ppm (the clock must move forward); callers
    /// validate it.
    pub fn new(offset: i64, rate_ppm: i64, mut steps: Vec<(Nanos, i64)>) -> Self {
        steps.sort_by_key(|&(at, _)| at);
        Self {
            offset,
            rate_ppm,
            steps,
            freezes: Vec::new(),
        }
    }

    /// The rate error in ppm.
    pub fn rate_ppm(&self) -> i64 {
        self.rate_ppm
    }

    /// The steps of this clock.
    pub fn steps(&self) -> &[(Nanos, i64)] {
        &self.steps
    }

    /// Stops the clock during `[start, end)` of true time. Freezes are added as the run
    /// goes, at or after the current time, so past readings never change.
    pub fn freeze(&mut self, start: Nanos, end: Nanos) {
        if end <= start {
            return;
        }
        self.freezes.push((start, end));
        self.freezes.sort_unstable();
        // Overlapping freezes (a pause that extends another) merge: the clock stands still
        // once, not twice.
        let mut merged: Vec<(Nanos, Nanos)> = Vec::with_capacity(self.freezes.len());
        for &(s, e) in &self.freezes {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        self.freezes = merged;
    }

    fn frozen_before(&self, t: Nanos) -> Nanos {
        self.freezes
            .iter()
            .map(|&(s, e)| e.min(t).saturating_sub(s))
            .sum()
    }

    fn is_frozen(&self, t: Nanos) -> bool {
        self.freezes.iter().any(|&(s, e)| s <= t && t < e)
    }

    /// The reading at true time `t` (never below zero).
    pub fn read(&self, t: Nanos) -> u64 {
        u64::try_from(self.raw(t).max(0)).unwrap_or(u64::MAX)
    }

    /// The reading before it is clamped at zero.
    fn raw(&self, t: Nanos) -> i128 {
        let running = i128::from(t - self.frozen_before(t));
        let scaled = running * (PPM + i128::from(self.rate_ppm)) / PPM;
        let jumps: i128 = self
            .steps
            .iter()
            .take_while(|&&(at, _)| at <= t)
            .map(|&(_, by)| i128::from(by))
            .sum();
        i128::from(self.offset) + scaled + jumps
    }

    /// The first true time at or after `from` at which the clock reads at least `target`.
    pub fn when(&self, target: u64, from: Nanos) -> Nanos {
        let mut t = from;
        // Each iteration either answers or moves to the next breakpoint (a step or the edge
        // of a freeze); there are finitely many, after which the clock runs linearly forever.
        loop {
            if self.read(t) >= target {
                return t;
            }
            let next = self.next_breakpoint(t);
            if !self.is_frozen(t) {
                // From the unclamped reading: a clock below zero still has to climb to it.
                let need = i128::from(target) - self.raw(t);
                let speed = PPM + i128::from(self.rate_ppm);
                let dt = (need * PPM + speed - 1) / speed.max(1);
                let mut x = t.saturating_add(u64::try_from(dt).unwrap_or(u64::MAX));
                if next.is_none_or(|b| x < b) {
                    // Integer rounding can leave us a hair short or a hair late.
                    while self.read(x) < target && x < u64::MAX {
                        x += 1;
                    }
                    while x > t && self.read(x - 1) >= target {
                        x -= 1;
                    }
                    return x;
                }
            }
            match next {
                Some(b) => t = b,
                None => return Nanos::MAX,
            }
        }
    }

    /// The true-time intervals within `[from, until)` during which the clock reads below
    /// `target`, in order. The clock only moves forward between its steps, so once it has
    /// reached `target` it can fall below it again only at a step back.
    pub fn intervals_below(&self, target: u64, from: Nanos, until: Nanos) -> Vec<(Nanos, Nanos)> {
        let mut intervals = Vec::new();
        let mut t = from;
        while t < until {
            if self.read(t) < target {
                let end = self.when(target, t).min(until);
                intervals.push((t, end));
                t = end;
                if t >= until {
                    break;
                }
            }
            let below_again = self
                .steps
                .iter()
                .map(|&(at, _)| at)
                .find(|&at| at > t && at < until && self.read(at) < target);
            match below_again {
                Some(at) => t = at,
                None => break,
            }
        }
        intervals
    }

    fn next_breakpoint(&self, t: Nanos) -> Option<Nanos> {
        let steps = self.steps.iter().map(|&(at, _)| at);
        let freezes = self.freezes.iter().flat_map(|&(s, e)| [s, e]);
        steps.chain(freezes).filter(|&b| b > t).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MS;
    use proptest::prelude::*;

    #[test]
    fn rate_offset_steps_and_freezes() {
        let slow = ClockModel::new(0, -20_000, vec![]);
        assert_eq!(slow.read(10_000 * MS), 9_800 * MS);
        let stepped = ClockModel::new(0, 0, vec![(1_000 * MS, 15_000 * MS as i64)]);
        assert_eq!(stepped.read(999 * MS), 999 * MS);
        assert_eq!(stepped.read(1_000 * MS), 16_000 * MS);
        assert_eq!(stepped.when(10_000 * MS, 0), 1_000 * MS);
        let back = ClockModel::new(0, 0, vec![(3_000 * MS, -5_000 * MS as i64)]);
        assert_eq!(back.read(12_000 * MS), 7_000 * MS);
        // Before the step the clock never reached 9 s; after it, it gets there 5 s late.
        assert_eq!(back.when(9_000 * MS, 0), 14_000 * MS);
        let mut frozen = ClockModel::ideal();
        frozen.freeze(100 * MS, 15_100 * MS);
        assert_eq!(frozen.read(15_100 * MS), 100 * MS);
        assert_eq!(frozen.when(200 * MS, 50 * MS), 15_200 * MS);
        // An overlapping freeze extends the first instead of counting twice.
        frozen.freeze(10_000 * MS, 20_000 * MS);
        assert_eq!(frozen.read(20_000 * MS), 100 * MS);
        assert_eq!(frozen.read(20_100 * MS), 200 * MS);
    }

    #[test]
    fn a_clock_that_steps_back_reads_below_a_target_again() {
        // Reaches 9 s at 9 s, steps back 5 s at 11 s (reading 6 s), reaches 9 s again at 14 s.
        let back = ClockModel::new(0, 0, vec![(11_000 * MS, -5_000 * MS as i64)]);
        assert_eq!(
            back.intervals_below(9_000 * MS, 1_000 * MS, 30_000 * MS),
            vec![(1_000 * MS, 9_000 * MS), (11_000 * MS, 14_000 * MS)]
        );
        // Cut at `until`, and nothing when the clock is past the target throughout.
        assert_eq!(
            back.intervals_below(9_000 * MS, 1_000 * MS, 12_000 * MS),
            vec![(1_000 * MS, 9_000 * MS), (11_000 * MS, 12_000 * MS)]
        );
        assert!(
            back.intervals_below(5_000 * MS, 9_500 * MS, 30_000 * MS)
                .is_empty()
        );
        // A step back that stays above the target opens nothing.
        let small = ClockModel::new(0, 0, vec![(11_000 * MS, -1_000 * MS as i64)]);
        assert_eq!(
            small.intervals_below(9_000 * MS, 0, 30_000 * MS),
            vec![(0, 9_000 * MS)]
        );
        // A clock that never gets there: one interval to `until`.
        let mut frozen = ClockModel::ideal();
        frozen.freeze(100 * MS, Nanos::MAX);
        assert_eq!(
            frozen.intervals_below(9_000 * MS, 0, Nanos::MAX),
            vec![(0, Nanos::MAX)]
        );
    }

    proptest! {
        #[test]
        fn intervals_below_are_exactly_where_the_clock_reads_below(
            rate in -500_000i64..500_000,
            steps in proptest::collection::vec((0u64..20_000_000_000, -8_000_000_000i64..8_000_000_000), 0..4),
            target in 0u64..20_000_000_000,
            from in 0u64..10_000_000_000,
            probes in proptest::collection::vec(0u64..30_000_000_000, 20),
        ) {
            let clock = ClockModel::new(0, rate, steps);
            let until = 30_000_000_000;
            let intervals = clock.intervals_below(target, from, until);
            for pair in intervals.windows(2) {
                prop_assert!(pair[0].1 < pair[1].0, "{intervals:?}");
            }
            for t in probes.into_iter().filter(|&t| t >= from) {
                let inside = intervals.iter().any(|&(a, b)| a <= t && t < b);
                prop_assert_eq!(inside, clock.read(t) < target, "t = {}, {:?}", t, intervals);
            }
        }

        #[test]
        fn when_finds_the_first_instant(
            rate in -500_000i64..500_000,
            offset in -1_000_000_000i64..1_000_000_000,
            step_at in 0u64..20_000_000_000,
            step_by in -5_000_000_000i64..5_000_000_000,
            freeze_at in 0u64..20_000_000_000,
            freeze_for in 0u64..5_000_000_000,
            target in 0u64..30_000_000_000,
            from in 0u64..10_000_000_000,
        ) {
            let mut clock = ClockModel::new(offset, rate, vec![(step_at, step_by)]);
            clock.freeze(freeze_at, freeze_at + freeze_for);
            clock.freeze(freeze_at / 2, freeze_at / 2 + freeze_for);
            let t = clock.when(target, from);
            prop_assert!(t >= from);
            prop_assert!(clock.read(t) >= target);
            if t > from {
                prop_assert!(clock.read(t - 1) < target, "not the first instant");
            }
        }
    }
}
