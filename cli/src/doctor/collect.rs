//! The collector: the only part of the doctor that talks to the nodes. It gathers
//! [`NodeObservation`]s, every node in parallel, and judges nothing.
//!
//! Per node, on one connection of its own: five `PING`s, `INFO`, `CONFIG GET appendfsync`,
//! and `TIME` every twentieth of the clock window; then the permission probe, with the
//! `redlock` library on a scratch resource (see `permissions`), and the clean-up of the
//! scratch keys. For a node on this host (a loopback address or a Unix socket), also the
//! age of its process as `/proc` gives it, right after `INFO`.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use redis::aio::MultiplexedConnection;
use redlock::Redlock;
use redlock::client::Fencing;
use redlock_core::{LockKey, NodeFailure, NodeStatus, Reply, RetryPolicy};

use crate::duration::show;

use super::clock::TimeSample;
use super::observe::{Limits, NodeObservation, parse_info};
use super::permissions::{Operation, Outcome, Probe, SCRIPT_COMMANDS, WAIT_COMMANDS};

/// How long connecting to a node, or one reply, may take. Generous: the doctor reports slow
/// nodes rather than cutting them off.
const REPLY_DEADLINE: Duration = Duration::from_secs(2);

/// `PING`s sent before anything else, for the round-trip statistics.
const PINGS: usize = 5;

/// `TIME` samples are taken at the start of the clock window and after each of this many
/// equal parts of it.
const CLOCK_INTERVALS: u32 = 20;

/// The scratch leases' TTL: short, so that a key a refused release leaves behind goes soon.
const PROBE_TTL: Duration = Duration::from_secs(5);

/// The scratch leases' per-node timeout: long enough for a slow node to answer, so that a
/// refusal is told apart from slowness (which the latency check reports).
const PROBE_NODE_TIMEOUT: Duration = Duration::from_millis(450);

/// One node to examine.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The URL as configured (never printed: it may carry a password).
    pub(crate) url: String,
    /// `host:port` or socket path, without credentials.
    pub(crate) address: String,
}

/// Observes every target, all at once.
pub(crate) async fn collect(targets: &[Target], limits: &Limits) -> Vec<NodeObservation> {
    let origin = Instant::now();
    join_all(targets.iter().map(|target| observe(target, limits, origin))).await
}

async fn observe(target: &Target, limits: &Limits, origin: Instant) -> NodeObservation {
    let address = target.address.clone();
    let mut connection = match connect(&target.url).await {
        Ok(connection) => connection,
        Err(why) => return NodeObservation::unreachable(address, why),
    };
    let mut node = NodeObservation {
        socket_addresses: resolve(&address).await,
        address,
        ..NodeObservation::default()
    };
    for _ in 0..PINGS {
        let sent = Instant::now();
        match ask::<String>(&mut connection, redis::cmd("PING")).await {
            Ok(_) => node.round_trips.push(sent.elapsed()),
            Err(why) => {
                node.reached = Err(why);
                return node;
            }
        }
    }
    node.info = Some(
        ask::<String>(&mut connection, redis::cmd("INFO"))
            .await
            .and_then(|text| parse_info(&text)),
    );
    // Read at once, so that it and INFO's uptime describe the same instant.
    node.process_age = node
        .server()
        .and_then(|server| server.process_id)
        .filter(|_| on_this_host(&target.url))
        .and_then(local_process_age);
    node.appendfsync = Some(appendfsync(&mut connection).await);
    node.clock = Some(sample_clock(&mut connection, limits.clock_window, origin, &mut node).await);
    node.probe = Some(probe(&target.url, limits, &mut connection).await);
    node
}

/// The socket addresses `host:port` resolves to, as the client resolves a node's name (an IP
/// literal is its own); none for a socket path or a lookup that fails or takes too long.
async fn resolve(address: &str) -> Vec<SocketAddr> {
    if let Ok(literal) = address.parse::<SocketAddr>() {
        return vec![literal];
    }
    match tokio::time::timeout(REPLY_DEADLINE, tokio::net::lookup_host(address)).await {
        Ok(Ok(found)) => found.collect(),
        Ok(Err(_)) | Err(_) => Vec::new(),
    }
}

