//! Random fault schedules, shrunk to a minimal counterexample when a property fails.
//!
//! 1. Within Redlock's assumptions (clock rates within the drift factor, no clock steps,
//!    accesses made right after a validity check and delivered within the margin, crashed
//!    nodes that keep their keys, or stay down longer than the TTL, or are left out by every
//!    client's restart quarantine, no failover) the correct client never yields `VIOLATED`,
//!    neither for mutual exclusion (no two windows overlap) nor for the resource, whatever
//!    the partitions, losses, duplicates, pauses and client crashes.
//! 2. With the linearizable token source and strict fencing, no stale access is ever
//!    applied, whatever the faults, assumptions broken or not.
//! 3. Quorum-minted tokens are unique and ordered like the leases' keys whenever no node
//!    loses its counter (every crashed node fsyncs every write), whatever else goes wrong:
//!    clock steps and rate errors, pauses, clocks that stop during pauses, partitions,
//!    losses. (Not in grant order: a holder whose clock stops after its raise landed is
//!    granted later with a smaller token, `fence-quorum-frozen-clock-after-raise`.)
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::time::Duration;

use proptest::prelude::*;
use redlock_core::{LockConfig, RestartPolicy, RetryPolicy};
use redlock_sim::History;
use redlock_sim::scenario::{
    ClientSpec, ClockKind, Crash, DEFAULT_UPTIME, Delay, Endpoint, Expectation, ExtendImpl,
    LinkSpec, LossOrder, NetworkSpec, NotificationSpec, Partition, PartitionKind, Persistence,
    ReleaseImpl, Scenario, ServerSpec, Step, TimingImpl, TokenSource, Verdict,
};
use redlock_sim::time::clock::ClockModel;
use redlock_sim::time::{MS, Nanos};

const TTL_MS: u64 = 2_000;

/// One client's part of a generated schedule.
#[derive(Clone, Debug)]
struct ClientPlan {
    start_ms: u64,
    iterations: u32,
    /// Critical-section moves; each access is preceded by a validity check when `checked`.
    moves: Vec<Move>,
    clock_ppm: i64,
    pauses: Vec<(u64, u64)>,
    crash_ms: Option<u64>,
    /// Whether the client's clock stops while it is paused (only in the unsafe schedules).
    frozen: bool,
}

#[derive(Clone, Copy, Debug)]
enum Move {
    Write,
    Read,
    Sleep(u64),
    Extend,
    /// A stop-the-world pause inside the critical section (only in the unsafe schedules).
    Pause(u64),
}

#[derive(Clone, Debug)]
struct NodePlan {
    clock_ppm: i64,
    crash: Option<(u64, u64, bool)>, // (at, restart after, persistent)
    step: Option<(u64, i64)>,
}

#[derive(Clone, Debug)]
struct Plan {
    nodes: usize,
    clients: Vec<ClientPlan>,
    node_plans: Vec<NodePlan>,
    partitions: Vec<(u64, u64, Vec<usize>)>, // (start, length, the side of the first client)
    loss: f64,
    duplicate: f64,
    resource_delay_ms: u64,
    safe: bool,
    /// Whether the clients apply the restart quarantine (as long as the TTL). With it, the
    /// safe schedules let crashed nodes without persistence restart at once.
    quarantine: bool,
}

fn moves(safe: bool) -> impl Strategy<Value = Vec<Move>> {
    let correct = prop_oneof![
        3 => Just(Move::Write),
        2 => Just(Move::Read),
        3 => (1u64..2_500).prop_map(Move::Sleep),
        1 => Just(Move::Extend),
    ];
    let any_move = if safe {
        correct.boxed()
    } else {
        prop_oneof![9 => correct, 1 => (100u64..4_000).prop_map(Move::Pause)].boxed()
    };
    proptest::collection::vec(any_move, 1..6)
}

