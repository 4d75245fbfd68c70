//! One state of the model, and its fingerprint: the state says what identifies it (as
//! stateright's `Representative` lets a state name its representative), so the explorer
//! never reaches into its fields.

use std::hash::{Hash, Hasher};

use super::client::Client;
use super::fingerprint::{Fingerprint, Hasher128};
use super::node::Node;
use super::node_symmetry;
use super::property::Property;

/// The most clients whose fingerprints the symmetric fingerprint sorts on the stack (the
/// check file allows no more).
pub(crate) const MAX_CLIENTS: usize = 8;

/// Each client's place in a fingerprint's order of the clients.
pub(crate) type Ranks = [u8; MAX_CLIENTS];

/// The most nodes node symmetry renumbers (a tick names the fast nodes in 8 bits).
pub(crate) const MAX_NODES: usize = 8;

/// Each node's number in a fingerprint's renumbering of the nodes.
pub(crate) type NodeRanks = [u8; MAX_NODES];

/// One state of the model: true time, every node and client with the messages in flight,
/// and the world's counters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CheckState {
    /// True time, in ticks.
    pub(crate) time: u32,
    pub(super) nodes: Vec<Node>,
    pub(super) clients: Vec<Client>,
    pub(super) faults_used: u32,
    pub(super) tokens: u16,
    /// Grants so far.
    pub(super) grants: u16,
    /// Whether nothing but resumes happened since true time last moved on.
    pub(super) tick_fresh: bool,
    pub(super) max_fence: u64,
    /// The *always* property this state breaks, if any.
    pub(crate) violation: Option<Property>,
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
    /// Frees what it holds on the heap (its nodes and clients), leaving a state that is
    /// not to be used again: a breadth-first level frees each of its states once expanded.
    pub(super) fn free_parts(&mut self) {
        self.nodes = Vec::new();
        self.clients = Vec::new();
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
    /// interchangeable: the fingerprint is taken over their fingerprints sorted, so states
    /// that differ only in which client is which share one. That is sound because the
    /// clients share one configuration and nothing in a state names a client except its own
    /// position (tokens are numbered by the world, not by the client).
    ///
    /// Also where each client stands in the order the fingerprint took them: `ranks[c]` is
    /// client `c`'s place (the identity without symmetry), or `None` when two clients hash
    /// alike, so that no one order is the fingerprint's.
    pub(crate) fn client_fingerprint(
        &self,
        symmetry: bool,
        seed: u64,
    ) -> (Fingerprint, Option<Ranks>) {
        let order = node_symmetry::identity();
        let hash_client = |client: &Client, h: &mut Hasher128| client.hash(h);
        self.client_fingerprint_of(&order[..self.nodes.len()], hash_client, symmetry, seed)
    }

    /// [`Self::client_fingerprint`] of this state with its nodes taken in `order` (node
    /// `order[j]` as node `j`) and each client hashed by `hash_client`: the fingerprint of
    /// the state renumbered, without a copy of it, when `hash_client` hashes each client
    /// renumbered (node symmetry fingerprints a state under every renumbering it tries).
    /// The same hash, field by field and in the same order, as the derived `Hash` of that
    /// state.
    pub(crate) fn client_fingerprint_of(
        &self,
        order: &[u8],
        hash_client: impl Fn(&Client, &mut Hasher128),
        symmetry: bool,
        seed: u64,
    ) -> (Fingerprint, Option<Ranks>) {
        let hash_nodes = |h: &mut Hasher128| {
            // As a slice hashes: its length, then each element.
            h.write_usize(order.len());
            for &n in order {
                self.nodes[usize::from(n)].hash(h);
            }
        };
        let clients = &self.clients;
        let count = clients.len();
        let mut ranks = [0u8; MAX_CLIENTS];
        for (c, rank) in ranks.iter_mut().enumerate().take(count) {
            *rank = c as u8;
        }
        if !symmetry || count > MAX_CLIENTS {
            let mut h = Hasher128::seeded(seed);
            self.time.hash(&mut h);
            hash_nodes(&mut h);
            h.write_usize(count);
            for client in clients {
                hash_client(client, &mut h);
            }
            self.hash_globals(&mut h);
            return (h.finish128(), (count <= MAX_CLIENTS).then_some(ranks));
        }
        let mut fps = [(0u128, 0u8); MAX_CLIENTS];
        for (c, (slot, client)) in fps.iter_mut().zip(clients).enumerate() {
            let mut h = Hasher128::seeded(seed);
            hash_client(client, &mut h);
            *slot = (h.finish128(), c as u8);
        }
        fps[..count].sort_unstable();
        let mut h = Hasher128::seeded(seed);
        self.time.hash(&mut h);
        hash_nodes(&mut h);
        let mut sorted = [0u128; MAX_CLIENTS];
        for (slot, (fp, _)) in sorted.iter_mut().zip(&fps[..count]) {
            *slot = *fp;
        }
        sorted[..count].hash(&mut h);
        self.hash_globals(&mut h);
        let tied = fps[..count].windows(2).any(|w| w[0].0 == w[1].0);
        for (rank, (_, c)) in fps[..count].iter().enumerate() {
            ranks[usize::from(*c)] = rank as u8;
        }
        (h.finish128(), (!tied).then_some(ranks))
    }

    /// Hashes everything but the time, the nodes and the clients (the symmetric
    /// fingerprint hashes those itself); the same fields as the derived `Hash`.
    fn hash_globals<H: Hasher>(&self, h: &mut H) {
        (
            self.faults_used,
            self.tokens,
            self.grants,
            self.tick_fresh,
            self.max_fence,
            self.violation,
        )
            .hash(h);
    }
}
