//! A part of a state (a node, a client, a client's phase, eligibility or link to a node)
//! shared by the states that have it alike.
//!
//! A successor is its parent with one step taken, and most steps change one client and one
//! node (a delivery), or a client alone (a timer): copying every node's store and every
//! client's machines for each successor, and freeing them again, was most of a state's
//! cost. A state holds each part behind a reference count instead, so that a successor
//! copies only the parts its step writes ([`Shared::make_mut`], the copy on first write),
//! and the others stay one allocation, however many states hold them.
//!
//! A part also remembers a few of its own fingerprints ([`Memo`]): a state's fingerprint is
//! composed of its nodes' and clients' own, and a client's of its phase's, its
//! eligibility's and its links' (`client/fingerprint.rs`), the same value in every state
//! that holds the part alike, so a part a step did not touch is not hashed again. A copy
//! made to be written starts with none.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a remembered fingerprint was taken as: the hash's seed and what else named it (the
/// part's place, the renumbering, the renaming), which the caller packs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemoKey {
    pub(crate) seed: u64,
    pub(crate) tag: u64,
}

/// The bit of a [`MemoKey`]'s tag that marks a part hashed as it is, its tokens named as
/// they are (the other tags are client symmetry's, its tokens renamed).
pub(crate) const PLAIN: u64 = 1 << 63;

/// A slot's state word: empty, taken by a writer, or (with the bit the hashing noted above
/// it) holding a fingerprint.
const EMPTY: u64 = 0;
const WRITING: u64 = 1;
const READY: u64 = 2;

/// One remembered fingerprint: the key's seed and tag, the fingerprint's high and low
/// halves, and the state word, each an atomic word so that a slot is written once and read
/// by both threads without a lock (the state word, stored last with `Release`, publishes
/// the other four).
#[derive(Default)]
struct Slot([AtomicU64; 5]);

/// The fingerprints a part remembers, up to `SLOTS` of them, each set once and filled in
/// order: states shared between the threads read them without a lock.
pub(crate) struct Memo<const SLOTS: usize> {
    slots: [Slot; SLOTS],
}

impl<const SLOTS: usize> Default for Memo<SLOTS> {
    fn default() -> Self {
        Self {
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

impl<const SLOTS: usize> Memo<SLOTS> {
    /// Forgets every fingerprint (the part is about to be written): only the state words,
    /// written in place.
    fn clear(&mut self) {
        for Slot([.., state]) in &mut self.slots {
            *state.get_mut() = EMPTY;
        }
    }

    /// The fingerprint remembered under `key`, or `hash`'s, remembered when a slot is free.
    pub(crate) fn get_or(&self, key: MemoKey, hash: impl FnOnce() -> (u128, bool)) -> (u128, bool) {
        for Slot([seed, tag, high, low, state]) in &self.slots {
            match state.load(Ordering::Acquire) {
                EMPTY => {
                    let (fp, flag) = hash();
                    // Another thread may take the slot first: the value is remembered or not.
                    if state
                        .compare_exchange(EMPTY, WRITING, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                    {
                        seed.store(key.seed, Ordering::Relaxed);
                        tag.store(key.tag, Ordering::Relaxed);
                        high.store((fp >> 64) as u64, Ordering::Relaxed);
                        low.store(fp as u64, Ordering::Relaxed);
                        state.store(READY | u64::from(flag) << 2, Ordering::Release);
                    }
                    return (fp, flag);
                }
                WRITING => {}
                ready => {
                    if seed.load(Ordering::Relaxed) == key.seed
                        && tag.load(Ordering::Relaxed) == key.tag
                    {
                        let fp = u128::from(high.load(Ordering::Relaxed)) << 64
                            | u128::from(low.load(Ordering::Relaxed));
                        return (fp, ready & 4 != 0);
                    }
                }
            }
        }
        hash()
    }
}

struct Part<T, const SLOTS: usize> {
    value: T,
    memo: Memo<SLOTS>,
}

impl<T: Clone, const SLOTS: usize> Clone for Part<T, SLOTS> {
    /// A copy to be written: it remembers nothing.
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            memo: Memo::default(),
        }
    }
}

/// A part of a state, shared until written (see the module's comment), remembering up to
/// `SLOTS` fingerprints of itself. It compares, hashes and prints as the part itself.
pub(crate) struct Shared<T, const SLOTS: usize = 0>(Arc<Part<T, SLOTS>>);

impl<T, const SLOTS: usize> Shared<T, SLOTS> {
    pub(crate) fn new(value: T) -> Self {
        Self(Arc::new(Part {
            value,
            memo: Memo::default(),
        }))
    }

    /// The fingerprints it remembers.
    pub(crate) fn memo(&self) -> &Memo<SLOTS> {
        &self.0.memo
    }

    /// Whether no other state holds it (a write copies nothing).
    pub(crate) fn is_unique(&self) -> bool {
        Arc::strong_count(&self.0) == 1
    }
}

impl<T: Clone, const SLOTS: usize> Shared<T, SLOTS> {
    /// The part, to be written: copied first when another state holds it too, and
    /// remembering no fingerprint from then on.
    pub(crate) fn make_mut(&mut self) -> &mut T {
        let part = Arc::make_mut(&mut self.0);
        // Not shared (or just copied): what it remembered is of the value before the write.
        part.memo.clear();
        &mut part.value
    }
}

impl<T, const SLOTS: usize> Deref for Shared<T, SLOTS> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T, const SLOTS: usize> Clone for Shared<T, SLOTS> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: PartialEq, const SLOTS: usize> PartialEq for Shared<T, SLOTS> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

impl<T: Eq, const SLOTS: usize> Eq for Shared<T, SLOTS> {}

impl<T: Hash, const SLOTS: usize> Hash for Shared<T, SLOTS> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.0.value.hash(h);
    }
}

impl<T: fmt::Debug, const SLOTS: usize> fmt::Debug for Shared<T, SLOTS> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.value.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_copies_a_shared_part_and_forgets_its_fingerprints() {
        let mut a: Shared<Vec<u8>, 2> = Shared::new(vec![1, 2]);
        let key = MemoKey { seed: 0, tag: 7 };
        assert_eq!(a.memo().get_or(key, || (5, true)), (5, true));
        let b = a.clone();
        assert_eq!(b.memo().get_or(key, || unreachable!()), (5, true));
        a.make_mut().push(3);
        assert_eq!(*a, vec![1, 2, 3]);
        assert_eq!(*b, vec![1, 2], "the other holder keeps the part as it was");
        assert_eq!(a.memo().get_or(key, || (6, false)), (6, false));
        assert_eq!(b.memo().get_or(key, || unreachable!()), (5, true));
    }

    #[test]
    fn a_part_remembers_a_few_keys_and_hashes_the_rest() {
        let a: Shared<u8, 4> = Shared::new(0u8);
        for tag in 0..4 {
            a.memo()
                .get_or(MemoKey { seed: 0, tag }, || (u128::from(tag), false));
        }
        let extra = MemoKey { seed: 0, tag: 99 };
        assert_eq!(a.memo().get_or(extra, || (1, false)), (1, false));
        assert_eq!(a.memo().get_or(extra, || (2, false)), (2, false));
        let seeded = MemoKey { seed: 1, tag: 0 };
        assert_eq!(a.memo().get_or(seeded, || (3, false)), (3, false));
        assert_eq!(
            a.memo()
                .get_or(MemoKey { seed: 0, tag: 0 }, || unreachable!())
                .0,
            0
        );
    }
}
