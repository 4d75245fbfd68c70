//! The faults a chaos run injects, drawn from its seeded generator, and how each is applied
//! to the fleet (signals, kills, restarts) or to a node's proxy (holds, latency, resets).

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::proxy::{Direction, ProxyHandle};
use crate::{FleetError, RedisFleet};

/// The kinds of fault, as counted in a [`ChaosReport`](super::ChaosReport).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// `SIGSTOP` a node for a while, then `SIGCONT`.
    Pause,
    /// `kill -9` a node and restart it at once: it keeps its keys only with
    /// `appendfsync always`.
    KillRestart,
    /// `kill -9` a node, keep it down longer than the TTL, restart it with its data wiped.
    DelayedRestart,
    /// Hold all traffic of one node in both directions (a partition).
    Blackhole,
    /// Hold one node's requests only.
    CutToServer,
    /// Hold one node's replies only.
    CutToClient,
    /// Add latency to one node's requests, replies or both.
    Latency,
    /// Close every connection to one node with a TCP reset.
    Reset,
    /// Hold all traffic of a majority of nodes: no acquisition can succeed meanwhile.
    MajorityPartition,
}

impl FaultKind {
    /// Every kind, in report order.
    pub const ALL: [Self; 9] = [
        Self::Pause,
        Self::KillRestart,
        Self::DelayedRestart,
        Self::Blackhole,
        Self::CutToServer,
        Self::CutToClient,
        Self::Latency,
        Self::Reset,
        Self::MajorityPartition,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::KillRestart => "kill+restart",
            Self::DelayedRestart => "delayed-restart",
            Self::Blackhole => "blackhole",
            Self::CutToServer => "cut-requests",
            Self::CutToClient => "cut-replies",
            Self::Latency => "latency",
            Self::Reset => "reset",
            Self::MajorityPartition => "majority-partition",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One fault on one node (or, for a majority partition, on several).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Pause(usize),
    KillRestart(usize),
    DelayedRestart(usize),
    Blackhole(usize),
    Cut(usize, Direction),
    Latency(usize, Option<Direction>, Duration),
    Reset(usize),
    MajorityPartition(Vec<usize>),
}

impl Fault {
    pub(crate) fn kind(&self) -> FaultKind {
        match self {
            Self::Pause(_) => FaultKind::Pause,
            Self::KillRestart(_) => FaultKind::KillRestart,
            Self::DelayedRestart(_) => FaultKind::DelayedRestart,
            Self::Blackhole(_) => FaultKind::Blackhole,
            Self::Cut(_, Direction::ToServer) => FaultKind::CutToServer,
            Self::Cut(_, Direction::ToClient) => FaultKind::CutToClient,
            Self::Latency(..) => FaultKind::Latency,
            Self::Reset(_) => FaultKind::Reset,
            Self::MajorityPartition(_) => FaultKind::MajorityPartition,
        }
    }

    fn nodes(&self) -> Vec<usize> {
        match self {
            Self::Pause(n)
            | Self::KillRestart(n)
            | Self::DelayedRestart(n)
            | Self::Blackhole(n)
            | Self::Cut(n, _)
            | Self::Latency(n, ..)
            | Self::Reset(n) => vec![*n],
            Self::MajorityPartition(nodes) => nodes.clone(),
        }
    }
}

/// A few faults applied together, held for a while, then healed together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Episode {
    pub(crate) faults: Vec<Fault>,
    pub(crate) hold: Duration,
    /// Whether healing a hold also resets the held connections (a partition long enough for
    /// TCP to give up) rather than delivering what was held.
    pub(crate) reset_on_heal: bool,
}

impl Episode {
    /// Draws the next episode for `nodes` nodes. A delayed restart is held longer than `ttl`.
    pub(crate) fn draw(rng: &mut ChaCha8Rng, nodes: usize, ttl: Duration) -> Self {
        let mut hold = Duration::from_millis(rng.random_range(100..=600));
        let reset_on_heal = rng.random_bool(0.3);
        if nodes >= 3 && rng.random_bool(0.06) {
            let mut chosen = Vec::new();
            while chosen.len() < nodes / 2 + 1 {
                let node = rng.random_range(0..nodes);
                if !chosen.contains(&node) {
                    chosen.push(node);
                }
            }
            chosen.sort_unstable();
            return Self {
                faults: vec![Fault::MajorityPartition(chosen)],
                hold,
                reset_on_heal,
            };
        }
        let node = rng.random_range(0..nodes);
        let mut faults = vec![draw_fault(rng, node)];
        if nodes >= 3 && rng.random_bool(0.3) {
            // A second fault on another node: two of five faulty still leaves a quorum.
            let taken = faults[0].nodes()[0];
            let other = (taken + rng.random_range(1..nodes)) % nodes;
            faults.push(draw_fault(rng, other));
        }
        if faults.iter().any(|f| f.kind() == FaultKind::DelayedRestart) {
            hold = hold.max(ttl + Duration::from_millis(200));
        }
        Self {
            faults,
            hold,
            reset_on_heal,
        }
    }
}

impl Episode {
    /// A one-line description: `pause on [2] + latency on [4], held 350ms`.
    pub(crate) fn describe(&self) -> String {
        let faults: Vec<String> = self
            .faults
            .iter()
            .map(|f| format!("{} on {:?}", f.kind(), f.nodes()))
            .collect();
        format!(
            "{}, held {:?}{}",
            faults.join(" + "),
            self.hold,
            if self.reset_on_heal { ", reset" } else { "" }
        )
    }
}

