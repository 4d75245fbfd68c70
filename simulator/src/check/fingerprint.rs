//! States told apart by a 128-bit fingerprint of their whole value.
//!
//! One pass over the state feeds two independent 64-bit lanes, so a state is hashed once
//! for 128 bits. The words are taken two at a time: each lane multiplies (full product,
//! halves folded) one word mixed into its value by the other mixed into a constant, as
//! wyhash and rapidhash do, so that a pair costs a lane one multiply where a word alone
//! cost one (2.9 % of the instructions a state on `shipped-drift`, 4.1 % on `teeth-s5`).
//! The lanes take the pair crossed, with their own constants and seeds, and each is
//! finished by a full avalanche. The hash is fixed (no random seed), so two runs explore
//! alike; a swarm member (`swarm.rs`) seeds both lanes with its own value, so that two
//! members' fingerprints, and so their collisions, differ.
//! With `n` distinct values fingerprinted, the chance that two of them share a fingerprint
//! is at most about n² / 2¹²⁹ for an ideal hash ([`collision_bound`]). A state's fingerprint
//! is composed of its parts' own, so the values are the distinct states and their parts
//! ([`values_fingerprinted`]); the report prints the bound over both.

use std::hash::Hasher;

/// A state's fingerprint.
pub(crate) type Fingerprint = u128;

const LANE_A: u64 = 0x9e37_79b9_7f4a_7c15;
const LANE_B: u64 = 0xd6e8_feb8_6659_fd93;
const SEED_A: u64 = 0x243f_6a88_85a3_08d3;
const SEED_B: u64 = 0x1319_8a2e_0370_7344;

/// The high and low halves of the full product, xor-ed: every input bit reaches every
/// output bit within a few words.
#[inline]
fn folded_multiply(x: u64, k: u64) -> u64 {
    let full = u128::from(x) * u128::from(k);
    (full as u64) ^ ((full >> 64) as u64)
}

