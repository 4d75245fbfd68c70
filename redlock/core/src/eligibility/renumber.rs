//! Renumbering the eligibility rule's nodes, for a model checker with node symmetry: its
//! events, admissions and per-node states move with a [`NodePermutation`], its `run_id`s are
//! renamed in place, and a state is hashed as renumbered without a copy. Nothing here
//! decides anything; it is how the checker sees two states that differ only in which node is
//! which as one.

use std::hash::{Hash, Hasher};

use super::{Admission, Eligibility, EligibilityEvent, NodeState};
use crate::renumber::{NodePermutation, RenumberNodes};

impl RenumberNodes for EligibilityEvent {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Quarantined { node, .. }
            | Self::Unidentifiable { node, .. }
            | Self::Evicting { node, .. }
            | Self::OutlivesQuarantine { node, .. } => node.renumber_nodes(perm),
            Self::Duplicate { node, of } => {
                node.renumber_nodes(perm);
                of.renumber_nodes(perm);
            }
        }
    }
}

impl RenumberNodes for Admission {
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Self::Refuse(failure) = self {
            failure.renumber_nodes(perm);
        }
    }
}

impl RenumberNodes for Eligibility {
    /// Each node's state moves to its new place; a duplicate names the node it duplicates
    /// by its new number. Connection numbers are per node and move with it.
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        for state in &mut self.nodes {
            state.duplicate_of.renumber_nodes(perm);
        }
        perm.permute(&mut self.nodes);
    }
}

impl Eligibility {
    /// Renames every `run_id` it knows (read, or remembered from an earlier process) in
    /// place by `rename`. Eligibility only compares `run_id`s for equality, so a one-to-one
    /// renaming changes no decision: a model checker whose servers' `run_id`s carry their
    /// position renames them with the nodes ([`RenumberNodes`]). In place, so that a
    /// renaming that keeps a `run_id`'s length (or leaves it alone) allocates nothing: a
    /// model checker renames them for every state it fingerprints.
    pub fn rename_run_ids(&mut self, mut rename: impl FnMut(&mut String)) {
        for state in &mut self.nodes {
            for run_id in [&mut state.run_id, &mut state.remembered]
                .into_iter()
                .flatten()
            {
                rename(run_id);
            }
        }
    }

    /// Feeds `state` what the derived `Hash` of this eligibility renumbered by `perm`
    /// ([`RenumberNodes`]), with its `run_id`s then renamed by `rename`
    /// ([`Self::rename_run_ids`]), would: the same words in the same order, without a copy.
    /// A model checker with node symmetry fingerprints a state under every renumbering of
    /// its nodes it tries, and a copy of every node's state (each `run_id` a new `String`)
    /// for each was much of that cost.
    pub fn hash_renumbered<H: Hasher>(
        &self,
        perm: &NodePermutation,
        mut rename: impl FnMut(&mut String),
        state: &mut H,
    ) {
        let count = self.nodes.len();
        if perm.len() != count {
            // A permutation of another length leaves the nodes where they are.
            let mut image = self.clone();
            image.renumber_nodes(perm);
            image.rename_run_ids(rename);
            return image.hash(state);
        }
        self.policy.hash(state);
        // As a vector hashes: its length, then each element (the node that moves to `j`).
        state.write_usize(count);
        let mut scratch = String::new();
        for j in 0..count {
            let n = (0..count).find(|&n| perm.index(n) == j).unwrap_or(j);
            // Every field, so that a field added to `NodeState` must be added here.
            let NodeState {
                run_id,
                remembered,
                changed,
                quarantined_until,
                dated,
                identified,
                unidentifiable_reported,
                eviction_reported,
                outlives_reported,
                duplicate_of,
                addresses,
                responsive,
            } = &self.nodes[n];
            for id in [run_id, remembered] {
                let renamed = id.as_ref().map(|id| {
                    scratch.clear();
                    scratch.push_str(id);
                    rename(&mut scratch);
                    scratch.as_str()
                });
                renamed.hash(state);
            }
            changed.hash(state);
            quarantined_until.hash(state);
            dated.hash(state);
            identified.hash(state);
            unidentifiable_reported.hash(state);
            eviction_reported.hash(state);
            outlives_reported.hash(state);
            duplicate_of.map(|of| perm.node(of)).hash(state);
            addresses.hash(state);
            responsive.hash(state);
        }
    }
}
