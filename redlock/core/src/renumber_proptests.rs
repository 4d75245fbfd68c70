//! The machines are equivariant under a renumbering of the nodes: a machine renumbered by
//! `p` and fed the original's events with every node `n` named `p(n)` sends the original's
//! commands renamed, produces its outcomes renamed, and is at every step the original
//! renumbered; and renumbering by `p` then by `p⁻¹` gives the machine back. Hashed as
//! renumbered ([`HashRenumbered`]), each machine feeds a hasher the words of its renumbered
//! copy's hash.

use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::time::Duration;

use proptest::prelude::*;

use super::*;

/// One event fed to a machine: a reply to one of the requests it sent (picked by position
/// among those sent so far), a timer, or (for an acquisition) the retry after a lost round.
#[derive(Clone, Debug)]
enum Event {
    Reply { pick: usize, reply: u8, gap_ms: u64 },
    Timeout { gap_ms: u64 },
    Retry { gap_ms: u64 },
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    let event = prop_oneof![
        8 => (0usize..64, 0u8..40, 0u64..30).prop_map(|(pick, reply, gap_ms)| Event::Reply { pick, reply, gap_ms }),
        1 => (0u64..80).prop_map(|gap_ms| Event::Timeout { gap_ms }),
        1 => (0u64..80).prop_map(|gap_ms| Event::Retry { gap_ms }),
    ];
    proptest::collection::vec(event, 0..40)
}

fn permutation(nodes: usize) -> impl Strategy<Value = NodePermutation> {
    Just((0..nodes).collect::<Vec<usize>>())
        .prop_shuffle()
        .prop_map(|to| NodePermutation::new(to).unwrap())
}

/// A reply to `command`: often one its machine expects (mostly a yes when `generous`,
/// else mostly a refusal naming the holder or not), so that rounds are won and
/// lost, fence phases and holder reads reached; else any of [`reply`].
fn reply_to(
    command: &Command,
    kind: u8,
    nodes: usize,
    generous: bool,
) -> Result<Reply, NodeFailure> {
    let holder = Token::from_bytes([7; 16]);
    let yes = (kind % 4 != 3) == generous;
    if kind >= 34 || (kind >= 20 && !generous) {
        return reply(kind % 20, nodes);
    }
    Ok(match command {
        Command::SetIfAbsentReadFence { .. } if yes => Reply::AcquiredWithFence { counter: 3 },
        Command::SetIfAbsentReadFence { .. } => Reply::TakenWithFence { counter: 2 },
        Command::RaiseFence { fence, .. } if yes => Reply::FenceRaised { counter: *fence },
        Command::RaiseFence { .. } => Reply::HeldByOther,
        Command::ReleaseIfOwner { .. } if yes => Reply::Released,
        Command::ExtendIfOwner { .. } if yes => Reply::Extended,
        Command::ReadHolder { .. } => Reply::Read(KeyReading {
            value: yes.then_some(KeyValue::Token(holder)),
            expires_in: yes.then_some(Duration::from_millis(150)),
            fence: None,
        }),
        _ if yes => Reply::Acquired,
        _ if kind % 4 == 1 => Reply::TakenUnread,
        _ => Reply::TakenBy {
            holder,
            remaining: None,
        },
    })
}

/// A reply of every kind the machines tell apart, failures included (a duplicate names a
/// node, which the renumbering renames too).
fn reply(kind: u8, nodes: usize) -> Result<Reply, NodeFailure> {
    let holder = Token::from_bytes([7; 16]);
    let ms = Duration::from_millis;
    Ok(match kind {
        0..=2 => Reply::Acquired,
        3..=5 => Reply::AcquiredWithFence { counter: 3 },
        6 | 7 => Reply::FenceRaised { counter: 4 },
        8 => Reply::Taken,
        9 => Reply::TakenUnread,
        10 => Reply::TakenFor { remaining: ms(300) },
        11 => Reply::TakenBy {
            holder,
            remaining: Some(ms(200)),
        },
        12 => Reply::TakenWithFence { counter: 5 },
        13 | 14 => Reply::Extended,
        15 => Reply::Released,
        16 => Reply::NotHeld,
        17 => Reply::Read(KeyReading {
            value: Some(KeyValue::Token(holder)),
            expires_in: Some(ms(100)),
            fence: None,
        }),
        18 => return Err(NodeFailure::TimedOut),
        _ => {
            return Err(NodeFailure::Duplicate {
                of: NodeId::new(usize::from(kind) % nodes),
            });
        }
    })
}

