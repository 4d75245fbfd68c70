//! Property tests of the machines against a reference model of the quorum rule: any order,
//! loss or duplication of replies, for N = 1..=9, reaches the decision the rule demands.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

#[derive(Clone, Copy, Debug)]
enum Answer {
    Yes,
    Taken,
    Down,
}

/// One delivered reply: which node, what it says, and how many microseconds after the
/// previous event it arrives.
#[derive(Clone, Debug)]
struct Delivery {
    node: usize,
    answer: Answer,
    gap_us: u64,
}

fn deliveries(nodes: usize) -> impl Strategy<Value = Vec<Delivery>> {
    let delivery = (
        0..nodes,
        prop_oneof![Just(Answer::Yes), Just(Answer::Taken), Just(Answer::Down)],
        // Mostly fast, sometimes slow enough to cross the 50 ms node timeout.
        prop_oneof![9 => 0u64..2_000, 1 => 0u64..60_000],
    )
        .prop_map(|(node, answer, gap_us)| Delivery {
            node,
            answer,
            gap_us,
        });
    // Up to twice as many deliveries as nodes: duplicates happen, and some nodes never answer.
    proptest::collection::vec(delivery, 0..=2 * nodes)
}

/// What the quorum rule demands, computed independently of the machine.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Expected {
    Won { at_us: u64 },
    Lost,
}

/// A strict majority, by definition rather than by formula: the smallest count above half.
fn majority(nodes: usize) -> usize {
    (1..=nodes).find(|k| 2 * k > nodes).unwrap_or(1)
}

