//! The simulator's keyspace against a real redis-server: the same random command sequences go
//! to both, through the client's own wire on the Redis side (so `SET … NX GET PX` and the
//! shipped Lua scripts), and every reply, the keys left (a waiter's mark hash included) and
//! the number of `PUBLISH`es the release scripts made after every step must agree.
//!
//! The simulator and the model checker judge the protocol on nodes that never run a script:
//! their keys live in `store.rs`, a re-implementation. This test is what ties the two.
//!
//! Time: the keyspace's clock is the test's; the server's is the wall clock, which barely
//! moves during a sequence. The TTLs are long (1,000 s and more), so nothing expires on its
//! own, and a step that advances time by 300 s does so on both sides: the keyspace's clock
//! moves, and on the server every key's TTL is lowered by as much (deleted when that reaches
//! zero). No TTL is a multiple of the step, so no key expires within a second of a
//! comparison: TTLs agree within [`TOLERANCE`].
//!
//! The server is the one the other integration tests start (`REDLOCK_REDIS_SERVER` names
//! another, as `scripts/test-server-matrix` does): on one before Redis 7.0 the commands go
//! in the form the client sends there ([`Command::for_server`]).
//!
//! Runs [`DEFAULT_CASES`] sequences (about a second); `PROPTEST_CASES=5000` for a longer run.

#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

mod common;

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use redis::aio::MultiplexedConnection;
use redlock::client::send_command;
use redlock::core::{Command, LockKey, NodeFailure, Reply, Token};
use redlock_core::ServerGeneration;
use redlock_sim::node::keyspace::{KeyState, Keyspace};
use redlock_sim::scenario::{ExtendImpl, ReleaseImpl};
use tokio::runtime::Runtime;

/// Sequences per run unless `PROPTEST_CASES` says otherwise.
const DEFAULT_CASES: u32 = 64;
/// How far one step of time goes.
const STEP: Duration = Duration::from_secs(300);
/// The TTLs the commands write: none a multiple of [`STEP`], each at least 100 s away from one.
const TTLS: [Duration; 3] = [
    Duration::from_secs(1_000),
    Duration::from_secs(1_700),
    Duration::from_secs(2_000),
];
/// How far a TTL read on the server may be from the keyspace's (the wall clock moves).
const TOLERANCE: Duration = Duration::from_secs(10);

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A core command, as the client sends it.
    Send(Command),
    /// Time moves on by [`STEP`].
    Advance,
}

fn resource(index: usize) -> LockKey {
    LockKey::new("diff:", ["a", "b"][index]).unwrap()
}

/// Three tokens: the first two of one client (one client prefix), the third of another, so
/// that a release meets waiting marks of its own client and of another
/// ([`Reply::ReleasedOthersWaiting`]).
fn token(index: u8) -> Token {
    let mut bytes = [index + 1; 16];
    let client = if index < 2 { 0xaa } else { 0xbb };
    bytes[..redlock_core::CLIENT_PREFIX_LEN].fill(client);
    Token::from_bytes(bytes)
}

/// Every single-key command the client sends a lock node (a waiter's marks included, with
/// the tokens as waiter ids), on two resources, three tokens and three TTLs, and steps of
/// time.
fn step() -> impl Strategy<Value = Step> {
    let command = (0..8usize, 0..2usize, 0..3u8, 0..TTLS.len(), 0..6u64).prop_map(
        |(kind, resource_index, token_index, ttl_index, fence)| {
            let key = resource(resource_index);
            let token = token(token_index);
            let ttl = TTLS[ttl_index];
            Step::Send(match kind {
                0 => Command::SetIfAbsent { key, token, ttl },
                1 => Command::SetIfAbsentReportHolder { key, token, ttl },
                2 => Command::SetIfAbsentReadFence { key, token, ttl },
                3 => Command::RaiseFence { key, token, fence },
                4 => Command::ReleaseIfOwner { key, token },
                5 => Command::MarkWaiting {
                    key,
                    waiter: token,
                    ttl,
                },
                6 => Command::UnmarkWaiting { key, waiter: token },
                _ => Command::ExtendIfOwner { key, token, ttl },
            })
        },
    );
    prop_oneof![6 => command, 1 => Just(Step::Advance)]
}