async fn connect(url: &str) -> Result<MultiplexedConnection, String> {
    let client = redis::Client::open(url).map_err(|e| one_line(&e.to_string()))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(REPLY_DEADLINE))
        .set_response_timeout(Some(REPLY_DEADLINE));
    let connecting = client.get_multiplexed_async_connection_with_config(&config);
    match tokio::time::timeout(REPLY_DEADLINE + REPLY_DEADLINE, connecting).await {
        Ok(Ok(connection)) => Ok(connection),
        Ok(Err(e)) => Err(one_line(&e.to_string())),
        Err(_) => Err(format!("no connection within {}", show(REPLY_DEADLINE))),
    }
}

/// Sends `command` and reads its reply, within [`REPLY_DEADLINE`]; errors are one line.
async fn ask<T: redis::FromRedisValue>(
    connection: &mut MultiplexedConnection,
    command: redis::Cmd,
) -> Result<T, String> {
    match tokio::time::timeout(REPLY_DEADLINE, command.query_async::<T>(connection)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(one_line(&e.to_string())),
        Err(_) => Err(format!("no answer within {}", show(REPLY_DEADLINE))),
    }
}

async fn appendfsync(connection: &mut MultiplexedConnection) -> Result<String, String> {
    let mut command = redis::cmd("CONFIG");
    command.arg("GET").arg("appendfsync");
    let pairs: Vec<String> = ask(connection, command).await?;
    pairs
        .get(1)
        .cloned()
        .ok_or_else(|| "the node has no appendfsync setting".to_owned())
}

/// `TIME` at the start of the window and after each twentieth of it (three back-to-back
/// samples when the window is zero); every round trip also counts for the latency.
async fn sample_clock(
    connection: &mut MultiplexedConnection,
    window: Duration,
    origin: Instant,
    node: &mut NodeObservation,
) -> Result<Vec<TimeSample>, String> {
    let start = Instant::now();
    let (count, every) = if window.is_zero() {
        (3, Duration::ZERO)
    } else {
        (CLOCK_INTERVALS + 1, window / CLOCK_INTERVALS)
    };
    let mut samples = Vec::with_capacity(count as usize);
    for index in 0..count {
        tokio::time::sleep_until((start + every * index).into()).await;
        let wall_sent = wall_us();
        let sent = Instant::now();
        let (seconds, micros): (i64, i64) = ask(connection, redis::cmd("TIME")).await?;
        let received = Instant::now();
        let wall_received = wall_us();
        node.round_trips.push(received - sent);
        samples.push(TimeSample {
            sent_ns: since(origin, sent),
            received_ns: since(origin, received),
            wall_sent_us: wall_sent,
            wall_received_us: wall_received,
            node_us: seconds.saturating_mul(1_000_000).saturating_add(micros),
        });
    }
    Ok(samples)
}

fn since(origin: Instant, at: Instant) -> i64 {
    i64::try_from(at.duration_since(origin).as_nanos()).unwrap_or(i64::MAX)
}

fn wall_us() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_micros()).unwrap_or(i64::MAX)
}

