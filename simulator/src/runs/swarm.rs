//! A swarm's members joined: what each member of `check --swarm I/N` recorded
//! ([`SwarmLine`], one JSON line), the checks that they are the members of one swarm of
//! one check, each there once, and what the merge prints.
//!
//! The members' visited sets overlap and are hashed with different seeds, so the merge
//! cannot count the distinct states they covered together: it prints the sum of their
//! distinct states as an upper bound. A swarm is not exhaustive: no violation in the states
//! covered is not a proof (unless a member completed its search, which the merge says).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hash::Hasher;

use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;

use crate::runs::merge::MergeError;

/// What a swarm without a violation, none of whose members completed, proves.
pub const NOT_EXHAUSTIVE: &str =
    "a swarm run is not exhaustive: no violation found in the states covered, not a proof";

/// One member's record: `check --swarm I/N --jsonl PATH` writes it, `merge` reads it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SwarmLine {
    /// The build's commit ([`super::jsonl::COMMIT`]).
    pub commit: String,
    /// The check's name.
    pub check: String,
    /// The hash of the check file's text ([`spec_hash`]).
    pub spec_hash: String,
    /// This member's index, from 1.
    pub member: u64,
    /// How many members the swarm has.
    pub members: u64,
    /// The seed of its fingerprints' hash.
    pub hash_seed: u64,
    /// The seed of its order of steps.
    pub order_seed: u64,
    /// Its `--max-states`, if it had one.
    pub max_states: Option<u64>,
    /// States generated.
    pub states: u64,
    /// Distinct states (by its own fingerprints).
    pub distinct_states: u64,
    /// The deepest state reached.
    pub depth: u32,
    /// How long it took.
    pub seconds: f64,
    /// Its peak resident memory.
    pub peak_memory_bytes: u64,
    /// Whether it explored every reachable state within the bounds.
    pub complete: bool,
    /// How it ended: `complete`, `violation`, `max-states` or `max-memory`.
    pub ending: String,
    /// The chance that two of its distinct states shared a fingerprint, at most.
    pub collision_bound: f64,
    /// Whether client symmetry was used.
    pub symmetry: bool,
    /// Whether the partial-order reduction was used.
    pub reduction: bool,
    /// What the check file expects: `violation` or `no-violation`.
    pub expected: String,
    /// The *sometimes* properties it reached.
    pub reached: Vec<String>,
    /// The *sometimes* properties the file allows to stay unreached.
    pub may_stay_unreached: Vec<String>,
    /// The *sometimes* properties it did not reach though the file does not allow it.
    pub unreached: Vec<String>,
    /// The violation it found, if any.
    pub violation: Option<Violation>,
    /// The check file's text, for a violation's replayable file.
    pub file: String,
}

/// A violation and the path to it, as `check --counterexample` writes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The *always* property broken.
    pub property: String,
    /// The steps from the initial state, as `[counterexample]` lists them.
    pub path: Vec<String>,
}

/// The hash that tells two check files apart: SipHash-1-3 under zero keys (fixed by its
/// specification, as the shards' keys are) over the text up to any `[counterexample]`
/// table, as 16 hexadecimal digits.
pub fn spec_hash(text: &str) -> String {
    let mut hasher = SipHasher13::new_with_keys(0, 0);
    for line in text.lines() {
        if line.trim() == "[counterexample]" {
            break;
        }
        hasher.write(line.as_bytes());
        hasher.write(b"\n");
    }
    format!("{:016x}", hasher.finish())
}

/// The members of one swarm, in order, each with where its line came from.
#[derive(Debug)]
pub struct Swarm {
    members: Vec<(String, SwarmLine)>,
}

/// Fails when `what` differs between the first member and `line`.
fn same<T: PartialEq + std::fmt::Display>(
    what: &str,
    first: (&str, &T),
    line: (&str, &T),
    advice: &str,
) -> Result<(), MergeError> {
    if first.1 == line.1 {
        return Ok(());
    }
    Err(MergeError::Mismatch(format!(
        "{} has {what} {} but {} has {}: {advice}",
        first.0, first.1, line.0, line.1
    )))
}

