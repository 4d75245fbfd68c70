//! Every renumbering of the nodes, made once: the canonical form (`node_symmetry.rs`) looks
//! one up by its ranks for each state it renumbers, where building it would check the
//! ranks and allocate twice (4.4 % of a search's instructions with the allocator's share,
//! measured on `shipped-drift`, docs/benchmarks.md).

use std::sync::OnceLock;

use redlock_core::NodePermutation;

use super::state::MAX_NODES;

/// The permutations of each length up to [`MAX_NODES`], in lexicographic order, each made
/// when first asked for (8! = 40,320 of them at the most).
static TABLES: [OnceLock<Vec<NodePermutation>>; MAX_NODES + 1] =
    [const { OnceLock::new() }; MAX_NODES + 1];

/// The permutation sending node `n` to `to[n]`.
///
/// # Panics
///
/// When `to` is not a permutation of `0..to.len()` or is longer than [`MAX_NODES`]: the
/// canonical form only asks for the ranks of distinct nodes.
pub(super) fn permutation(to: &[u8]) -> &'static NodePermutation {
    let table = TABLES[to.len()].get_or_init(|| NodePermutation::all(to.len()));
    let perm = &table[lexicographic_rank(to)];
    debug_assert!((0..to.len()).all(|n| perm.index(n) == usize::from(to[n])));
    perm
}

/// The place of `to` among the permutations of its length in lexicographic order (its
/// Lehmer code read as a factorial-base number).
fn lexicographic_rank(to: &[u8]) -> usize {
    let len = to.len();
    let mut rank = 0;
    for (i, &first) in to.iter().enumerate() {
        let smaller_after = to[i + 1..].iter().filter(|&&later| later < first).count();
        rank = rank * (len - i) + smaller_after;
    }
    assert!(
        is_permutation(to),
        "{to:?} is not a permutation of 0..{len}"
    );
    rank
}

fn is_permutation(to: &[u8]) -> bool {
    let mut seen = 0u32;
    to.iter().all(|&n| {
        let bit = 1u32.checked_shl(u32::from(n)).unwrap_or(0);
        let fresh = usize::from(n) < to.len() && seen & bit == 0;
        seen |= bit;
        fresh
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lookup_is_the_permutation_its_ranks_name() {
        for len in 0..=6 {
            for (rank, expected) in NodePermutation::all(len).iter().enumerate() {
                let to: Vec<u8> = (0..len).map(|n| expected.index(n) as u8).collect();
                assert_eq!(lexicographic_rank(&to), rank, "{to:?}");
                assert_eq!(permutation(&to), expected);
                let made = NodePermutation::new(to.iter().map(|&n| usize::from(n)).collect());
                assert_eq!(permutation(&to), &made.unwrap());
            }
        }
    }

    #[test]
    #[should_panic(expected = "is not a permutation")]
    fn ranks_that_repeat_a_node_are_refused() {
        permutation(&[0, 0, 2]);
    }

    #[test]
    fn only_permutations_are_permutations() {
        assert!(is_permutation(&[2, 0, 1]));
        assert!(is_permutation(&[]));
        assert!(!is_permutation(&[1, 1]));
        assert!(!is_permutation(&[0, 3, 1]));
    }
}