fn expected(nodes: usize, deliveries: &[Delivery], timeout_us: u64) -> Expected {
    let q = majority(nodes);
    let mut seen = vec![false; nodes];
    let (mut yes, mut no, mut now) = (0, 0, 0);
    for d in deliveries {
        now += d.gap_us;
        if now >= timeout_us {
            // The timer fires first: everything missing counts against.
            return Expected::Lost;
        }
        if std::mem::replace(&mut seen[d.node], true) {
            continue;
        }
        match d.answer {
            Answer::Yes => yes += 1,
            Answer::Taken | Answer::Down => no += 1,
        }
        if yes >= q {
            return Expected::Won { at_us: now };
        }
        if no > nodes - q {
            return Expected::Lost;
        }
    }
    Expected::Lost
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn acquire_decides_by_the_quorum_rule(
        (nodes, deliveries) in (1usize..=9).prop_flat_map(|n| (Just(n), deliveries(n))),
    ) {
        let config = LockConfig::new(nodes).with_retry(RetryPolicy::no_retry());
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::from_nanos(1_000_000_000);
        let mut m = Acquire::new(&config, key, Token::from_bytes([9; 16]), t0);
        let sets: Vec<Transmit> = std::iter::from_fn(|| m.poll_transmit()).collect();
        prop_assert_eq!(sets.len(), nodes);

        let timeout_us = u64::try_from(config.node_timeout().as_micros()).unwrap();
        let mut now = t0;
        let mut outcome = None;
        for d in &deliveries {
            now = now.saturating_add(Duration::from_micros(d.gap_us));
            // A driver fires the timer before delivering anything that arrives after it.
            if let Some(deadline) = m.poll_timeout() && now >= deadline {
                m.handle_timeout(now);
            }
            if outcome.is_none() {
                outcome = m.poll_outcome();
            }
            let reply = match d.answer {
                Answer::Yes => Ok(Reply::Acquired),
                Answer::Taken => Ok(Reply::Taken),
                Answer::Down => Err(NodeFailure::Refused),
            };
            m.handle_reply(sets[d.node].request, reply, now);
            if outcome.is_none() {
                outcome = m.poll_outcome();
            }
        }
        if outcome.is_none() {
            // Nothing else arrives: the timer must end the round.
            let deadline = m.poll_timeout();
            prop_assert!(deadline.is_some(), "undecided machine without a timer would hang");
            m.handle_timeout(deadline.unwrap());
            outcome = m.poll_outcome();
        }
        prop_assert!(m.poll_outcome().is_none(), "exactly one outcome");

        let after: Vec<Transmit> = std::iter::from_fn(|| m.poll_transmit()).collect();
        match (expected(nodes, &deliveries, timeout_us), outcome) {
            (Expected::Won { at_us }, Some(AcquireEvent::Acquired(grant))) => {
                prop_assert_eq!(grant.decided_at, t0.saturating_add(Duration::from_micros(at_us)));
                prop_assert!(grant.decided_at < grant.valid_until);
                let yes = grant.nodes.iter().filter(|s| s.reply() == Some(Reply::Acquired)).count();
                prop_assert_eq!(yes, majority(nodes), "decided at the first majority");
                prop_assert!(after.is_empty(), "a won round releases nothing");
            }
            (Expected::Lost, Some(AcquireEvent::Failed(failure))) => {
                let yes = failure.last_round.count(Reply::Acquired);
                prop_assert!(yes < majority(nodes));
                // Every node that may hold this round's token gets a release of it: all but
                // those that answered *taken* by the decision (their SET NX wrote nothing)
                // and those whose SET was refused before it was sent.
                let released: Vec<usize> = after.iter().map(|t| t.node.index()).collect();
                let may_hold: Vec<usize> = (0..nodes)
                    .filter(|&i| {
                        let status = &failure.last_round.nodes[i];
                        status.reply() != Some(Reply::Taken)
                            && !matches!(status, NodeStatus::Failed(f) if f.never_sent())
                    })
                    .collect();
                prop_assert_eq!(released, may_hold);
                let all_releases = after
                    .iter()
                    .all(|t| matches!(t.command, Command::ReleaseIfOwner { .. }));
                prop_assert!(all_releases, "cleanup must be releases only");
            }
            (expected, outcome) => prop_assert!(false, "expected {expected:?}, got {outcome:?}"),
        }
    }

    #[test]
    fn extend_and_release_always_finish(
        (nodes, deliveries) in (1usize..=9).prop_flat_map(|n| (Just(n), deliveries(n))),
    ) {
        let config = LockConfig::new(nodes);
        let key = LockKey::new("", "r").unwrap();
        let token = Token::from_bytes([5; 16]);
        let t0 = Timestamp::ZERO;
        let mut extend = Extend::new(&config, key.clone(), token, Timestamp::MAX, t0, t0);
        let mut release = Release::new(&config, key, token, t0);
        let ext: Vec<Transmit> = std::iter::from_fn(|| extend.poll_transmit()).collect();
        let rel: Vec<Transmit> = std::iter::from_fn(|| release.poll_transmit()).collect();
        let mut now = t0;
        let (mut ext_out, mut rel_out) = (None, None);
        for d in &deliveries {
            now = now.saturating_add(Duration::from_micros(d.gap_us));
            let (e, r) = match d.answer {
                Answer::Yes => (Ok(Reply::Extended), Ok(Reply::Released)),
                Answer::Taken => (Ok(Reply::HeldByOther), Ok(Reply::NotHeld)),
                Answer::Down => (Err(NodeFailure::TimedOut), Err(NodeFailure::TimedOut)),
            };
            extend.handle_reply(ext[d.node].request, e, now);
            release.handle_reply(rel[d.node].request, r, now);
            ext_out = ext_out.or_else(|| extend.poll_outcome());
            rel_out = rel_out.or_else(|| release.poll_outcome());
        }
        if let Some(deadline) = extend.poll_timeout() {
            extend.handle_timeout(deadline.max(now));
        }
        if let Some(deadline) = release.poll_timeout() {
            release.handle_timeout(deadline.max(now));
        }
        let ext_out = ext_out.or_else(|| extend.poll_outcome());
        let rel_out = rel_out.or_else(|| release.poll_outcome());
        prop_assert!(ext_out.is_some());
        let report = rel_out.unwrap();
        prop_assert_eq!(report.nodes.len(), nodes);
        if let Some(ExtendOutcome::Extended(e)) = ext_out {
            let yes = e.nodes.iter().filter(|s| s.reply() == Some(Reply::Extended)).count();
            prop_assert!(yes >= majority(nodes));
        }
        prop_assert!(extend.poll_transmit().is_none(), "an extension never sends a delete");
    }
}

