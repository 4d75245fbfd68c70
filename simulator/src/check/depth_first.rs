//! The depth-first part of the explorer: from each state of the last breadth-first level,
//! every state below it not seen before, with a stack of the states on the current path.
//! Memory holds the stack (a state and its steps per level of depth), not a frontier.

use std::sync::{Mutex, PoisonError};

use super::explore::Entry;
use super::model::Action;
use super::property::Property;
use super::search::{Boundaries, CHECK_EVERY, Search};
use super::sleep::{Next, Pending, Sleep};
use super::state::CheckState;
use super::swarm::Order;
use super::tick_local::TickStates;

/// What the depth-first search found.
#[derive(Default)]
pub(super) struct Found {
    pub(super) states: u64,
    pub(super) reached: u8,
    pub(super) boundaries: Boundaries,
    /// The deepest state reached.
    pub(super) depth: u32,
    /// The first violation: the property, the trail index of the root it was found under,
    /// and the path from that root.
    pub(super) violation: Option<(Property, u32, Vec<Action>)>,
    /// With `tick_local`: the states within a tick, each counted once per tick's set that
    /// saw it.
    pub(super) within_ticks: u64,
}

/// A state on the current path, with its steps and the next one to take.
struct Frame {
    state: CheckState,
    actions: Vec<Action>,
    next: usize,
    /// The steps asleep here and those already taken from here.
    asleep: Sleep,
    /// The step that led here from the frame below (none for a root).
    via: Option<Action>,
    /// Whether it begins a tick whose states the search keeps in a set of their own, the
    /// top of `Ticks` while it is on the stack (`tick_local`).
    opens_tick: bool,
}

/// With `tick_local`: one set for each tick whose beginning is on the stack, the innermost
/// last. The set at height `h` holds the states within the ticks begun at that height under
/// the same beginning at height `h - 1`: a tick begun after a sibling's (another state
/// beginning the same tick, reached from the same tick before) shares the sibling's set, so
/// that a state both reach is expanded once. Sets from `valid` up belong to beginnings that
/// have left the stack and are emptied before use; those above `open` are kept for their
/// allocations.
struct Ticks {
    sets: Vec<TickStates>,
    open: usize,
    valid: usize,
    steps: u64,
}

impl Ticks {
    fn start(&mut self) {
        self.open = 0;
        self.valid = 0;
    }

    /// A state beginning a tick is pushed: its set is the next one, kept if a sibling's.
    fn open(&mut self) {
        if self.open == self.sets.len() {
            self.sets.push(TickStates::new(self.steps));
        } else if self.valid <= self.open {
            self.sets[self.open].clear();
        }
        self.open += 1;
        self.valid = self.valid.max(self.open);
    }

    /// A state beginning a tick leaves the stack: its set stays for its siblings, the sets
    /// of the ticks begun below it do not.
    fn close(&mut self) {
        self.valid = self.valid.min(self.open);
        self.open -= 1;
    }

    /// The set a state within a tick goes in: the innermost tick's, if one is open.
    fn innermost(&self) -> Option<&TickStates> {
        self.open.checked_sub(1).map(|top| &self.sets[top])
    }
}

/// Explores below every root (a trail index and a state at depth `depth`), on the threads.
pub(super) fn explore(search: &Search<'_>, roots: Vec<Entry>, depth: u32) -> Found {
    let threads = search.options.threads.max(1);
    let roots = Mutex::new(roots);
    let violation = Mutex::new(None);
    let parts: Vec<Found> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| worker(search, &roots, depth, &violation)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut found = Found {
        violation: violation
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
        ..Found::default()
    };
    for part in parts {
        found.states += part.states;
        found.reached |= part.reached;
        found.within_ticks += part.within_ticks;
        found.boundaries.add(part.boundaries);
        found.depth = found.depth.max(part.depth);
    }
    found
}

type FirstViolation = Mutex<Option<(Property, u32, Vec<Action>)>>;

