//! `redlock-sim check`: every interleaving of the shipped machines within bounds.
//!
//! The simulator samples one order of events per seed; a check explores *every* order a
//! small model allows — N nodes, M clients, true time in ticks up to a horizon, clocks that
//! stray within a bound, and a budget of faults — and judges each state it reaches. The
//! clients run the core's machines ([`redlock_core::Acquire`], `Waiting`, `Held`, `Keeper`,
//! `Release`, `Eligibility`), the same the tokio client and the simulator drive, through a
//! driver of its own (`client.rs`); the nodes keep their keys in the simulator's own
//! keyspace (`store.rs`, which re-implements the effects of the Lua scripts rather than
//! running them). The client decisions are the core's, not a copy.
//!
//! A check file (`simulator/checks/*.toml`, see [`CheckSpec`]) says the bounds and what is
//! expected: `no-violation` or `violation`. A violation comes back as the path of steps
//! that reaches it; written into the check file as `[counterexample]`, `redlock-sim run`
//! replays it with the same verdict and `redlock-sim explain` prints it step by step.
//!
//! | file | job |
//! |---|---|
//! | `spec.rs` | a check's bounds, faults and expectation ([`CheckSpec`]) |
//! | `raw.rs`, `file.rs` | the check file's serde mirror, and its translation into a [`CheckSpec`] |
//! | `property.rs`, `judge.rs` | the properties, and the one function that judges them after a step |
//! | `state.rs`, `shared.rs` | one state of the model, and its fingerprint (computed by the state); its nodes and clients shared between states until a step writes them, each with the fingerprints of it remembered |
//! | `model.rs` | the steps enabled in a state, and the state each leads to |
//! | `client.rs`, `node.rs`, `rate.rs` | a client's driver of the core's machines; a node; how far a clock strays |
//! | `search.rs`, `explore.rs`, `depth_first.rs`, `visited.rs` | what the searches share (options, progress, the visited set, the stop flag); the explorer: breadth first, then depth first; the states seen |
//! | `node_symmetry.rs` | node symmetry: a state renumbered, and the least fingerprint over the renumberings of its nodes |
//! | `client_symmetry.rs`, `token.rs` | client symmetry: the least fingerprint over the renamings of the clients; the model's tokens, which name the client that drew them |
//! | `sleep.rs` | the partial-order reduction: sleep sets over independent steps, and what a state reached again is still to take |
//! | `fingerprint.rs`, `memory.rs` | the 128-bit hash; the memory bound and the process's memory |
//! | `steps.rs` | the model stepped from outside, for another explorer ([`ModelSteps`]) |
//! | `swarm.rs` | a swarm member ([`swarm::Member`]): its order of steps, its hash seed, its record for `merge` |
//!
//! # Example
//!
//! ```
//! let text = r#"
//! name = "two clients, three nodes, no faults"
//! [model]
//! horizon_ticks = 4
//! [expect]
//! outcome = "no-violation"
//! may_stay_unreached = ["contended-hand-off", "extension"]
//! "#;
//! let spec = redlock_sim::check::parse(text, "inline").unwrap();
//! let report = redlock_sim::check::check(spec, redlock_sim::check::Options::default());
//! assert!(report.exploration.complete && report.exploration.violation.is_none());
//! assert!(report.matches());
//! ```

mod client;
mod client_symmetry;
mod crew;
mod depth_first;
mod explore;
mod file;
mod fingerprint;
mod judge;
pub mod memory;
mod model;
mod node;
mod node_symmetry;
mod permutations;
mod property;
mod rate;
mod raw;
mod search;
mod shared;
mod sleep;
mod spec;
mod state;
mod steps;
pub mod swarm;
mod tick_local;
mod token;
mod visited;

use std::fmt::Write as _;

pub use file::parse;
pub use fingerprint::{collision_bound, values_fingerprinted};
pub use model::{Action, Link};
pub use property::Property;
pub use search::{Boundaries, DEFAULT_BREADTH_FIRST_MEMORY, Exploration, Options, Progress, Stop};
pub use spec::{CheckSpec, Durability, Outcome, PauseKind, WaiterMarks, WorkStop};
pub use steps::{ModelState, ModelSteps};

use model::Model;

