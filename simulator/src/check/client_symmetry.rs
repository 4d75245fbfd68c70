//! Client symmetry: states that differ only in which client is which share one fingerprint.
//!
//! Every client of a check runs one configuration (a check file has one `[client]` table
//! and no per-client switch), starts by the same rule, and is told apart from the others
//! only by its place in the state's list and by the owner written in its tokens
//! (`token.rs`). Renaming the clients by a permutation `p` (client `c`'s state moves to
//! place `p(c)`, and every token client `c` drew, wherever it is, names `p(c)` instead)
//! gives a state that behaves as the original with its clients renamed: the same steps,
//! renamed, lead to the same states, renamed, judged alike (docs/simulator.md, "Client
//! symmetry", states the argument).
//!
//! The canonical form is the least fingerprint over the renamings that sort the clients by
//! their own fingerprints (a client hashed with its own tokens as [`SELF`] and any other
//! client's as [`OTHER`], which no renaming changes), so that only clients alike are
//! permuted among themselves. Under a renaming, each node is hashed with every token's
//! owner renamed, and each client with its own tokens as `SELF` and another's as that
//! client's new name; a client that holds no other client's token hashes as its own
//! fingerprint, which is reused. Nothing is copied but a node's waiting marks (a sorted
//! set, sorted again once renamed).

use std::hash::{Hash, Hasher};

use redlock_core::Token;

use super::fingerprint::{Fingerprint, Hasher128, pass_integers};
use super::node;
use super::node_symmetry::next_combination;
use super::shared::MemoKey;
use super::state::{CheckState, HashClient, MAX_CLIENTS, Ranks, SharedClient};
use super::token;

/// The name the hashed client's own tokens take.
const SELF: u8 = 0xfe;
/// The name another client's token takes in a client's own fingerprint.
const OTHER: u8 = 0xff;

/// The name each client's tokens take in a hash: `names[c]` for the tokens client `c` drew.
#[derive(Clone, Copy, Debug)]
pub(super) struct Owners {
    names: [u8; MAX_CLIENTS],
    /// [`Owners::tag`], taken once: a client's fingerprint asks for it for each part it
    /// looks up (folding the names each time, a search ran 0.45 % more instructions).
    tag: u64,
}

impl Owners {
    /// Every client's tokens named as they are.
    pub(super) const AS_THEY_ARE: Self = Self::new([0, 1, 2, 3, 4, 5, 6, 7]);

    /// Client `c`'s tokens named `names[c]`.
    pub(super) const fn new(names: [u8; MAX_CLIENTS]) -> Self {
        let mut tag = 0;
        let mut c = 0;
        while c < MAX_CLIENTS {
            let name = match names[c] {
                SELF => 8,
                OTHER => 9,
                name => (name & 7) as u64,
            };
            tag |= name << (4 * c);
            c += 1;
        }
        Self { names, tag }
    }

    /// Every client's tokens as [`OTHER`], but `own`'s as [`SELF`].
    fn seen_from(own: usize) -> Self {
        SEEN_FROM[own]
    }

    /// The view of the client these names call [`SELF`] ([`Owners::seen_from`] it), when
    /// they are not that view already: a part that holds no other client's token (no
    /// [`OTHER`] in it under that view) hashes alike under both, as its own tokens are
    /// `SELF` in each.
    pub(super) fn own_view(&self) -> Option<Self> {
        let own = self.names.iter().position(|&name| name == SELF)?;
        let view = SEEN_FROM[own];
        (view.tag != self.tag).then_some(view)
    }

    /// The name `client`'s tokens take.
    pub(super) fn of(&self, client: u8) -> u8 {
        self.names
            .get(usize::from(client))
            .copied()
            .unwrap_or(client)
    }

    /// Whether `name` is [`OTHER`], the name of every other client's tokens in a client's
    /// own view.
    pub(super) fn is_other(name: u8) -> bool {
        name == OTHER
    }

