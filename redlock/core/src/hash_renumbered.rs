//! Hashing a value as renumbered, without the copy: the words the derived `Hash` of the
//! value renumbered by a [`NodePermutation`] would feed a hasher, fed from the value as it
//! is.
//!
//! A model checker with node symmetry fingerprints every state it meets under every
//! renumbering of the nodes it tries. A copy of a client's lease machines per renumbering
//! (their rounds' per-node statuses, their queued commands, each with its key) was a large
//! part of that cost; hashed here, each part that names a node is renamed as it is hashed,
//! each list indexed by node is read in its new order, and the rest is hashed as it is.
//!
//! Each machine's `hash_renumbered` sits beside its `renumber_nodes` and mirrors it part for
//! part, a permutation of another length than a list's included (the list keeps its order,
//! as [`NodePermutation::permute`] leaves it); the property tests in
//! `renumber_proptests.rs` compare the words with those of the renumbered copy's hash.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use super::renumber::{NodePermutation, RenumberNodes};
use super::{NodeFailure, NodeId, NodeStatus, RequestId, Transmit};

/// A value that names nodes, hashed as if renumbered: `hash_renumbered(perm, h)` feeds `h`
/// exactly the words, in the same order, that the derived `Hash` of the value renumbered by
/// `perm` ([`RenumberNodes`]) would, without the copy. Values equal once renumbered hash
/// alike under any hasher, and a hasher keyed by its words (a fingerprint) sees no
/// difference between the value renumbered and the copy.
///
/// ```
/// use std::hash::{DefaultHasher, Hash, Hasher};
/// use redlock_core::*;
///
/// let config = LockConfig::new(3);
/// let key = LockKey::new("redlock:", "report").unwrap();
/// let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), Timestamp::ZERO);
/// let sent: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
/// acquire.handle_reply(sent[0].request, Ok(Reply::Acquired), Timestamp::ZERO);
///
/// let swap = NodePermutation::new(vec![1, 0, 2]).unwrap();
/// let mut copy = acquire.clone();
/// copy.renumber_nodes(&swap);
/// let (mut without_copy, mut of_copy) = (DefaultHasher::new(), DefaultHasher::new());
/// acquire.hash_renumbered(&swap, &mut without_copy);
/// copy.hash(&mut of_copy);
/// assert_eq!(without_copy.finish(), of_copy.finish());
/// ```
pub trait HashRenumbered: RenumberNodes + Hash {
    /// Feeds `state` what the derived `Hash` of this value renumbered by `perm` would.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H);
}

impl HashRenumbered for NodeId {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        perm.node(*self).hash(state);
    }
}

impl HashRenumbered for RequestId {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let mut renamed = *self;
        renamed.renumber_nodes(perm);
        renamed.hash(state);
    }
}

/// The command names no node (its key, token and times are the same on every node): only
/// the request and the node are renamed, and the command is not copied.
impl HashRenumbered for Transmit {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        let Self {
            request,
            node,
            command,
        } = self;
        request.hash_renumbered(perm, state);
        node.hash_renumbered(perm, state);
        command.hash(state);
    }
}

/// Only a duplicate names a node; the others (some with text) hash as they are, uncopied.
impl HashRenumbered for NodeFailure {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        match self {
            Self::Duplicate { of } => Self::Duplicate { of: perm.node(*of) }.hash(state),
            other => other.hash(state),
        }
    }
}

impl HashRenumbered for NodeStatus {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        match self {
            Self::Failed(NodeFailure::Duplicate { of }) => {
                Self::Failed(NodeFailure::Duplicate { of: perm.node(*of) }).hash(state);
            }
            other => other.hash(state),
        }
    }
}

impl<T: HashRenumbered> HashRenumbered for Option<T> {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // As an option hashes: its discriminant, then the value.
        std::mem::discriminant(self).hash(state);
        if let Some(value) = self {
            value.hash_renumbered(perm, state);
        }
    }
}

impl<T: HashRenumbered> HashRenumbered for Box<T> {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        (**self).hash_renumbered(perm, state);
    }
}

/// A queue of values each naming its node: each renamed, the order kept.
impl<T: HashRenumbered> HashRenumbered for VecDeque<T> {
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, state: &mut H) {
        // As a deque hashes: its length, then each element.
        state.write_usize(self.len());
        for value in self {
            value.hash_renumbered(perm, state);
        }
    }
}

/// Hashes `items`, a list indexed by node, as the vector renumbered by
/// `renumber_per_node` would hash: each entry
/// renamed, at its node's new place (in the order kept, for a list of another length than
/// the permutation's).
pub(crate) fn hash_per_node<T: HashRenumbered, H: Hasher>(
    items: &[T],
    perm: &NodePermutation,
    state: &mut H,
) {
    hash_reordered(items, perm, state, |item, state| {
        item.hash_renumbered(perm, state);
    });
}

/// Hashes `items`, a list indexed by node whose entries name no node, as the vector
/// [`NodePermutation::permute`] reorders would hash. For entries whose slice hashes entry
/// by entry (not the integers, whose slices hash as one write of their bytes).
pub(crate) fn hash_permuted<T: Hash, H: Hasher>(
    items: &[T],
    perm: &NodePermutation,
    state: &mut H,
) {
    hash_reordered(items, perm, state, |item, state| item.hash(state));
}

/// As a vector hashes: its length, then `hash_one` of each entry, taken at its node's new
/// place (in the order kept, for a list of another length than the permutation's).
fn hash_reordered<T, H: Hasher>(
    items: &[T],
    perm: &NodePermutation,
    state: &mut H,
    mut hash_one: impl FnMut(&T, &mut H),
) {
    state.write_usize(items.len());
    if items.len() == perm.len() {
        for j in 0..items.len() {
            hash_one(&items[perm.comes_from(j)], state);
        }
    } else {
        items.iter().for_each(|item| hash_one(item, state));
    }
}
