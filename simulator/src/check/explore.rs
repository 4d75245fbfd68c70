//! The explorer: breadth first over every reachable state within the bounds, each distinct
//! state once, level by level, the levels' successors computed on several threads.
//!
//! States are told apart by a 64-bit fingerprint of their whole value (`foldhash` with a
//! fixed seed, so that two runs explore alike). With symmetry on, the clients are
//! interchangeable: a state's fingerprint is taken over its clients' fingerprints sorted, so
//! states that differ only in which client is which count once. That is sound because the
//! clients share one configuration and nothing in a state names a client except its own
//! position (tokens are numbered by the world, not by the client).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use foldhash::fast::FixedState;

use super::model::{Action, Model, Property, World};

/// How to explore.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Worker threads for each level's successors.
    pub threads: usize,
    /// Stop after this many distinct states (the result is then incomplete).
    pub max_states: u64,
    /// Count states equal up to a renaming of the clients once.
    pub symmetry: bool,
    /// Report progress about once a second through this callback.
    pub progress: Option<fn(&Progress)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            threads: 1,
            max_states: u64::MAX,
            symmetry: true,
            progress: None,
        }
    }
}

/// How far an exploration has come.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// States generated (every successor of every explored state).
    pub states: u64,
    /// Distinct states.
    pub distinct: u64,
    /// The depth (steps from the initial state) being explored.
    pub depth: u32,
    /// Time so far.
    pub elapsed: Duration,
}

/// What an exploration found.
#[derive(Debug)]
pub struct Exploration {
    /// States generated.
    pub states: u64,
    /// Distinct states.
    pub distinct: u64,
    /// The deepest level explored.
    pub depth: u32,
    /// Whether every reachable state within the bounds was explored.
    pub complete: bool,
    /// How long it took.
    pub elapsed: Duration,
    /// The *sometimes* properties reached (bits of [`Property::bit`]).
    pub(crate) reached: u8,
    /// The first violation found: the property and the path from the initial state.
    pub violation: Option<(Property, Vec<Action>)>,
}

/// The fingerprint of a state.
pub(crate) fn fingerprint(world: &World, symmetry: bool) -> u64 {
    let hasher = FixedState::with_seed(0x5eed);
    if !symmetry {
        return hasher.hash_one(world);
    }
    let mut clients: Vec<u64> = world.clients.iter().map(|c| hasher.hash_one(c)).collect();
    clients.sort_unstable();
    let mut h = hasher.build_hasher();
    world.time.hash(&mut h);
    world.nodes.hash(&mut h);
    clients.hash(&mut h);
    world.hash_globals(&mut h);
    h.finish()
}

/// Where a distinct state came from: its parent's fingerprint and the step (none for the
/// initial state).
type Origin = Option<(u64, Action)>;

/// One shard of the distinct states.
type Shard = HashMap<u64, Origin, FixedState>;

/// The distinct states seen, each with its parent and the step from it (for a
/// counterexample's path), split in shards that the workers lock one at a time.
struct Seen {
    shards: Vec<Mutex<Shard>>,
}

const SHARDS: usize = 64;

impl Seen {
    fn new() -> Self {
        Self {
            shards: (0..SHARDS)
                .map(|i| Mutex::new(HashMap::with_hasher(FixedState::with_seed(i as u64))))
                .collect(),
        }
    }

    fn shard(&self, fp: u64) -> std::sync::MutexGuard<'_, Shard> {
        // The fingerprint's high bits pick the shard; the map hashes it again for its own.
        let index = (fp >> 58) as usize % SHARDS;
        self.shards[index]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `fp` reached from `from`; `false` when it was seen before.
    fn insert(&self, fp: u64, from: Origin) -> bool {
        let mut shard = self.shard(fp);
        if shard.contains_key(&fp) {
            return false;
        }
        shard.insert(fp, from);
        true
    }

    fn parent(&self, fp: u64) -> Option<(u64, Action)> {
        self.shard(fp).get(&fp).copied().flatten()
    }

    fn path_to(&self, mut fp: u64) -> Vec<Action> {
        let mut path = Vec::new();
        while let Some((parent, action)) = self.parent(fp) {
            path.push(action);
            fp = parent;
        }
        path.reverse();
        path
    }
}

/// What one worker found in its part of a level.
#[derive(Default)]
struct Level {
    states: u64,
    reached: u8,
    next: Vec<(u64, World)>,
    /// The first violating state it found.
    violation: Option<(Property, u64)>,
}

/// Explores `model` from its initial state.
pub(crate) fn explore(model: &Model, options: Options) -> Exploration {
    let started = Instant::now();
    let initial = model.initial();
    let root = fingerprint(&initial, options.symmetry);
    let seen = Seen::new();
    seen.insert(root, None);
    let mut result = Exploration {
        states: 1,
        distinct: 1,
        depth: 0,
        complete: true,
        elapsed: Duration::ZERO,
        reached: 0,
        violation: None,
    };
    if let Some(property) = initial.violation {
        result.violation = Some((property, Vec::new()));
    }
    let mut frontier = vec![(root, initial)];
    let mut last_report = Instant::now();
    let threads = options.threads.max(1);
    while !frontier.is_empty() && result.violation.is_none() {
        let chunk = frontier.len().div_ceil(threads);
        let seen = &seen;
        let levels: Vec<Level> = std::thread::scope(|scope| {
            let workers: Vec<_> = frontier
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || {
                        let mut actions = Vec::new();
                        let mut level = Level::default();
                        for (fp, world) in part {
                            model.actions(world, &mut actions);
                            for &action in &actions {
                                let (next, reached) = model.step(world, action);
                                level.states += 1;
                                level.reached |= reached;
                                let next_fp = fingerprint(&next, options.symmetry);
                                if !seen.insert(next_fp, Some((*fp, action))) {
                                    continue;
                                }
                                match next.violation {
                                    Some(property) => {
                                        level.violation.get_or_insert((property, next_fp));
                                    }
                                    None => level.next.push((next_fp, next)),
                                }
                            }
                        }
                        level
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        frontier = Vec::new();
        for level in levels {
            result.states += level.states;
            result.reached |= level.reached;
            result.distinct += level.next.len() as u64 + u64::from(level.violation.is_some());
            if result.violation.is_none()
                && let Some((property, fp)) = level.violation
            {
                result.violation = Some((property, seen.path_to(fp)));
            }
            frontier.extend(level.next);
        }
        if !frontier.is_empty() || result.violation.is_some() {
            result.depth += 1;
        }
        if result.distinct >= options.max_states && !frontier.is_empty() {
            result.complete = false;
            break;
        }
        if let Some(report) = options.progress
            && last_report.elapsed() >= Duration::from_secs(1)
        {
            last_report = Instant::now();
            report(&Progress {
                states: result.states,
                distinct: result.distinct,
                depth: result.depth,
                elapsed: started.elapsed(),
            });
        }
    }
    if result.violation.is_some() {
        // A violation ends the search: what lies deeper is unexplored.
        result.complete = result.complete && frontier.is_empty();
    }
    result.elapsed = started.elapsed();
    result
}