    /// Every renaming the canonical forms hash a client of `count` under: as they are,
    /// each client's own view, and each permutation with one client's own tokens `SELF`.
    #[cfg(test)]
    pub(super) fn all_for_tests(count: usize) -> Vec<Self> {
        let mut all = vec![Self::AS_THEY_ARE];
        let mut order: [u8; MAX_CLIENTS] = std::array::from_fn(|c| c as u8);
        loop {
            for own in 0..count {
                let mut names = order;
                names[own] = SELF;
                all.push(Self::new(names));
            }
            if !next_combination(&mut order, &[(0, count)]) {
                break;
            }
        }
        all.extend((0..count).map(Self::seen_from));
        all
    }

    pub(super) fn rename(&self, token: Token) -> Token {
        token::renamed(token, |c| self.of(c))
    }

    /// The renaming in 32 bits, for a part's remembered fingerprints (never
    /// [`PLAIN`](super::shared::PLAIN)): each client's name in 4 bits, [`SELF`] and
    /// [`OTHER`] as 8 and 9.
    pub(super) fn tag(&self) -> u64 {
        self.tag
    }
}

/// [`Owners::seen_from`] each client, made once.
const SEEN_FROM: [Owners; MAX_CLIENTS] = {
    let mut all = [Owners::AS_THEY_ARE; MAX_CLIENTS];
    let mut own = 0;
    while own < MAX_CLIENTS {
        let mut names = [OTHER; MAX_CLIENTS];
        names[own] = SELF;
        all[own] = Owners::new(names);
        own += 1;
    }
    all
};

/// A hasher that feeds `inner` what it is fed, with every model token's owner renamed by
/// `owners`: a token hashes as its 16 bytes written at once (the derived `Hash` of its
/// array), which [`token::owner`] recognises by their tag. Also notes whether a token
/// named [`OTHER`] went by.
pub(super) struct Renamed<'a, H> {
    inner: &'a mut H,
    owners: Owners,
    other: bool,
}

impl<'a, H: Hasher> Renamed<'a, H> {
    pub(super) fn new(inner: &'a mut H, owners: Owners) -> Self {
        Self {
            inner,
            owners,
            other: false,
        }
    }
}

impl<H> Renamed<'_, H> {
    /// Whether a token named [`OTHER`] went by.
    pub(super) fn saw_other(&self) -> bool {
        self.other
    }
}

impl<H: Hasher> Hasher for Renamed<'_, H> {
    fn finish(&self) -> u64 {
        self.inner.finish()
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        match token::owner(bytes) {
            Some(client) => {
                let mut renamed = [0; 16];
                renamed.copy_from_slice(bytes);
                renamed[0] = self.owners.of(client);
                self.other |= Owners::is_other(renamed[0]);
                self.inner.write(&renamed);
            }
            None => self.inner.write(bytes),
        }
    }

    pass_integers!();
}

/// The fingerprint of client `c` of a state as `hash_client` takes it, and whether a token
/// named [`OTHER`] was in it, with its tokens named (where `renaming` is `None`, its own
/// fingerprint) by [`Owners::seen_from`] `c`, else by `renaming` but `c`'s own tokens as
/// [`SELF`]; remembered with the client: a step that leaves the client alone leaves it
/// shared, and its fingerprints with it.
pub(super) fn remembered_client_hash(
    client: &SharedClient,
    c: usize,
    hash_client: &HashClient<'_>,
    renaming: Option<&Ranks>,
    seed: u64,
) -> (Fingerprint, bool) {
    // The client's place (3 bits), the hashing (25 bits), the renaming (3 bits a client,
    // and a bit for one).
    let mut tag = (c as u64) | hash_client.tag() << 3;
    let mut owners = Owners::seen_from(c);
    if let Some(ranks) = renaming {
        tag |= 1 << 28;
        for (i, &rank) in ranks.iter().enumerate() {
            tag |= u64::from(rank & 7) << (29 + 3 * i);
        }
        let mut names = *ranks;
        names[c] = SELF;
        owners = Owners::new(names);
    }
    client.memo().get_or(MemoKey { seed, tag }, || {
        hash_client.fingerprint(client, &owners, seed)
    })
}