fn sequences() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(step(), 1..40)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(DEFAULT_CASES)
}

/// Whether two durations agree within [`TOLERANCE`] (`Duration::MAX`, no expiry, only with
/// itself).
fn close(a: Duration, b: Duration) -> bool {
    if a == Duration::MAX || b == Duration::MAX {
        return a == b;
    }
    a.abs_diff(b) <= TOLERANCE
}

/// Whether two replies agree, remaining times within [`TOLERANCE`].
fn same_reply(a: &Result<Reply, NodeFailure>, b: &Result<Reply, NodeFailure>) -> bool {
    match (a, b) {
        (Ok(Reply::TakenFor { remaining: x }), Ok(Reply::TakenFor { remaining: y })) => {
            close(*x, *y)
        }
        (
            Ok(Reply::TakenBy {
                holder: h1,
                remaining: Some(x),
            }),
            Ok(Reply::TakenBy {
                holder: h2,
                remaining: Some(y),
            }),
        ) => h1 == h2 && close(*x, *y),
        _ => a == b,
    }
}

fn same_keys(a: &[KeyState], b: &[KeyState]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.key == y.key
                && x.value == y.value
                && match (x.expires_in, y.expires_in) {
                    (Some(x), Some(y)) => close(x, y),
                    (x, y) => x == y,
                }
        })
}

/// The server's keys, by name, as [`Keyspace::keys`] lists them: a hash (a waiter's marks)
/// as `hash:` and its fields in order.
async fn server_keys(connection: &mut MultiplexedConnection) -> Vec<KeyState> {
    let names: Vec<Vec<u8>> = redis::cmd("KEYS")
        .arg("*")
        .query_async(connection)
        .await
        .unwrap();
    let mut keys = Vec::new();
    for name in names {
        // Nothing expires within a step (the TTLs are long): three reads describe one moment.
        let kind: String = redis::cmd("TYPE")
            .arg(&name)
            .query_async(connection)
            .await
            .unwrap();
        let value: Option<String> = if kind == "hash" {
            let mut fields: Vec<String> = redis::cmd("HKEYS")
                .arg(&name)
                .query_async(connection)
                .await
                .unwrap();
            fields.sort();
            Some(format!("hash:{}", fields.join(",")))
        } else {
            redis::cmd("GET")
                .arg(&name)
                .query_async(connection)
                .await
                .unwrap()
        };
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&name)
            .query_async(connection)
            .await
            .unwrap();
        let Some(value) = value else { continue };
        keys.push(KeyState {
            key: String::from_utf8(name).unwrap(),
            value,
            expires_in: u64::try_from(pttl).ok().map(Duration::from_millis),
        });
    }
    keys.sort();
    keys
}