/// Runs the library's operations against this node alone on a scratch resource, then
/// removes what they left.
async fn probe(url: &str, limits: &Limits, connection: &mut MultiplexedConnection) -> Probe {
    let mut probe = Probe::default();
    let built = Redlock::builder()
        .node(url)
        .ttl(PROBE_TTL)
        .node_timeout(PROBE_NODE_TIMEOUT)
        .connect_timeout(REPLY_DEADLINE)
        .key_prefix(limits.key_prefix.clone())
        // The scratch leases are the doctor's own: no restart can have lost them.
        .restart_quarantine(None)
        .retry_count(0)
        .build();
    let redlock = match built {
        Ok(redlock) => redlock,
        Err(e) => {
            probe
                .operations
                .push((Operation::Acquire, Outcome::Failed(e.to_string())));
            return probe;
        }
    };
    let scratch = format!("doctor-{:016x}", rand::random::<u64>());
    let pair = [format!("{scratch}-a"), format!("{scratch}-b")];

    let (acquired, extended, released) = lease_cycle(&redlock, &scratch, false).await;
    probe.operations.extend([
        (Operation::Acquire, acquired),
        (Operation::Extend, extended),
        (Operation::Release, released),
    ]);
    match redlock.with_fencing(Fencing::Quorum) {
        Ok(fenced) => {
            let (acquired, _, released) = lease_cycle(&fenced, &scratch, false).await;
            probe.operations.extend([
                (Operation::FencedAcquire, acquired),
                (Operation::FencedRelease, released),
            ]);
        }
        Err(e) => probe
            .operations
            .push((Operation::FencedAcquire, Outcome::Failed(e.to_string()))),
    }
    let names = format!("{}\n{}", pair[0], pair[1]);
    let (acquired, extended, released) = lease_cycle(&redlock, &names, true).await;
    probe.operations.extend([
        (Operation::MultiAcquire, acquired),
        (Operation::MultiExtend, extended),
        (Operation::MultiRelease, released),
    ]);
    redlock.settle().await;

    let key = |resource: &str| LockKey::new(&limits.key_prefix, resource).ok();
    if probe.needs_direct_probe()
        && let Some(direct) = key(&format!("{scratch}-direct"))
    {
        probe.commands = direct_probe(connection, direct.as_str()).await;
    }
    if let Some(channel) = key(&format!("{scratch}-wait")) {
        probe.waiting = wait_probe(url, connection, &channel).await;
    }
    // What refused releases left, the fence counter and the wait probe's mark hash (neither
    // has a TTL; the hash stays if `HDEL` was refused), go now.
    let mut leftovers: Vec<String> = Vec::new();
    if let Some(key) = key(&format!("{scratch}-wait")) {
        leftovers.push(key.wait_key());
    }
    for resource in [
        scratch.as_str(),
        &pair[0],
        &pair[1],
        &format!("{scratch}-direct"),
    ] {
        if let Some(key) = key(resource) {
            leftovers.push(key.fence_key());
            leftovers.push(key.as_str().to_owned());
        }
    }
    let mut delete = redis::cmd("DEL");
    for key in &leftovers {
        delete.arg(key);
    }
    let _ = ask::<i64>(connection, delete).await;
    probe
}

/// Takes a lease on `resource` (on the resources named on its lines when `many`), extends it
/// and releases it; returns how each step went.
async fn lease_cycle(redlock: &Redlock, resource: &str, many: bool) -> (Outcome, Outcome, Outcome) {
    let taken = if many {
        match redlock.with_retry(RetryPolicy::no_retry()) {
            Ok(once) => once.acquire_many(resource.lines()).await,
            Err(e) => Err(e),
        }
    } else {
        redlock.try_acquire(resource).await
    };
    let mut lease = match taken {
        Ok(lease) => lease,
        Err(e) => return (refusal(&e), Outcome::Skipped, Outcome::Skipped),
    };
    let extended = match lease.extend().await {
        Ok(_) => Outcome::Done,
        Err(e) => refusal(&e),
    };
    let report = lease.release().await;
    let released = match report.nodes.first() {
        Some(NodeStatus::Replied(Reply::Released | Reply::NotHeld)) => Outcome::Done,
        Some(status) => status_outcome(status),
        None => Outcome::Failed("no node in the release report".into()),
    };
    (Outcome::Done, extended, released)
}

/// What a failed operation says about the node.
fn refusal(error: &redlock::Error) -> Outcome {
    match error.nodes().and_then(|nodes| nodes.nodes().first()) {
        Some(node) => status_outcome(&node.status),
        None => Outcome::Failed(error.to_string()),
    }
}

fn status_outcome(status: &NodeStatus) -> Outcome {
    match status {
        NodeStatus::Failed(NodeFailure::Denied(text)) => Outcome::Denied(text.clone()),
        NodeStatus::Failed(failure) => Outcome::Failed(failure.to_string()),
        NodeStatus::Pending => Outcome::Failed("no answer in time".into()),
        // A reply where a refusal or success was expected (and statuses added later).
        _ => Outcome::Failed(format!("the node answered: {status}")),
    }
}

/// Sends each command the scripts use directly on `key`; returns each with its refusal.
async fn direct_probe(
    connection: &mut MultiplexedConnection,
    key: &str,
) -> Vec<(String, Option<String>)> {
    let mut refusals = Vec::with_capacity(SCRIPT_COMMANDS.len());
    for name in SCRIPT_COMMANDS {
        let mut command = redis::cmd(name);
        command.arg(key);
        match name {
            "SET" => {
                command
                    .arg("doctor")
                    .arg("PX")
                    .arg(PROBE_TTL.as_millis() as u64);
            }
            "PEXPIRE" => {
                command.arg(PROBE_TTL.as_millis() as u64);
            }
            _ => {}
        }
        let refused = permission_refused(ask::<redis::Value>(connection, command).await);
        refusals.push((name.to_owned(), refused));
    }
    refusals
}

