//! The distinct states seen: their fingerprints alone, 16 bytes each, in open-addressing
//! tables split in shards that the workers lock one at a time.
//!
//! A fingerprint's top byte picks its shard, so within a shard only the other 120 bits
//! tell fingerprints apart: the slot keeps those, and in its top byte, with sleep sets, the
//! steps asleep at every visit so far, folded to 8 bits (an over-approximation: see
//! [`fold`]). Two fingerprints share a slot only when all 128 bits agree, so the bound on
//! collisions is that of 128-bit fingerprints.
//!
//! A shard grows by doubling when four fifths full, so the set takes between 20 and 40
//! bytes per state (29 on average), and a growth copies one shard of 256, never the whole
//! set at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::fingerprint::Fingerprint;

const SHARDS: usize = 256;
const FIRST_CAPACITY: usize = 256;
/// The bits of a fingerprint a slot keeps; the top byte is the shard's number.
const KEPT: Fingerprint = (1 << 120) - 1;
const SLOT: usize = size_of::<Fingerprint>();

/// The steps of `sleep` folded to 8 bits: bit `i % 8` for step `i`.
///
/// [`unfold`] gives back every step that shares a bit with one of them, a superset: a state
/// reached again then takes, beside the steps that slept at every earlier visit and not at
/// this one, some that did not sleep, which is sound (a smaller sleep set only prunes less)
/// and costs their successors' computation, all of them states seen before.
fn fold(sleep: u64) -> u8 {
    sleep
        .to_le_bytes()
        .into_iter()
        .fold(0, |acc, byte| acc | byte)
}

/// Every step whose bit `fold` would set in `folded`.
fn unfold(folded: u8) -> u64 {
    u64::from(folded) * 0x0101_0101_0101_0101
}

/// One shard: linear probing over slots, zero meaning empty; each slot a fingerprint's
/// kept bits and, on top, its folded sleep set.
struct Table {
    slots: Vec<Fingerprint>,
    len: usize,
}

/// What [`Visited::visit`] found.
pub(crate) enum Visit {
    /// A state not seen before.
    New,
    /// Seen before, with nothing left to take.
    Seen,
    /// Seen before: these steps (a superset of those asleep at every earlier visit but not
    /// at this one; see [`fold`]), are to be taken now.
    Again(u64),
}

impl Table {
    fn new() -> Self {
        Self {
            slots: vec![0; FIRST_CAPACITY],
            len: 0,
        }
    }

    /// Finds the slot of `kept` (a fingerprint's kept bits, not zero), inserting it when
    /// new: whether it was new, the slot, the bytes added.
    fn find(&mut self, kept: Fingerprint) -> (bool, usize, usize) {
        let mut grown = 0;
        if (self.len + 1) * 5 > self.slots.len() * 4 {
            grown = self.grow();
        }
        let mask = self.slots.len() - 1;
        // The low bits pick the slot; the shard came from the top byte.
        let mut i = (kept as usize) & mask;
        loop {
            let slot = self.slots[i];
            if slot & KEPT == kept {
                return (false, i, grown);
            }
            if slot == 0 {
                self.slots[i] = kept;
                self.len += 1;
                return (true, i, grown);
            }
            i = (i + 1) & mask;
        }
    }

    /// Inserts `kept`; `false` when it was there. Returns the bytes added.
    fn insert(&mut self, kept: Fingerprint) -> (bool, usize) {
        let (new, _, grown) = self.find(kept);
        (new, grown)
    }

    /// Inserts `kept` reached with the sleep set `sleep`: returns what is left to take and
    /// the bytes added. What stays recorded is the intersection of the sleep sets (folded).
    fn visit(&mut self, kept: Fingerprint, sleep: u64, steps: u64) -> (Visit, usize) {
        let (new, i, grown) = self.find(kept);
        let folded = |slot: Fingerprint| (slot >> 120) as u8;
        let with = |folded: u8| kept | Fingerprint::from(folded) << 120;
        if new {
            self.slots[i] = with(fold(sleep));
            return (Visit::New, grown);
        }
        let before = unfold(folded(self.slots[i])) & steps;
        self.slots[i] = with(fold(before & sleep));
        match before & !sleep {
            0 => (Visit::Seen, grown),
            left => (Visit::Again(left), grown),
        }
    }

    fn grow(&mut self) -> usize {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for slot in old.into_iter().filter(|&slot| slot != 0) {
            let mut i = ((slot & KEPT) as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = slot;
        }
        self.slots.len() / 2 * SLOT
    }
}

/// A set of the states seen, that a search records a state in: the visited set, or a
/// tick's own (`tick_local.rs`).
pub(crate) trait Seen {
    /// Records `fp`; `false` when it was seen before.
    fn insert(&self, fp: Fingerprint) -> bool;

    /// Records `fp` reached with the sleep set `sleep`: new, or seen with steps to take now
    /// (those asleep at every earlier visit and not in `sleep`; none: nothing left).
    fn visit(&self, fp: Fingerprint, sleep: u64) -> Visit;
}

impl Seen for Visited {
    fn insert(&self, fp: Fingerprint) -> bool {
        Self::insert(self, fp)
    }

