//! A client under node symmetry: renumbered (`node_symmetry.rs` renumbers states), and its
//! links hashed as if renumbered without the copy.
//!
//! Node symmetry fingerprints a state under every renumbering it tries, for every state
//! the checker meets: a copy of each client per renumbering (its links with every message
//! queue, its machines) was most of a state's cost. [`NodeLink::hash_renumbered`] feeds a
//! hasher the same words, in the same order, as the derived `Hash` of the renumbered link,
//! each message renumbered as it is hashed; the client's fingerprint (`fingerprint.rs`)
//! takes its links in the new order and has its lease machines ([`Phase::hash_renumbered`])
//! and its eligibility hashed renumbered by the core, without copies.

use std::hash::{Hash, Hasher};

use redlock_core::{Eligibility, HashRenumbered, NodePermutation, RenumberNodes, Waiting};

use super::connection::Conn;
use super::lease::Lease;
use super::{Acquiring, Client, Msg, NodeLink, Phase};
use crate::net::message::{NodeReply, ServerId};

impl Msg {
    /// Renames the nodes it names: its request's, and the server an identification names.
    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Request { request, .. } => request.renumber_nodes(perm),
            Self::Reply { request, reply, .. } => {
                request.renumber_nodes(perm);
                renumber_reply(reply, perm);
            }
            Self::Released(_) | Self::Closed { .. } => {}
        }
    }

    /// Hashes it as renumbered by `perm`: a request field by field as derived (only its
    /// request names a node, and its command is not copied), anything else renumbered.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, h: &mut H) {
        match self {
            Self::Request {
                conn,
                op,
                request,
                cmd,
            } => {
                std::mem::discriminant(self).hash(h);
                conn.hash(h);
                op.hash(h);
                request.map(|r| r.renumbered(perm)).hash(h);
                cmd.hash(h);
            }
            Self::Reply {
                conn,
                op,
                request,
                reply,
            } => {
                std::mem::discriminant(self).hash(h);
                conn.hash(h);
                op.hash(h);
                request.map(|r| r.renumbered(perm)).hash(h);
                match reply {
                    // The two answers that name a node: copied and renamed.
                    NodeReply::Identity { .. } | NodeReply::Failure(_) => {
                        let mut image = reply.clone();
                        renumber_reply(&mut image, perm);
                        image.hash(h);
                    }
                    // A copy of any other would allocate for nothing: it names no node.
                    _ => reply.hash(h),
                }
            }
            Self::Released(_) | Self::Closed { .. } => self.hash(h),
        }
    }
}

/// Renames the node a reply names: the server an identification names, the node a
/// failure names.
fn renumber_reply(reply: &mut NodeReply, perm: &NodePermutation) {
    match reply {
        NodeReply::Identity { server, .. } => server.server = perm.index(server.server),
        NodeReply::Failure(failure) => failure.renumber_nodes(perm),
        _ => {}
    }
}

/// `renumbered` for a request: the core's operation on a copy.
trait Renumbered: RenumberNodes + Clone {
    fn renumbered(mut self, perm: &NodePermutation) -> Self {
        self.renumber_nodes(perm);
        self
    }
}

impl<T: RenumberNodes + Clone> Renumbered for T {}

impl NodeLink {
    /// What it holds, without naming its node: the connections opened, the messages on
    /// their way each way, the delayed links.
    pub(in crate::check) fn shape(&self) -> (u32, bool, usize, usize, usize, u8) {
        (
            self.opened,
            self.conn.is_some(),
            self.to_node.len(),
            self.from_node.len(),
            self.notices.len(),
            self.late,
        )
    }

    fn renumber_nodes(&mut self, perm: &NodePermutation) {
        if let Some(conn) = &mut self.conn {
            for (_, request) in &mut conn.outstanding {
                request.renumber_nodes(perm);
            }
            for (_, transmit) in &mut conn.waiting {
                transmit.renumber_nodes(perm);
            }
        }
        for queue in [&mut self.to_node, &mut self.from_node, &mut self.notices] {
            for msg in queue {
                msg.renumber_nodes(perm);
            }
        }
    }

