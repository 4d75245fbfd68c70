//! The simulated network: latency, loss, duplication, spikes, scripted delays, partitions,
//! and per-link FIFO order (links behave like TCP connections: a message never overtakes an
//! earlier one on the same link).
//!
//! What travels on it is in [`message`]: the requests and replies between the simulated
//! clients and nodes.

pub(crate) mod message;
pub(crate) mod name;

use std::collections::BTreeMap;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Endpoint, LinkSpec, NetworkSpec, PartitionKind};
use crate::time::Nanos;

/// Delivery times of one message: none (lost or cut), one, or two (duplicated).
pub(crate) type Deliveries = Vec<Nanos>;

pub(crate) struct Network {
    spec: NetworkSpec,
    /// The last delivery time per directed link, to keep links FIFO.
    last: BTreeMap<(Endpoint, Endpoint), Nanos>,
}

impl Network {
    pub(crate) fn new(spec: NetworkSpec) -> Self {
        Self {
            spec,
            last: BTreeMap::new(),
        }
    }

    fn link(&self, from: Endpoint, to: Endpoint) -> &LinkSpec {
        self.spec
            .links
            .iter()
            .rev()
            .find(|(f, t, _)| *f == from && *t == to)
            .map_or(&self.spec.default, |(_, _, spec)| spec)
    }

    /// Whether the link `from → to` is cut at `now`.
    pub(crate) fn is_cut(&self, now: Nanos, from: Endpoint, to: Endpoint) -> bool {
        self.spec.partitions.iter().any(|p| {
            if now < p.start || now >= p.end {
                return false;
            }
            match &p.kind {
                PartitionKind::Cut(links) => links.iter().any(|&(f, t)| f == from && t == to),
                PartitionKind::Groups(groups) => {
                    let named = |e: Endpoint| groups.iter().any(|g| g.contains(&e));
                    named(from)
                        && named(to)
                        && !groups.iter().any(|g| g.contains(&from) && g.contains(&to))
                }
            }
        })
    }

    /// Sends a message at `now`: when (if ever) it arrives.
    pub(crate) fn send(
        &mut self,
        now: Nanos,
        from: Endpoint,
        to: Endpoint,
        rng: &mut ChaCha8Rng,
    ) -> Deliveries {
        if self.is_cut(now, from, to) {
            return Vec::new();
        }
        let link = self.link(from, to).clone();
        if link.loss > 0.0 && rng.random::<f64>() < link.loss {
            return Vec::new();
        }
        let (min, max) = link.latency;
        let mut latency = if max > min {
            rng.random_range(min..=max)
        } else {
            min
        };
        if link.spike_probability > 0.0 && rng.random::<f64>() < link.spike_probability {
            latency += link.spike;
        }
        latency += self
            .spec
            .delays
            .iter()
            .filter(|d| d.from == from && d.to == to && d.start <= now && now < d.end)
            .map(|d| d.extra)
            .sum::<Nanos>();
        let last = self.last.entry((from, to)).or_insert(0);
        let arrival = (now + latency).max(*last);
        *last = arrival;
        let mut deliveries = vec![arrival];
        if link.duplicate > 0.0 && rng.random::<f64>() < link.duplicate {
            deliveries.push(arrival);
        }
        deliveries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Delay, Partition};
    use rand::SeedableRng;

    #[test]
    fn partitions_delays_and_fifo() {
        let c = Endpoint::Client(0);
        let (n0, n1) = (Endpoint::Server(0), Endpoint::Server(1));
        let spec = NetworkSpec {
            default: LinkSpec {
                latency: (1_000, 1_000),
                ..LinkSpec::default()
            },
            links: vec![],
            partitions: vec![
                Partition {
                    start: 0,
                    end: 100,
                    kind: PartitionKind::Groups(vec![vec![c, n0]]),
                },
                Partition {
                    start: 0,
                    end: 100,
                    kind: PartitionKind::Groups(vec![vec![c, n0], vec![n1]]),
                },
                Partition {
                    start: 200,
                    end: 300,
                    kind: PartitionKind::Cut(vec![(n0, c)]),
                },
            ],
            delays: vec![Delay {
                from: c,
                to: n0,
                start: 400,
                end: 401,
                extra: 5_000,
            }],
        };
        let mut net = Network::new(spec);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        assert!(net.is_cut(50, c, n1) && net.is_cut(50, n1, c));
        assert!(!net.is_cut(50, c, n0));
        assert!(!net.is_cut(100, c, n1));
        assert!(net.is_cut(250, n0, c) && !net.is_cut(250, c, n0), "one-way");
        assert_eq!(net.send(400, c, n0, &mut rng), vec![6_400]);
        // The next message on the link cannot overtake the delayed one.
        assert_eq!(net.send(401, c, n0, &mut rng), vec![6_400]);
        assert_eq!(net.send(401, c, n1, &mut rng), vec![1_401]);
    }
}
