//! The parameters a sweep can vary, and how each changes a scenario.

use std::str::FromStr;

use super::SweepError;
use crate::scenario::{Delay, Endpoint, Persistence, Scenario, ServerSpec, Step};
use crate::time::clock::ClockModel;
use crate::time::{MS, Nanos, from_ms};

/// A parameter to sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    /// The length (ms) of the target client's stop-the-world pauses (its `pause` steps and
    /// scheduled pauses).
    ClientPause,
    /// How much slower than true time the target client's clock runs, in percent.
    ClientClockSlow,
    /// How much faster than true time the target node's clock runs, in percent.
    NodeClockFast,
    /// How long (ms) the target node stays down after each of its crashes.
    RestartDelay,
    /// The one-way latency (ms) of every link.
    Latency,
    /// The number of nodes (every client locks on all of them).
    Nodes,
    /// The target node's persistence: 0 none, 1 everysec, 2 always.
    Persistence,
    /// Extra delay (ms) of every message from the target client to the resource.
    ResourceDelay,
}

impl FromStr for Knob {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        Ok(match name {
            "client-pause" => Self::ClientPause,
            "client-clock-slow" => Self::ClientClockSlow,
            "node-clock-fast" => Self::NodeClockFast,
            "restart-delay" => Self::RestartDelay,
            "latency" => Self::Latency,
            "nodes" => Self::Nodes,
            "persistence" => Self::Persistence,
            "resource-delay" => Self::ResourceDelay,
            other => {
                return Err(format!(
                    "unknown parameter `{other}`; expected client-pause, client-clock-slow, node-clock-fast, restart-delay, latency, nodes, persistence or resource-delay"
                ));
            }
        })
    }
}

/// What a knob applies to: a client or a node, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target(pub String);

/// A resolved target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved {
    /// No target needed.
    None,
    /// A client by index.
    Client(usize),
    /// A node (server) by index.
    Node(usize),
}

