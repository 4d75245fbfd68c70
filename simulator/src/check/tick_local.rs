//! The states within one tick, seen by a depth-first search that keeps only the states
//! beginning a tick in its visited set (`Options::tick_local`).
//!
//! Most distinct states of a model are the orders of the steps within a tick: in the
//! first five million of `teeth-s5-three-clients`, 50,845 end a tick (true time may move
//! on) and the other 99 % lie between two ticks. Each of those is reached from one state
//! that began its tick, and seldom from another, so a set of its own for each tick's
//! expansion, dropped when the search leaves that tick, dedups almost as well as the
//! global set and holds a tick's states only while the search is inside it. Memory then
//! grows with the states that begin a tick, not with all of them.
//!
//! Sound for the same reason state caching is: a state is left out only when its set has
//! seen it, with the steps asleep at every visit so far (Godefroid's rule, as in
//! `visited.rs`), and a state seen under another tick's set is explored again. What it
//! costs is that: a state reached from two ticks' beginnings is expanded twice.

use std::cell::RefCell;
use std::collections::HashMap;

use super::fingerprint::Fingerprint;
use super::visited::{Seen, Visit};

/// One tick's states: each fingerprint with the steps asleep at every visit so far.
#[derive(Default)]
pub(crate) struct TickStates {
    seen: RefCell<HashMap<Fingerprint, u64>>,
    /// The steps a sleep set may hold (as [`super::visited::Visited`]'s).
    steps: u64,
}

impl TickStates {
    pub(crate) fn new(steps: u64) -> Self {
        Self {
            seen: RefCell::default(),
            steps,
        }
    }

    /// Empties it for another tick, keeping its allocation.
    pub(crate) fn clear(&self) {
        self.seen.borrow_mut().clear();
    }
}

impl Seen for TickStates {
    fn insert(&self, fp: Fingerprint) -> bool {
        self.seen.borrow_mut().insert(fp, 0).is_none()
    }

    /// As the visited set's, with the sleep sets kept whole rather than folded.
    fn visit(&self, fp: Fingerprint, sleep: u64) -> Visit {
        let mut seen = self.seen.borrow_mut();
        let Some(recorded) = seen.get_mut(&fp) else {
            seen.insert(fp, sleep & self.steps);
            return Visit::New;
        };
        let before = *recorded & self.steps;
        *recorded = before & sleep;
        match before & !sleep {
            0 => Visit::Seen,
            left => Visit::Again(left),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_seen_in_a_tick_is_new_again_after_a_clear() {
        let tick = TickStates::new(u64::MAX);
        assert!(matches!(tick.visit(7, 0b110), Visit::New));
        assert!(matches!(tick.visit(7, 0b110), Visit::Seen));
        // Reached again with a smaller sleep set: takes what slept before but not now.
        assert!(matches!(tick.visit(7, 0b010), Visit::Again(0b100)));
        assert!(matches!(tick.visit(7, 0b010), Visit::Seen));
        tick.clear();
        assert!(matches!(tick.visit(7, 0b010), Visit::New));
        assert!(tick.insert(8) && !tick.insert(8));
    }
}
