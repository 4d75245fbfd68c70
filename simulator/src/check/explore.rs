//! The explorer: every reachable state within the bounds, each distinct state once, its
//! successors computed on several threads.
//!
//! It goes breadth first, level by level, while the levels fit in a share of the memory
//! bound (so that a counterexample found there is a shortest one), then depth first from
//! every state of the last level (so that memory no longer grows with the frontier: what
//! grows is the set of fingerprints, 16 bytes a state in tables at most four fifths
//! full). Both searches visit the same states: a distinct state is expanded once, whichever
//! search reaches it, and every successor of it is generated; so the counts of states
//! generated and distinct do not depend on where the search turned depth first, nor on
//! the threads (tested).
//!
//! A counterexample's path is rebuilt from the trail of the breadth-first levels (each
//! state there keeps the index of its parent and the step from it, 8 bytes) and, below
//! them, the depth-first stack.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::depth_first;
use super::memory;
use super::model::{Action, Model};
use super::property::Property;
use super::search::{CHECK_EVERY, Exploration, MAX_STATES, Options, Search, Trail};
use super::sleep::{Next, Pending};
use super::state::CheckState;

/// A state to expand: its trail index, the state, and what it is to take.
pub(super) type Entry = (u32, CheckState, Pending);

/// What one worker found in its part of a level.
#[derive(Default)]
struct Level {
    states: u64,
    reached: u8,
    /// The states to expand next: the parent's trail index, the step, the state, what it
    /// is to take.
    next: Vec<(u32, Action, CheckState, Pending)>,
    /// The first violating state it found: the property, the parent, the step.
    violation: Option<(Property, u32, Action)>,
}

/// Explores `model` from its initial state.
pub(crate) fn explore(model: &Model, options: Options) -> Exploration {
    let search = Search::new(model, options);
    let baseline = memory::resident();
    let initial = model.initial();
    let _ = search.reduction.visit(
        &search.visited,
        &initial,
        Default::default(),
        options.symmetries(),
    );
    let mut result = Exploration {
        states: 1,
        distinct: 1,
        depth: 0,
        complete: true,
        stopped: None,
        elapsed: Duration::ZERO,
        peak_memory: 0,
        depth_first_from: None,
        reached: 0,
        violation: None,
    };
    if let Some(property) = initial.violation {
        result.violation = Some((property, Vec::new()));
    }
    let mut trail = Trail::new();
    let mut frontier: Vec<Entry> = vec![(0u32, initial, Pending::default())];
    let mut growth = 0.0;
    let budget = options.breadth_first_memory.min(options.max_memory / 4);
    while !frontier.is_empty() && result.violation.is_none() {
        // What the frontier takes is what the process holds beyond its tables.
        let tables = search.visited.bytes() + trail.bytes();
        let frontier_bytes = memory::resident().saturating_sub(baseline + tables);
        let next_bytes = frontier_bytes as f64 * f64::max(growth, 1.0);
        if next_bytes >= budget as f64 || trail.steps.len() >= (u32::MAX / 2) as usize {
            result.depth_first_from = Some(result.depth);
            search.set_level(result.depth, 0, growth, true);
            let found = depth_first::explore(&search, frontier, result.depth);
            result.states += found.states;
            result.reached |= found.reached;
            result.depth = result.depth.max(found.depth);
            if let Some((property, root, below)) = found.violation {
                let mut path = trail.path(root);
                path.extend(below);
                result.violation = Some((property, path));
            }
            frontier = Vec::new();
            break;
        }
        let levels = breadth_first_level(&search, &mut frontier);
        let previous = frontier.len();
        frontier = Vec::with_capacity(levels.iter().map(|level| level.next.len()).sum());
        for level in levels {
            result.states += level.states;
            result.reached |= level.reached;
            if result.violation.is_none()
                && let Some((property, parent, action)) = level.violation
            {
                let mut path = trail.path(parent);
                path.push(action);
                result.violation = Some((property, path));
            }
            for (parent, action, state, pending) in level.next {
                frontier.push((trail.push(parent, action), state, pending));
            }
        }
        if !frontier.is_empty() || result.violation.is_some() {
            result.depth += 1;
        }
        growth = frontier.len() as f64 / previous as f64;
        search.set_level(result.depth, frontier.len() as u64, growth, false);
        search.report(true);
        if search.stopped() {
            break;
        }
        if search.visited.len() >= options.max_states && !frontier.is_empty() {
            search.stop_for(MAX_STATES);
            break;
        }
    }
    result.distinct = search.visited.len();
    result.stopped = search.stop_reason();
    result.complete =
        result.stopped.is_none() && (result.violation.is_none() || frontier.is_empty());
    if result.violation.is_some() && result.depth_first_from.is_some() {
        // A violation ends the depth-first search wherever it is.
        result.complete = false;
    }
    result.peak_memory = search
        .peak_memory
        .load(Ordering::Relaxed)
        .max(memory::resident());
    result.elapsed = search.started.elapsed();
    result
}