/// A check's result.
#[derive(Debug)]
pub struct CheckReport {
    /// The check.
    pub spec: CheckSpec,
    /// What the exploration found.
    pub exploration: Exploration,
    /// Whether client symmetry was used.
    pub symmetry: bool,
    /// Whether node symmetry was used.
    pub node_symmetry: bool,
    /// Whether the partial-order reduction was used.
    pub reduction: bool,
    /// The swarm member that searched, if the search was one ([`Options::swarm`]).
    pub swarm: Option<swarm::Member>,
}

/// Explores `spec` exhaustively within its bounds; or, as a member of a swarm
/// ([`Options::swarm`]), depth first in the member's own order until a bound.
pub fn check(spec: CheckSpec, mut options: Options) -> CheckReport {
    if options.swarm.is_some() {
        // Depth first from the initial state: the members' orders part at the first step.
        // One thread: the order the generator shuffles in is then the search's own, and a
        // bounded member covers the same states every time.
        options.threads = 1;
        options.breadth_first_memory = 0;
    }
    if options.tick_local {
        // Depth first from the initial state: the ticks' sets belong to the depth-first
        // stack, and a breadth-first level would hold every state of its ticks.
        options.breadth_first_memory = 0;
    }
    let model = Model::new(spec);
    let exploration = explore::explore(&model, options);
    CheckReport {
        spec: model.spec,
        exploration,
        symmetry: options.symmetry,
        node_symmetry: options.node_symmetry,
        reduction: options.reduction,
        swarm: options.swarm,
    }
}

impl CheckReport {
    /// The chance that two of the values the search fingerprinted (its distinct states and
    /// their parts) shared a fingerprint, at most ([`values_fingerprinted`]).
    pub fn collision_bound(&self) -> f64 {
        collision_bound(values_fingerprinted(
            self.exploration.distinct + self.exploration.within_ticks,
            (self.spec.nodes, self.node_symmetry),
            (self.spec.clients, self.symmetry),
        ))
    }

    /// What was found: a violation, or none.
    pub fn outcome(&self) -> Outcome {
        if self.exploration.violation.is_some() {
            Outcome::Violation
        } else {
            Outcome::NoViolation
        }
    }

    /// Whether the outcome is the expected one. An incomplete exploration without a
    /// violation proves nothing, and so does not match a `no-violation` expectation; nor
    /// does one that left a *sometimes* property unreached (a model that grants nothing
    /// cannot pass), unless the file lists it in `may_stay_unreached`.
    pub fn matches(&self) -> bool {
        match self.spec.expect {
            Outcome::Violation => self.exploration.violation.is_some(),
            Outcome::NoViolation => {
                self.exploration.violation.is_none()
                    && self.exploration.complete
                    && self.unreached().is_empty()
            }
        }
    }

    /// The *sometimes* properties that stayed unreached though the file does not allow it.
    pub fn unreached(&self) -> Vec<Property> {
        Property::ALL
            .iter()
            .copied()
            .filter(|p| !p.is_always())
            .filter(|p| self.exploration.reached & p.bit() == 0)
            .filter(|p| self.spec.may_stay_unreached & p.bit() == 0)
            .collect()
    }

    /// Whether `redlock-sim check` succeeds: every *always* property held in a complete
    /// exploration, and every *sometimes* one was reached or may stay unreached.
    pub fn passed(&self) -> bool {
        self.outcome() == Outcome::NoViolation
            && self.exploration.complete
            && self.unreached().is_empty()
    }

    /// Each property and its result: `held`, `violated`, `unknown` (a violation of another
    /// ended the search), `not-checked`, `reached`, `not-reached (allowed)` or
    /// `not-reached`.
    pub fn properties(&self) -> Vec<(Property, &'static str)> {
        let violated = self.exploration.violation.as_ref().map(|(p, _)| *p);
        Property::ALL
            .iter()
            .map(|&p| {
                let result = if p.is_always() {
                    if violated == Some(p) {
                        "violated"
                    } else if self.spec.always & p.bit() == 0
                        || (p == Property::FencesIncrease && !self.spec.config.fencing())
                        || (p == Property::WaiterTold && self.spec.waiter_marks == WaiterMarks::Off)
                    {
                        "not-checked"
                    } else if violated.is_some() || !self.exploration.complete {
                        "unknown"
                    } else {
                        "held"
                    }
                } else if self.exploration.reached & p.bit() != 0 {
                    "reached"
                } else if self.spec.may_stay_unreached & p.bit() != 0 {
                    "not-reached (allowed)"
                } else {
                    "not-reached"
                };
                (p, result)
            })
            .collect()
    }

