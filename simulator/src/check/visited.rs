//! The distinct states seen: their fingerprints alone, 16 bytes each, in open-addressing
//! tables split in shards that the workers lock one at a time.
//!
//! A shard grows by doubling when three quarters full, so the set takes between 21 and 43
//! bytes per state (32 on average), and a growth copies one shard of 256, never the whole
//! set at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::fingerprint::Fingerprint;

const SHARDS: usize = 256;
const FIRST_CAPACITY: usize = 256;

/// One shard: linear probing over slots, zero meaning empty; with sleep sets, beside each
/// slot the steps asleep at every visit of its state so far.
struct Table {
    slots: Vec<Fingerprint>,
    /// Empty without sleep sets, else one per slot.
    sleeps: Vec<u64>,
    len: usize,
}

/// What [`Visited::visit`] found.
pub(crate) enum Visit {
    /// A state not seen before.
    New,
    /// Seen before, with nothing left to take.
    Seen,
    /// Seen before: these steps, asleep at every earlier visit but not at this one, are
    /// to be taken now.
    Again(u64),
}

impl Table {
    fn new(sleeping: bool) -> Self {
        Self {
            slots: vec![0; FIRST_CAPACITY],
            sleeps: if sleeping {
                vec![0; FIRST_CAPACITY]
            } else {
                Vec::new()
            },
            len: 0,
        }
    }

    /// Inserts `fp` (not zero); `false` when it was there. Returns the bytes added.
    fn insert(&mut self, fp: Fingerprint) -> (bool, usize) {
        let (new, _, grown) = self.find(fp);
        (new, grown)
    }

    /// Inserts `fp` reached with the sleep set `sleep`: returns what is left to take and
    /// the bytes added.
    fn visit(&mut self, fp: Fingerprint, sleep: u64) -> (Visit, usize) {
        let (new, i, grown) = self.find(fp);
        if new {
            self.sleeps[i] = sleep;
            return (Visit::New, grown);
        }
        let before = self.sleeps[i];
        self.sleeps[i] = before & sleep;
        match before & !sleep {
            0 => (Visit::Seen, grown),
            left => (Visit::Again(left), grown),
        }
    }

    /// Finds `fp`'s slot, inserting it when new: whether it was new, the slot, the bytes
    /// added.
    fn find(&mut self, fp: Fingerprint) -> (bool, usize, usize) {
        let mut grown = 0;
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            grown = self.grow();
        }
        let mask = self.slots.len() - 1;
        // The low half picks the slot; the shard came from the high half.
        let mut i = (fp as usize) & mask;
        loop {
            let slot = self.slots[i];
            if slot == fp {
                return (false, i, grown);
            }
            if slot == 0 {
                self.slots[i] = fp;
                self.len += 1;
                return (true, i, grown);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) -> usize {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let sleeping = !self.sleeps.is_empty();
        let old_sleeps = if sleeping {
            std::mem::replace(&mut self.sleeps, vec![0; self.slots.len()])
        } else {
            Vec::new()
        };
        let mask = self.slots.len() - 1;
        for (j, fp) in old.into_iter().enumerate().filter(|&(_, fp)| fp != 0) {
            let mut i = (fp as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = fp;
            if sleeping {
                self.sleeps[i] = old_sleeps[j];
            }
        }
        let per_slot = size_of::<Fingerprint>() + if sleeping { size_of::<u64>() } else { 0 };
        self.slots.len() / 2 * per_slot
    }
}

/// The set of fingerprints seen.
pub(crate) struct Visited {
    shards: Vec<Mutex<Table>>,
    len: AtomicU64,
    bytes: AtomicU64,
}

impl Visited {
    /// An empty set; with `sleeping`, one that keeps a sleep set beside each fingerprint
    /// ([`Self::visit`]), 8 bytes more a slot.
    pub(crate) fn new(sleeping: bool) -> Self {
        let per_slot = size_of::<Fingerprint>() + if sleeping { size_of::<u64>() } else { 0 };
        Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Table::new(sleeping)))
                .collect(),
            len: AtomicU64::new(0),
            bytes: AtomicU64::new((SHARDS * FIRST_CAPACITY * per_slot) as u64),
        }
    }

    fn shard(&self, fp: Fingerprint) -> MutexGuard<'_, Table> {
        let index = (fp >> 120) as usize % SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `fp`; `false` when it was seen before.
    pub(crate) fn insert(&self, fp: Fingerprint) -> bool {
        // Zero marks an empty slot: the one fingerprint of 2¹²⁸ that is zero counts as one.
        let fp = fp.max(1);
        let (new, grown) = self.shard(fp).insert(fp);
        if grown > 0 {
            self.bytes.fetch_add(grown as u64, Ordering::Relaxed);
        }
        if new {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
        new
    }

    /// Records `fp` reached with the sleep set `sleep` (a set made with `sleeping`): new, or
    /// seen with the steps asleep at every earlier visit and not in `sleep`, which are to be
    /// taken now (none: nothing left). What stays recorded is the intersection.
    pub(crate) fn visit(&self, fp: Fingerprint, sleep: u64) -> Visit {
        let fp = fp.max(1);
        let (visit, grown) = self.shard(fp).visit(fp, sleep);
        if grown > 0 {
            self.bytes.fetch_add(grown as u64, Ordering::Relaxed);
        }
        if matches!(visit, Visit::New) {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
        visit
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
    use super::*;

    #[test]
    fn each_fingerprint_is_new_once_across_growths() {
        let visited = Visited::new(false);
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
        // Each shard at most 4/3 full and a power of two: under 43 bytes per fingerprint.
        assert!(visited.bytes() < 43 * 100_000 + 256 * 256 * 16);
    }

    #[test]
    fn a_state_reached_again_takes_what_slept_at_every_visit_but_this_one() {
        let visited = Visited::new(true);
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
}
