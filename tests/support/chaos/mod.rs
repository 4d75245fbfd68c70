//! Chaos runs: several clients on one fleet behind [fault proxies](crate::proxy), while a
//! seeded schedule pauses, kills, restarts, partitions and slows the nodes.
//!
//! A run checks the promises of the client within its documented assumptions:
//!
//! - **no two holders**: a [`Detector`] counts the holders inside each resource's critical
//!   section, entered only with a valid lease and left before the release;
//! - **every call returns within its bound**: `acquire` within
//!   [`acquire_budget()`](redlock::core::LockConfig::acquire_budget), `extend` and `release`
//!   within two per-node timeouts, each plus a scheduling slack;
//! - **acquisitions resume** once the faults of an episode heal;
//! - **nothing lost**: once every lease is released and the faults healed, no lock key
//!   remains on any node (a key whose release was held by a partition may wait for its TTL).
//!
//! The seed decides the fault schedule (kinds, nodes, durations) and each client's choices;
//! the interleaving with real processes is not reproducible, the schedule is.
//!
//! ```no_run
//! # async fn demo() -> Result<(), redlock_tests::chaos::ChaosError> {
//! let report = redlock_tests::chaos::run(&redlock_tests::chaos::ChaosConfig::new(42)).await?;
//! println!("{report}");
//! assert!(report.problems().is_empty());
//! # Ok(())
//! # }
//! ```

mod detector;
mod faults;
mod report;
mod worker;

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use redlock::Redlock;

pub use self::detector::{Detector, Inside, Overlap};
pub use self::faults::FaultKind;
pub use self::report::ChaosReport;

use self::faults::{Episode, Targets};
use self::worker::{Bounds, Worker};
use crate::proxy::FaultProxy;
use crate::{FleetError, FleetOptions, Persistence, RedisFleet};

/// The key prefix of every lock a chaos run takes.
pub const KEY_PREFIX: &str = "redlock:";

/// The environment variable that overrides the seed of the chaos test and the soak.
pub const SEED_ENV: &str = "REDLOCK_CHAOS_SEED";

/// The parameters of a chaos run.
#[derive(Clone, Debug)]
pub struct ChaosConfig {
    /// Seeds the fault schedule and the clients' choices.
    pub seed: u64,
    /// Nodes in the fleet.
    pub nodes: usize,
    /// Concurrent clients, each with its own connections.
    pub clients: usize,
    /// Resources the clients contend for.
    pub resources: usize,
    /// Lease TTL: short, so that keys held by a partition expire quickly.
    pub ttl: Duration,
    /// How the nodes persist. Only [`Persistence::AppendFsyncAlways`] makes an immediate
    /// restart after `kill -9` safe; with [`Persistence::None`] the run is the unsafe
    /// configuration and may show overlaps.
    pub persistence: Persistence,
    /// Stop once this many leases were granted...
    pub target_acquisitions: u64,
    /// ...or once this much time has passed, whichever comes first.
    pub max_duration: Duration,
    /// Scheduling slack allowed on top of every call's bound.
    pub slack: Duration,
    /// How long after an episode heals an acquisition must succeed.
    pub recovery_limit: Duration,
    /// Print a progress line to standard error this often.
    pub progress_every: Option<Duration>,
}

impl ChaosConfig {
    /// The CI-sized run: 5 nodes with `appendfsync always`, 6 clients on 3 resources, a 1 s
    /// TTL, until 5,000 leases were granted (at most 150 s).
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            nodes: 5,
            clients: 6,
            resources: 3,
            ttl: Duration::from_secs(1),
            persistence: Persistence::AppendFsyncAlways,
            target_acquisitions: 5_000,
            max_duration: Duration::from_secs(150),
            slack: Duration::from_millis(150),
            recovery_limit: Duration::from_secs(3),
            progress_every: None,
        }
    }

    /// The seed from [`SEED_ENV`] when it is set, otherwise a fresh one.
    ///
    /// # Errors
    ///
    /// When the variable is set but is not a number.
    pub fn seed_from_env() -> Result<u64, String> {
        match std::env::var(SEED_ENV) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|e| format!("{SEED_ENV}={text:?} is not a u64 seed: {e}")),
            Err(_) => Ok(rand::random()),
        }
    }
}

