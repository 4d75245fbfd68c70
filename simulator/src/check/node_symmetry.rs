//! Node symmetry: states that differ only in which node is which share one fingerprint.
//!
//! Every node of a check has the same configuration, no fault names a node (a budget
//! counts faults of any node) and nothing in the model breaks a tie by a node's number, so
//! renumbering the nodes of a state (the nodes themselves, each client's link to each node
//! with the requests and servers named in it, and each client's machines by the core's
//! [`RenumberNodes`]) gives a state that behaves as the original with its nodes renamed:
//! the same steps, renamed, lead to the same states, renamed, judged alike
//! (docs/simulator.md, "Node symmetry", states the argument).
//!
//! The canonical form of a state is the least fingerprint over the renumberings that sort
//! the nodes by their own fingerprints (a node's state, and how many messages each client
//! has on its way to and from it: neither names a node's number), so that only nodes alike
//! are permuted among themselves: one renumbering when the nodes all differ, up to `N!`
//! when they are all alike (nodes alike in every respect are taken in one order). Any
//! state renumbered has the same nodes' own fingerprints, the same renumberings to try
//! (renamed) and so the same least fingerprint.

use std::hash::Hash;

#[cfg(test)]
use redlock_core::NodePermutation;

use super::client_symmetry::{Owners, remembered_client_hash};
use super::fingerprint::{Fingerprint, Hasher128};
use super::node;
use super::permutations::permutation;
use super::shared::{MemoKey, PLAIN};
use super::state::{
    CheckState, HashClient, MAX_CLIENTS, MAX_NODES, Naming, NodeRanks, Ranks, SharedClient,
};

/// The identity renumbering, as node ranks.
pub(super) fn identity() -> NodeRanks {
    std::array::from_fn(|n| n as u8)
}

/// `state` with node `n` renumbered `perm.index(n)` throughout.
#[cfg(test)]
pub(crate) fn renumbered(state: &CheckState, perm: &NodePermutation) -> CheckState {
    let mut next = state.clone();
    perm.permute(&mut next.nodes);
    for client in &mut next.clients {
        client.make_mut().renumber_nodes(perm);
    }
    next
}

/// Whether swapping nodes `a` and `b` leaves `state` as it is: the two nodes are equal,
/// and each client hashes alike renumbered by the transposition and as it is (128-bit
/// fingerprints, as the explorer tells states apart: a client that a renumbering changes
/// is taken as unchanged only when the two fingerprints collide).
///
/// With client symmetry, a client that holds no other client's token is compared by the
/// fingerprints the canonical form takes of it (its own tokens named `SELF`, so that no
/// two of its tokens are named alike), remembered with it under the same keys.
fn swap_leaves_alone(state: &CheckState, a: usize, b: usize, clients: bool, seed: u64) -> bool {
    if state.nodes[a] != state.nodes[b] {
        return false;
    }
    let mut to = identity();
    to.swap(a, b);
    let swapped = HashClient::Renumbered(permutation(&to[..state.nodes.len()]));
    state.clients.iter().enumerate().all(|(c, client)| {
        if clients && c < MAX_CLIENTS {
            let (as_is, other) = remembered_client_hash(client, c, &HashClient::AsIs, None, seed);
            if !other {
                return remembered_client_hash(client, c, &swapped, None, seed).0 == as_is;
            }
        }
        hash_alone(client, &swapped) == hash_alone(client, &HashClient::AsIs)
    })
}

/// `client` hashed by `hash_client` on its own (the fixed seed, its tokens as they are),
/// remembered with the client: most steps leave most clients as they were.
fn hash_alone(client: &SharedClient, hash_client: &HashClient<'_>) -> Fingerprint {
    let tag = PLAIN | hash_client.tag();
    let hash = || {
        (
            hash_client.fingerprint(client, &Owners::AS_THEY_ARE, 0).0,
            false,
        )
    };
    client.memo().get_or(MemoKey { seed: 0, tag }, hash).0
}

/// The least fingerprint of `state` over the renumberings that sort its nodes by their own
/// fingerprints (with client symmetry when `clients`), and its naming: `None` when two
/// renumberings give it (the state is its own image under a renumbering, so that no one
/// naming of the nodes is the fingerprint's) or two clients tie.
pub(super) fn canonical(
    state: &CheckState,
    clients: bool,
    seed: u64,
) -> (Fingerprint, Option<Naming>) {
    canonical_with(state, clients, true, seed)
}

