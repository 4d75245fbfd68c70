//! Swarm verification: member I of N searches on its own, in an order and with fingerprints
//! of its own, so that N machines cover more of a model that no one of them can hold.
//!
//! A member is an ordinary search with three differences: it goes depth first from the
//! initial state on one thread (breadth first, every member would cover the same shallow
//! levels before its bound; depth first, the orders part at the first step); it takes the
//! steps enabled in each state in an order shuffled by a generator seeded with I
//! (`Order`); and its fingerprints are hashed with a seed derived from I, so that two
//! members do not share a collision (a state one member skips because its fingerprint
//! collided is no likelier to be skipped by another). Each is bounded by `--max-states`
//! and `--max-memory` as a check is; a member that stops at its bound has done its share.
//!
//! Everything depends on I alone (and the check): the same file and I give the same states
//! and outcome, and members 1 to 3 of a swarm of 4 search as members 1 to 3 of a swarm of
//! 3 do. No member is a plain check, not even 1 of 1: its order and hash are its own.
//!
//! The members' records (`check --swarm I/N --jsonl PATH`) are joined by `redlock-sim
//! merge` (`runs/swarm.rs`), which sums what they covered and reports any violation; a
//! swarm is not exhaustive (unless a member completed its search).

use std::fmt;
use std::str::FromStr;

use super::CheckReport;
use super::search::Stop;
use crate::runs::shard::Shard;
use crate::runs::swarm::{SwarmLine, spec_hash};

/// Member `index` of a swarm of `count` (1-based, as `--shard` counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Member {
    index: u64,
    count: u64,
}

/// Mixes of the index for the two seeds, so that the hash's seed and the order's differ.
const HASH_SALT: u64 = 0x5741_524d_4841_5348;
const ORDER_SALT: u64 = 0x5741_524d_4f52_4452;

impl Member {
    /// Member `index` of `count`.
    ///
    /// # Errors
    ///
    /// When `count` is 0 or `index` is not within `1..=count`; the message says which.
    pub fn new(index: u64, count: u64) -> Result<Self, String> {
        if count == 0 {
            return Err(format!(
                "{index}/{count}: a swarm has at least one member (N >= 1)"
            ));
        }
        if index == 0 || index > count {
            return Err(format!(
                "{index}/{count}: the member I counts from 1 to N ({count} here)"
            ));
        }
        Ok(Self { index, count })
    }

    /// The member's index, from 1.
    pub fn index(self) -> u64 {
        self.index
    }

    /// How many members the swarm has.
    pub fn count(self) -> u64 {
        self.count
    }

    /// The seed of its fingerprints' hash: never 0 (the plain check's).
    pub fn hash_seed(self) -> u64 {
        splitmix64(self.index ^ HASH_SALT).max(1)
    }

    /// The seed of its order of steps.
    pub fn order_seed(self) -> u64 {
        splitmix64(self.index ^ ORDER_SALT)
    }
}

impl FromStr for Member {
    type Err = String;

    /// `I/N`, e.g. `2/4`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let expected = "expected I/N, e.g. 2/4 (member I of a swarm of N, I from 1 to N), or auto";
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| format!("`{text}`: {expected}"))?;
        let parse = |part: &str| {
            part.trim()
                .parse::<u64>()
                .map_err(|_| format!("`{text}`: `{part}` is not a whole number; {expected}"))
        };
        Self::new(parse(index)?, parse(count)?)
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The member a `--swarm` argument names: `I/N`, or `auto` for the job engine's variables,
/// read as `run --shard auto` reads them ([`Shard::from_env`]).
///
/// # Errors
///
/// As [`Member::from_str`] and [`Shard::from_env`].
pub fn parse_arg(text: &str) -> Result<Member, String> {
    if text != "auto" {
        return text.parse();
    }
    let shard = Shard::from_env(&|name| std::env::var(name).ok())
        .map_err(|e| e.to_string().replace("--shard auto", "--swarm auto"))?;
    Member::new(shard.index(), shard.count())
}

