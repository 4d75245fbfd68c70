//! A client's fingerprint, composed of its parts' own: its phase (the lease machines), its
//! eligibility and its link to each node are each hashed alone, remembered with the part
//! (`shared.rs`), and the client's fingerprint hashes those fingerprints with its few
//! fields of its own.
//!
//! A step writes one client's phase and one link at most (a tick writes no part at all,
//! only the clocks), and the canonical form hashes each client under every renumbering of
//! the nodes and renaming of the clients it tries: hashed whole, a client was hashed again
//! for each, every message and per-node table of its machines with it. Composed, a part a
//! step left alone is hashed once under each renumbering and renaming, whichever client
//! copy holds it. Two clients with the same fingerprint have parts with the same
//! fingerprints, so that up to a collision of the 128-bit hash (as everywhere in the
//! explorer) they are the same client.

use std::hash::Hash;
use std::sync::OnceLock;

use redlock_core::NodePermutation;

use super::Client;
use super::phase_fingerprint::phase_fingerprint;
use crate::check::client_symmetry::{Owners, Renamed};
use crate::check::fingerprint::{Fingerprint, Hasher128};
use crate::check::permutations;
use crate::check::shared::{MemoKey, Shared};
use crate::check::state::{MAX_NODES, renumbering_tag};
use crate::net::message::ServerId;

impl Client {
    /// Its fingerprint under `seed`, renumbered by `perm` (as it is for `None`) and with its
    /// tokens' owners named by `owners` (`client_symmetry.rs`), and whether a token of
    /// another client was named `OTHER` in it. Renumbered, it is the fingerprint of the
    /// client renumbered by `perm` (`renumber_nodes`), without the copy.
    pub(in crate::check) fn fingerprint(
        &self,
        perm: Option<&NodePermutation>,
        owners: &Owners,
        seed: u64,
    ) -> (Fingerprint, bool) {
        if let Some(perm) = perm.filter(|_| self.links.len() > MAX_NODES) {
            // More nodes than a renumbering's tag names: a copy, renumbered.
            let mut image = self.clone();
            image.renumber_nodes(perm);
            return image.fingerprint(None, owners, seed);
        }
        // The renumbering (25 bits) and the renaming (32 bits) a part's fingerprint is
        // remembered under.
        let perm_tag = perm.map_or(0, renumbering_tag);
        let key = MemoKey {
            seed,
            tag: perm_tag | owners.tag() << 25,
        };
        let mut h = Hasher128::seeded(seed);
        // The fields of its own, in the order of the derived `Hash`: none holds a token or
        // names a node.
        (self.clock, &self.strays, self.paused, self.acted).hash(&mut h);
        let (phase, mut other) = phase_fingerprint(&self.phase, perm, perm_tag, owners, seed);
        phase.hash(&mut h);
        (self.iteration, self.op, self.drawn).hash(&mut h);
        self.eligibility_fingerprint(perm, seed).hash(&mut h);
        self.faults.hash(&mut h);
        // The link of node `n` becomes node `perm.index(n)`'s: position `j` holds the link
        // of the node that becomes `j`.
        let count = self.links.len();
        let mut from: [usize; MAX_NODES] = std::array::from_fn(|n| n);
        if let Some(perm) = perm {
            for n in 0..count {
                from[perm.index(n)] = n;
            }
        }
        count.hash(&mut h);
        if count > MAX_NODES {
            // More nodes than a renumbering names (never renumbered: a client of as many is
            // renumbered as a copy, above): each link as it is.
            for link in &self.links {
                let (link, link_other) = part(link, key, owners, |link, h| link.hash(h));
                other |= link_other;
                link.hash(&mut h);
            }
            return (h.finish128(), other);
        }
        // A link seldom holds another client's token (a release's notification does),
        // and one that holds none hashes alike under every renaming that names its own
        // client's tokens alike: under a renaming of the clients, it is looked up first
        // as its client's own view took it.
        let own_view = owners.own_view();
        // A link names no node but its own, so it is hashed as node 0's link whatever the
        // renumbering: the same fingerprint under every one, remembered once for all.
        for &n in &from[..count] {
            let hash_link = |owners: &Owners| {
                let key = MemoKey {
                    seed,
                    tag: AS_NODE_ZERO | owners.tag() << 25,
                };
                part(&self.links[n], key, owners, |link, h| {
                    link.hash_renumbered(as_node_zero(n, count), h)
                })
            };
            let (link, link_other) = match own_view.map(|view| hash_link(&view)) {
                Some((fingerprint, false)) => (fingerprint, false),
                _ => hash_link(owners),
            };
            other |= link_other;
            link.hash(&mut h);
        }
        (h.finish128(), other)
    }