/// [`canonical`]; with `collapse`, a run of nodes alike in every respect (each two of them
/// next in the run swapped leave the state as it is, so any order of them does) is taken in
/// one order, not in all: every order gives the same state, so the least fingerprint is
/// the same, and no one naming is the fingerprint's either way.
fn canonical_with(
    state: &CheckState,
    clients: bool,
    collapse: bool,
    seed: u64,
) -> (Fingerprint, Option<Naming>) {
    let count = state.nodes.len();
    // `order[j]`: the node that becomes node `j`; sorted by the nodes' own fingerprints.
    let mut own = [0u128; MAX_NODES];
    for (n, (slot, node)) in own.iter_mut().zip(&state.nodes).enumerate() {
        let mut h = Hasher128::default();
        // With client symmetry, its tokens without their owners: no renaming of the clients
        // changes a node's own fingerprint.
        let owners = clients.then_some(Owners::new([0; MAX_CLIENTS]));
        node::fingerprint(node, owners.as_ref(), 0).hash(&mut h);
        // What the clients have on their way with it, summed so that the clients' order
        // does not count (client symmetry).
        let links = state.clients.iter().fold(0u128, |sum, client| {
            let mut l = Hasher128::default();
            client.links[n].shape().hash(&mut l);
            sum.wrapping_add(l.finish128())
        });
        links.hash(&mut h);
        *slot = h.finish128();
    }
    let mut order: [u8; MAX_NODES] = identity();
    order[..count].sort_by_key(|&n| (own[usize::from(n)], n));
    // The runs of nodes alike: each is permuted in place, every combination of them tried.
    let mut runs = [(0usize, 0usize); MAX_NODES];
    let mut run_count = 0;
    let mut start = 0;
    for j in 1..=count {
        if j == count || own[usize::from(order[j])] != own[usize::from(order[start])] {
            runs[run_count] = (start, j);
            run_count += 1;
            start = j;
        }
    }
    let mut alike = false;
    if collapse {
        let mut kept = 0;
        for r in 0..run_count {
            let (start, end) = runs[r];
            let whole = end - start > 1
                && (start..end - 1).all(|j| {
                    let (a, b) = (usize::from(order[j]), usize::from(order[j + 1]));
                    swap_leaves_alone(state, a, b, clients, seed)
                });
            alike |= whole;
            if !whole {
                runs[kept] = runs[r];
                kept += 1;
            }
        }
        run_count = kept;
    }
    let runs = &runs[..run_count];
    let mut best: Option<(Fingerprint, Option<Ranks>, NodeRanks)> = None;
    let mut tied = alike;
    loop {
        let mut ranks = identity();
        for (j, &n) in order[..count].iter().enumerate() {
            ranks[usize::from(n)] = j as u8;
        }
        let (fp, client_ranks) = if ranks[..count] == identity()[..count] {
            state.client_fingerprint(clients, seed)
        } else {
            // The renumbered state's fingerprint: its nodes taken in the new order, its
            // clients hashed renumbered (the nodes themselves name no node,
            // `a_node_state_names_no_node`).
            let hash_client = HashClient::Renumbered(permutation(&ranks[..count]));
            state.client_fingerprint_of(&order[..count], &hash_client, clients, seed)
        };
        match &best {
            Some((least, ..)) if fp > *least => {}
            Some((least, ..)) if fp == *least => tied = true,
            _ => {
                best = Some((fp, client_ranks, ranks));
                tied = alike;
            }
        }
        if !next_combination(&mut order, runs) {
            break;
        }
    }
    let (fp, client_ranks, nodes) = best.expect("at least one renumbering");
    let naming = client_ranks
        .filter(|_| !tied)
        .map(|clients| Naming { clients, nodes });
    (fp, naming)
}

/// Steps `order` to the next combination of the permutations of its runs (each run in
/// lexicographic order, the first run fastest); `false` once every one has been seen (and
/// the runs are sorted again).
pub(super) fn next_combination(order: &mut [u8; MAX_NODES], runs: &[(usize, usize)]) -> bool {
    runs.iter()
        .any(|&(start, end)| next_permutation(&mut order[start..end]))
}

/// The next permutation of `items` in lexicographic order; `false` (and `items` sorted) after
/// the last.
fn next_permutation(items: &mut [u8]) -> bool {
    let len = items.len();
    let Some(i) = (1..len).rev().find(|&i| items[i - 1] < items[i]) else {
        items.reverse();
        return false;
    };
    let j = (i..len)
        .rev()
        .find(|&j| items[j] > items[i - 1])
        .unwrap_or(i);
    items.swap(i - 1, j);
    items[i..].reverse();
    true
}

#[cfg(test)]
mod tests {
    use super::super::model::{Action, catalogue_model, walk_first_states};
    use super::super::state::Symmetry;
    use super::*;

    fn hash_of<T: Hash>(value: &T) -> Fingerprint {
        let mut h = Hasher128::default();
        value.hash(&mut h);
        h.finish128()
    }

    #[test]
    fn every_combination_of_the_runs_once() {
        let mut order = identity();
        let runs = [(0, 2), (2, 5)];
        let mut seen = std::collections::HashSet::new();
        loop {
            assert!(seen.insert(order));
            if !next_combination(&mut order, &runs) {
                break;
            }
        }
        assert_eq!(seen.len(), 2 * 6);
        assert_eq!(order, identity(), "sorted again after the last");
    }