    fn visit(&self, fp: Fingerprint, sleep: u64) -> Visit {
        Self::visit(self, fp, sleep)
    }
}

/// The set of fingerprints seen.
pub(crate) struct Visited {
    shards: Vec<Mutex<Table>>,
    /// The steps a sleep set may hold: those outside are never taken again.
    steps: u64,
    len: AtomicU64,
    bytes: AtomicU64,
}

impl Visited {
    /// An empty set. With sleep sets of the steps in `steps`, [`Self::visit`] keeps one
    /// beside each fingerprint, in the same 16 bytes.
    pub(crate) fn new(steps: u64) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Table::new())).collect(),
            steps,
            len: AtomicU64::new(0),
            bytes: AtomicU64::new((SHARDS * FIRST_CAPACITY * SLOT) as u64),
        }
    }

    /// `fp`'s shard, and the bits of `fp` its slot keeps (never zero, which marks an empty
    /// slot: the one fingerprint of 2¹²⁰ in a shard whose kept bits are zero counts as the
    /// one whose kept bits are 1).
    fn shard(&self, fp: Fingerprint) -> (MutexGuard<'_, Table>, Fingerprint) {
        let index = (fp >> 120) as usize % SHARDS;
        let table = self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (table, (fp & KEPT).max(1))
    }

    fn count(&self, new: bool, grown: usize) {
        if grown > 0 {
            self.bytes.fetch_add(grown as u64, Ordering::Relaxed);
        }
        if new {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records `fp`; `false` when it was seen before.
    pub(crate) fn insert(&self, fp: Fingerprint) -> bool {
        let (mut table, kept) = self.shard(fp);
        let (new, grown) = table.insert(kept);
        drop(table);
        self.count(new, grown);
        new
    }

    /// Records `fp` reached with the sleep set `sleep`: new, or seen with steps to take now
    /// (a superset of those asleep at every earlier visit and not in `sleep`, within the
    /// set's `steps`; none: nothing left).
    pub(crate) fn visit(&self, fp: Fingerprint, sleep: u64) -> Visit {
        let (mut table, kept) = self.shard(fp);
        let (visit, grown) = table.visit(kept, sleep, self.steps);
        drop(table);
        self.count(matches!(visit, Visit::New), grown);
        visit
    }

    /// The steps a sleep set may hold.
    pub(crate) fn steps(&self) -> u64 {
        self.steps
    }

    /// How many distinct fingerprints it holds.
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// The bytes its tables take.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn each_fingerprint_is_new_once_across_growths() {
        let visited = Visited::new(u64::MAX);
        let fps: Vec<Fingerprint> = (0..100_000u128)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))
            .collect();
        for &fp in &fps {
            assert!(visited.insert(fp), "{fp:x} new");
        }
        for &fp in &fps {
            assert!(!visited.insert(fp), "{fp:x} seen");
        }
        assert_eq!(visited.len(), 100_000);
        // Each shard at most 5/4 of its count and a power of two: 40 bytes per fingerprint at most.
        assert!(visited.bytes() <= 40 * 100_000 + 256 * 256 * 16);
    }

    #[test]
    fn fingerprints_that_differ_only_in_the_shards_byte_are_two() {
        let visited = Visited::new(u64::MAX);
        let low = 0x1234_5678_9abc_def0_u128;
        assert!(visited.insert(low | 1 << 120));
        assert!(visited.insert(low | 2 << 120));
        assert!(!visited.insert(low | 1 << 120));
        assert_eq!(visited.len(), 2);
    }

    #[test]
    fn a_state_reached_again_takes_what_slept_at_every_visit_but_this_one() {
        // Four steps: none shares a bit with another.
        let visited = Visited::new(0b1111);
        assert!(matches!(visited.visit(7, 0b1110), Visit::New));
        // Asleep now: a superset of what slept before; nothing to take.
        assert!(matches!(visited.visit(7, 0b1111), Visit::Seen));
        // 0b0100 slept before and not now: taken now; what stays is the intersection.
        assert!(matches!(visited.visit(7, 0b1010), Visit::Again(0b0100)));
        assert!(matches!(visited.visit(7, 0b0010), Visit::Again(0b1000)));
        assert!(matches!(visited.visit(7, 0b0000), Visit::Again(0b0010)));
        assert!(matches!(visited.visit(7, 0b0000), Visit::Seen));
        assert_eq!(visited.len(), 1);
    }

    #[test]
    fn steps_eight_apart_share_a_bit() {
        let visited = Visited::new(u64::MAX);
        assert!(matches!(visited.visit(9, 1 << 3), Visit::New));
        // Step 11 slept neither time, but shares step 3's bit: taken again, with step 3.
        assert!(matches!(visited.visit(9, 0), Visit::Again(left) if left == unfold(1 << 3)));
        assert!(matches!(visited.visit(9, 0), Visit::Seen));
    }

    proptest! {
        /// Whatever the sleep sets, a state reached again takes at least the steps that
        /// slept at every earlier visit and not at this one (what the exact sets would
        /// take), and nothing that sleeps now.
        #[test]
        fn again_takes_a_superset_of_the_exact_steps(sleeps in prop::collection::vec(any::<u64>(), 1..8)) {
            let visited = Visited::new(u64::MAX);
            let mut exact = sleeps[0];
            prop_assert!(matches!(visited.visit(5, sleeps[0]), Visit::New));
            for &sleep in &sleeps[1..] {
                let wanted = exact & !sleep;
                let taken = match visited.visit(5, sleep) {
                    Visit::New => panic!("seen before"),
                    Visit::Seen => 0,
                    Visit::Again(left) => left,
                };
                prop_assert_eq!(taken & wanted, wanted);
                prop_assert_eq!(taken & sleep, 0);
                exact &= sleep;
            }
        }
    }
}
