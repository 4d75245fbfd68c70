//! Renumbering the nodes: a permutation of the configured list applied to everything a
//! machine keeps per node.
//!
//! Nothing the machines decide depends on *which* position a node has in the list: a round
//! counts votes, a cleanup goes to every node that may hold the key, a release notification
//! frees the node it came from, eligibility is per node. So a machine renumbered by a
//! permutation `p` and fed the events of the original with every node `n` named `p(n)`
//! produces the original's commands and outcomes with their nodes renamed the same way (the
//! machines are *equivariant*; the tests and the property tests in `renumber_proptests.rs` check it).
//! A model checker uses this to count states that differ only in the nodes' names once
//! (node symmetry).
//!
//! Two things follow the index order, and neither changes an outcome:
//!
//! - the commands of one step are queued in index order (a round's `SET`s, a cleanup's
//!   releases, the holder reads): each goes to its own node, and a driver keeps order only
//!   per node;
//! - [`Eligibility`](super::Eligibility) refuses a name of a server that another counted
//!   name already reaches (the same `run_id` or address), taking the first such name in
//!   index order. The names that keep a vote never share a server (the second is refused
//!   as it is identified), so at most one is found: which name keeps the vote follows the
//!   order of identification, which a renumbering renames, not the index order.

use std::collections::VecDeque;
use std::fmt;

use super::NodeId;

/// A permutation of the node indices `0..len`: node `i` becomes node `to(i)`.
///
/// ```
/// use redlock_core::{NodeId, NodePermutation};
///
/// let swap = NodePermutation::new(vec![1, 0, 2]).unwrap();
/// assert_eq!(swap.node(NodeId::new(0)), NodeId::new(1));
/// let mut per_node = vec!["a", "b", "c"];
/// swap.permute(&mut per_node);
/// assert_eq!(per_node, ["b", "a", "c"]);
/// assert!(NodePermutation::new(vec![0, 0]).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodePermutation {
    to: Vec<u32>,
}

/// A list that is not a permutation of `0..len`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotAPermutation(
    /// The list given.
    pub Vec<usize>,
);

impl fmt::Display for NotAPermutation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a permutation of 0..{}: every index must appear exactly once",
            self.0,
            self.0.len()
        )
    }
}

impl std::error::Error for NotAPermutation {}

impl NodePermutation {
    /// The permutation sending node `i` to `to[i]`.
    ///
    /// # Errors
    ///
    /// `to` is not a permutation of `0..to.len()`.
    pub fn new(to: Vec<usize>) -> Result<Self, NotAPermutation> {
        let mut seen = vec![false; to.len()];
        let valid = to.iter().all(|&i| match seen.get_mut(i) {
            Some(slot) if !*slot => {
                *slot = true;
                true
            }
            _ => false,
        });
        if !valid || u32::try_from(to.len()).is_err() {
            return Err(NotAPermutation(to));
        }
        Ok(Self {
            to: to.iter().map(|&i| i as u32).collect(),
        })
    }

    /// The identity on `len` nodes.
    pub fn identity(len: usize) -> Self {
        Self {
            to: (0..len)
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
                .collect(),
        }
    }

    /// Every permutation of `len` nodes (`len!` of them), the identity first.
    pub fn all(len: usize) -> Vec<Self> {
        let mut out = Vec::new();
        let mut current: Vec<usize> = (0..len).collect();
        loop {
            out.push(Self {
                to: current.iter().map(|&i| i as u32).collect(),
            });
            // The next in lexicographic order.
            let Some(i) = (1..len).rev().find(|&i| current[i - 1] < current[i]) else {
                return out;
            };
            let j = (i..len)
                .rev()
                .find(|&j| current[j] > current[i - 1])
                .unwrap_or(i);
            current.swap(i - 1, j);
            current[i..].reverse();
        }
    }

    /// How many nodes it permutes.
    pub fn len(&self) -> usize {
        self.to.len()
    }

    /// Whether it permutes no node.
    pub fn is_empty(&self) -> bool {
        self.to.is_empty()
    }

    /// Whether it leaves every node where it is.
    pub fn is_identity(&self) -> bool {
        self.to.iter().enumerate().all(|(i, &to)| i == to as usize)
    }

    /// Where node `index` goes (an index it does not cover stays).
    pub fn index(&self, index: usize) -> usize {
        self.to.get(index).map_or(index, |&to| to as usize)
    }