    /// Walks `file`'s model over up to `limit` states and, in each, for a few renumberings
    /// `p`: every step of the state renumbered is the renumbered step of the state, leading
    /// to the renumbered successor, judged alike; renumbering by `p` then `p⁻¹` gives the
    /// state back; and the canonical fingerprint is the same for the state and its image.
    fn equivariant(file: &str, limit: usize) -> usize {
        let model = catalogue_model(file);
        let nodes = model.spec.nodes;
        let perms = NodePermutation::all(nodes);
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![model.initial()];
        let (mut actions, mut image_actions) = (Vec::new(), Vec::new());
        let mut checked = 0;
        let both = Symmetry {
            clients: true,
            nodes: true,
        };
        while let Some(s) = stack.pop() {
            if seen.len() >= limit || !seen.insert(s.fingerprint(Symmetry::NONE, 0)) {
                continue;
            }
            model.actions(&s, &mut actions);
            for perm in perms.iter().skip(seen.len() % perms.len()).take(2) {
                let image = renumbered(&s, perm);
                for (client, renamed) in s.clients.iter().zip(&image.clients) {
                    let owners = Owners::AS_THEY_ARE;
                    assert_eq!(
                        HashClient::Renumbered(perm).fingerprint(client, &owners, 0),
                        HashClient::AsIs.fingerprint(renamed, &owners, 0),
                        "{file}: a client hashed renumbered"
                    );
                }
                assert_eq!(renumbered(&image, &perm.inverse()), s, "{file}: p then p⁻¹");
                assert_eq!(
                    image.fingerprint(both, 0),
                    s.fingerprint(both, 0),
                    "{file}: canonical fingerprint of {}",
                    model.describe(&s)
                );
                model.actions(&image, &mut image_actions);
                let mut expected: Vec<String> = actions
                    .iter()
                    .map(|&a| rename(a, perm).to_string())
                    .collect();
                let mut got: Vec<String> = image_actions.iter().map(ToString::to_string).collect();
                expected.sort();
                got.sort();
                assert_eq!(got, expected, "{file}: steps of {}", model.describe(&s));
                for &a in &actions {
                    let (next, reached) = model.successor(&s, a);
                    let (image_next, image_reached) = model.successor(&image, rename(a, perm));
                    assert_eq!(image_reached, reached, "{file}: {a}");
                    assert_eq!(image_next.violation, next.violation, "{file}: {a}");
                    let expected = renumbered(&next, perm);
                    assert!(
                        image_next == expected,
                        "{file}: {a} from {}",
                        model.describe(&s)
                    );
                    checked += 1;
                }
            }
            for &a in &actions {
                stack.push(model.successor(&s, a).0);
            }
        }
        checked
    }

    /// `action` with its nodes renamed by `perm`.
    fn rename(action: Action, perm: &NodePermutation) -> Action {
        let n = |node: u8| perm.index(usize::from(node)) as u8;
        let bits = |set: u8| {
            (0..8)
                .filter(|i| set & (1 << i) != 0)
                .fold(0u8, |out, i| out | 1 << n(i))
        };
        match action {
            Action::Tick { slow, fast } => Action::Tick {
                slow,
                fast: bits(fast),
            },
            Action::Deliver { client, node, link } => Action::Deliver {
                client,
                node: n(node),
                link,
            },
            Action::Delay { client, node, link } => Action::Delay {
                client,
                node: n(node),
                link,
            },
            Action::Drop { client, node, link } => Action::Drop {
                client,
                node: n(node),
                link,
            },
            Action::Crash(node) => Action::Crash(n(node)),
            Action::Restart(node) => Action::Restart(n(node)),
            Action::Revive { client, node } => Action::Revive {
                client,
                node: n(node),
            },
            Action::Jump(node) => Action::Jump(n(node)),
            other => other,
        }
    }

    #[test]
    fn the_model_is_equivariant_under_renumbering_the_nodes() {
        // Crashes with and without quarantine, pauses, losses and delays, keep-alive,
        // fencing, clock jumps and fast node clocks, waiting marks, five nodes.
        for file in [
            "shipped-drift.toml",
            "shipped-crash.toml",
            "no-restart-quarantine.toml",
            "shipped-pause-loss.toml",
            "keep-alive-never-stops-delayed.toml",
            "fencing-crash-mutation.toml",
            "waiting-marks.toml",
            "teeth-s6-five-nodes.toml",
        ] {
            assert!(equivariant(file, 1_500) > 0, "{file}");
        }
    }

    #[test]
    fn taking_nodes_alike_in_one_order_changes_no_fingerprint() {
        let mut collapsed = 0;
        for file in [
            "shipped-drift.toml",
            "shipped-crash.toml",
            "teeth-s6-five-nodes.toml",
        ] {
            let model = catalogue_model(file);
            walk_first_states(&model, 2_000, |s| {
                for clients in [false, true] {
                    let fast = canonical_with(s, clients, true, 0);
                    assert_eq!(fast, canonical_with(s, clients, false, 0), "{file}");
                    collapsed += usize::from(fast.1.is_none());
                }
            });
        }
        assert!(collapsed > 0);
    }

    #[test]
    fn a_node_state_names_no_node() {
        // The nodes' own fingerprints sort them: a node's state must not carry its number.
        let model = catalogue_model("shipped-crash.toml");
        let s = model.initial();
        let own: Vec<Fingerprint> = s.nodes.iter().map(hash_of).collect();
        assert!(own.windows(2).all(|w| w[0] == w[1]));
    }
}
