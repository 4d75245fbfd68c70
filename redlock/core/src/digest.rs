//! A value's 128-bit digest, taken once where the value is made.
//!
//! Every lease machine holds its lock's configuration and key, and hashes them with
//! itself. A model checker hashes the machines of every state it reaches, and there the
//! two constants cost more than the rest of a machine's fields (3.3 % of a search's
//! instructions, `docs/benchmarks.md`). Hashed as the digest taken when they were made,
//! they cost two words. Equal values have equal digests (the digest is a function of the
//! value), so `Hash` stays consistent with `Eq`; two different values share a digest with
//! a chance of about 2⁻¹²⁸.

use std::hash::{DefaultHasher, Hash, Hasher};

/// Two 64-bit lanes of SipHash (the standard library's default hasher, whose keys are
/// fixed), each salted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Digest([u64; 2]);

impl Digest {
    pub(crate) fn of<T: Hash + ?Sized>(value: &T) -> Self {
        let lane = |salt: u64| {
            let mut hasher = DefaultHasher::new();
            salt.hash(&mut hasher);
            value.hash(&mut hasher);
            hasher.finish()
        };
        Self([lane(0x243f_6a88_85a3_08d3), lane(0x1319_8a2e_0370_7344)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_a_digest_and_different_ones_do_not() {
        assert_eq!(Digest::of("redlock:a"), Digest::of("redlock:a"));
        assert_ne!(Digest::of("redlock:a"), Digest::of("redlock:b"));
        assert_ne!(Digest::of(&(1u64, 2u64)), Digest::of(&(2u64, 1u64)));
        let Digest([a, b]) = Digest::of("x");
        assert_ne!(a, b, "the lanes are salted apart");
    }
}