/// How many blocks a level is cut into per thread: enough that a thread which drew states
/// with fewer successors, or ran less of the time, takes more blocks, so that the threads
/// end a level together. With a level cut in halves, a thread waited for the other 4 to
/// 10 % of the time; with blocks, under 3 % (docs/benchmarks.md, "Threads take a level's
/// blocks in turn").
const BLOCKS_PER_THREAD: usize = 32;
/// The fewest states in a block, below which taking a block costs more than it balances.
const MIN_BLOCK: usize = 64;

/// One breadth-first level: each state's successors, on the threads, which take the
/// level's blocks in turn as they finish their last; the blocks' results in the order of
/// the blocks, so that the next level's order does not depend on which thread took which.
/// A state's parts are freed once it is expanded, so that the level's successors reuse
/// their memory instead of touching new pages (the level's own entries go with the level).
fn breadth_first_level(search: &Search<'_>, frontier: &mut [Entry]) -> Vec<Level> {
    let threads = search.options.threads.max(1);
    if threads == 1 {
        return vec![expand(search, frontier)];
    }
    let frontier_len = frontier.len();
    let block = frontier_len
        .div_ceil(threads * BLOCKS_PER_THREAD)
        .max(MIN_BLOCK);
    // The blocks, numbered, taken one at a time by whichever thread asks next.
    let blocks = Mutex::new(frontier.chunks_mut(block).enumerate());
    let count = frontier_len.div_ceil(block);
    let mut done: Vec<(usize, Level)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.min(count))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let next = blocks.lock().unwrap_or_else(PoisonError::into_inner).next();
                        let Some((i, part)) = next else {
                            break mine;
                        };
                        mine.push((i, expand(search, part)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    done.sort_unstable_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, level)| level).collect()
}

fn expand(search: &Search<'_>, part: &mut [Entry]) -> Level {
    let (model, symmetry) = (search.model, search.options.symmetries());
    let reduction = &search.reduction;
    let mut actions = Vec::new();
    let mut level = Level::default();
    let mut unreported = 0;
    for (index, state, pending) in part {
        if search.stopped() {
            break;
        }
        model.actions(state, &mut actions);
        reduction.select(&mut actions, pending);
        let mut asleep = pending.sleep;
        for &action in &actions {
            let (next, reached, sleep) = reduction.successor(state, action, &mut asleep);
            level.states += 1;
            level.reached |= reached;
            unreported += 1;
            if unreported == CHECK_EVERY {
                search.look(unreported);
                unreported = 0;
            }
            let pending = match reduction.visit(&search.visited, &next, sleep, symmetry) {
                Next::Seen => continue,
                Next::Again(pending) => pending,
                Next::New(pending) => {
                    if let Some(property) = next.violation {
                        level.violation.get_or_insert((property, *index, action));
                        continue;
                    }
                    pending
                }
            };
            level.next.push((*index, action, next, pending));
        }
        state.free_parts();
    }
    search.look(unreported);
    level
}
