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

/// One shard: linear probing over slots, zero meaning empty.
struct Table {
    slots: Vec<Fingerprint>,
    len: usize,
}

impl Table {
    fn new() -> Self {
        Self {
            slots: vec![0; FIRST_CAPACITY],
            len: 0,
        }
    }

    /// Inserts `fp` (not zero); `false` when it was there. Returns the bytes added.
    fn insert(&mut self, fp: Fingerprint) -> (bool, usize) {
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
                return (false, grown);
            }
            if slot == 0 {
                self.slots[i] = fp;
                self.len += 1;
                return (true, grown);
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) -> usize {
        let doubled = vec![0; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for fp in old.into_iter().filter(|&fp| fp != 0) {
            let mut i = (fp as usize) & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = fp;
        }
        self.slots.len() / 2 * size_of::<Fingerprint>()
    }
}

/// The set of fingerprints seen.
pub(crate) struct Visited {
    shards: Vec<Mutex<Table>>,
    len: AtomicU64,
    bytes: AtomicU64,
}

impl Visited {
    pub(crate) fn new() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(Table::new())).collect(),
            len: AtomicU64::new(0),
            bytes: AtomicU64::new((SHARDS * FIRST_CAPACITY * size_of::<Fingerprint>()) as u64),
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
        let visited = Visited::new();
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
}