/// How many `PUBLISH`es the server ran since its stats were reset (`INFO commandstats`;
/// a script's calls count).
async fn publishes(connection: &mut MultiplexedConnection) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(connection)
        .await
        .unwrap();
    stats
        .lines()
        .find_map(|line| line.strip_prefix("cmdstat_publish:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Moves the server's time on by [`STEP`]: every key's TTL goes down by as much, and a key
/// whose TTL runs out is gone.
async fn advance_server(connection: &mut MultiplexedConnection) {
    let step = i64::try_from(STEP.as_millis()).unwrap();
    for key in server_keys(connection).await {
        let Some(left) = key.expires_in else { continue };
        let left = i64::try_from(left.as_millis()).unwrap() - step;
        let cmd = if left > 0 {
            let mut cmd = redis::cmd("PEXPIRE");
            cmd.arg(&key.key).arg(left);
            cmd
        } else {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(&key.key);
            cmd
        };
        let _: i64 = cmd.query_async(connection).await.unwrap();
    }
}

/// Runs `steps` on an emptied server and on `keyspace`, failing at the first difference.
async fn compare(
    steps: &[Step],
    connection: &mut MultiplexedConnection,
    mut keyspace: Keyspace,
) -> Result<(), TestCaseError> {
    let _: () = redis::cmd("FLUSHALL")
        .query_async(connection)
        .await
        .unwrap();
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(connection)
        .await
        .unwrap();
    let generation = ServerGeneration::from_info(&info);
    let step_ms = u64::try_from(STEP.as_millis()).unwrap();
    let mut now_ms = 0;
    // `CONFIG RESETSTAT` zeroes the server's command counts with the keyspace's.
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(connection)
        .await
        .unwrap();
    for (index, step) in steps.iter().enumerate() {
        match step {
            Step::Send(command) => {
                // The form of the request the client sends this server (`SET … NX` without
                // `GET` before Redis 7.0).
                let command = &command.clone().for_server(generation);
                let server = send_command(connection, command).await;
                let model = keyspace.execute(command, now_ms);
                prop_assert!(
                    same_reply(&server, &model),
                    "step {index}, {command:?}: redis-server answered {server:?}, the keyspace {model:?}"
                );
            }
            Step::Advance => {
                advance_server(connection).await;
                now_ms += step_ms;
            }
        }
        let server = server_keys(connection).await;
        let model = keyspace.keys(now_ms);
        prop_assert!(
            same_keys(&server, &model),
            "after step {index} ({step:?}): redis-server holds {server:?}, the keyspace {model:?}"
        );
        // The release scripts publish only where a waiter's mark is: as many `PUBLISH`es.
        let published = publishes(connection).await;
        prop_assert_eq!(
            published,
            keyspace.published(),
            "after step {} ({:?}): PUBLISH calls on redis-server and in the keyspace",
            index,
            step
        );
    }
    Ok(())
}

/// One server and a connection to it, for every sequence of a test.
fn server() -> (redlock_tests::RedisFleet, Runtime, MultiplexedConnection) {
    let fleet = common::fleet(1);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = redis::Client::open(fleet.url(0)).unwrap();
    let connection = runtime
        .block_on(client.get_multiplexed_async_connection())
        .unwrap();
    (fleet, runtime, connection)
}

/// Runs the random sequences against the server and keyspaces made by `keyspace`.
fn run(cases: u32, keyspace: fn() -> Keyspace) -> Result<(), TestError<Vec<Step>>> {
    let (_fleet, runtime, connection) = server();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner.run(&sequences(), |steps| {
        let mut connection = connection.clone();
        runtime.block_on(compare(&steps, &mut connection, keyspace()))
    })
}

#[test]
fn the_keyspace_answers_as_redis_server_with_the_shipped_scripts() {
    if let Err(error) = run(cases(), Keyspace::new) {
        panic!("{error}");
    }
}

/// The comparison has teeth: a keyspace that performs a faulty client's operations (a plain
/// `DEL` for a release, an extension that re-creates a missing key), or whose release
/// publishes where no waiter marked (the release before the marks), is told apart from the
/// server by the same sequences.
#[test]
fn a_keyspace_with_a_faulty_operation_is_told_apart() {
    type Mutant = (&'static str, fn() -> Keyspace);
    let mutants: [Mutant; 3] = [
        ("plain DEL", || {
            Keyspace::with_faults(ReleaseImpl::PlainDel, ExtendImpl::Script)
        }),
        ("re-creating extension", || {
            Keyspace::with_faults(ReleaseImpl::Script, ExtendImpl::Reacquire)
        }),
        ("a release that publishes without a mark", || {
            Keyspace::new().publishing_every_release()
        }),
    ];
    for (name, keyspace) in mutants {
        match run(cases(), keyspace) {
            Err(TestError::Fail(why, steps)) => {
                println!("{name}: found in {} steps: {why}", steps.len());
            }
            other => panic!("{name}: no difference found ({other:?})"),
        }
    }
}