/// The least fingerprint of `state` (its nodes taken in `order`, each client hashed by
/// `hash_client`) over the renamings of the clients that sort them by their own
/// fingerprints, and each client's place in the renaming that gives it: `None` when two
/// renamings give it (the state is its own image under a renaming of two clients, so that
/// no one naming is the fingerprint's). At most [`MAX_CLIENTS`] clients.
pub(super) fn canonical(
    state: &CheckState,
    order: &[u8],
    hash_client: &HashClient<'_>,
    seed: u64,
) -> (Fingerprint, Option<Ranks>) {
    let clients = &state.clients;
    let count = clients.len();
    let mut own = [0u128; MAX_CLIENTS];
    let mut knows_others = [false; MAX_CLIENTS];
    for (c, client) in clients.iter().enumerate() {
        (own[c], knows_others[c]) = remembered_client_hash(client, c, hash_client, None, seed);
    }
    // `sorted[j]`: the client that becomes client `j`.
    let mut sorted: [u8; MAX_CLIENTS] = std::array::from_fn(|c| c as u8);
    sorted[..count].sort_by_key(|&c| (own[usize::from(c)], c));
    let mut runs = [(0usize, 0usize); MAX_CLIENTS];
    let mut run_count = 0;
    let mut start = 0;
    for j in 1..=count {
        if j == count || own[usize::from(sorted[j])] != own[usize::from(sorted[start])] {
            if j - start > 1 {
                runs[run_count] = (start, j);
                run_count += 1;
            }
            start = j;
        }
    }
    let runs = &runs[..run_count];
    let mut best: Option<(Fingerprint, Ranks)> = None;
    let mut tied = false;
    loop {
        let mut ranks = [0u8; MAX_CLIENTS];
        for (j, &c) in sorted[..count].iter().enumerate() {
            ranks[usize::from(c)] = j as u8;
        }
        let mut h = Hasher128::seeded(seed);
        state.time.hash(&mut h);
        let owners = Owners::new(ranks);
        h.write_usize(order.len());
        for &n in order {
            node::fingerprint(&state.nodes[usize::from(n)], Some(&owners), seed).hash(&mut h);
        }
        h.write_usize(count);
        for &c in &sorted[..count] {
            let c = usize::from(c);
            let fp = if knows_others[c] {
                remembered_client_hash(&clients[c], c, hash_client, Some(&ranks), seed).0
            } else {
                own[c]
            };
            fp.hash(&mut h);
        }
        state.hash_globals(&mut h);
        let fp = h.finish128();
        match &best {
            Some((least, _)) if fp > *least => {}
            Some((least, _)) if fp == *least => tied = true,
            _ => {
                best = Some((fp, ranks));
                tied = false;
            }
        }
        if !next_combination(&mut sorted, runs) {
            break;
        }
    }
    let (fp, ranks) = best.expect("at least one renaming");
    (fp, (!tied).then_some(ranks))
}

#[cfg(test)]
mod tests {
    use super::super::model::{Action, Model, catalogue_model};
    use super::super::state::Symmetry;
    use super::*;

    /// A renaming's tag names each client's name in its 4 bits, and tells every renaming
    /// the canonical forms use from every other.
    #[test]
    fn a_renamings_tag_names_each_clients_name() {
        assert_eq!(Owners::AS_THEY_ARE.tag(), 0x7654_3210);
        assert_eq!(Owners::seen_from(1).tag(), 0x9999_9989);
        let renamings = permutations(3).into_iter().map(|to| {
            let mut names = [0; MAX_CLIENTS];
            names[..3].copy_from_slice(&to);
            names
        });
        let mut tags = std::collections::HashSet::new();
        for names in renamings.clone() {
            assert!(tags.insert(Owners::new(names).tag()));
        }
        for own in 0..3 {
            assert!(tags.insert(Owners::seen_from(own).tag()));
            for mut names in renamings.clone() {
                names[own] = SELF;
                assert!(tags.insert(Owners::new(names).tag()));
            }
        }
    }