/// Why a chaos run could not be carried out (as opposed to a broken promise, which is in
/// the [`ChaosReport`]).
#[derive(Debug)]
pub enum ChaosError {
    /// The fleet could not be started or driven.
    Fleet(FleetError),
    /// A proxy could not be started.
    Proxy(std::io::Error),
    /// A client could not be built.
    Client(redlock::Error),
}

impl fmt::Display for ChaosError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fleet(e) => write!(f, "fleet: {e}"),
            Self::Proxy(e) => write!(f, "fault proxy: {e}"),
            Self::Client(e) => write!(f, "client: {e}"),
        }
    }
}

impl std::error::Error for ChaosError {}

impl From<FleetError> for ChaosError {
    fn from(e: FleetError) -> Self {
        Self::Fleet(e)
    }
}

/// Builds a client over `urls` for a chaos run: retries 5 times, 10–30 ms apart.
///
/// # Errors
///
/// As [`RedlockBuilder::build`](redlock::RedlockBuilder::build).
pub fn chaos_client(urls: &[String], ttl: Duration) -> Result<Redlock, redlock::Error> {
    // The harness's own nodes: it starts and restarts them itself and judges exclusion with
    // its own detector, so the restart quarantine is off (its behaviour has tests of its own).
    Redlock::builder()
        .nodes(urls.iter().cloned())
        .restart_quarantine(None)
        .ttl(ttl)
        .retry_count(5)
        .retry_delay(Duration::from_millis(10))
        .retry_jitter(Duration::from_millis(20))
        .connect_timeout(Duration::from_millis(200))
        .key_prefix(KEY_PREFIX)
        .build()
}