fn client(safe: bool) -> impl Strategy<Value = ClientPlan> {
    let ppm = if safe {
        -1_000i64..=1_000
    } else {
        -50_000i64..=50_000
    };
    (
        0u64..3_000,
        1u32..3,
        moves(safe),
        ppm,
        proptest::collection::vec((0u64..6_000, 1u64..4_000), 0..2),
        prop::option::weighted(0.15, 0u64..6_000),
        if safe {
            Just(false).boxed()
        } else {
            any::<bool>().boxed()
        },
    )
        .prop_map(
            |(start_ms, iterations, moves, clock_ppm, pauses, crash_ms, frozen)| ClientPlan {
                start_ms,
                iterations,
                moves,
                clock_ppm,
                pauses,
                crash_ms,
                frozen,
            },
        )
}

fn node(safe: bool) -> impl Strategy<Value = NodePlan> {
    let ppm = if safe {
        -1_000i64..=1_000
    } else {
        -50_000i64..=50_000
    };
    let step = if safe {
        Just(None).boxed()
    } else {
        prop::option::weighted(0.2, (0u64..6_000, -20_000i64..20_000)).boxed()
    };
    (
        ppm,
        prop::option::weighted(0.3, (0u64..6_000, 0u64..4_000, any::<bool>())),
        step,
    )
        .prop_map(|(clock_ppm, crash, step)| NodePlan {
            clock_ppm,
            crash,
            step,
        })
}

fn plan(safe: bool) -> impl Strategy<Value = Plan> {
    (prop_oneof![Just(3usize), Just(5usize)], 2usize..=3).prop_flat_map(move |(nodes, clients)| {
        (
            proptest::collection::vec(client(safe), clients),
            proptest::collection::vec(node(safe), nodes),
            proptest::collection::vec(
                (
                    0u64..6_000,
                    100u64..5_000,
                    proptest::collection::vec(0..nodes, 1..nodes),
                ),
                0..3,
            ),
            0.0f64..0.2,
            0.0f64..0.2,
            if safe { 0u64..10 } else { 0u64..5_000 },
            any::<bool>(),
        )
            .prop_map(
                move |(
                    clients,
                    node_plans,
                    partitions,
                    loss,
                    duplicate,
                    resource_delay_ms,
                    quarantine,
                )| Plan {
                    nodes,
                    clients,
                    node_plans,
                    partitions,
                    loss,
                    duplicate,
                    resource_delay_ms,
                    safe,
                    quarantine,
                },
            )
    })
}

/// The same schedule with tokens minted on the nodes, and every crash persistent.
fn quorum_minted(plan: &Plan) -> Scenario {
    let mut scenario = build(plan);
    scenario.tokens = TokenSource::QuorumMinted;
    for server in &mut scenario.servers {
        server.persistence = Persistence::Always;
    }
    for client in &mut scenario.clients {
        client.config = client.config.clone().with_fencing(true);
    }
    scenario
}