    /// Hashes it as renumbered by `perm`, as the derived `Hash` of its fields in order.
    pub(super) fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, h: &mut H) {
        std::mem::discriminant(&self.conn).hash(h);
        if let Some(conn) = &self.conn {
            conn.hash_renumbered(perm, h);
        }
        self.opened.hash(h);
        for queue in [&self.to_node, &self.from_node, &self.notices] {
            // As a deque hashes: its length, then each element.
            h.write_usize(queue.len());
            for msg in queue {
                msg.hash_renumbered(perm, h);
            }
        }
        self.late.hash(h);
    }
}

impl Conn {
    /// Hashes it as renumbered by `perm`, as the derived `Hash` of its fields in order.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, h: &mut H) {
        self.id.hash(h);
        self.identifying.hash(h);
        self.broken.hash(h);
        h.write_usize(self.outstanding.len());
        for &(op, request) in &self.outstanding {
            (op, request.map(|r| r.renumbered(perm))).hash(h);
        }
        h.write_usize(self.waiting.len());
        for (op, transmit) in &self.waiting {
            (op, transmit.clone().renumbered(perm)).hash(h);
        }
    }
}

impl Phase {
    /// Renumbers its machines by the core's operation.
    pub(super) fn renumber_nodes(&mut self, perm: &NodePermutation) {
        match self {
            Self::Acquiring(a) => {
                a.machine.renumber_nodes(perm);
                a.waiting.renumber_nodes(perm);
            }
            Self::Holding(lease) => {
                lease.held.renumber_nodes(perm);
                lease.keeper.renumber_nodes(perm);
                if let Some((_, release)) = &mut lease.releasing {
                    release.renumber_nodes(perm);
                }
                if let Some((_, extend)) = &mut lease.extending {
                    extend.renumber_nodes(perm);
                }
            }
            Self::Idle | Self::Done => {}
        }
    }
}

impl Phase {
    /// Hashes it as renumbered by `perm` (`renumber_nodes`): the words of the renumbered
    /// copy's derived `Hash`, its machines hashed renumbered by the core, without the copy.
    pub(super) fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Self::Acquiring(acquiring) => {
                acquiring.hash_fields(Some(perm), h, |w, h| w.hash_renumbered(perm, h));
            }
            Self::Holding(lease) => lease.hash_renumbered(perm, h),
            Self::Idle | Self::Done => {}
        }
    }
}

impl Acquiring {
    /// Hashes its fields in order, as its derived `Hash` does (renumbered by `perm`, or as
    /// it is for `None`), its wait by `hash_waiting`.
    pub(super) fn hash_fields<H: Hasher>(
        &self,
        perm: Option<&NodePermutation>,
        h: &mut H,
        hash_waiting: impl FnOnce(&Waiting, &mut H),
    ) {
        // Every field, so that a field added to the acquisition must be added here.
        let Self {
            op,
            machine,
            round,
            waiting,
            lost_a_round,
        } = self;
        op.hash(h);
        match perm {
            None => machine.hash(h),
            Some(perm) => machine.hash_renumbered(perm, h),
        }
        round.hash(h);
        hash_waiting(waiting, h);
        lost_a_round.hash(h);
    }
}

impl Lease {
    /// Hashes it as renumbered by `perm`, as the derived `Hash` of its fields in order.
    fn hash_renumbered<H: Hasher>(&self, perm: &NodePermutation, h: &mut H) {
        let Self {
            op,
            held,
            keeper,
            work,
            releasing,
            extend_at,
            extending,
            grants_before,
        } = self;
        op.hash(h);
        held.hash_renumbered(perm, h);
        keeper.hash_renumbered(perm, h);
        work.hash(h);
        std::mem::discriminant(releasing).hash(h);
        if let Some((op, release)) = releasing {
            op.hash(h);
            release.hash_renumbered(perm, h);
        }
        extend_at.hash(h);
        std::mem::discriminant(extending).hash(h);
        if let Some((op, extend)) = extending {
            op.hash(h);
            extend.hash_renumbered(perm, h);
        }
        grants_before.hash(h);
    }
}

/// Renumbers `eligibility` by the core's operation, with the servers its `run_id`s name
/// (the model's servers name their node in it, so that no two nodes are one server).
fn renumber_eligibility(eligibility: &mut Eligibility, perm: &NodePermutation) {
    eligibility.renumber_nodes(perm);
    eligibility.rename_run_ids(|run_id| ServerId::renumber_run_id(run_id, |n| perm.index(n)));
}