/// Runs a chaos run and reports what it saw.
///
/// # Errors
///
/// [`ChaosError`] when the fleet, a proxy or a client cannot be set up or a fault cannot be
/// applied; broken promises are reported in the [`ChaosReport`] instead.
pub async fn run(config: &ChaosConfig) -> Result<ChaosReport, ChaosError> {
    let started = Instant::now();
    let options = FleetOptions {
        persistence: config.persistence,
        ..FleetOptions::default()
    };
    let nodes = config.nodes;
    let fleet = tokio::task::spawn_blocking(move || RedisFleet::start_with(nodes, options))
        .await
        .map_err(|e| ChaosError::Fleet(FleetError::Io(std::io::Error::other(e))))??;
    let mut proxies = Vec::with_capacity(nodes);
    for index in 0..nodes {
        proxies.push(
            FaultProxy::start(fleet.addr(index))
                .await
                .map_err(ChaosError::Proxy)?,
        );
    }
    let urls: Vec<String> = proxies.iter().map(FaultProxy::url).collect();
    let targets = Targets {
        fleet: Arc::new(Mutex::new(fleet)),
        proxies: proxies.iter().map(FaultProxy::handle).collect(),
    };

    let probe = chaos_client(&urls, config.ttl).map_err(ChaosError::Client)?;
    let bounds = Bounds {
        acquire: probe.config().acquire_budget(),
        extend_or_release: probe.config().node_timeout() * 2,
        slack: config.slack,
    };
    let mut report = ChaosReport {
        seed: config.seed,
        acquire_bound: bounds.acquire,
        extend_release_bound: bounds.extend_or_release,
        slack: bounds.slack,
        ..ChaosReport::default()
    };

    let detector = Arc::new(Detector::new(config.resources));
    let stop = Arc::new(AtomicBool::new(false));
    let acquired = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::with_capacity(config.clients);
    let mut workers = Vec::with_capacity(config.clients);
    for id in 1..=config.clients {
        let redlock = chaos_client(&urls, config.ttl).map_err(ChaosError::Client)?;
        clients.push(redlock.clone());
        let worker = Worker {
            id,
            redlock,
            detector: Arc::clone(&detector),
            resources: config.resources,
            stop: Arc::clone(&stop),
            acquired: Arc::clone(&acquired),
            seed: config.seed,
            bounds,
        };
        workers.push(tokio::spawn(worker.run()));
    }

    let schedule = inject_faults(config, &targets, &probe, &acquired, &mut report).await;
    stop.store(true, Ordering::SeqCst);
    let mut latencies = Vec::new();
    for worker in workers {
        match worker.await {
            Ok(stats) => report.add_worker(stats, &mut latencies),
            Err(e) => report.unexpected.push(format!("a client panicked: {e}")),
        }
    }
    report.set_latencies(latencies);
    schedule?;
    report.overlaps = detector.overlaps();
    report.overlap_examples = detector.examples();

    // Every fault is healed: every client must acquire again.
    for (id, client) in clients.iter().enumerate() {
        let resource = format!("chaos-final-{}", id + 1);
        if let Err(e) = recover(client, &resource, config.recovery_limit).await {
            report
                .unrecovered
                .push(format!("client {} after the end: {e}", id + 1));
        }
    }
    drop(clients);
    drop(probe);

    // Nothing lost: wait for the background cleanups, and at most a TTL for keys whose
    // release a partition held.
    let end = Instant::now();
    let limit = config.ttl + Duration::from_millis(500);
    loop {
        let fleet = Arc::clone(&targets.fleet);
        let keys = tokio::task::spawn_blocking(move || leftover_keys(&fleet))
            .await
            .unwrap_or_else(|e| vec![format!("inspection panicked: {e}")]);
        if keys.is_empty() || end.elapsed() > limit {
            report.leftover_keys = keys;
            report.clean_after = end.elapsed();
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(proxies);
    let fleet = targets.fleet;
    // Stopping the fleet waits for the processes: keep that off the runtime's workers.
    let _ = tokio::task::spawn_blocking(move || drop(fleet)).await;
    report.wall_time = started.elapsed();
    Ok(report)
}

/// The fault driver: episodes separated by quiet gaps until the run's end, each followed by
/// a check that acquisitions resume.
async fn inject_faults(
    config: &ChaosConfig,
    targets: &Targets,
    probe: &Redlock,
    acquired: &AtomicU64,
    report: &mut ChaosReport,
) -> Result<(), ChaosError> {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let finished = || {
        acquired.load(Ordering::SeqCst) >= config.target_acquisitions
            || started.elapsed() >= config.max_duration
    };
    while !finished() {
        let gap = Duration::from_millis(rng.random_range(50..=250));
        tokio::time::sleep(gap).await;
        let episode = Episode::draw(&mut rng, config.nodes, config.ttl);
        targets.apply(&episode).await?;
        report.episodes += 1;
        for fault in &episode.faults {
            *report.faults.entry(fault.kind()).or_default() += 1;
        }
        tokio::time::sleep(episode.hold).await;
        targets.heal(&episode).await?;
        let healed = Instant::now();
        match recover(probe, "chaos-probe", config.recovery_limit).await {
            Ok(()) => {
                let took = healed.elapsed();
                if took > report.longest_recovery {
                    report.longest_recovery = took;
                    report.slowest_episode = episode.describe();
                }
            }
            Err(e) => report
                .unrecovered
                .push(format!("episode {} ({episode:?}): {e}", report.episodes)),
        }
        if let Some(every) = config.progress_every
            && last_progress.elapsed() >= every
        {
            last_progress = Instant::now();
            eprintln!(
                "[{:>5.0?}] {} acquisitions, {} episodes",
                started.elapsed(),
                acquired.load(Ordering::SeqCst),
                report.episodes
            );
        }
    }
    Ok(())
}

/// Acquires and releases `resource` until it works or `limit` passes.
async fn recover(client: &Redlock, resource: &str, limit: Duration) -> Result<(), String> {
    let started = Instant::now();
    loop {
        match client.acquire(resource).await {
            Ok(lease) => {
                lease.release().await;
                return Ok(());
            }
            Err(e) if started.elapsed() >= limit => {
                return Err(format!("no lease within {limit:?}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn leftover_keys(fleet: &Mutex<RedisFleet>) -> Vec<String> {
    let Ok(fleet) = fleet.lock() else {
        return vec!["fleet lock poisoned".into()];
    };
    let mut keys = Vec::new();
    for index in 0..fleet.len() {
        match fleet.keys_with_prefix(index, KEY_PREFIX) {
            Ok(entries) => keys.extend(
                entries
                    .into_iter()
                    .map(|(key, _)| format!("node {index}: {key}")),
            ),
            Err(e) => keys.push(format!("node {index}: cannot inspect: {e}")),
        }
    }
    keys
}
