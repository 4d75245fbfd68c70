//! The conditions under which a lease is exclusive (`docs/guarantees.md`) and the simulator
//! scenarios that show what happens when one fails. Every finding of the doctor names one of
//! each, so that a warning can be reproduced: `redlock-sim explain <file>`.
//!
//! `cli/tests/doctor_catalogue.rs` reads the `scenario(…)` entries below and checks that every
//! file exists, that its scenario has the name given here, and that `docs/guarantees.md` gives
//! it the verdict given here: keep each entry's four strings on the lines after `scenario(`.

use std::fmt;

use serde::Serialize;
use serde::ser::SerializeStruct;

/// A condition of the guarantee, or availability (which is not one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Condition {
    /// `guarantees.md` condition 1.
    Clocks,
    /// `guarantees.md` condition 2.
    Memory,
    /// The nodes are independent masters, each with one vote.
    Independence,
    /// Not a safety condition: a quorum must answer in time for leases to be granted,
    /// extended and released.
    Availability,
}

impl Condition {
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Clocks => "clocks",
            Self::Memory => "memory",
            Self::Independence => "independence",
            Self::Availability => "availability",
        }
    }

    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Clocks => {
                "guarantees.md condition 1: clocks count time within the drift factor (no node \
                 clock faster, no client clock slower, no node clock stepped forward)"
            }
            Self::Memory => {
                "guarantees.md condition 2: nodes do not forget (a crashed node comes back with \
                 its keys or stays out for a TTL; no eviction; no failover to a replica)"
            }
            Self::Independence => {
                "the nodes are independent masters: one vote per server, no replication \
                 between them"
            }
            Self::Availability => {
                "availability, not safety: a quorum must answer in time for leases to be \
                 granted, extended and released"
            }
        }
    }
}

impl Condition {
    /// The condition in a few words, for the table.
    pub(crate) fn short(self) -> &'static str {
        match self {
            Self::Clocks => "1. clocks count time within the drift factor (guarantees.md)",
            Self::Memory => "2. nodes do not forget (guarantees.md)",
            Self::Independence => "independent masters, one vote per server",
            Self::Availability => "availability (not a safety condition)",
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl Serialize for Condition {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Condition", 2)?;
        state.serialize_field("id", self.id())?;
        state.serialize_field("text", self.text())?;
        state.end()
    }
}

/// A scenario of the simulator's catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Scenario {
    /// `RL-05`, or `fence` for the fencing scenarios.
    pub(crate) id: &'static str,
    /// The rest of its name.
    pub(crate) title: &'static str,
    /// Its file, from the repository's root.
    pub(crate) file: &'static str,
    /// Its unfenced verdict in `docs/guarantees.md`.
    pub(crate) unfenced: &'static str,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = if self.id == "fence" {
            format!("fencing: {}", self.title)
        } else {
            format!("{} {}", self.id, self.title)
        };
        write!(f, "{name} — {} ({})", self.unfenced, self.file)
    }
}

const fn scenario(
    id: &'static str,
    title: &'static str,
    file: &'static str,
    unfenced: &'static str,
) -> Scenario {
    Scenario {
        id,
        title,
        file,
        unfenced,
    }
}