    /// Where `node` goes.
    pub fn node(&self, node: NodeId) -> NodeId {
        NodeId::new(self.index(node.index()))
    }

    /// The node that goes to `index` (an index it does not cover stays): where the inverse
    /// sends `index`, without building the inverse, for reading a list indexed by node in
    /// its renumbered order.
    pub fn comes_from(&self, index: usize) -> usize {
        self.to
            .iter()
            .position(|&to| to as usize == index)
            .unwrap_or(index)
    }

    /// The permutation that undoes this one.
    pub fn inverse(&self) -> Self {
        let mut back = vec![0; self.to.len()];
        for (i, &to) in self.to.iter().enumerate() {
            back[to as usize] = i as u32;
        }
        Self { to: back }
    }

    /// This permutation, then `next`.
    pub fn then(&self, next: &Self) -> Self {
        Self {
            to: self
                .to
                .iter()
                .map(|&to| next.index(to as usize) as u32)
                .collect(),
        }
    }

    /// Moves the item of node `i` to position `to(i)`, for a list indexed by node. A list
    /// of another length than the permutation's is left as it is (no machine keeps one).
    pub fn permute<T>(&self, items: &mut [T]) {
        if items.len() != self.to.len() {
            return;
        }
        for start in 0..items.len() {
            // Each cycle once, from its smallest index; swapping along it puts each item at
            // its place.
            let mut j = self.to[start] as usize;
            let mut smallest = true;
            while j != start {
                if j < start {
                    smallest = false;
                    break;
                }
                j = self.to[j] as usize;
            }
            if !smallest {
                continue;
            }
            let mut j = self.to[start] as usize;
            while j != start {
                items.swap(start, j);
                j = self.to[j] as usize;
            }
        }
    }
}

/// A value that names nodes: renumbering applies a [`NodePermutation`] to every node it
/// names and to every list it keeps indexed by node.
pub trait RenumberNodes {
    /// Renames node `n` to `perm.node(n)` throughout.
    fn renumber_nodes(&mut self, perm: &NodePermutation);
}

impl RenumberNodes for NodeId {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        *self = perm.node(*self);
    }
}

impl<T: RenumberNodes> RenumberNodes for Option<T> {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Some(value) = self {
            value.renumber_nodes(perm);
        }
    }
}

impl<T: RenumberNodes> RenumberNodes for Box<T> {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        (**self).renumber_nodes(perm);
    }
}

/// A queue or a list of values each naming its node (not indexed by node): each value is
/// renamed, the order kept.
impl<T: RenumberNodes> RenumberNodes for VecDeque<T> {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        for value in self {
            value.renumber_nodes(perm);
        }
    }
}

/// Renames what each entry of a list indexed by node names, and moves each entry to its
/// node's new place.
pub(crate) fn renumber_per_node<T: RenumberNodes>(items: &mut [T], perm: &NodePermutation) {
    for item in items.iter_mut() {
        item.renumber_nodes(perm);
    }
    perm.permute(items);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_permutation_once_and_each_undone_by_its_inverse() {
        let all = NodePermutation::all(4);
        assert_eq!(all.len(), 24);
        assert!(all[0].is_identity());
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), 24);
        for p in &all {
            assert!(p.then(&p.inverse()).is_identity());
            let mut items: Vec<usize> = (0..4).collect();
            p.permute(&mut items);
            for (i, &item) in items.iter().enumerate() {
                assert_eq!(p.index(item), i);
            }
            p.inverse().permute(&mut items);
            assert_eq!(items, [0, 1, 2, 3]);
        }
        assert_eq!(NodePermutation::all(0).len(), 1);
        assert_eq!(NodePermutation::all(5).len(), 120);
    }

    #[test]
    fn a_list_that_is_no_permutation_is_refused() {
        assert!(NodePermutation::new(vec![0, 2]).is_err());
        assert!(NodePermutation::new(vec![1, 1]).is_err());
        let error = NodePermutation::new(vec![3]).unwrap_err();
        assert!(error.to_string().contains("not a permutation"), "{error}");
        assert!(NodePermutation::new(vec![]).unwrap().is_empty());
    }

    #[test]
    fn a_list_of_another_length_is_left_alone() {
        let swap = NodePermutation::new(vec![1, 0]).unwrap();
        let mut three = [1, 2, 3];
        swap.permute(&mut three);
        assert_eq!(three, [1, 2, 3]);
        assert_eq!(swap.index(5), 5);
    }
}