fn build(plan: &Plan) -> Scenario {
    let ms = |n: u64| n * MS;
    let config = LockConfig::new(plan.nodes)
        .with_ttl(Duration::from_millis(TTL_MS))
        .with_node_timeout(Duration::from_millis(20))
        .with_retry(RetryPolicy::new(
            300,
            Duration::from_millis(20),
            Duration::from_millis(10),
        ));
    config.validate().expect("a valid generated configuration");
    let servers = plan
        .node_plans
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (crashes, persistence) = match p.crash {
                None => (Vec::new(), Persistence::None),
                Some((at, after, persistent)) => {
                    // Within the assumptions, a node without its keys stays down longer than
                    // a TTL (the delayed restart), or keeps them (appendfsync always), or the
                    // clients' restart quarantine leaves it out for a TTL.
                    let after = if plan.safe && !persistent && !plan.quarantine {
                        after.max(TTL_MS + 100)
                    } else {
                        after
                    };
                    let persistence = if persistent {
                        Persistence::Always
                    } else {
                        Persistence::None
                    };
                    (
                        vec![Crash {
                            at: ms(at),
                            restart_after: Some(ms(after)),
                        }],
                        persistence,
                    )
                }
            };
            let steps = p
                .step
                .map(|(at, by)| vec![(ms(at), by * MS as i64)])
                .unwrap_or_default();
            ServerSpec {
                name: format!("n{i}"),
                clock: ClockModel::new(0, p.clock_ppm, steps),
                persistence,
                uptime: DEFAULT_UPTIME,
                crashes,
                replica: None,
                failover: None,
            }
        })
        .collect();
    let clients: Vec<ClientSpec> = plan
        .clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut steps = Vec::new();
            for m in &c.moves {
                match m {
                    Move::Write => steps.extend([Step::Check, Step::Write]),
                    Move::Read => steps.extend([Step::Check, Step::Read]),
                    Move::Sleep(n) => steps.push(Step::Sleep(ms(*n))),
                    Move::Extend => steps.push(Step::Extend),
                    // The unsafe schedules put the pause between the check and the access.
                    Move::Pause(n) => steps.extend([Step::Check, Step::Pause(ms(*n)), Step::Write]),
                }
            }
            ClientSpec {
                name: format!("c{}", i + 1),
                start: ms(c.start_ms),
                iterations: c.iterations,
                gap: ms(50),
                steps,
                access_timeout: ms(200),
                pauses: c
                    .pauses
                    .iter()
                    .map(|&(at, len)| (ms(at), ms(len)))
                    .collect(),
                crash_at: c.crash_ms.map(ms),
                clock: ClockModel::new(0, c.clock_ppm, Vec::new()),
                clock_kind: ClockKind::Monotonic,
                freeze_during_pauses: c.frozen,
                release: ReleaseImpl::Script,
                extend: ExtendImpl::Script,
                loss_order: LossOrder::StopFirst,
                timing: TimingImpl::Correct,
                nodes: (0..plan.nodes).collect(),
                config: config.clone(),
                restart: if plan.quarantine {
                    RestartPolicy::Quarantine(config.ttl())
                } else {
                    RestartPolicy::Persistent
                },
                keep_alive: None,
                supervisor: None,
            }
        })
        .collect();
    let partitions = plan
        .partitions
        .iter()
        .map(|(start, length, side)| {
            let mut first = vec![Endpoint::Client(0)];
            let mut rest: Vec<Endpoint> = (1..clients.len()).map(Endpoint::Client).collect();
            for n in 0..plan.nodes {
                if side.contains(&n) {
                    first.push(Endpoint::Server(n));
                } else {
                    rest.push(Endpoint::Server(n));
                }
            }
            Partition {
                start: ms(*start),
                end: ms(start + length),
                kind: PartitionKind::Groups(vec![first, rest]),
            }
        })
        .collect();
    let delays = (0..clients.len())
        .map(|c| Delay {
            from: Endpoint::Client(c),
            to: Endpoint::Resource,
            start: 0,
            end: u64::MAX,
            extra: ms(plan.resource_delay_ms),
        })
        .collect();
    Scenario {
        name: "generated".into(),
        description: String::new(),
        source: "generated".into(),
        seed: 1,
        duration: ms(30_000),
        max_events: 5_000_000,
        tokens: TokenSource::Linearizable,
        expect: Expectation {
            exclusion: Verdict::Safe,
            plain: Verdict::Safe,
            fenced: Verdict::Safe,
            strict: Verdict::Safe,
            cause: None,
            fences_increase: None,
        },
        resource: "generated".into(),
        nodes: plan.nodes,
        network: NetworkSpec {
            default: LinkSpec {
                loss: plan.loss,
                duplicate: plan.duplicate,
                ..LinkSpec::default()
            },
            links: Vec::new(),
            partitions,
            delays,
        },
        // Release notifications are lost and duplicated as often as any message.
        notifications: NotificationSpec {
            loss: plan.loss,
            duplicate: plan.duplicate,
            ..NotificationSpec::default()
        },
        servers,
        clients,
    }
}