/// SplitMix64's step: a bijection of the 64-bit values with a full avalanche.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A member's order of steps: a SplitMix64 generator that shuffles each state's steps as
/// the depth-first search pushes it. One thread draws from it in the search's own order,
/// so the orders, and the states a bounded member covers, are the same every time.
#[derive(Clone, Debug)]
pub(super) struct Order(u64);

impl Order {
    pub(super) fn new(seed: u64) -> Self {
        Self(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.0)
    }

    /// Shuffles `items` (Fisher–Yates; each draw scaled to its range by a widening
    /// multiply, without the modulo's bias).
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = ((u128::from(self.next()) * (i as u128 + 1)) >> 64) as usize;
            items.swap(i, j);
        }
    }
}

/// How a member's search ended, in a word: `complete`, `violation`, `max-states` or
/// `max-memory`.
pub fn ending(report: &CheckReport) -> &'static str {
    let e = &report.exploration;
    match e.stopped {
        _ if e.violation.is_some() => "violation",
        _ if e.complete => "complete",
        Some(Stop::MaxStates) => "max-states",
        Some(Stop::MaxMemory(_)) => "max-memory",
        None => "complete",
    }
}

/// The member's record for `redlock-sim merge`: what it covered and found, with the check
/// file's `text` (so that the merge can write a violation's replayable file).
pub fn line(report: &CheckReport, member: Member, text: &str, max_states: u64) -> SwarmLine {
    let e = &report.exploration;
    let names = |bits: u8| {
        super::Property::ALL
            .iter()
            .filter(|p| !p.is_always() && bits & p.bit() != 0)
            .map(|p| p.name().to_owned())
            .collect::<Vec<_>>()
    };
    SwarmLine {
        commit: crate::runs::jsonl::COMMIT.to_owned(),
        check: report.spec.name.clone(),
        spec_hash: spec_hash(text),
        member: member.index,
        members: member.count,
        hash_seed: member.hash_seed(),
        order_seed: member.order_seed(),
        max_states: (max_states != u64::MAX).then_some(max_states),
        states: e.states,
        distinct_states: e.distinct,
        depth: e.depth,
        seconds: e.elapsed.as_secs_f64(),
        peak_memory_bytes: e.peak_memory,
        complete: e.complete,
        ending: ending(report).to_owned(),
        collision_bound: report.collision_bound(),
        symmetry: report.symmetry,
        reduction: report.reduction,
        expected: report.spec.expect.name().to_owned(),
        reached: names(e.reached),
        may_stay_unreached: names(report.spec.may_stay_unreached),
        unreached: report
            .unreached()
            .iter()
            .map(|p| p.name().to_owned())
            .collect(),
        violation: e
            .violation
            .as_ref()
            .map(|(property, path)| crate::runs::swarm::Violation {
                property: property.name().to_owned(),
                path: path.iter().map(ToString::to_string).collect(),
            }),
        file: text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_i_of_n_from_one_and_says_what_is_wrong() {
        let member: Member = "2/4".parse().unwrap();
        assert_eq!((member.index(), member.count()), (2, 4));
        assert_eq!(member.to_string(), "2/4");
        assert_eq!("1/1".parse::<Member>().unwrap(), Member::new(1, 1).unwrap());
        for (bad, why) in [
            ("0/3", "from 1 to N (3 here)"),
            ("4/3", "from 1 to N (3 here)"),
            ("1/0", "at least one member"),
            ("x", "expected I/N"),
            ("x/3", "`x` is not a whole number"),
            ("1/", "`` is not a whole number"),
            ("-1/3", "not a whole number"),
        ] {
            let error = bad.parse::<Member>().unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn each_member_has_its_own_seeds_fixed_by_its_index() {
        let members: Vec<Member> = (1..=64).map(|i| Member::new(i, 64).unwrap()).collect();
        let mut hashes: Vec<u64> = members.iter().map(|m| m.hash_seed()).collect();
        let mut orders: Vec<u64> = members.iter().map(|m| m.order_seed()).collect();
        assert!(hashes.iter().all(|&s| s != 0));
        hashes.sort_unstable();
        hashes.dedup();
        orders.sort_unstable();
        orders.dedup();
        assert_eq!((hashes.len(), orders.len()), (64, 64));
        // The index alone: member 2 of 3 is member 2 of 4.
        let (a, b) = (Member::new(2, 3).unwrap(), Member::new(2, 4).unwrap());
        assert_eq!(
            (a.hash_seed(), a.order_seed()),
            (b.hash_seed(), b.order_seed())
        );
        // Pinned: a change here changes what every member of a swarm covers.
        assert_eq!(
            Member::new(1, 1).unwrap().order_seed(),
            splitmix64(ORDER_SALT ^ 1)
        );
    }

    const SMALL: &str = "name = \"small\"\n[model]\nhorizon_ticks = 3\n\
                         [expect]\noutcome = \"no-violation\"\n";

    #[test]
    fn a_member_that_completes_reaches_every_state_the_plain_check_reaches() {
        let spec = crate::check::parse(SMALL, "inline").unwrap();
        let plain = crate::check::check(spec.clone(), crate::check::Options::default());
        assert!(plain.exploration.complete);
        for i in 1..=3 {
            let options = crate::check::Options {
                swarm: Some(Member::new(i, 3).unwrap()),
                // Ignored for a member: one thread, depth first from the start.
                threads: 4,
                ..crate::check::Options::default()
            };
            let member = crate::check::check(spec.clone(), options);
            let e = &member.exploration;
            assert!(e.complete && e.violation.is_none(), "{}", member.text());
            assert_eq!(e.distinct, plain.exploration.distinct, "member {i}");
            assert_eq!(e.reached, plain.exploration.reached, "member {i}");
            assert_eq!(e.depth_first_from, Some(0));
            assert_eq!(ending(&member), "complete");
        }
    }

    #[test]
    fn a_bounded_member_stops_at_its_share_and_its_violation_replays() {
        let spec = crate::check::parse(SMALL, "inline").unwrap();
        let options = crate::check::Options {
            swarm: Some(Member::new(2, 2).unwrap()),
            max_states: 500,
            ..crate::check::Options::default()
        };
        let member = crate::check::check(spec, options);
        assert_eq!(member.exploration.distinct, 500);
        assert_eq!(ending(&member), "max-states");
        assert!(
            member.text().contains("a swarm member's share"),
            "{}",
            member.text()
        );
        assert!(
            member.text().contains("not exhaustive"),
            "{}",
            member.text()
        );

        let path = format!(
            "{}/checks/no-elapsed-check.toml",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        for i in 1..=2 {
            let options = crate::check::Options {
                swarm: Some(Member::new(i, 2).unwrap()),
                ..crate::check::Options::default()
            };
            let member = crate::check::check(crate::check::parse(&text, &path).unwrap(), options);
            assert_eq!(ending(&member), "violation", "{}", member.text());
            let record = line(&member, Member::new(i, 2).unwrap(), &text, u64::MAX);
            assert_eq!(record.ending, "violation");
            let file = member.counterexample_file(&text).unwrap();
            let replay = crate::check::replay(crate::check::parse(&file, "cx").unwrap()).unwrap();
            assert_eq!(
                replay.violation.map(|p| p.name()),
                record.violation.as_ref().map(|v| v.property.as_str())
            );
        }
    }

    #[test]
    fn an_order_shuffles_alike_for_one_seed_and_differently_for_another() {
        let shuffled = |seed: u64| {
            let mut order = Order::new(seed);
            (0..4)
                .map(|_| {
                    let mut items: Vec<u32> = (0..10).collect();
                    order.shuffle(&mut items);
                    items
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(shuffled(7), shuffled(7));
        assert_ne!(shuffled(7), shuffled(8));
        for items in shuffled(7) {
            let mut sorted = items.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..10).collect::<Vec<_>>(), "a permutation");
        }
        // Every item reaches the first place over many shuffles (no position is stuck).
        let mut order = Order::new(1);
        let mut first = [0u32; 5];
        for _ in 0..1000 {
            let mut items = [0usize, 1, 2, 3, 4];
            order.shuffle(&mut items);
            first[items[0]] += 1;
        }
        assert!(first.iter().all(|&n| (150..250).contains(&n)), "{first:?}");
        let mut empty: [u8; 0] = [];
        order.shuffle(&mut empty);
    }
}