proptest! {
    #[test]
    fn a_fenced_grant_is_above_every_counter_it_read(
        counters in proptest::collection::vec(prop::option::of(0u64..1_000_000), 1..=9),
    ) {
        let nodes = counters.len();
        let config = LockConfig::new(nodes).with_fencing(true).with_retry(RetryPolicy::no_retry());
        let key = LockKey::new("", "r").unwrap();
        let t0 = Timestamp::ZERO;
        let mut m = Acquire::new(&config, key, Token::from_bytes([3; 16]), t0);
        let sets: Vec<Transmit> = std::iter::from_fn(|| m.poll_transmit()).collect();
        // `None` nodes are down; the others take the key and report their counter.
        for (t, counter) in sets.iter().zip(&counters) {
            let reply = match counter {
                Some(counter) => Ok(Reply::AcquiredWithFence { counter: *counter }),
                None => Err(NodeFailure::Refused),
            };
            m.handle_reply(t.request, reply, t0);
        }
        let up: Vec<u64> = counters.iter().flatten().copied().collect();
        let raises: Vec<Transmit> = std::iter::from_fn(|| m.poll_transmit()).collect();
        if up.len() < majority(nodes) {
            let lost = matches!(m.poll_outcome(), Some(AcquireEvent::Failed(_)));
            prop_assert!(lost);
            return Ok(());
        }
        let Some(Command::RaiseFence { fence, .. }) = raises.first().map(|t| t.command.clone()) else {
            return Err(TestCaseError::fail("no fence phase"));
        };
        // The token read by the quorum that actually decided: at least every counter of the
        // first majority of replies, so above all of them.
        let decided_on = &up[..majority(nodes)];
        prop_assert!(decided_on.iter().all(|c| fence > *c));
        for t in &raises {
            m.handle_reply(t.request, Ok(Reply::FenceRaised { counter: fence }), t0);
        }
        let Some(AcquireEvent::Acquired(grant)) = m.poll_outcome() else {
            return Err(TestCaseError::fail("no grant"));
        };
        prop_assert_eq!(grant.fence, Some(fence));
    }
}

/// One step of a keep-alive run: a node's answer to the running attempt, after a gap.
#[derive(Clone, Debug)]
struct KeeperStep {
    node: usize,
    answer: Answer,
    gap_us: u64,
}

fn keeper_steps() -> impl Strategy<Value = Vec<KeeperStep>> {
    let step = (
        0usize..5,
        prop_oneof![Just(Answer::Yes), Just(Answer::Taken), Just(Answer::Down)],
        prop_oneof![3 => 0u64..5_000, 1 => 0u64..200_000],
    )
        .prop_map(|(node, answer, gap_us)| KeeperStep {
            node,
            answer,
            gap_us,
        });
    proptest::collection::vec(step, 0..200)
}