/// 96 cases in CI; more with `PROPTEST_CASES=5000`.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn within_the_assumptions_the_correct_client_is_never_violated(plan in plan(true), seed in any::<u64>()) {
        let scenario = build(&plan);
        let run = redlock_sim::run(&scenario, seed, false).unwrap();
        prop_assert_eq!(
            run.report.exclusion, Verdict::Safe,
            "overlaps {:?}", run.judgement.overlaps
        );
        prop_assert!(
            run.report.verdicts.iter().all(|v| *v == Verdict::Safe),
            "verdicts {:?}, counts {:?}, first problem {:?}",
            run.report.verdicts, run.report.counts, run.judgement.first_problem
        );
    }

    #[test]
    fn linearizable_tokens_and_strict_fencing_never_apply_a_stale_access(plan in plan(false), seed in any::<u64>()) {
        let scenario = build(&plan);
        let run = redlock_sim::run(&scenario, seed, false).unwrap();
        prop_assert_eq!(run.report.counts.stale_applied[2], 0);
        prop_assert_ne!(run.report.verdicts[2], Verdict::Violated);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn quorum_minted_tokens_are_unique_and_ordered_like_keys_while_nodes_keep_their_counters(plan in plan(false), seed in any::<u64>()) {
        let run = redlock_sim::run(&quorum_minted(&plan), seed, false).unwrap();
        let checked = unique_and_ordered_like_keys(&run.history);
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
    }
}

/// What quorum-minted tokens promise while no node loses a counter: no two leases share a
/// token, and any two leases have a node that held both their keys, in the order of their
/// tokens (a node where both raised the counter: their raise quorums intersect).
fn unique_and_ordered_like_keys(history: &History) -> Result<(), String> {
    // The first time each lease's key was set on each server.
    let first_set = |lease: usize, server: usize| -> Option<Nanos> {
        let token = history.leases[lease].token;
        history
            .keys
            .iter()
            .filter(|k| k.server == server && k.token == token)
            .map(|k| k.from)
            .min()
    };
    let servers = history
        .keys
        .iter()
        .map(|k| k.server)
        .max()
        .map_or(0, |m| m + 1);
    let leases = &history.leases;
    for a in 0..leases.len() {
        for b in a + 1..leases.len() {
            let (fa, fb) = (leases[a].fence, leases[b].fence);
            if fa == fb {
                return Err(format!("leases {a} and {b} share token {fa}: {leases:?}"));
            }
            let agrees = (0..servers).any(|s| match (first_set(a, s), first_set(b, s)) {
                (Some(ta), Some(tb)) => (ta < tb) == (fa < fb),
                _ => false,
            });
            if !agrees {
                return Err(format!(
                    "no node held the keys of leases {a} (token {fa}) and {b} (token {fb}) in token order: {:?}",
                    history.keys
                ));
            }
        }
    }
    Ok(())
}

/// The schedule that breaks grant order (a holder suspended with its clock stopped after its
/// raise landed is granted later with a smaller token) keeps what the tokens do promise. The
/// nodes keep their counters: nothing crashes.
#[test]
fn a_later_grant_with_a_smaller_token_keeps_tokens_unique_and_ordered_like_keys() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios/fence-quorum-frozen-clock-after-raise.toml");
    let scenario = Scenario::load(&path).unwrap();
    assert!(scenario.servers.iter().all(|s| s.crashes.is_empty()));
    for seed in 1..=5 {
        let run = redlock_sim::run(&scenario, seed, false).unwrap();
        let leases = &run.history.leases;
        assert_eq!(leases.len(), 2, "seed {seed}");
        assert!(
            leases[1].granted_at > leases[0].granted_at && leases[1].fence < leases[0].fence,
            "seed {seed}: the later grant should carry the smaller token: {leases:?}"
        );
        assert_eq!(run.report.counts.fence_regressions, 1, "seed {seed}");
        unique_and_ordered_like_keys(&run.history).unwrap();
    }
}

/// The unsafe generator does reach violations (so the first property is not vacuous):
/// some generated schedules break the unfenced resource.
#[test]
fn the_unsafe_generator_finds_violations() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = plan(false);
    let violated = (0..200)
        .filter(|_| {
            let plan = strategy.new_tree(&mut runner).unwrap().current();
            let run = redlock_sim::run(&build(&plan), 1, false).unwrap();
            run.report.verdicts[0] == Verdict::Violated
        })
        .count();
    assert!(violated > 0, "no generated schedule violated anything");
}