    /// Every permutation of `0..count`, as `to[c]`: client `c` becomes client `to[c]`.
    fn permutations(count: usize) -> Vec<Vec<u8>> {
        let mut order: [u8; MAX_CLIENTS] = std::array::from_fn(|c| c as u8);
        let mut all = Vec::new();
        loop {
            all.push(order[..count].to_vec());
            if !next_combination(&mut order, &[(0, count)]) {
                return all;
            }
        }
    }

    /// `action` with its clients renamed by `to`.
    fn rename(action: Action, to: &[u8]) -> Action {
        let c = |client: u8| to[usize::from(client)];
        match action {
            Action::Tick { slow, fast } => Action::Tick {
                slow: (0..to.len())
                    .filter(|&i| slow & (1 << i) != 0)
                    .fold(0, |out, i| out | 1 << to[i]),
                fast,
            },
            Action::Start(x) => Action::Start(c(x)),
            Action::Fire(x) => Action::Fire(c(x)),
            Action::StopWork(x) => Action::StopWork(c(x)),
            Action::Pause(x) => Action::Pause(c(x)),
            Action::Resume(x) => Action::Resume(c(x)),
            Action::Deliver { client, node, link } => Action::Deliver {
                client: c(client),
                node,
                link,
            },
            Action::Delay { client, node, link } => Action::Delay {
                client: c(client),
                node,
                link,
            },
            Action::Drop { client, node, link } => Action::Drop {
                client: c(client),
                node,
                link,
            },
            Action::Revive { client, node } => Action::Revive {
                client: c(client),
                node,
            },
            other => other,
        }
    }

    /// The derived `Hash` of `state` with its clients renamed by `to` (client `c` moved to
    /// place `to[c]`, every token it drew naming `to[c]`), without a copy: the words the
    /// explorer's renamed hashing feeds.
    fn hash_renamed(state: &CheckState, to: &[u8]) -> Fingerprint {
        let mut owners = [0u8; MAX_CLIENTS];
        owners[..to.len()].copy_from_slice(to);
        let owners = Owners::new(owners);
        let mut h = Hasher128::default();
        state.time.hash(&mut h);
        h.write_usize(state.nodes.len());
        for node in &state.nodes {
            node.hash_renamed(|t| owners.rename(t), &mut h);
        }
        let count = state.clients.len();
        let mut from = vec![0; count];
        for (c, &j) in to.iter().enumerate() {
            from[usize::from(j)] = c;
        }
        h.write_usize(count);
        for &c in &from {
            state.clients[c].hash(&mut Renamed::new(&mut h, owners));
        }
        state.hash_globals(&mut h);
        h.finish128()
    }

    fn plain(state: &CheckState) -> Fingerprint {
        let mut h = Hasher128::default();
        state.hash(&mut h);
        h.finish128()
    }

    fn actions_named(model: &Model, state: &CheckState, to: Option<&[u8]>) -> Vec<String> {
        let mut actions = Vec::new();
        model.actions(state, &mut actions);
        let mut named: Vec<String> = actions
            .iter()
            .map(|&a| to.map_or(a, |to| rename(a, to)).to_string())
            .collect();
        named.sort();
        named
    }

