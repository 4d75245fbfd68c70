//! One state of the model, and its fingerprint: the state says what identifies it (as
//! stateright's `Representative` lets a state name its representative), so the explorer
//! never reaches into its fields.

use std::hash::{Hash, Hasher};

use redlock_core::NodePermutation;

use super::client::Client;
use super::client_symmetry::{self, Owners};
use super::fingerprint::{Fingerprint, Hasher128};
use super::node::{self, SharedNode};
use super::node_symmetry;
use super::property::Property;
use super::shared::Shared;

/// The most clients whose fingerprints the symmetric fingerprint sorts on the stack (the
/// check file allows no more).
pub(crate) const MAX_CLIENTS: usize = 8;

/// Each client's place in a fingerprint's order of the clients.
pub(crate) type Ranks = [u8; MAX_CLIENTS];

/// The most nodes node symmetry renumbers (a tick names the fast nodes in 8 bits).
pub(crate) const MAX_NODES: usize = 8;

/// Each node's number in a fingerprint's renumbering of the nodes.
pub(crate) type NodeRanks = [u8; MAX_NODES];

/// How many fingerprints of itself a client remembers: its own under each renumbering of
/// the nodes the canonical form tries (usually one or two), once more under each renaming
/// of the clients when it holds another client's token, and as it is and with two nodes
/// swapped for node symmetry's test of nodes alike.
const CLIENT_MEMO: usize = 8;

/// A client of a state, shared with the states that have it alike.
pub(crate) type SharedClient = Shared<Client, CLIENT_MEMO>;

/// One state of the model: true time, every node and client with the messages in flight,
/// and the world's counters. Its nodes and clients are [`Shared`] with the states that
/// have them alike (a step copies only what it writes); it compares and hashes as if it
/// held them itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CheckState {
    /// True time, in ticks.
    pub(crate) time: u32,
    pub(super) nodes: Vec<SharedNode>,
    pub(super) clients: Vec<SharedClient>,
    pub(super) faults_used: u32,
    /// Grants so far.
    pub(super) grants: u16,
    /// Whether nothing but resumes happened since true time last moved on.
    pub(super) tick_fresh: bool,
    pub(super) max_fence: u64,
    /// The *always* property this state breaks, if any.
    pub(crate) violation: Option<Property>,
}

/// How a fingerprint hashes each client: as it is, or renumbered (node symmetry).
pub(crate) enum HashClient<'a> {
    AsIs,
    Renumbered(&'a NodePermutation),
}

impl HashClient<'_> {
    /// The client's fingerprint as this hashing takes it under `seed`, its tokens' owners
    /// named by `owners`, and whether another client's token was named `OTHER` in it
    /// (`client/fingerprint.rs`).
    pub(crate) fn fingerprint(
        &self,
        client: &Client,
        owners: &Owners,
        seed: u64,
    ) -> (Fingerprint, bool) {
        match self {
            Self::AsIs => client.fingerprint(None, owners, seed),
            Self::Renumbered(perm) => client.fingerprint(Some(perm), owners, seed),
        }
    }

    /// Which hashing it is, in 25 bits (for a client's remembered fingerprints): the
    /// renumbering's image of each node in 3 bits, and a bit for a renumbering.
    pub(crate) fn tag(&self) -> u64 {
        match self {
            Self::AsIs => 0,
            Self::Renumbered(perm) => renumbering_tag(perm),
        }
    }
}

/// A renumbering of at most [`MAX_NODES`] nodes in 25 bits, never 0 (which is "as it is"):
/// each node's image in 3 bits, and a bit for a renumbering.
pub(crate) fn renumbering_tag(perm: &NodePermutation) -> u64 {
    (0..perm.len().min(MAX_NODES)).fold(1, |tag, n| {
        tag | ((perm.index(n) as u64) & 7) << (1 + 3 * n)
    })
}

/// Which renamings a fingerprint ignores: of the clients, of the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Symmetry {
    /// States that differ only in which client is which share a fingerprint.
    pub(crate) clients: bool,
    /// States that differ only in which node is which share a fingerprint.
    pub(crate) nodes: bool,
}

#[cfg(test)]
impl Symmetry {
    /// Neither: every state its own fingerprint.
    pub(crate) const NONE: Self = Self {
        clients: false,
        nodes: false,
    };
}

/// How a fingerprint named the clients and the nodes: `clients[c]` is client `c`'s place
/// in the order the fingerprint took them, `nodes[n]` node `n`'s number in the renumbered
/// state it hashed (the identity without symmetry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Naming {
    pub(crate) clients: Ranks,
    pub(crate) nodes: NodeRanks,
}