/// The avalanche of MurmurHash3's 64-bit finaliser.
#[inline]
fn finish64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A hasher with two 64-bit lanes, read as one 128-bit value by [`Self::finish128`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hasher128 {
    a: u64,
    b: u64,
    pending: u64,
    words: u64,
}

impl Default for Hasher128 {
    fn default() -> Self {
        Self {
            a: SEED_A,
            b: SEED_B,
            pending: 0,
            words: 0,
        }
    }
}

impl Hasher128 {
    /// A hasher whose lanes start from `seed` mixed into the fixed seeds; seed 0 is
    /// [`Self::default`]. The seed goes through the lanes' whole chain of multiplies, so
    /// two states that collide under one seed are no likelier than any two to collide
    /// under another.
    pub(crate) fn seeded(seed: u64) -> Self {
        Self {
            // finish64 maps 0 to 0, so seed 0 leaves the fixed seeds alone.
            a: SEED_A ^ finish64(seed),
            b: SEED_B ^ finish64(seed.wrapping_mul(LANE_B)),
            pending: 0,
            words: 0,
        }
    }

    /// Takes a word: the first of a pair waits for the second.
    #[inline]
    fn word(&mut self, x: u64) {
        if self.words & 1 == 0 {
            self.pending = x;
        } else {
            let (a, b) = Self::mix(self.a, self.b, self.pending, x);
            self.a = a;
            self.b = b;
        }
        self.words = self.words.wrapping_add(1);
    }

    /// The lanes after the words `x` and `y`. A lane's product is zero only when one of its
    /// factors is: when a word equals the lane's value or the other word its constant,
    /// chances of 2⁻⁶⁴ for words that are not chosen against the hash. The other lane,
    /// which takes the pair crossed, still tells the words apart then.
    #[inline]
    fn mix(a: u64, b: u64, x: u64, y: u64) -> (u64, u64) {
        (
            folded_multiply(a ^ x, LANE_A ^ y),
            folded_multiply(b ^ y.rotate_left(29), LANE_B ^ x),
        )
    }

    /// The 128-bit value. A word left without its pair is taken with a zero; the count of
    /// words, mixed into both lanes, tells it from a pair that ended with one.
    pub(crate) fn finish128(&self) -> Fingerprint {
        let (mut la, mut lb) = (self.a, self.b);
        if self.words & 1 == 1 {
            (la, lb) = Self::mix(la, lb, self.pending, 0);
        }
        let a = finish64(la ^ self.words);
        let b = finish64(lb.wrapping_add(self.words.rotate_left(32)));
        (u128::from(a) << 64) | u128::from(b)
    }
}

impl Hasher for Hasher128 {
    fn finish(&self) -> u64 {
        (self.finish128() >> 64) as u64
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            self.word(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0; 8];
            word[..rest.len()].copy_from_slice(rest);
            // The length tells "ab" from "ab\0".
            self.word(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.word(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.word(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.word(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.word(i);
    }
    fn write_u128(&mut self, i: u128) {
        self.word(i as u64);
        self.word((i >> 64) as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.word(i as u64);
    }
}

/// The integer writes of a hasher that wraps another (`self.inner`) and changes only what
/// is written as bytes (a token): each integer passes as it is, as the inner hasher's own
/// word, not as bytes.
macro_rules! pass_integers {
    () => {
        fn write_u8(&mut self, i: u8) {
            self.inner.write_u8(i);
        }
        fn write_u16(&mut self, i: u16) {
            self.inner.write_u16(i);
        }
        fn write_u32(&mut self, i: u32) {
            self.inner.write_u32(i);
        }
        fn write_u64(&mut self, i: u64) {
            self.inner.write_u64(i);
        }
        fn write_u128(&mut self, i: u128) {
            self.inner.write_u128(i);
        }
        fn write_usize(&mut self, i: usize) {
            self.inner.write_usize(i);
        }
    };
}
pub(crate) use pass_integers;

/// An upper bound on the chance that two of `values` distinct values shared a fingerprint
/// (and so a state was never explored), for an ideal 128-bit hash: n(n − 1) / 2¹²⁹.
pub fn collision_bound(values: u64) -> f64 {
    let n = values as f64;
    n * (n - 1.0).max(0.0) / 2f64.powi(129)
}

/// At most how many distinct values a search of `distinct` states took fingerprints of:
/// each state, and each of its parts (every node; every client, its phase, its eligibility
/// and its link to each node) under each renumbering of the nodes and renaming of the
/// clients its canonical form may try (`nodes`! and `clients`! at most, 1 where that
/// symmetry is off). A value a generated state hashes is one of these: the generated state
/// is a renaming of a distinct one. A loose bound, so that the printed one is one.
///
/// ```
/// use redlock_sim::check::values_fingerprinted;
/// // Three nodes and two clients, both symmetries: 3 + 2 * 6 parts, 3! * 2! namings.
/// assert_eq!(values_fingerprinted(1_000, (3, true), (2, true)), 1_000 * (1 + 15 * 12));
/// assert_eq!(values_fingerprinted(1_000, (3, false), (2, false)), 1_000 * (1 + 15));
/// ```
pub fn values_fingerprinted(
    distinct: u64,
    (nodes, node_symmetry): (usize, bool),
    (clients, client_symmetry): (usize, bool),
) -> u64 {
    let factorial = |n: usize| (1..=n as u64).fold(1u64, u64::saturating_mul);
    let parts = (nodes + clients * (3 + nodes)) as u64;
    let renamed = |count: usize, symmetry: bool| if symmetry { factorial(count) } else { 1 };
    let namings = renamed(nodes, node_symmetry).saturating_mul(renamed(clients, client_symmetry));
    distinct.saturating_mul(parts.saturating_mul(namings).saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::Hash;

    fn hash128<T: Hash + ?Sized>(value: &T) -> Fingerprint {
        let mut h = Hasher128::default();
        value.hash(&mut h);
        h.finish128()
    }

    #[test]
    fn fingerprints_tell_apart_what_differs_and_only_that() {
        assert_eq!(hash128(&(1u32, "ab")), hash128(&(1u32, "ab")));
        let values = [
            hash128(&(1u32, "ab")),
            hash128(&(1u32, "ab\0")),
            hash128(&(2u32, "ab")),
            hash128(&(0u64, 0u64)),
            hash128(&(0u64, 0u64, 0u64)),
            hash128(&[0u8; 0][..]),
        ];
        for (i, a) in values.iter().enumerate() {
            for b in &values[i + 1..] {
                assert_ne!(a, b);
                // Both halves differ, not one alone.
                assert_ne!(a >> 64, b >> 64);
                assert_ne!(*a as u64, *b as u64);
            }
        }
    }

    /// Taken two at a time, every word still reaches both halves: the fingerprints of all
    /// lists of one to three small words differ in each half. A lane that let one word of
    /// a pair go would give lists that differ only in that word the same half.
    #[test]
    fn every_word_of_a_pair_reaches_both_halves() {
        let words = 0..24u64;
        let mut lists: Vec<Vec<u64>> = words.clone().map(|x| vec![x]).collect();
        for x in words.clone() {
            for y in words.clone() {
                lists.push(vec![x, y]);
                lists.extend(words.clone().map(|z| vec![x, y, z]));
            }
        }
        let (mut high, mut low) = (HashSet::new(), HashSet::new());
        for list in &lists {
            let mut h = Hasher128::default();
            list.iter().for_each(|&word| h.write_u64(word));
            let fingerprint = h.finish128();
            assert!(high.insert((fingerprint >> 64) as u64), "{list:?}");
            assert!(low.insert(fingerprint as u64), "{list:?}");
        }
    }

    #[test]
    fn a_seed_changes_every_fingerprint_and_seed_zero_none() {
        let hash = |seed: u64, value: &(u32, &str)| {
            let mut h = Hasher128::seeded(seed);
            value.hash(&mut h);
            h.finish128()
        };
        let value = (7u32, "state");
        assert_eq!(hash(0, &value), hash128(&value));
        let seeded: Vec<Fingerprint> = (1..=4).map(|seed| hash(seed, &value)).collect();
        for (i, a) in seeded.iter().enumerate() {
            assert_ne!(*a, hash128(&value));
            assert_ne!(a >> 64, hash128(&value) >> 64);
            assert_ne!(*a as u64, hash128(&value) as u64);
            for b in &seeded[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn the_collision_bound_grows_with_the_square_of_the_states() {
        assert_eq!(collision_bound(1), 0.0);
        let bound = collision_bound(1_000_000_000);
        assert!(bound > 1.4e-21 && bound < 1.5e-21, "{bound}");
    }
}