proptest! {
    /// Whatever the nodes answer and whenever, a punctual driver (timers called exactly at
    /// `poll_timeout`) sees: no attempt started that could not be decided before the loss
    /// deadline, a deadline that never moves back, a loss reported at the deadline or
    /// earlier and never while an extension would have kept the lease, then nothing but the
    /// release, and the release never before the work's stop is confirmed or the keys have
    /// expired (the release deadline).
    #[test]
    fn the_keeper_never_reports_a_loss_late_nor_releases_before_the_stop(
        steps in keeper_steps(),
        ttl_ms in 200u64..20_000,
        max_hold_ms in 1u64..60_000,
        stop_after_ms in proptest::option::of(0u64..40_000),
    ) {
        let config = LockConfig::new(5)
            .with_ttl(Duration::from_millis(ttl_ms))
            .with_max_hold(Duration::from_millis(max_hold_ms));
        let t0 = Timestamp::ZERO;
        let key = LockKey::new("", "r").unwrap();
        let mut acquire = Acquire::new(&config, key, Token::from_bytes([1; 16]), t0);
        let sets: Vec<Transmit> = std::iter::from_fn(|| acquire.poll_transmit()).collect();
        for t in &sets {
            acquire.handle_reply(t.request, Ok(Reply::Acquired), t0);
        }
        let Some(AcquireEvent::Acquired(grant)) = acquire.poll_outcome() else {
            return Err(TestCaseError::fail("no grant"));
        };
        let mut keeper = Keeper::new(&config, KeepAlive::default(), Held::new(grant));
        let mut now = t0;
        let mut in_flight: Vec<Transmit> = Vec::new();
        let mut lost = false;
        let mut lost_at = t0;
        let mut released = None;
        let mut deadline = keeper.held().valid_until();
        let mut steps = steps.into_iter();
        loop {
            let before = keeper.lost_at();
            let sent: Vec<Transmit> = std::iter::from_fn(|| keeper.poll_transmit()).collect();
            if !sent.is_empty() {
                prop_assert!(
                    now.saturating_add(config.node_timeout()) <= before,
                    "an attempt at {now} cannot be decided before {before}"
                );
                in_flight = sent;
            }
            while let Some(event) = keeper.poll_outcome() {
                prop_assert!(released.is_none(), "an event after the release: {event:?}");
                match event {
                    KeeperEvent::Lost(reason) => {
                        prop_assert!(!lost, "lost twice");
                        lost = true;
                        lost_at = now;
                        if !matches!(reason, LeaseLost::KeysGone { .. }) {
                            prop_assert!(now <= before, "lost at {now}, deadline {before}");
                        }
                    }
                    KeeperEvent::Release(when) => {
                        prop_assert!(lost, "released without a loss or a stop");
                        // Only the release deadline frees it without the stop confirmed.
                        prop_assert_eq!(when, ReleaseWhen::KeysExpired);
                        prop_assert!(now >= keeper.release_deadline());
                        released = Some(now);
                    }
                    other => prop_assert!(!lost, "{other:?} after the loss"),
                }
            }
            prop_assert!(keeper.held().valid_until() >= deadline);
            deadline = keeper.held().valid_until();
            if lost && released.is_none() && let Some(after) = stop_after_ms {
                let stopped = lost_at.saturating_add(Duration::from_millis(after));
                if stopped < keeper.release_deadline() {
                    // The driver confirms the stop: the release follows at once, not before.
                    now = stopped;
                    keeper.work_stopped(now);
                    prop_assert_eq!(
                        keeper.poll_outcome(),
                        Some(KeeperEvent::Release(ReleaseWhen::WorkStopped))
                    );
                    released = Some(now);
                }
            }
            let Some(timer) = keeper.poll_timeout() else { break };
            prop_assert!(released.is_none());
            // The next reply, if it comes before the timer; else the timer.
            match steps.next() {
                Some(step) if !in_flight.is_empty() => {
                    let at = now.saturating_add(Duration::from_micros(step.gap_us));
                    if at < timer {
                        now = at;
                        let reply = match step.answer {
                            Answer::Yes => Ok(Reply::Extended),
                            Answer::Taken => Ok(Reply::HeldByOther),
                            Answer::Down => Err(NodeFailure::TimedOut),
                        };
                        keeper.handle_reply(in_flight[step.node].request, reply, now);
                        continue;
                    }
                    now = timer;
                    keeper.handle_timeout(now);
                }
                _ => {
                    now = timer;
                    keeper.handle_timeout(now);
                }
            }
        }
        prop_assert!(lost, "a keeper only stops by losing the lease");
        prop_assert!(released.is_some(), "a lost lease is released in the end");
        prop_assert!(!keeper.is_valid(now));
    }
}