/// The node's refusal of a probe command for want of permission (`NOPERM`), if that is
/// why it failed; other failures say nothing about permissions.
fn permission_refused<T>(result: Result<T, String>) -> Option<String> {
    match result {
        Ok(_) => None,
        // redis-rs shows the NOPERM code as `NoPerm:`.
        Err(why) if why.to_ascii_lowercase().contains("noperm") => Some(why),
        Err(_) => None,
    }
}

/// Sends each of [`WAIT_COMMANDS`] on `key` (and its channel, which is named like it, and
/// its mark hash): a `PUBLISH`, a `PTTL`, an `HSET`, `HDEL` and `HKEYS` and a `PING` on the
/// connection, a `SUBSCRIBE` on a subscription connection of its own. Returns each with the node's refusal, if it refused it.
async fn wait_probe(
    url: &str,
    connection: &mut MultiplexedConnection,
    lock_key: &LockKey,
) -> Vec<(String, Option<String>)> {
    let (key, marks) = (lock_key.as_str(), lock_key.wait_key());
    let mut refusals = Vec::with_capacity(WAIT_COMMANDS.len());
    for name in WAIT_COMMANDS {
        let outcome = match name {
            "SUBSCRIBE" => subscribe_once(url, key).await,
            _ => {
                let mut command = redis::cmd(name);
                match name {
                    "PUBLISH" => {
                        command.arg(key).arg("doctor");
                    }
                    "PTTL" => {
                        command.arg(key);
                    }
                    // A waiter's mark, on the key's mark hash (removed by the `HDEL`).
                    "HSET" => {
                        command.arg(&marks).arg("doctor").arg("1");
                    }
                    "HDEL" => {
                        command.arg(&marks).arg("doctor");
                    }
                    // The release script's read of whose the marks are.
                    "HKEYS" => {
                        command.arg(&marks);
                    }
                    _ => {}
                }
                ask::<redis::Value>(connection, command).await.map(drop)
            }
        };
        refusals.push((name.to_owned(), permission_refused(outcome)));
    }
    refusals
}

/// Subscribes to `channel` on a connection of its own, as a waiter does, and leaves.
async fn subscribe_once(url: &str, channel: &str) -> Result<(), String> {
    let client = redis::Client::open(url).map_err(|e| one_line(&e.to_string()))?;
    let subscribed = async {
        let mut pubsub = client.get_async_pubsub().await?;
        pubsub.subscribe(channel).await?;
        pubsub.unsubscribe(channel).await
    };
    match tokio::time::timeout(REPLY_DEADLINE, subscribed).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(one_line(&e.to_string())),
        Err(_) => Err(format!("no answer within {}", show(REPLY_DEADLINE))),
    }
}

/// Whether the node at `url` runs on this host: a loopback address (or `localhost`), or a
/// Unix socket.
fn on_this_host(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, _) | redis::ConnectionAddr::TcpTls { host, .. } => {
            is_loopback(host)
        }
        redis::ConnectionAddr::Unix(_) => true,
        // Any kind of address added later: not known to be local.
        #[allow(unreachable_patterns)]
        _ => false,
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The age of local process `pid` on the boot-time clock, if it is a Redis-like server:
/// a node in a container reports the process id of its own namespace, which here may be
/// another program, and that must not be compared.
fn local_process_age(pid: u32) -> Option<Duration> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let comm = comm.trim();
    if !["redis", "valkey", "keydb"]
        .iter()
        .any(|name| comm.contains(name))
    {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    super::clock::process_age(&stat, &uptime, u64::try_from(ticks).ok()?)
}

/// An error text fit for one line of the report.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(240) {
        Some((at, _)) => format!("{}…", &joined[..at]),
        None => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses_and_unix_sockets_are_on_this_host() {
        for url in [
            "redis://127.0.0.1:6379",
            "redis://127.0.0.2:6379",
            "redis://localhost:6379",
            "redis://[::1]:6379",
            "redis+unix:///run/redis.sock",
        ] {
            assert!(on_this_host(url), "{url}");
        }
        for url in [
            "redis://10.0.0.5:6379",
            "redis://redis-1.example:6379",
            "redis://[2001:db8::1]:6379",
            "not a url",
        ] {
            assert!(!on_this_host(url), "{url}");
        }
    }
}