fn numbers(list: impl Iterator<Item = u64>) -> String {
    list.map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

/// Joins the members' lines (each with its `file:line`).
///
/// # Errors
///
/// When the lines come from different builds, checks (name or file) or swarm sizes; when a
/// member is out of range or there twice; when a member is missing. Each message names the
/// lines or the members.
pub fn merge(lines: Vec<(String, SwarmLine)>) -> Result<Swarm, MergeError> {
    let Some((first_at, first)) = lines.first() else {
        return Err(MergeError::Mismatch("no swarm members to merge".into()));
    };
    let one_check = "merge the members of one check";
    let mut by_member: BTreeMap<u64, (String, SwarmLine)> = BTreeMap::new();
    for (at, line) in &lines {
        same(
            "check",
            (first_at, &format!("{:?}", first.check)),
            (at, &format!("{:?}", line.check)),
            one_check,
        )?;
        same(
            "check file hash",
            (first_at, &first.spec_hash),
            (at, &line.spec_hash),
            "the members searched different versions of the check file; merge the members of \
             one check",
        )?;
        same(
            "a swarm of",
            (first_at, &first.members),
            (at, &line.members),
            "merge the members of one swarm (one N)",
        )?;
        same(
            "commit",
            (first_at, &first.commit),
            (at, &line.commit),
            "merge the members of one build",
        )?;
        if line.member == 0 || line.member > line.members {
            return Err(MergeError::Mismatch(format!(
                "{at}: member {} of a swarm of {} (members count from 1 to {})",
                line.member, line.members, line.members
            )));
        }
        if let Some((earlier, _)) = by_member.get(&line.member) {
            return Err(MergeError::Mismatch(format!(
                "{earlier} and {at} are both member {} of {}: was a member's file given twice?",
                line.member, line.members
            )));
        }
        by_member.insert(line.member, (at.clone(), line.clone()));
    }
    let count = first.members;
    if by_member.len() as u64 != count {
        let missing: Vec<u64> = (1..=count).filter(|i| !by_member.contains_key(i)).collect();
        let plural = |n: usize| if n == 1 { "member" } else { "members" };
        return Err(MergeError::Mismatch(format!(
            "{} {} of {count} {} missing; the files hold {} {}: is a member's file left out?",
            plural(missing.len()),
            numbers(missing.iter().copied()),
            if missing.len() == 1 { "is" } else { "are" },
            plural(by_member.len()),
            numbers(by_member.keys().copied()),
        )));
    }
    Ok(Swarm {
        members: by_member.into_values().collect(),
    })
}

impl Swarm {
    /// The members' lines, by index.
    pub fn members(&self) -> impl Iterator<Item = &SwarmLine> {
        self.members.iter().map(|(_, line)| line)
    }

    fn first(&self) -> &SwarmLine {
        &self.members[0].1
    }

    /// States generated, summed over the members.
    pub fn states(&self) -> u64 {
        self.members().map(|m| m.states).sum()
    }

    /// The members' distinct states summed: an upper bound on the distinct states covered
    /// (their visited sets overlap).
    pub fn distinct_upper_bound(&self) -> u64 {
        self.members().map(|m| m.distinct_states).sum()
    }

    /// The violation with the shortest path (the first member's, among equals).
    pub fn violation(&self) -> Option<(&SwarmLine, &Violation)> {
        self.members()
            .filter_map(|m| Some((m, m.violation.as_ref()?)))
            .min_by_key(|(m, v)| (v.path.len(), m.member))
    }

    /// The first member that explored every reachable state within the bounds.
    pub fn complete_member(&self) -> Option<u64> {
        self.members()
            .find(|m| m.complete && m.violation.is_none())
            .map(|m| m.member)
    }

    /// The *sometimes* properties some member reached, in the members' order.
    pub fn reached(&self) -> Vec<String> {
        let mut reached: Vec<String> = Vec::new();
        for name in self.members().flat_map(|m| &m.reached) {
            if !reached.contains(name) {
                reached.push(name.clone());
            }
        }
        reached
    }

    /// The *sometimes* properties no member reached, though the file does not allow it.
    pub fn unreached(&self) -> Vec<String> {
        let reached = self.reached();
        self.first()
            .unreached
            .iter()
            .filter(|p| !reached.contains(p))
            .cloned()
            .collect()
    }

    /// Whether the merge succeeds: no violation in the states covered, and every
    /// *sometimes* property reached by some member or allowed to stay unreached.
    pub fn passed(&self) -> bool {
        self.violation().is_none() && self.unreached().is_empty()
    }

    /// What the merge prints.
    pub fn text(&self) -> String {
        let first = self.first();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}: a swarm of {} members (check file hash {})",
            first.check, first.members, first.spec_hash
        );
        for m in self.members() {
            let ending = match (&m.violation, m.ending.as_str()) {
                (Some(v), _) => format!("violation of {} ({} steps)", v.property, v.path.len()),
                (None, "max-states") => "stopped at --max-states".to_owned(),
                (None, "max-memory") => "stopped at the memory bound".to_owned(),
                (None, other) => other.to_owned(),
            };
            let _ = writeln!(
                out,
                "  member {}/{}: {} states, {} distinct, depth {}, {:.2} s, peak memory {} MiB, \
                 {ending}",
                m.member,
                m.members,
                m.states,
                m.distinct_states,
                m.depth,
                m.seconds,
                m.peak_memory_bytes >> 20
            );
        }
        let _ = writeln!(
            out,
            "  covered: {} states generated; at most {} distinct (the members' distinct states \
             summed: an upper bound, as their searches overlap)",
            self.states(),
            self.distinct_upper_bound()
        );
        let reached = self.reached();
        let _ = writeln!(
            out,
            "  sometimes reached by some member: {}",
            if reached.is_empty() {
                "none".to_owned()
            } else {
                reached.join(", ")
            }
        );
        let unreached = self.unreached();
        if let Some((member, violation)) = self.violation() {
            let _ = writeln!(
                out,
                "  counterexample (member {}/{}, {} steps) to {}: {}",
                member.member,
                member.members,
                violation.path.len(),
                violation.property,
                violation.path.join(", ")
            );
            let _ = writeln!(
                out,
                "  outcome: violation (expected {}): {}",
                first.expected,
                if first.expected == "violation" {
                    "as expected"
                } else {
                    "NOT AS EXPECTED"
                }
            );
            return out;
        }
        if !unreached.is_empty() {
            let _ = writeln!(
                out,
                "  never reached by any member: {} (a check that expects no violation must \
                 reach each sometimes property, or list it in expect.may_stay_unreached)",
                unreached.join(", ")
            );
        }
        match self.complete_member() {
            Some(member) => {
                let _ = writeln!(
                    out,
                    "  member {member} completed its search: every reachable state within the \
                     bounds was explored, as `check` without --swarm explores them"
                );
            }
            None => {
                let _ = writeln!(out, "  {NOT_EXHAUSTIVE}");
            }
        }
        let _ = writeln!(
            out,
            "  outcome: no violation (expected {}){}",
            first.expected,
            if first.expected == "violation" {
                ": NOT AS EXPECTED"
            } else {
                ""
            }
        );
        out
    }

    /// What the merge prints with `--json`: one object.
    pub fn json(&self) -> serde_json::Value {
        let first = self.first();
        let violation = self.violation();
        serde_json::json!({
            "kind": "swarm",
            "check": first.check,
            "spec_hash": first.spec_hash,
            "members": first.members,
            "member_results": self.members().map(|m| serde_json::json!({
                "member": m.member,
                "states": m.states,
                "distinct_states": m.distinct_states,
                "depth": m.depth,
                "seconds": m.seconds,
                "peak_memory_bytes": m.peak_memory_bytes,
                "ending": m.ending,
                "complete": m.complete,
                "violation": m.violation,
            })).collect::<Vec<_>>(),
            "states": self.states(),
            "distinct_states_upper_bound": self.distinct_upper_bound(),
            "complete_member": self.complete_member(),
            "exhaustive": violation.is_none() && self.complete_member().is_some(),
            "reached": self.reached(),
            "unreached": self.unreached(),
            "outcome": if violation.is_some() { "violation" } else { "no-violation" },
            "expected": first.expected,
            "passed": self.passed(),
            "counterexample": violation.map(|(m, v)| serde_json::json!({
                "member": m.member,
                "property": v.property,
                "path": v.path,
            })),
            "note": (violation.is_none() && self.complete_member().is_none())
                .then_some(NOT_EXHAUSTIVE),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn member(index: u64, count: u64) -> (String, SwarmLine) {
        (
            format!("m{index}.jsonl:1"),
            SwarmLine {
                commit: "abc".into(),
                check: "c".into(),
                spec_hash: spec_hash("name = \"c\"\n"),
                member: index,
                members: count,
                hash_seed: index,
                order_seed: index,
                max_states: Some(100),
                states: 250,
                distinct_states: 100,
                depth: 30,
                seconds: 0.5,
                peak_memory_bytes: 1 << 20,
                complete: false,
                ending: "max-states".into(),
                collision_bound: 0.0,
                symmetry: true,
                reduction: true,
                expected: "no-violation".into(),
                reached: vec!["grant".into()],
                may_stay_unreached: vec!["extension".into()],
                unreached: vec!["contended-hand-off".into()],
                violation: None,
                file: "name = \"c\"\n".into(),
            },
        )
    }

    fn error(lines: Vec<(String, SwarmLine)>) -> String {
        merge(lines).unwrap_err().to_string()
    }

    #[test]
    fn the_file_hash_ignores_a_counterexample_and_nothing_else() {
        let text = "name = \"c\"\n[model]\nnodes = 3\n";
        assert_eq!(
            spec_hash(text),
            spec_hash(&format!("{text}[counterexample]\npath = []\n"))
        );
        assert_ne!(
            spec_hash(text),
            spec_hash("name = \"c\"\n[model]\nnodes = 5\n")
        );
        assert_eq!(spec_hash(text).len(), 16);
    }

    #[test]
    fn members_sum_and_a_swarm_without_a_complete_member_is_not_exhaustive() {
        let mut three = vec![member(3, 3), member(1, 3), member(2, 3)];
        three[0].1.reached.push("contended-hand-off".into());
        let swarm = merge(three).unwrap();
        assert_eq!(
            swarm.members().map(|m| m.member).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!((swarm.states(), swarm.distinct_upper_bound()), (750, 300));
        assert!(swarm.passed());
        let text = swarm.text();
        assert!(text.contains(NOT_EXHAUSTIVE), "{text}");
        assert!(text.contains("at most 300 distinct"), "{text}");
        assert!(text.contains("upper bound"), "{text}");
        assert_eq!(swarm.json()["note"], NOT_EXHAUSTIVE);
        // Contended hand-off reached by member 3 alone still counts.
        assert!(swarm.unreached().is_empty());
    }

    #[test]
    fn the_shortest_violation_is_reported_and_fails_the_merge() {
        let mut lines = vec![member(1, 3), member(2, 3), member(3, 3)];
        for (i, steps) in [(0, 9), (2, 5)] {
            lines[i].1.violation = Some(Violation {
                property: "mutual-exclusion".into(),
                path: (0..steps).map(|s| format!("step{s}")).collect(),
            });
            lines[i].1.ending = "violation".into();
        }
        let swarm = merge(lines).unwrap();
        let (m, v) = swarm.violation().unwrap();
        assert_eq!((m.member, v.path.len()), (3, 5));
        assert!(!swarm.passed());
        let text = swarm.text();
        assert!(text.contains("member 3/3, 5 steps"), "{text}");
        assert!(text.contains("NOT AS EXPECTED"), "{text}");
        assert!(!text.contains(NOT_EXHAUSTIVE), "{text}");
    }

    #[test]
    fn a_complete_member_makes_the_swarm_exhaustive_and_unreached_fails_it() {
        let mut lines = vec![member(1, 2), member(2, 2)];
        lines[1].1.complete = true;
        lines[1].1.ending = "complete".into();
        for (_, line) in &mut lines {
            line.reached.clear();
            line.unreached = vec!["grant".into(), "contended-hand-off".into()];
        }
        let swarm = merge(lines).unwrap();
        assert_eq!(swarm.complete_member(), Some(2));
        let text = swarm.text();
        assert!(text.contains("member 2 completed its search"), "{text}");
        assert!(!text.contains(NOT_EXHAUSTIVE), "{text}");
        assert_eq!(swarm.unreached(), ["grant", "contended-hand-off"]);
        assert!(!swarm.passed());
        assert!(
            text.contains("never reached by any member: grant"),
            "{text}"
        );
    }

    #[test]
    fn members_of_different_checks_swarms_or_builds_do_not_merge() {
        let mut other = member(2, 2);
        other.1.check = "d".into();
        assert!(error(vec![member(1, 2), other]).contains("has check \"c\""));

        let mut edited = member(2, 2);
        edited.1.spec_hash = spec_hash("name = \"c\"\nx = 1\n");
        let e = error(vec![member(1, 2), edited]);
        assert!(
            e.contains("check file hash") && e.contains("m2.jsonl:1"),
            "{e}"
        );

        let e = error(vec![member(1, 2), member(2, 3)]);
        assert!(e.contains("a swarm of 2 but m2.jsonl:1 has 3"), "{e}");

        let mut rebuilt = member(2, 2);
        rebuilt.1.commit = "def".into();
        assert!(error(vec![member(1, 2), rebuilt]).contains("commit"));
    }

    #[test]
    fn a_member_twice_or_missing_is_named() {
        let e = error(vec![member(1, 3), member(2, 3), member(2, 3)]);
        assert!(
            e.contains("both member 2 of 3") && e.contains("given twice"),
            "{e}"
        );
        let e = error(vec![member(1, 4), member(4, 4)]);
        assert!(
            e.contains("members 2, 3 of 4 are missing; the files hold members 1, 4"),
            "{e}"
        );
        let e = error(vec![member(1, 2)]);
        assert!(
            e.contains("member 2 of 2 is missing; the files hold member 1"),
            "{e}"
        );
        let mut outside = member(1, 2);
        outside.1.member = 5;
        assert!(error(vec![outside]).contains("member 5 of a swarm of 2"));
    }
}