pub(crate) const RL04_STEP_FORWARD: Scenario = scenario(
    "RL-04",
    "node clock jumps forward under a bare majority",
    "simulator/scenarios/rl-04-node-clock-jump-bare-majority.toml",
    "VIOLATED",
);
pub(crate) const RL04B_STEP_BACKWARD: Scenario = scenario(
    "RL-04b",
    "node clock jumps backward",
    "simulator/scenarios/rl-04b-node-clock-jump-backward.toml",
    "SAFE",
);
pub(crate) const RL05_NO_PERSISTENCE: Scenario = scenario(
    "RL-05",
    "node crash and immediate restart without persistence (no restart quarantine)",
    "simulator/scenarios/rl-05-crash-no-persistence.toml",
    "VIOLATED",
);
pub(crate) const RL05_EVERYSEC: Scenario = scenario(
    "RL-05",
    "node crash with appendfsync everysec, before the fsync (no restart quarantine)",
    "simulator/scenarios/rl-05-crash-everysec-before-fsync.toml",
    "VIOLATED",
);
pub(crate) const RL05_ALWAYS: Scenario = scenario(
    "RL-05",
    "node crash with appendfsync always (no restart quarantine)",
    "simulator/scenarios/rl-05-crash-fsync-always.toml",
    "SAFE",
);
pub(crate) const RL05_QUARANTINE: Scenario = scenario(
    "RL-05",
    "node crash and immediate restart without persistence, client with the restart quarantine",
    "simulator/scenarios/rl-05-crash-no-persistence-quarantine.toml",
    "SAFE",
);
pub(crate) const RL05B_FRESH_CLIENT: Scenario = scenario(
    "RL-05b",
    "a client started after a node restarted empty (no restart quarantine)",
    "simulator/scenarios/rl-05b-fresh-client-after-restart.toml",
    "VIOLATED",
);
pub(crate) const RL06_SHORT: Scenario = scenario(
    "RL-06",
    "delayed restart shorter than the TTL (no restart quarantine)",
    "simulator/scenarios/rl-06-delayed-restart-5000ms.toml",
    "VIOLATED",
);
pub(crate) const RL06_LONG: Scenario = scenario(
    "RL-06",
    "delayed restart longer than the TTL (no restart quarantine)",
    "simulator/scenarios/rl-06-delayed-restart-10200ms.toml",
    "SAFE",
);
pub(crate) const RL06B_SHORT_QUARANTINE: Scenario = scenario(
    "RL-06b",
    "restart quarantine shorter than another client's TTL",
    "simulator/scenarios/rl-06b-quarantine-shorter-than-another-ttl.toml",
    "VIOLATED",
);
pub(crate) const RL07_FAILOVER: Scenario = scenario(
    "RL-07",
    "failover to a lagging replica (single-node lock)",
    "simulator/scenarios/rl-07-failover-lagging-replica.toml",
    "VIOLATED",
);
pub(crate) const RL08B_SPLIT_BRAIN: Scenario = scenario(
    "RL-08b",
    "asymmetric partition around a master (Sentinel split brain)",
    "simulator/scenarios/rl-08b-split-brain-around-master.toml",
    "VIOLATED",
);
pub(crate) const RL10_FAST: Scenario = scenario(
    "RL-10",
    "node clock 2 % fast under a bare majority",
    "simulator/scenarios/rl-10-node-clock-fast-2pc.toml",
    "VIOLATED",
);
pub(crate) const RL10_WITHIN: Scenario = scenario(
    "RL-10",
    "node clock 0.5 % fast (within the drift factor)",
    "simulator/scenarios/rl-10-node-clock-fast-0.5pc.toml",
    "SAFE",
);
pub(crate) const RL12_SLOW_REPLIES: Scenario = scenario(
    "RL-12",
    "slow replies eat the validity: correct client",
    "simulator/scenarios/rl-12-slow-replies-correct.toml",
    "SAFE",
);
pub(crate) const RL13A_MINORITY: Scenario = scenario(
    "RL-13a",
    "minority/majority partition, nobody holds",
    "simulator/scenarios/rl-13a-minority-partition.toml",
    "SAFE",
);
pub(crate) const RL14_PLAIN_DEL: Scenario = scenario(
    "RL-14",
    "release races expiry with a plain DEL",
    "simulator/scenarios/rl-14-release-plain-del.toml",
    "VIOLATED",
);
pub(crate) const FENCE_NO_PERSISTENCE: Scenario = scenario(
    "fence",
    "quorum-minted tokens repeat after a crash without persistence (no restart quarantine)",
    "simulator/scenarios/fence-quorum-crash-no-persistence.toml",
    "VIOLATED",
);

/// Every scenario the doctor cites.
#[cfg(test)]
pub(crate) const ALL: [Scenario; 18] = [
    RL04_STEP_FORWARD,
    RL04B_STEP_BACKWARD,
    RL05_NO_PERSISTENCE,
    RL05_EVERYSEC,
    RL05_ALWAYS,
    RL05_QUARANTINE,
    RL05B_FRESH_CLIENT,
    RL06_SHORT,
    RL06_LONG,
    RL06B_SHORT_QUARANTINE,
    RL07_FAILOVER,
    RL08B_SPLIT_BRAIN,
    RL10_FAST,
    RL10_WITHIN,
    RL12_SLOW_REPLIES,
    RL13A_MINORITY,
    RL14_PLAIN_DEL,
    FENCE_NO_PERSISTENCE,
];

#[cfg(test)]
mod tests {
    use super::ALL;

    #[test]
    fn every_scenario_is_listed_once() {
        for (index, scenario) in ALL.iter().enumerate() {
            assert!(
                !ALL[..index].iter().any(|other| other.file == scenario.file),
                "{scenario} twice"
            );
        }
    }
}
