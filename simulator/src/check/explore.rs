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
//!
//! The breadth-first levels are expanded by a crew of threads that lives as long as they do
//! (`crew.rs`), each thread taking first the blocks of states it made itself, so that a
//! state is mostly freed by the thread whose allocator arena holds it. Two threads' CPU per
//! state fell by 13 %, from 1.30 times one thread's to 1.07 on `teeth-s1-crash` and from
//! 1.25 to 1.09 on `shipped-drift` (`/usr/bin/time target/release/redlock-sim check
//! simulator/checks/teeth-s1-crash.toml --threads T --max-states 5000000`, T = 1 and 2,
//! before and after alternated on a shared machine: docs/benchmarks.md, "Threads keep the
//! states they made").

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::crew::{Block, Crew};
use super::depth_first;
use super::memory;
use super::model::{Action, Model};
use super::property::Property;
use super::search::{Boundaries, CHECK_EVERY, Exploration, MAX_STATES, Options, Search, Trail};
use super::sleep::{Next, Pending};
use super::state::CheckState;

/// A state to expand: its trail index, the state, and what it is to take.
pub(super) type Entry = (u32, CheckState, Pending);

/// What the expansion of a block of a level found.
#[derive(Default)]
pub(super) struct Level {
    states: u64,
    reached: u8,
    boundaries: Boundaries,
    /// The states to expand next, in blocks of at most the size asked: each with its
    /// parent's trail index (its own once the level is done), the state, what it is to
    /// take.
    next: Vec<Vec<Entry>>,
    /// The step from the parent to each state of `next`, in order.
    steps: Vec<Action>,
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
        boundaries: Boundaries::default(),
        reached: 0,
        violation: None,
        within_ticks: 0,
    };
    if let Some(property) = initial.violation {
        result.violation = Some((property, Vec::new()));
    }
    let first = Block {
        maker: 0,
        entries: vec![(0u32, initial, Pending::default())],
    };
    // The crew's threads live as long as the breadth-first levels (see `crew.rs`).
    let finished = std::thread::scope(|scope| {
        let crew = Crew::start(scope, &search);
        levels(&search, &crew, &mut result, vec![first], baseline)
    });
    result.distinct = search.visited.len();
    result.stopped = search.stop_reason();
    result.complete = result.stopped.is_none() && (result.violation.is_none() || finished);
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

/// The breadth-first levels from `frontier`, then depth first from the last level once the
/// next would not fit its share of the memory bound: whether every state was expanded.
fn levels(
    search: &Search<'_>,
    crew: &Crew,
    result: &mut Exploration,
    mut frontier: Vec<Block>,
    baseline: u64,
) -> bool {
    let mut trail = Trail::new();
    let mut growth = 0.0;
    let budget = search
        .options
        .breadth_first_memory
        .min(search.options.max_memory / 4);
    while !frontier.is_empty() && result.violation.is_none() {
        // What the frontier takes is what the process holds beyond its tables.
        let tables = search.visited.bytes() + trail.bytes();
        let frontier_bytes = memory::resident().saturating_sub(baseline + tables);
        let next_bytes = frontier_bytes as f64 * f64::max(growth, 1.0);
        if next_bytes >= budget as f64 || trail.steps.len() >= (u32::MAX / 2) as usize {
            result.depth_first_from = Some(result.depth);
            search.set_level(result.depth, 0, growth, true);
            let roots = frontier.into_iter().flat_map(|block| block.entries);
            let found = depth_first::explore(search, roots.collect(), result.depth);
            result.states += found.states;
            result.within_ticks += found.within_ticks;
            result.reached |= found.reached;
            result.boundaries.add(found.boundaries);
            result.depth = result.depth.max(found.depth);
            if let Some((property, root, below)) = found.violation {
                let mut path = trail.path(root);
                path.extend(below);
                result.violation = Some((property, path));
            }
            return true;
        }
        let previous = states(&frontier);
        for (maker, mut level) in crew.level(search, std::mem::take(&mut frontier)) {
            result.states += level.states;
            result.reached |= level.reached;
            result.boundaries.add(level.boundaries);
            if result.violation.is_none()
                && let Some((property, parent, action)) = level.violation
            {
                let mut path = trail.path(parent);
                path.push(action);
                result.violation = Some((property, path));
            }
            let entries = level.next.iter_mut().flatten();
            for ((index, _, _), action) in entries.zip(level.steps) {
                *index = trail.push(*index, action);
            }
            let blocks = level.next.into_iter();
            frontier.extend(blocks.map(|entries| Block { maker, entries }));
        }
        let next = states(&frontier);
        if next > 0 || result.violation.is_some() {
            result.depth += 1;
        }
        growth = next as f64 / previous as f64;
        search.set_level(result.depth, next as u64, growth, false);
        search.report(true);
        if search.stopped() {
            break;
        }
        if search.visited.len() >= search.options.max_states && next > 0 {
            search.stop_for(MAX_STATES);
            break;
        }
    }
    frontier.is_empty()
}

/// How many states the blocks hold.
pub(super) fn states(blocks: &[Block]) -> usize {
    blocks.iter().map(|block| block.entries.len()).sum()
}

/// Expands the states of `part` (freeing each one's parts once expanded, so that its
/// successors reuse their memory instead of touching new pages, and then `part` itself, on
/// the thread that made them when it can: see `crew.rs`), their successors cut into blocks
/// of at most `block` states. `unreported` counts the states generated since the thread's
/// last look at the limits (a look reads the process's memory: not one per block).
pub(super) fn expand(
    search: &Search<'_>,
    mut part: Vec<Entry>,
    block: usize,
    unreported: &mut u64,
) -> Level {
    let (model, symmetry) = (search.model, search.options.symmetries());
    let reduction = &search.reduction;
    let mut actions = Vec::new();
    let mut level = Level::default();
    for (index, state, pending) in &mut part {
        if search.stopped() {
            break;
        }
        model.actions(state, &mut actions);
        level.boundaries.count(&actions, pending.only.is_none());
        reduction.select(&mut actions, pending);
        let mut asleep = pending.sleep;
        for &action in &actions {
            let (next, reached, sleep) = reduction.successor(state, action, &mut asleep);
            level.states += 1;
            level.reached |= reached;
            *unreported += 1;
            if *unreported == CHECK_EVERY {
                search.look(*unreported);
                *unreported = 0;
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
            match level.next.last_mut() {
                Some(last) if last.len() < block => last.push((*index, next, pending)),
                _ => level.next.push(vec![(*index, next, pending)]),
            }
            level.steps.push(action);
        }
        state.free_parts();
    }
    level
}