fn renumbered<T: RenumberNodes + Clone>(value: &T, perm: &NodePermutation) -> T {
    let mut value = value.clone();
    value.renumber_nodes(perm);
    value
}

/// A hasher that keeps every word it is fed, with the method that fed it: a value hashed
/// renumbered without a copy must feed the words of the renumbered copy's derived `Hash`,
/// word for word, so that every hasher (a checker's fingerprint among them) sees them alike.
#[derive(Debug, Default, PartialEq)]
struct Words(Vec<(&'static str, Vec<u8>)>);

impl Hasher for Words {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.push(("bytes", bytes.to_vec()));
    }
    fn write_u8(&mut self, i: u8) {
        self.0.push(("u8", i.to_le_bytes().to_vec()));
    }
    fn write_u16(&mut self, i: u16) {
        self.0.push(("u16", i.to_le_bytes().to_vec()));
    }
    fn write_u32(&mut self, i: u32) {
        self.0.push(("u32", i.to_le_bytes().to_vec()));
    }
    fn write_u64(&mut self, i: u64) {
        self.0.push(("u64", i.to_le_bytes().to_vec()));
    }
    fn write_u128(&mut self, i: u128) {
        self.0.push(("u128", i.to_le_bytes().to_vec()));
    }
    fn write_usize(&mut self, i: usize) {
        self.0.push(("usize", i.to_le_bytes().to_vec()));
    }
    fn write_isize(&mut self, i: isize) {
        self.0.push(("isize", i.to_le_bytes().to_vec()));
    }
}

/// `value` hashed renumbered by `perm` feeds the words of its renumbered copy's hash; and
/// so it does by a permutation of one node more, and of one less (which leave the lists
/// indexed by node in their order, and rename only the nodes they cover).
fn hashes_as_renumbered<T: HashRenumbered + Clone>(
    value: &T,
    perm: &NodePermutation,
) -> Result<(), TestCaseError> {
    let nodes = perm.len();
    let reversed = |len: usize| NodePermutation::new((0..len).rev().collect()).unwrap();
    for perm in [
        perm.clone(),
        reversed(nodes + 1),
        reversed(nodes.saturating_sub(1)),
    ] {
        let mut without_copy = Words::default();
        value.hash_renumbered(&perm, &mut without_copy);
        let mut copy = Words::default();
        renumbered(value, &perm).hash(&mut copy);
        prop_assert_eq!(without_copy, copy, "renumbered by {:?}", perm);
    }
    Ok(())
}

/// Every command queued, in a fixed order (each step queues its commands in index order;
/// a driver keeps order only per node, which renaming keeps).
fn drain(machine: &mut impl Machine) -> Vec<Transmit> {
    let mut sent: Vec<Transmit> = std::iter::from_fn(|| machine.poll_transmit()).collect();
    sent.sort_by_key(|t| t.request);
    sent
}

/// Runs `original` and its renumbering side by side on `events`; `retry` starts an
/// acquisition's next round (and does nothing for the other machines).
fn equivariant<M>(
    mut original: M,
    perm: &NodePermutation,
    (nodes, generous): (usize, bool),
    events: &[Event],
    retry: fn(&mut M, Timestamp),
) -> Result<(), TestCaseError>
where
    M: Machine + HashRenumbered + Clone + PartialEq + Debug,
    M::Outcome: HashRenumbered + Clone + PartialEq + Debug,
{
    let back = perm.inverse();
    prop_assert_eq!(
        renumbered(&renumbered(&original, perm), &back),
        original.clone()
    );
    let mut image = renumbered(&original, perm);
    let mut now = Timestamp::from_nanos(1_000_000_000);
    let mut sent = Vec::new();
    for event in events {
        let a = drain(&mut original);
        let mut b = drain(&mut image);
        let mut expected: Vec<Transmit> = a.iter().map(|t| renumbered(t, perm)).collect();
        expected.sort_by_key(|t| t.request);
        b.sort_by_key(|t| t.request);
        prop_assert_eq!(&b, &expected);
        sent.extend(a);
        let outcome = original.poll_outcome();
        prop_assert_eq!(
            image.poll_outcome(),
            outcome.as_ref().map(|o| renumbered(o, perm))
        );
        if let Some(outcome) = &outcome {
            hashes_as_renumbered(outcome, perm)?;
        }
        prop_assert_eq!(&image, &renumbered(&original, perm));
        hashes_as_renumbered(&original, perm)?;
        match *event {
            Event::Reply {
                pick,
                reply: kind,
                gap_ms,
            } => {
                now = now.saturating_add(Duration::from_millis(gap_ms));
                // Mostly a request of the latest commands (the round in progress), at
                // times any earlier one (a late reply).
                let recent = sent.len().min(2 * nodes);
                let index = if pick < 48 {
                    sent.len() - recent + pick % recent.max(1)
                } else {
                    pick % sent.len().max(1)
                };
                let Some(transmit) = sent.get(index) else {
                    continue;
                };
                let answer = reply_to(&transmit.command, kind, nodes, generous);
                let image_answer = answer.clone().map_err(|f| renumbered(&f, perm));
                original.handle_reply(transmit.request, answer, now);
                image.handle_reply(renumbered(&transmit.request, perm), image_answer, now);
            }
            Event::Timeout { gap_ms } => {
                now = now.saturating_add(Duration::from_millis(gap_ms));
                original.handle_timeout(now);
                image.handle_timeout(now);
            }
            Event::Retry { gap_ms } => {
                now = now.saturating_add(Duration::from_millis(gap_ms));
                retry(&mut original, now);
                retry(&mut image, now);
            }
        }
    }
    prop_assert_eq!(drain(&mut image).len(), drain(&mut original).len());
    prop_assert_eq!(&image, &renumbered(&original, perm));
    hashes_as_renumbered(&original, perm)?;
    prop_assert_eq!(renumbered(&image, &back), original);
    Ok(())
}

fn config(nodes: usize, fencing: bool) -> LockConfig {
    LockConfig::new(nodes)
        .with_retry(RetryPolicy::new(
            3,
            Duration::from_millis(20),
            Duration::ZERO,
        ))
        .with_fencing(fencing)
}

fn key() -> LockKey {
    LockKey::new("", "r").unwrap()
}

fn no_retry<M>(_: &mut M, _: Timestamp) {}

/// A granted lease on `nodes` nodes: the nodes `answers` marks (not a multiple of 3)
/// answer first, the others only if the grant needs them (else they stay pending in it).
fn held(nodes: usize, answers: &[u8]) -> Held {
    let config = config(nodes, false);
    let t0 = Timestamp::from_nanos(1_000_000_000);
    let mut acquire = Acquire::new(&config, key(), Token::from_bytes([1; 16]), t0);
    let sent = drain(&mut acquire);
    let (first, later): (Vec<_>, Vec<_>) = sent
        .iter()
        .zip(answers)
        .partition(|(_, answer)| **answer % 3 != 0);
    for (transmit, _) in first.into_iter().chain(later) {
        acquire.handle_reply(transmit.request, Ok(Reply::Acquired), t0);
        if let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() {
            return Held::new(grant);
        }
    }
    panic!("no grant")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn acquire_is_equivariant(
        (nodes, perm, events, fencing, unread, generous) in (1usize..=6).prop_flat_map(|n| {
            (Just(n), permutation(n), events(), any::<bool>(), any::<bool>(), any::<bool>())
        }),
    ) {
        let t0 = Timestamp::from_nanos(1_000_000_000);
        let mut acquire = Acquire::new(&config(nodes, fencing), key(), Token::from_bytes([1; 16]), t0);
        if unread {
            acquire = acquire.waiting_until(t0.saturating_add(Duration::from_millis(400)));
        }
        equivariant(acquire, &perm, (nodes, generous), &events, |m, now| {
            m.retry(Token::from_bytes([2; 16]), now);
        })?;
    }

    #[test]
    fn release_extend_and_keeper_are_equivariant(
        (nodes, perm, events, answers, generous) in (1usize..=6).prop_flat_map(|n| {
            (Just(n), permutation(n), events(), proptest::collection::vec(0u8..6, n), any::<bool>())
        }),
    ) {
        let config = config(nodes, false);
        let held = held(nodes, &answers);
        let now = Timestamp::from_nanos(1_000_000_000);
        prop_assert_eq!(&renumbered(&renumbered(&held, &perm), &perm.inverse()), &held);
        hashes_as_renumbered(&held, &perm)?;
        let run = (nodes, generous);
        equivariant(held.release(&config, now), &perm, run, &events, no_retry)?;
        equivariant(held.extend(&config, now), &perm, run, &events, no_retry)?;
        let keeper = Keeper::new(&config, KeepAlive::at_half_life(config.ttl()), held);
        equivariant(keeper, &perm, run, &events, no_retry)?;
    }

    /// Eligibility: identifications of servers `s0`, `s1`, ... (two names may reach one
    /// server: the duplicate rule), each `run_id` renamed with the renumbering (a
    /// one-to-one renaming, as a checker's servers named after their node are).
    #[test]
    fn eligibility_is_equivariant(
        (nodes, perm, steps) in (1usize..=6).prop_flat_map(|n| {
            (Just(n), permutation(n), proptest::collection::vec((0..n, 0..n, 0u8..4, 1u64..4, 0u64..20_000, 0u64..3), 0..40))
        }),
    ) {
        let run_id = |node: usize, incarnation: u64| format!("s{node}-{incarnation}");
        let rename = |id: &str| {
            let (node, incarnation) = id[1..].split_once('-').unwrap();
            let node: usize = node.parse().unwrap();
            format!("s{}-{incarnation}", perm.index(node))
        };
        let quarantine = Duration::from_secs(10);
        let mut original = Eligibility::new(nodes, RestartPolicy::Quarantine(quarantine));
        let mut image = original.clone();
        let set = Command::SetIfAbsent { key: key(), token: Token::from_bytes([1; 16]), ttl: quarantine };
        let mut now = Timestamp::ZERO;
        for (node, server, what, connection, uptime_ms, incarnation) in steps {
            now = now.saturating_add(Duration::from_millis(500));
            let (n, m) = (NodeId::new(node), perm.node(NodeId::new(node)));
            let connection = ConnectionId(connection);
            match what {
                0 => {
                    let identity = |id: String| Ok(NodeIdentity {
                        run_id: id,
                        uptime: Duration::from_millis(uptime_ms),
                        maxmemory_policy: None,
                    });
                    let a = original.identified(n, connection, identity(run_id(server, incarnation)), now);
                    let b = image.identified(m, connection, identity(run_id(perm.index(server), incarnation)), now);
                    prop_assert_eq!(b, a.iter().map(|e| renumbered(e, &perm)).collect::<Vec<_>>());
                }
                1 => {
                    let a = original.admit(n, connection, &set, now);
                    prop_assert_eq!(image.admit(m, connection, &set, now), renumbered(&a, &perm));
                }
                2 => {
                    original.unanswered(n, connection);
                    image.unanswered(m, connection);
                }
                _ => {
                    original.probed(n, connection, uptime_ms % 2 == 0);
                    image.probed(m, connection, uptime_ms % 2 == 0);
                }
            }
            let mut expected = renumbered(&original, &perm);
            expected.rename_run_ids(|id| *id = rename(id));
            prop_assert_eq!(&image, &expected);
            // Hashed renumbered without a copy: the words of the copy's hash.
            let mut without_copy = std::hash::DefaultHasher::new();
            original.hash_renumbered(&perm, |id| *id = rename(id), &mut without_copy);
            let mut copy = std::hash::DefaultHasher::new();
            expected.hash(&mut copy);
            prop_assert_eq!(without_copy.finish(), copy.finish());
        }
    }

    /// Waiting: what a lost round saw, and the notifications heard from each node.
    #[test]
    fn waiting_is_equivariant(
        (nodes, perm, seen, heard, marking) in (1usize..=6).prop_flat_map(|n| {
            (
                Just(n),
                permutation(n),
                proptest::collection::vec(0u8..4, n),
                proptest::collection::vec((0..n, 0u8..3, any::<bool>()), 0..12),
                any::<bool>(),
            )
        }),
    ) {
        let config = config(nodes, false);
        let token = |t: u8| Token::from_bytes([t; 16]);
        let statuses: Vec<NodeStatus> = seen
            .iter()
            .map(|&s| match s {
                0 => NodeStatus::Replied(Reply::TakenBy { holder: token(0), remaining: None }),
                1 => NodeStatus::Replied(Reply::TakenBy { holder: token(1), remaining: None }),
                2 => NodeStatus::Replied(Reply::Taken),
                _ => NodeStatus::Pending,
            })
            .collect();
        let t0 = Timestamp::from_nanos(1_000_000_000);
        let acquire = |statuses: Vec<NodeStatus>| {
            // A failure is built by a lost round; its nodes are what matter here.
            let mut round = Acquire::new(&config.clone().with_retry(RetryPolicy::no_retry()), key(), token(9), t0);
            let sent = drain(&mut round);
            for (t, s) in sent.iter().zip(&statuses) {
                let reply = s.reply().ok_or(NodeFailure::TimedOut);
                round.handle_reply(t.request, reply, t0);
            }
            round.handle_timeout(t0.saturating_add(Duration::from_secs(1)));
            match round.poll_outcome() {
                Some(AcquireEvent::Failed(f)) => Some(f.last_round),
                _ => None,
            }
        };
        let Some(failure) = acquire(statuses) else { return Ok(()) };
        let mut original = Waiting::new(&config, key());
        if marking {
            // The waiting marks: the lost round's holders marked, node by node.
            original = original.marking(token(7), Duration::from_secs(10));
        }
        let mut image = renumbered(&original, &perm);
        let timer = t0.saturating_add(Duration::from_secs(5));
        let mut half = heard.len() / 2;
        for (i, (node, t, here)) in heard.iter().enumerate() {
            if i == half {
                original.round_lost(&failure, true, timer);
                image.round_lost(&renumbered(&failure, &perm), true, timer);
                half = usize::MAX;
                // The marks go out node by node in index order: the same commands, renamed,
                // in another order (which matters only per node).
                let by_node = |mut sent: Vec<Transmit>| {
                    sent.sort_by_key(|t| t.node.index());
                    sent
                };
                let sent: Vec<Transmit> = std::iter::from_fn(|| original.poll_transmit())
                    .map(|t| renumbered(&t, &perm))
                    .collect();
                let image_sent: Vec<Transmit> = std::iter::from_fn(|| image.poll_transmit()).collect();
                prop_assert_eq!(by_node(image_sent), by_node(sent));
            }
            let now = t0.saturating_add(Duration::from_millis(10 * i as u64));
            let payload = token(*t).to_hex();
            if *here {
                original.released_here(token(*t), now);
                image.released_here(token(*t), now);
            } else {
                original.notified(NodeId::new(*node), key().as_str().as_bytes(), &payload, now);
                image.notified(perm.node(NodeId::new(*node)), key().as_str().as_bytes(), &payload, now);
            }
            prop_assert_eq!(&image, &renumbered(&original, &perm));
            hashes_as_renumbered(&original, &perm)?;
            // Without its sets of holders, too.
            let (mut without_copy, mut copy) = (Words::default(), Words::default());
            original.hash_without_holder_sets(Some(&perm), &mut without_copy);
            renumbered(&original, &perm).hash_without_holder_sets(None, &mut copy);
            prop_assert_eq!(without_copy, copy);
            prop_assert_eq!(image.next_round(), original.next_round());
        }
        prop_assert_eq!(renumbered(&image, &perm.inverse()), original);
    }
}

/// The duplicate rule reads like a tie broken by index (the first other name found keeps
/// the vote), but the names that keep a vote never share a `run_id` (the second is refused
/// as it is identified), so at most one is found: who keeps the vote follows the order of
/// identification, which a renumbering renames, not the order of the list.
#[test]
fn duplicates_follow_the_order_of_identification_not_the_index() {
    let policy = RestartPolicy::Quarantine(Duration::from_secs(10));
    let identity = || {
        Ok(NodeIdentity {
            run_id: "same".into(),
            uptime: Duration::from_secs(3600),
            maxmemory_policy: None,
        })
    };
    let (now, c) = (Timestamp::ZERO, ConnectionId(1));
    let mut original = Eligibility::new(3, policy);
    original.identified(NodeId::new(0), c, identity(), now);
    original.identified(NodeId::new(2), c, identity(), now);
    original.identified(NodeId::new(1), c, identity(), now);
    assert_eq!(original.duplicate_of(NodeId::new(2)), Some(NodeId::new(0)));
    assert_eq!(original.duplicate_of(NodeId::new(1)), Some(NodeId::new(0)));
    // Swapped 0 and 2 and fed the same identifications renamed: node 2 (once node 0) is
    // met first and keeps the vote.
    let swap = NodePermutation::new(vec![2, 1, 0]).unwrap();
    let mut image = Eligibility::new(3, policy);
    image.identified(NodeId::new(2), c, identity(), now);
    image.identified(NodeId::new(0), c, identity(), now);
    image.identified(NodeId::new(1), c, identity(), now);
    assert_eq!(image.duplicate_of(NodeId::new(0)), Some(NodeId::new(2)));
    assert_eq!(image, renumbered(&original, &swap));
}