fn worker(
    search: &Search<'_>,
    roots: &Mutex<Vec<Entry>>,
    root_depth: u32,
    violation: &FirstViolation,
) -> Found {
    let mut found = Found::default();
    let mut stack: Vec<Frame> = Vec::new();
    let tick_local = search.options.tick_local;
    let mut ticks = Ticks {
        sets: Vec::new(),
        open: 0,
        valid: 0,
        steps: search.visited.steps(),
    };
    let mut unreported = 0;
    // A swarm member's order of steps (one thread draws from it: see `check::check`).
    let mut order = search
        .options
        .swarm
        .map(|member| Order::new(member.order_seed()));
    loop {
        if search.stopped() {
            break;
        }
        let root = roots.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let Some((root_index, root, pending)) = root else {
            break;
        };
        // Frames above `height` are kept for their allocations, not their contents.
        let mut height = 0;
        ticks.start();
        push(
            &mut stack,
            &mut height,
            (root, pending),
            None,
            (search, &mut found.boundaries),
            &mut order,
        );
        open_tick(&mut stack[height - 1], &mut ticks, tick_local);
        while height > 0 {
            let top = &mut stack[height - 1];
            let Some(&action) = top.actions.get(top.next) else {
                if top.opens_tick {
                    ticks.close();
                }
                height -= 1;
                continue;
            };
            top.next += 1;
            let (next, reached, sleep) =
                search
                    .reduction
                    .successor(&top.state, action, &mut top.asleep);
            found.states += 1;
            found.reached |= reached;
            unreported += 1;
            if unreported == CHECK_EVERY {
                search.look(unreported);
                unreported = 0;
                if search.stopped() {
                    break;
                }
            }
            let Some((pending, new)) = visit(search, &ticks, &next, sleep, &mut found) else {
                continue;
            };
            let depth = root_depth + height as u32;
            found.depth = found.depth.max(depth);
            if let Some(property) = next.violation.filter(|_| new) {
                let mut path: Vec<Action> = stack[1..height].iter().filter_map(|f| f.via).collect();
                path.push(action);
                violation
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert((property, root_index, path));
                search.stop_at_violation();
                break;
            }
            if !search.within_max_states() {
                break;
            }
            if unreported == 0 {
                search.reached_depth(depth);
            }
            push(
                &mut stack,
                &mut height,
                (next, pending),
                Some(action),
                (search, &mut found.boundaries),
                &mut order,
            );
            open_tick(&mut stack[height - 1], &mut ticks, tick_local);
        }
    }
    search.look(unreported);
    found
}

/// Records `next` in its set (the visited set, or with `tick_local` its tick's own when it
/// lies within a tick): what is still to take there and whether it is new; `None` when
/// nothing is.
fn visit(
    search: &Search<'_>,
    ticks: &Ticks,
    next: &CheckState,
    sleep: Sleep,
    found: &mut Found,
) -> Option<(Pending, bool)> {
    let symmetry = search.options.symmetries();
    // A tick's set is open only with `tick_local`.
    let within_tick = ticks.innermost().filter(|_| !next.tick_fresh);
    let visit = match within_tick {
        Some(tick) => search.reduction.visit(tick, next, sleep, symmetry),
        None => search
            .reduction
            .visit(&search.visited, next, sleep, symmetry),
    };
    let (pending, new) = match visit {
        Next::Seen => return None,
        Next::Again(pending) => (pending, false),
        Next::New(pending) => (pending, true),
    };
    if new && within_tick.is_some() {
        found.within_ticks += 1;
    }
    Some((pending, new))
}

/// With `tick_local`, a frame whose state begins a tick opens that tick's set.
fn open_tick(frame: &mut Frame, ticks: &mut Ticks, tick_local: bool) {
    frame.opens_tick = tick_local && frame.state.tick_fresh;
    if frame.opens_tick {
        ticks.open();
    }
}

/// Puts `state` on the stack with its steps, shuffled in a swarm member's `order`.
fn push(
    stack: &mut Vec<Frame>,
    height: &mut usize,
    (state, pending): (CheckState, Pending),
    via: Option<Action>,
    (search, boundaries): (&Search<'_>, &mut Boundaries),
    order: &mut Option<Order>,
) {
    if *height == stack.len() {
        stack.push(Frame {
            state,
            actions: Vec::new(),
            next: 0,
            asleep: pending.sleep,
            via,
            opens_tick: false,
        });
    } else {
        let frame = &mut stack[*height];
        frame.state = state;
        frame.next = 0;
        frame.asleep = pending.sleep;
        frame.via = via;
    }
    let frame = &mut stack[*height];
    search.model.actions(&frame.state, &mut frame.actions);
    boundaries.count(&frame.actions, pending.only.is_none());
    search.reduction.select(&mut frame.actions, &pending);
    if let Some(order) = order {
        order.shuffle(&mut frame.actions);
    }
    *height += 1;
}