    /// Walks `file`'s model over up to `limit` states and, in each, for every renaming `p`
    /// of its clients: the path to the state with its steps renamed by `p` is a path of the
    /// model (the initial state is its own image: every client starts alike) and leads to
    /// the state renamed, word for word as the explorer hashes a renaming; its steps are the
    /// state's renamed, its judgement the same, and its canonical fingerprint (clients
    /// alone, and with the nodes) the same.
    fn equivariant(file: &str, limit: usize) -> usize {
        let model = catalogue_model(file);
        walk_images(&model, limit, |s, image, to| {
            let describe = || format!("{file}: {} renamed by {to:?}", model.describe(s));
            assert_eq!(hash_renamed(s, to), plain(image), "{}", describe());
            assert_eq!(image.violation, s.violation, "{}", describe());
            assert_eq!(
                actions_named(&model, image, None),
                actions_named(&model, s, Some(to)),
                "{}",
                describe()
            );
            same_fingerprints(&model, s, image, to);
        })
    }

    /// Walks `model` depth first over up to `limit` states and, in each, for every renaming
    /// `to` of its clients, follows the path to the state with its steps renamed from the
    /// initial state (the initial state is its own image: every client starts alike) and
    /// hands `check` the state, the state so reached and `to`. Returns how many it checked.
    fn walk_images(
        model: &Model,
        limit: usize,
        mut check: impl FnMut(&CheckState, &CheckState, &[u8]),
    ) -> usize {
        let perms = permutations(model.spec.clients);
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(model.initial(), Vec::new())];
        let mut checked = 0;
        while let Some((s, path)) = stack.pop() {
            if seen.len() >= limit || !seen.insert(plain(&s)) {
                continue;
            }
            for to in &perms {
                let image = path.iter().fold(model.initial(), |at, &a| {
                    model.successor(&at, rename(a, to)).0
                });
                check(&s, &image, to);
                checked += 1;
            }
            let mut actions = Vec::new();
            model.actions(&s, &mut actions);
            for &a in &actions {
                let mut next = path.clone();
                next.push(a);
                stack.push((model.successor(&s, a).0, next));
            }
        }
        checked
    }

    /// `s` and its `image` under the renaming `to` share their canonical fingerprints,
    /// clients alone and with node symmetry.
    fn same_fingerprints(model: &Model, s: &CheckState, image: &CheckState, to: &[u8]) {
        for nodes in [false, true] {
            let symmetry = Symmetry {
                clients: true,
                nodes,
            };
            assert_eq!(
                image.fingerprint(symmetry, 0),
                s.fingerprint(symmetry, 0),
                "{}: {} renamed by {to:?}",
                model.spec.name,
                model.describe(s)
            );
        }
    }

    #[test]
    fn the_model_is_equivariant_under_renaming_the_clients() {
        // Crashes, pauses, losses and delays, keep-alive, fencing, waiting marks (a node's
        // marks name several clients), releases by plain DEL, three clients.
        for file in [
            "shipped-drift.toml",
            "shipped-crash.toml",
            "shipped-pause-loss.toml",
            "keep-alive-never-stops-delayed.toml",
            "fencing-crash-mutation.toml",
            "waiting-marks.toml",
            "plain-del-release.toml",
            "teeth-s5-three-clients.toml",
        ] {
            assert!(equivariant(file, 1_000) > 1_000, "{file}");
        }
    }

    /// Three clients whose waits saw two holders each: renamed, a wait's set of holders is
    /// in another order than the image keeps it, and its fingerprint must not see that.
    /// (`teeth-s5`'s model at a horizon of two ticks and without its crash: the depth-first
    /// walk reaches such waits within its first states.)
    #[test]
    fn a_state_and_its_renamed_image_share_a_fingerprint_deep_into_three_clients() {
        let text = "name = \"three clients, two ticks\"\n[model]\nclients = 3\nttl_ticks = 6\n\
                    horizon_ticks = 2\nwork_ticks = 3\nretries = 6\n\
                    [expect]\noutcome = \"no-violation\"\n";
        let model = Model::new(crate::check::parse(text, "inline").unwrap());
        // Deeper than `equivariant`, which also compares the words of the renamed state's
        // hash with the image's and so stops where a waiter's holders are renamed out of
        // their order: the canonical fingerprints alone.
        let checked = walk_images(&model, LIMIT, |s, image, to| {
            same_fingerprints(&model, s, image, to);
        });
        assert!(checked > LIMIT);
    }

    const LIMIT: usize = 20_000;

    /// A state reached by `steps` from the initial one of `file`.
    fn reached(model: &Model, steps: &[Action]) -> CheckState {
        steps
            .iter()
            .fold(model.initial(), |at, &a| model.successor(&at, a).0)
    }

    /// A link that holds another client's token (a release's notification on its way) is
    /// told apart by whose token it is: three clients, the second a tick ahead of the
    /// third, and the first told of a release by the second or by the third. No renaming
    /// maps one state to the other, so their fingerprints differ (a link that holds another
    /// client's token is hashed under the renaming, not taken from its client's own view,
    /// which names every other client alike); and both differ from a notification of the
    /// first client's own token.
    #[test]
    fn a_link_is_told_apart_by_whose_token_it_holds() {
        use super::super::client::Msg;
        use super::super::token::model_token;
        let model = catalogue_model("teeth-s5-three-clients.toml");
        let symmetry = Symmetry {
            clients: true,
            nodes: true,
        };
        let mut start = model.initial();
        start.clients[1].make_mut().clock += 1;
        let told_by = |client: u8| {
            let mut state = start.clone();
            let link = state.clients[0].make_mut().links[0].make_mut();
            link.notices
                .push_back(Msg::Released(model_token(client, 1)));
            state
        };
        let (by_second, by_third, by_itself) = (told_by(1), told_by(2), told_by(0));
        assert_ne!(
            by_second.fingerprint(symmetry, 0),
            by_third.fingerprint(symmetry, 0)
        );
        for state in [&by_second, &by_third] {
            assert_ne!(
                state.fingerprint(symmetry, 0),
                by_itself.fingerprint(symmetry, 0)
            );
        }
    }

    #[test]
    fn only_renamings_share_a_fingerprint() {
        // Every client starts at time zero: each has its first commands on their way.
        let model = catalogue_model("shipped-crash.toml");
        let symmetry = Symmetry {
            clients: true,
            nodes: false,
        };
        let deliver = |client, node| Action::Deliver {
            client,
            node,
            link: super::super::model::Link::ToNode,
        };
        // Client 0 has its key on node 0, client 1 on none; and the other way round.
        let one = reached(&model, &[deliver(0, 0)]);
        let other = reached(&model, &[deliver(1, 0)]);
        assert_ne!(plain(&one), plain(&other));
        assert_eq!(one.fingerprint(symmetry, 0), other.fingerprint(symmetry, 0));
        assert_ne!(
            one.fingerprint(Symmetry::NONE, 0),
            other.fingerprint(Symmetry::NONE, 0)
        );
        // The clients' places swapped without renaming their tokens: node 0 holds the token
        // of the client now second, which holds it as another's. Not a renaming: the first
        // client's key would be the second's.
        let mut swapped = one.clone();
        swapped.clients.swap(0, 1);
        assert_ne!(
            swapped.fingerprint(symmetry, 0),
            one.fingerprint(symmetry, 0)
        );
        // Clients that are not alike: one's clock a tick on.
        let mut apart = other.clone();
        apart.clients[0].make_mut().clock += 1;
        assert_ne!(apart.fingerprint(symmetry, 0), one.fingerprint(symmetry, 0));
        assert_ne!(
            apart.fingerprint(symmetry, 0),
            other.fingerprint(symmetry, 0)
        );
        // A state that is its own image under a renaming (every client alike, as at the
        // start): no one naming is its fingerprint's.
        let (_, naming) = model.initial().fingerprint_ranked(symmetry, 0);
        assert_eq!(naming, None, "the initial state is its own image");
        let (_, naming) = one.fingerprint_ranked(symmetry, 0);
        assert!(naming.is_some());
    }
}