impl CheckState {
    /// Lets go of its nodes and clients (freed with the last state that holds them),
    /// leaving a state that is not to be used again: a breadth-first level frees each of
    /// its states once expanded.
    pub(super) fn free_parts(&mut self) {
        self.nodes = Vec::new();
        self.clients = Vec::new();
    }

    /// Tokens drawn by every client so far.
    pub(super) fn tokens_drawn(&self) -> u32 {
        self.clients
            .iter()
            .map(|c| u32::from(c.tokens_drawn()))
            .sum()
    }

    /// Its fingerprint (see [`Self::fingerprint_ranked`]).
    pub(crate) fn fingerprint(&self, symmetry: Symmetry, seed: u64) -> Fingerprint {
        self.fingerprint_ranked(symmetry, seed).0
    }

    /// Its fingerprint, and how it named the clients and the nodes, or `None` when no one
    /// naming is the fingerprint's (two clients hash alike, or two renumberings of the
    /// nodes give the fingerprint). The partial-order reduction names the steps of states
    /// that share a fingerprint by this naming.
    ///
    /// With node symmetry, the fingerprint is the least over the renumberings of the nodes
    /// that sort them by their own fingerprints (`node_symmetry.rs`): states that differ
    /// only in which node is which share one.
    ///
    /// `seed` seeds the hash (0 for a plain check; a swarm member's own otherwise).
    pub(crate) fn fingerprint_ranked(
        &self,
        symmetry: Symmetry,
        seed: u64,
    ) -> (Fingerprint, Option<Naming>) {
        if symmetry.nodes && (2..=MAX_NODES).contains(&self.nodes.len()) {
            return node_symmetry::canonical(self, symmetry.clients, seed);
        }
        let (fp, ranks) = self.client_fingerprint(symmetry.clients, seed);
        let nodes = node_symmetry::identity();
        (fp, ranks.map(|clients| Naming { clients, nodes }))
    }

    /// Its fingerprint with the nodes as they are numbered. With `symmetry`, the clients are
    /// interchangeable: the fingerprint is the least over the renamings of the clients that
    /// sort them by their own fingerprints (`client_symmetry.rs`), so states that differ only
    /// in which client is which share one.
    ///
    /// Also where each client stands in the renaming the fingerprint took: `ranks[c]` is
    /// client `c`'s place (the identity without symmetry), or `None` when two renamings give
    /// the fingerprint, so that no one naming is the fingerprint's.
    pub(crate) fn client_fingerprint(
        &self,
        symmetry: bool,
        seed: u64,
    ) -> (Fingerprint, Option<Ranks>) {
        let order = node_symmetry::identity();
        self.client_fingerprint_of(
            &order[..self.nodes.len()],
            &HashClient::AsIs,
            symmetry,
            seed,
        )
    }

    /// [`Self::client_fingerprint`] of this state with its nodes taken in `order` (node
    /// `order[j]` as node `j`) and each client hashed by `hash_client`: the fingerprint of
    /// the state renumbered, without a copy of it, when `hash_client` hashes each client
    /// renumbered (node symmetry fingerprints a state under every renumbering it tries).
    /// Without client symmetry, the state's fields in the order of the derived `Hash`, with
    /// each node and client as its own fingerprint.
    pub(crate) fn client_fingerprint_of(
        &self,
        order: &[u8],
        hash_client: &HashClient<'_>,
        symmetry: bool,
        seed: u64,
    ) -> (Fingerprint, Option<Ranks>) {
        let count = self.clients.len();
        if symmetry && count <= MAX_CLIENTS {
            return client_symmetry::canonical(self, order, hash_client, seed);
        }
        let mut h = Hasher128::seeded(seed);
        self.time.hash(&mut h);
        // As a slice hashes: its length, then each element.
        h.write_usize(order.len());
        for &n in order {
            node::fingerprint(&self.nodes[usize::from(n)], None, seed).hash(&mut h);
        }
        h.write_usize(count);
        for client in &self.clients {
            let (fp, _) = hash_client.fingerprint(client, &Owners::AS_THEY_ARE, seed);
            fp.hash(&mut h);
        }
        self.hash_globals(&mut h);
        let ranks = std::array::from_fn(|c| c as u8);
        (h.finish128(), (count <= MAX_CLIENTS).then_some(ranks))
    }

    /// Hashes everything but the time, the nodes and the clients (the symmetric
    /// fingerprint hashes those itself); the same fields as the derived `Hash`.
    pub(super) fn hash_globals<H: Hasher>(&self, h: &mut H) {
        (
            self.faults_used,
            self.grants,
            self.tick_fresh,
            self.max_fence,
            self.violation,
        )
            .hash(h);
    }
}