fn draw_fault(rng: &mut ChaCha8Rng, node: usize) -> Fault {
    let direction = |rng: &mut ChaCha8Rng| {
        if rng.random_bool(0.5) {
            Direction::ToServer
        } else {
            Direction::ToClient
        }
    };
    match rng.random_range(0..8) {
        0 => Fault::Pause(node),
        1 => Fault::KillRestart(node),
        2 => Fault::DelayedRestart(node),
        3 => Fault::Blackhole(node),
        4 => Fault::Cut(node, direction(rng)),
        5 | 6 => {
            let which = match rng.random_range(0..3) {
                0 => None,
                _ => Some(direction(rng)),
            };
            // Below and above the 50 ms per-node timeout: slow nodes and lost votes.
            Fault::Latency(node, which, Duration::from_millis(rng.random_range(5..=80)))
        }
        _ => Fault::Reset(node),
    }
}

/// What the faults act on: the processes and the proxies in front of them.
#[derive(Clone, Debug)]
pub(crate) struct Targets {
    pub(crate) fleet: Arc<Mutex<RedisFleet>>,
    pub(crate) proxies: Vec<ProxyHandle>,
}

impl Targets {
    /// Applies the faults of `episode`.
    pub(crate) async fn apply(&self, episode: &Episode) -> Result<(), FleetError> {
        for fault in &episode.faults {
            match fault {
                Fault::Pause(n) => self.with_fleet(*n, RedisFleet::pause).await?,
                Fault::KillRestart(n) => self.with_fleet(*n, RedisFleet::restart).await?,
                Fault::DelayedRestart(n) => self.with_fleet(*n, RedisFleet::kill).await?,
                Fault::Blackhole(n) => self.proxies[*n].set_blackhole(true),
                Fault::MajorityPartition(nodes) => {
                    for n in nodes {
                        self.proxies[*n].set_blackhole(true);
                    }
                }
                Fault::Cut(n, direction) => self.proxies[*n].set_cut(*direction, true),
                Fault::Latency(n, direction, latency) => {
                    let directions = match direction {
                        Some(d) => vec![*d],
                        None => vec![Direction::ToServer, Direction::ToClient],
                    };
                    for d in directions {
                        self.proxies[*n].set_latency(d, *latency);
                    }
                }
                Fault::Reset(n) => self.proxies[*n].reset_connections(),
            }
        }
        Ok(())
    }

    /// Undoes the faults of `episode`: every node runs and answers, every proxy forwards.
    pub(crate) async fn heal(&self, episode: &Episode) -> Result<(), FleetError> {
        for fault in &episode.faults {
            match fault {
                Fault::Pause(n) => self.with_fleet(*n, RedisFleet::resume).await?,
                Fault::DelayedRestart(n) => {
                    // Down for longer than the TTL: every lease it held has expired, so it
                    // may come back empty, as the safety argument allows.
                    self.with_fleet(*n, |fleet, n| {
                        fleet.wipe_data(n)?;
                        fleet.restart(n)
                    })
                    .await?;
                }
                Fault::KillRestart(_) | Fault::Reset(_) => {}
                Fault::Blackhole(_)
                | Fault::MajorityPartition(_)
                | Fault::Cut(..)
                | Fault::Latency(..) => {
                    for n in fault.nodes() {
                        // Reset first: what was held dies with the connections.
                        if episode.reset_on_heal && fault.kind() != FaultKind::Latency {
                            self.proxies[n].reset_connections();
                        }
                        self.proxies[n].heal();
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs a blocking fleet operation on node `n` off the runtime's workers.
    async fn with_fleet<F>(&self, n: usize, operation: F) -> Result<(), FleetError>
    where
        F: FnOnce(&mut RedisFleet, usize) -> Result<(), FleetError> + Send + 'static,
    {
        let fleet = Arc::clone(&self.fleet);
        tokio::task::spawn_blocking(move || {
            let mut fleet = fleet
                .lock()
                .map_err(|_| FleetError::Io(std::io::Error::other("fleet lock poisoned")))?;
            operation(&mut fleet, n)
        })
        .await
        .map_err(|e| FleetError::Io(std::io::Error::other(e)))?
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn the_same_seed_draws_the_same_schedule() {
        let draw = |seed| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            (0..200)
                .map(|_| Episode::draw(&mut rng, 5, Duration::from_secs(1)))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn episodes_keep_a_quorum_except_majority_partitions_and_outlast_the_ttl_when_down() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut kinds = std::collections::BTreeSet::new();
        for _ in 0..2_000 {
            let episode = Episode::draw(&mut rng, 5, Duration::from_secs(1));
            let mut nodes: Vec<usize> = episode.faults.iter().flat_map(Fault::nodes).collect();
            nodes.sort_unstable();
            nodes.dedup();
            let majority = episode
                .faults
                .iter()
                .any(|f| f.kind() == FaultKind::MajorityPartition);
            assert_eq!(nodes.len() >= 3, majority, "{episode:?}");
            if episode
                .faults
                .iter()
                .any(|f| f.kind() == FaultKind::DelayedRestart)
            {
                assert!(episode.hold > Duration::from_secs(1), "{episode:?}");
            }
            kinds.extend(episode.faults.iter().map(Fault::kind));
        }
        assert_eq!(kinds.len(), FaultKind::ALL.len(), "every kind is drawn");
    }
}