impl Client {
    /// Renumbers the nodes it knows by `perm` (node `n` becomes `perm.index(n)`): its link to
    /// each node moves with the node, with every request and server named in it, and its
    /// machines are renumbered by the core's operation. Connection numbers are labels of one
    /// node's connections and move with them.
    pub(in crate::check) fn renumber_nodes(&mut self, perm: &NodePermutation) {
        for link in &mut self.links {
            link.make_mut().renumber_nodes(perm);
        }
        perm.permute(&mut self.links);
        renumber_eligibility(self.eligibility.make_mut(), perm);
        self.phase.make_mut().renumber_nodes(perm);
    }
}

#[cfg(test)]
mod tests {
    use std::hash::Hash;

    use redlock_core::NodePermutation;

    use super::super::NodeLink;
    use crate::check::fingerprint::Hasher128;
    use crate::check::model::{catalogue_model, walk_first_states};

    /// Walks the first states of models with crashes and restarts (identifications, broken
    /// connections, failures), losses, delays, waiting marks, fencing and five nodes, and
    /// hashes each client's link to each node under every renumbering: hashed renumbered,
    /// it is its renumbered copy hashed, every message and connection included; and a
    /// renumbering that keeps the link's node in place leaves its hash as it is (a link
    /// names no node but its own, which hashing it as node 0's relies on,
    /// `fingerprint.rs`).
    #[test]
    fn a_link_hashed_renumbered_is_its_renumbered_copy_hashed() {
        let mut messages = 0;
        for file in [
            "shipped-crash.toml",
            "no-restart-quarantine.toml",
            "shipped-pause-loss.toml",
            "waiting-marks.toml",
            "fencing-crash-mutation.toml",
            "teeth-s6-five-nodes.toml",
        ] {
            let model = catalogue_model(file);
            let perms = NodePermutation::all(model.spec.nodes);
            walk_first_states(&model, 1_500, |s| {
                for client in &s.clients {
                    for (n, link) in client.links.iter().enumerate() {
                        messages += link.to_node.len() + link.from_node.len() + link.notices.len();
                        for perm in &perms {
                            assert_hashed_as_its_copy(link, perm, file);
                            if perm.index(n) == n {
                                assert_eq!(hashed(link, Some(perm)), hashed(link, None), "{file}");
                            }
                        }
                    }
                }
            });
        }
        assert!(messages > 1_000, "{messages} messages on their way");
    }

    /// A connection being identified again after a reconnection, with requests written
    /// and a command waiting for the identification (the walk above seldom meets one): its
    /// words, hashed renumbered by hand, are its renumbered copy's.
    #[test]
    fn a_reconnection_hashed_renumbered_is_its_renumbered_copy_hashed() {
        use redlock_core::{Acquire, LockConfig, LockKey, Machine, Timestamp, Token};

        use super::Conn;

        let key = LockKey::new("redlock:", "r").unwrap();
        let config = LockConfig::new(3);
        let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), Timestamp::ZERO);
        let answered = acquire.poll_transmit().unwrap();
        let waiting = acquire.poll_transmit().unwrap();
        let link = NodeLink {
            conn: Some(Conn {
                id: 2,
                identifying: true,
                broken: false,
                outstanding: vec![(1, None), (2, Some(answered.request))],
                waiting: [(3, waiting)].into(),
            }),
            opened: 2,
            ..NodeLink::default()
        };
        for perm in NodePermutation::all(3) {
            assert_hashed_as_its_copy(&link, &perm, "a reconnection");
        }
    }

    /// `link` hashed renumbered by `perm` is its renumbered copy hashed.
    fn assert_hashed_as_its_copy(link: &NodeLink, perm: &NodePermutation, what: &str) {
        let mut image = link.clone();
        image.renumber_nodes(perm);
        assert_eq!(
            hashed(link, Some(perm)),
            hashed(&image, None),
            "{what}: {link:?} renumbered by {perm:?}"
        );
    }

    /// `link` hashed renumbered by `perm` without a copy, or as it is.
    fn hashed(link: &NodeLink, perm: Option<&NodePermutation>) -> u128 {
        let mut h = Hasher128::seeded(7);
        match perm {
            Some(perm) => link.hash_renumbered(perm, &mut h),
            None => link.hash(&mut h),
        }
        h.finish128()
    }
}