impl Knob {
    /// The axis label, with its unit.
    pub fn label(self) -> &'static str {
        match self {
            Self::ClientPause => "client pause (ms)",
            Self::ClientClockSlow => "client clock slow (%)",
            Self::NodeClockFast => "node clock fast (%)",
            Self::RestartDelay => "restart delay (ms)",
            Self::Latency => "one-way latency (ms)",
            Self::Nodes => "nodes",
            Self::Persistence => "persistence (0 none, 1 everysec, 2 always)",
            Self::ResourceDelay => "delay to the resource (ms)",
        }
    }

    fn wants(self) -> Option<&'static str> {
        match self {
            Self::ClientPause | Self::ClientClockSlow | Self::ResourceDelay => Some("client"),
            Self::NodeClockFast | Self::RestartDelay | Self::Persistence => Some("node"),
            Self::Latency | Self::Nodes => None,
        }
    }

    /// Finds the target: the one named, or the first client, or the first node the scenario
    /// configures (a `[[node]]` section) and otherwise `n0`.
    pub(crate) fn resolve_target(
        self,
        scenario: &Scenario,
        target: Option<&Target>,
    ) -> Result<Resolved, SweepError> {
        let bad = |msg: String| Err(SweepError::Knob(msg));
        match (self.wants(), target) {
            (None, None) => Ok(Resolved::None),
            (None, Some(t)) => bad(format!(
                "`{}` takes no target (got `{}`)",
                self.label(),
                t.0
            )),
            (Some("client"), None) => Ok(Resolved::Client(0)),
            (Some("client"), Some(t)) => scenario
                .clients
                .iter()
                .position(|c| c.name == t.0)
                .map(Resolved::Client)
                .map_or_else(|| bad(format!("no client named `{}`", t.0)), Ok),
            (Some(_), None) => {
                let configured = scenario.servers.iter().position(|s| {
                    s.clock != ClockModel::ideal()
                        || !s.crashes.is_empty()
                        || s.persistence != Persistence::None
                });
                Ok(Resolved::Node(configured.unwrap_or(0)))
            }
            (Some(_), Some(t)) => scenario
                .servers
                .iter()
                .position(|s| s.name == t.0)
                .map(Resolved::Node)
                .map_or_else(|| bad(format!("no node named `{}`", t.0)), Ok),
        }
    }

    /// The scenario with this knob at `value`.
    pub(crate) fn apply(
        self,
        scenario: &Scenario,
        target: &Resolved,
        value: f64,
    ) -> Result<Scenario, SweepError> {
        if !value.is_finite() {
            return Err(SweepError::Knob(format!("{value} is not a usable value")));
        }
        let mut s = scenario.clone();
        let ms = |v: f64| from_ms(v.max(0.0));
        let ppm = |percent: f64| (percent * 10_000.0).round() as i64;
        match (self, *target) {
            (Self::ClientPause, Resolved::Client(c)) => {
                let client = &mut s.clients[c];
                let mut found = false;
                for step in &mut client.steps {
                    if let Step::Pause(length) = step {
                        *length = ms(value);
                        found = true;
                    }
                }
                for pause in &mut client.pauses {
                    pause.1 = ms(value);
                    found = true;
                }
                if !found {
                    return Err(SweepError::Knob(format!(
                        "client `{}` has no pause to vary",
                        client.name
                    )));
                }
            }
            (Self::ClientClockSlow, Resolved::Client(c)) => {
                let client = &mut s.clients[c];
                client.clock = ClockModel::new(0, -ppm(value), client.clock.steps().to_vec());
            }
            (Self::NodeClockFast, Resolved::Node(n)) => {
                let server = &mut s.servers[n];
                server.clock = ClockModel::new(0, ppm(value), server.clock.steps().to_vec());
            }
            (Self::RestartDelay, Resolved::Node(n)) => {
                let server = &mut s.servers[n];
                if server.crashes.is_empty() {
                    return Err(SweepError::Knob(format!(
                        "node `{}` never crashes",
                        server.name
                    )));
                }
                for crash in &mut server.crashes {
                    crash.restart_after = Some(ms(value));
                }
            }
            (Self::Persistence, Resolved::Node(n)) => {
                s.servers[n].persistence = match value.round() as i64 {
                    0 => Persistence::None,
                    1 => Persistence::Everysec,
                    _ => Persistence::Always,
                };
            }
            (Self::Latency, _) => {
                let latency = ms(value);
                s.network.default.latency = (latency, latency);
            }
            (Self::ResourceDelay, Resolved::Client(c)) => {
                s.network.delays.push(Delay {
                    from: Endpoint::Client(c),
                    to: Endpoint::Resource,
                    start: 0,
                    end: Nanos::MAX,
                    extra: ms(value),
                });
            }
            (Self::Nodes, _) => resize(&mut s, value.round().max(1.0) as usize)?,
            (knob, target) => {
                return Err(SweepError::Knob(format!(
                    "`{}` cannot apply to {target:?}",
                    knob.label()
                )));
            }
        }
        Ok(s)
    }

    /// The analytic boundary for this knob in this scenario, where one is known.
    pub(crate) fn threshold(self, scenario: &Scenario, target: &Resolved) -> Option<(f64, String)> {
        let client = scenario.clients.first()?;
        let ttl = client.config.ttl().as_secs_f64() * 1e3;
        let drift = client.config.drift().as_secs_f64() * 1e3;
        // A round's elapsed time: a round trip at the worst link latency.
        let elapsed = 2.0 * scenario.network.default.latency.1 as f64 / MS as f64;
        match (self, target) {
            (Self::ClientClockSlow, _) => Some((
                100.0 * (elapsed + drift) / ttl,
                "slow client clock: (elapsed + drift) / TTL".into(),
            )),
            (Self::NodeClockFast, _) => Some((
                100.0 * (elapsed + drift) / (ttl - elapsed - drift),
                "fast node clock: (elapsed + drift) / (TTL - elapsed - drift)".into(),
            )),
            (Self::RestartDelay, Resolved::Node(n)) => {
                // A node that forgot keys must stay down until every lease that counted on
                // it has ended: the lease granted just before the crash ends by TTL - drift
                // after its start (the Redis description rounds this up to one TTL).
                let crash = scenario.servers[*n].crashes.first()?.at as f64 / MS as f64;
                Some((
                    (ttl - drift - crash).max(0.0),
                    "validity end after the crash (delay the restart by at least a TTL)".into(),
                ))
            }
            (Self::ClientPause, _) => {
                Some((ttl - drift, "the lease's validity, TTL - drift".into()))
            }
            _ => None,
        }
    }
}

/// Changes the number of nodes: ideal servers added or removed at the end; every client
/// locks on all nodes.
fn resize(s: &mut Scenario, nodes: usize) -> Result<(), SweepError> {
    if s.servers.len() != s.nodes {
        return Err(SweepError::Knob(
            "cannot resize a scenario with replicas".into(),
        ));
    }
    s.servers.truncate(nodes);
    while s.servers.len() < nodes {
        s.servers.push(ServerSpec {
            name: format!("n{}", s.servers.len()),
            clock: ClockModel::ideal(),
            persistence: Persistence::None,
            uptime: crate::scenario::DEFAULT_UPTIME,
            crashes: Vec::new(),
            replica: None,
            failover: None,
        });
    }
    s.nodes = nodes;
    for client in &mut s.clients {
        client.nodes = (0..nodes).collect();
        client.config = client.config.clone().with_nodes(nodes);
    }
    let keep = |e: &Endpoint| !matches!(e, Endpoint::Server(i) if *i >= nodes);
    for partition in &mut s.network.partitions {
        if let crate::scenario::PartitionKind::Groups(groups) = &mut partition.kind {
            for group in groups.iter_mut() {
                group.retain(keep);
            }
        }
    }
    s.network.links.retain(|(f, t, _)| keep(f) && keep(t));
    s.network.delays.retain(|d| keep(&d.from) && keep(&d.to));
    Ok(())
}