    /// The states per second.
    pub fn rate(&self) -> f64 {
        self.exploration.states as f64 / self.exploration.elapsed.as_secs_f64().max(1e-9)
    }

    /// How the exploration ended, in words: complete, or what cut it short and what to do.
    pub fn ending(&self) -> String {
        let e = &self.exploration;
        match e.stopped {
            _ if e.complete => "complete".to_owned(),
            Some(Stop::MaxStates) if self.swarm.is_some() => {
                "stopped at --max-states (a swarm member's share: normal)".to_owned()
            }
            Some(Stop::MaxStates) => "INCOMPLETE (--max-states)".to_owned(),
            Some(Stop::MaxMemory(bound)) => format!(
                "INCOMPLETE: the memory bound ({}, --max-memory) was reached; lower \
                 horizon_ticks, the fault budget, clients or nodes, or raise --max-memory",
                memory::format_size(bound)
            ),
            None => "stopped at the first violation".to_owned(),
        }
    }

    /// The search in one line: its counts, time, rate, reductions and how it ended.
    fn search_line(&self) -> String {
        let e = &self.exploration;
        let reductions = [
            (self.symmetry, ", client symmetry"),
            (self.node_symmetry, ", node symmetry"),
            (self.reduction, ", sleep sets"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, name)| *name)
        .collect::<String>();
        format!(
            "  {} states, {} distinct, depth {}, {:.2} s, {:.0} states/s{reductions}, {}",
            e.states,
            e.distinct,
            e.depth,
            e.elapsed.as_secs_f64(),
            self.rate(),
            self.ending(),
        )
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let e = &self.exploration;
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.spec.name);
        if let Some(member) = self.swarm {
            let _ = writeln!(
                out,
                "  swarm member {member}: depth first in its own order of steps (seed {:#018x}), \
                 fingerprints hashed with its own seed ({:#018x})",
                member.order_seed(),
                member.hash_seed()
            );
        }
        let _ = writeln!(out, "{}", self.search_line());
        let _ = writeln!(
            out,
            "  of the distinct states, {} end a tick (true time may move on) and {} end the \
             run; the others are the orders of steps within a tick",
            e.boundaries.tick_ends, e.boundaries.finals
        );
        if e.within_ticks > 0 {
            let _ = writeln!(
                out,
                "  tick-local: {} distinct states kept (those beginning a tick), {} within \
                 ticks in each tick's own set (a state reached from two ticks counts twice)",
                e.distinct, e.within_ticks
            );
        }
        let _ = writeln!(
            out,
            "  128-bit fingerprints: P(two states or parts shared one) <= {:.1e}; peak memory {}{}",
            self.collision_bound(),
            memory::format_size(e.peak_memory),
            match e.depth_first_from {
                // A swarm member goes depth first from the start (its header says so).
                Some(level) if self.swarm.is_none() => {
                    format!("; breadth first to depth {level}, then depth first")
                }
                _ => String::new(),
            }
        );
        for (property, result) in self.properties() {
            let _ = writeln!(
                out,
                "  {:<9} {:<21} {result}",
                property.kind(),
                property.name()
            );
        }
        if let Some((property, path)) = &e.violation {
            let _ = writeln!(
                out,
                "  counterexample ({} steps) to {}: {}",
                path.len(),
                property.name(),
                path.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let unreached = self.unreached();
        if self.outcome() == Outcome::NoViolation && !unreached.is_empty() {
            let _ = writeln!(
                out,
                "  never reached: {} (a check that expects no violation must reach each \
                 sometimes property, or list it in expect.may_stay_unreached)",
                unreached
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if self.swarm.is_some() && self.outcome() == Outcome::NoViolation {
            let _ = writeln!(
                out,
                "  outcome: no violation in the states this member covered (expected {}); \
                 not exhaustive: `redlock-sim merge` joins the members' --jsonl records",
                self.spec.expect.name()
            );
            return out;
        }
        let verdict = if self.matches() {
            "as expected"
        } else {
            "NOT AS EXPECTED"
        };
        let _ = writeln!(
            out,
            "  outcome: {} (expected {}): {verdict}",
            self.outcome().name(),
            self.spec.expect.name()
        );
        out
    }

    /// The report as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let e = &self.exploration;
        serde_json::json!({
            "name": self.spec.name,
            "states": e.states,
            "distinct_states": e.distinct,
            "seconds": e.elapsed.as_secs_f64(),
            "states_per_second": self.rate(),
            "depth": e.depth,
            "complete": e.complete,
            "ending": self.ending(),
            "collision_bound": self.collision_bound(),
            "peak_memory_bytes": e.peak_memory,
            "depth_first_from": e.depth_first_from,
            "tick_end_states": e.boundaries.tick_ends,
            "within_tick_states": e.within_ticks,
            "final_states": e.boundaries.finals,
            "client_symmetry": self.symmetry,
            // The older name of `client_symmetry`, for readers of earlier records.
            "symmetry": self.symmetry,
            "node_symmetry": self.node_symmetry,
            "reduction": self.reduction,
            "outcome": self.outcome().name(),
            "expected": self.spec.expect.name(),
            "matches": self.matches(),
            "passed": self.passed(),
            "unreached": self.unreached().iter().map(|p| p.name()).collect::<Vec<_>>(),
            "properties": self.properties().iter().map(|(p, result)| serde_json::json!({
                "name": p.name(),
                "kind": p.kind(),
                "result": result,
            })).collect::<Vec<_>>(),
            "counterexample": e.violation.as_ref().map(|(p, path)| serde_json::json!({
                "property": p.name(),
                "path": path.iter().map(ToString::to_string).collect::<Vec<_>>(),
            })),
        })
    }

    /// The check file's text with the counterexample appended as `[counterexample]`, for
    /// `redlock-sim run` and `explain` to replay; `None` without a violation.
    pub fn counterexample_file(&self, original: &str) -> Option<String> {
        let (property, path) = self.exploration.violation.as_ref()?;
        let path: Vec<String> = path.iter().map(ToString::to_string).collect();
        Some(counterexample_file(original, property.name(), &path))
    }
}

/// The check file's text `original` (up to any `[counterexample]` table it has) with `path`
/// appended as `[counterexample]`, the steps to a state that breaks `property`: what
/// `check --counterexample` and `merge --counterexample` write, and `run` and `explain`
/// replay.
pub fn counterexample_file(original: &str, property: &str, path: &[String]) -> String {
    let mut out = String::new();
    for line in original.lines() {
        if line.trim() == "[counterexample]" {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\n# Found by `redlock-sim check`: {} steps to a state that breaks {property}.",
        path.len(),
    );
    out.push_str("[counterexample]\npath = [\n");
    for action in path {
        let _ = writeln!(out, "    \"{action}\",");
    }
    out.push_str("]\n");
    out
}

/// A counterexample replayed: each step with what it led to, and the property broken.
#[derive(Debug)]
pub struct Replay {
    /// One line per step: the step, then the state it led to.
    pub steps: Vec<String>,
    /// The property the last state breaks, if any.
    pub violation: Option<Property>,
}

/// Replays the `[counterexample]` path of `spec` from the initial state.
///
/// # Errors
///
/// A step that is not enabled where the path takes it (the file was edited, or the
/// algorithm changed since the counterexample was found), or a file without a path.
pub fn replay(spec: CheckSpec) -> Result<Replay, String> {
    let Some(path) = spec.counterexample.clone() else {
        return Err("the check file has no [counterexample] path to replay".into());
    };
    let model = Model::new(spec);
    let mut state = model.initial();
    let mut steps = vec![format!("start: {}", model.describe(&state))];
    let mut actions = Vec::new();
    for (i, wanted) in path.iter().enumerate() {
        model.actions(&state, &mut actions);
        let Some(&action) = actions.iter().find(|a| a.to_string() == *wanted) else {
            return Err(format!(
                "counterexample.path[{i}]: `{wanted}` is not possible there (possible: {})",
                actions
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        state = model.successor(&state, action).0;
        steps.push(format!(
            "{:>3}. {action:<24} {}",
            i + 1,
            model.describe(&state)
        ));
    }
    Ok(Replay {
        steps,
        violation: state.violation,
    })
}