    /// Its eligibility's own fingerprint under `seed`, renumbered by `perm` (with the
    /// `run_id`s it knows renamed) or as it is, remembered with the eligibility. The
    /// eligibility holds no token, so no renaming of the clients changes it.
    fn eligibility_fingerprint(&self, perm: Option<&NodePermutation>, seed: u64) -> Fingerprint {
        let tag = perm.map_or(0, renumbering_tag);
        let hash = || {
            let mut h = Hasher128::seeded(seed);
            match perm {
                None => self.eligibility.hash(&mut h),
                Some(perm) => {
                    let rename =
                        |run_id: &mut String| ServerId::renumber_run_id(run_id, |n| perm.index(n));
                    self.eligibility.hash_renumbered(perm, rename, &mut h);
                }
            }
            (h.finish128(), false)
        };
        self.eligibility
            .memo()
            .get_or(MemoKey { seed, tag }, hash)
            .0
    }
}

/// The low bits of the tag a link's fingerprint is remembered under: it is hashed as the
/// link of node 0 (`as_node_zero`), so no renumbering names it; every renumbering's tag has
/// its lowest bit set (`renumbering_tag`), and no renumbering, 0.
const AS_NODE_ZERO: u64 = 2;

/// The renumbering that swaps nodes 0 and `n` of `count` (at most [`MAX_NODES`]). Every
/// message on the link of node `n` is to or from that node (a request's id and a command
/// name it, an identification names its server), so the link renumbered by this is the
/// same link as node 0's, whichever renumbering the client is hashed under: two links at
/// one place of two clients hash alike exactly when they are alike, as the renumbering is
/// one to one. The test `a_link_hashed_renumbered_is_its_renumbered_copy_hashed`
/// (`renumber.rs`) walks the catalogue's models for it.
fn as_node_zero(n: usize, count: usize) -> &'static NodePermutation {
    // Looked up once per count: a lookup by ranks checks and ranks them each time.
    static TABLES: [OnceLock<Vec<&'static NodePermutation>>; MAX_NODES + 1] =
        [const { OnceLock::new() }; MAX_NODES + 1];
    let table = TABLES[count].get_or_init(|| {
        (0..count)
            .map(|n| {
                let mut to: [u8; MAX_NODES] = std::array::from_fn(|i| i as u8);
                to.swap(0, n);
                permutations::permutation(&to[..count])
            })
            .collect()
    });
    table[n]
}

/// The fingerprint of `part` alone under `key` (its seed, and the renumbering and renaming
/// its tag names), hashed by `hash` with its tokens' owners named by `owners`, and whether
/// a token named `OTHER` was in it: remembered with the part.
fn part<T, const SLOTS: usize>(
    part: &Shared<T, SLOTS>,
    key: MemoKey,
    owners: &Owners,
    hash: impl FnOnce(&T, &mut Renamed<'_, Hasher128>),
) -> (Fingerprint, bool) {
    part.memo().get_or(key, || {
        let mut h = Hasher128::seeded(key.seed);
        let mut renamed = Renamed::new(&mut h, *owners);
        hash(part, &mut renamed);
        let other = renamed.saw_other();
        (h.finish128(), other)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::hash::Hash;

    use redlock_core::NodePermutation;

    use super::super::Phase;
    use crate::check::fingerprint::{Fingerprint, Hasher128};
    use crate::check::model::{catalogue_model, walk_first_states};

    /// `phase` renumbered by `perm`, and its hash as the fingerprint takes it (without the
    /// copy) and the hash of the copy.
    fn hashed(phase: &Phase, perm: &NodePermutation) -> (Phase, Fingerprint, Fingerprint) {
        let mut without_copy = Hasher128::seeded(7);
        phase.hash_renumbered(perm, &mut without_copy);
        let mut image = phase.clone();
        image.renumber_nodes(perm);
        let mut copy = Hasher128::seeded(7);
        image.hash(&mut copy);
        (image, without_copy.finish128(), copy.finish128())
    }

    /// Walks the first states of models whose clients acquire, lose rounds and wait (with
    /// marks), fence, keep their leases alive, extend them by hand and release them, and
    /// hashes each client's phase under every renumbering of the nodes: hashed renumbered,
    /// it is its renumbered copy hashed; and phases whose renumbered copies differ hash
    /// apart.
    #[test]
    fn a_phase_hashed_renumbered_is_its_renumbered_copy_hashed() {
        for file in [
            "shipped-drift.toml",
            "waiting-marks.toml",
            "fencing-crash-mutation.toml",
            "keep-alive-never-stops-delayed.toml",
            "manual-extension.toml",
        ] {
            let model = catalogue_model(file);
            let perms = NodePermutation::all(model.spec.nodes);
            let mut images: HashMap<Fingerprint, Phase> = HashMap::new();
            walk_first_states(&model, 600, |s| {
                for client in &s.clients {
                    for perm in &perms {
                        let (image, without_copy, copy) = hashed(&client.phase, perm);
                        assert_eq!(without_copy, copy, "{file}: renumbered by {perm:?}");
                        if let Some(other) = images.insert(without_copy, image.clone()) {
                            assert_eq!(other, image, "{file}: two phases hashed alike");
                        }
                    }
                }
            });
            assert!(images.len() > 50, "{file}: {} phases", images.len());
        }
    }
}
