//! The threads that expand the breadth-first levels, each taking first the blocks of states
//! it made itself.
//!
//! A state's parts are allocated by the thread that made it and freed, once the state is
//! expanded, by the thread that expanded it. When that is another thread, glibc's allocator
//! takes the lock of the maker's arena, which the maker is using at the same moment: with
//! a level's blocks handed to whichever thread asked, two threads spent about 1.3 times the
//! CPU a state costs one thread, 8 % of it in the kernel waking threads on those locks
//! (docs/benchmarks.md, "Threads take a level's blocks in turn"). So the same threads live
//! from level to level (a thread spawned anew for each level may be given another thread's
//! arena), a level's successors stay in blocks by the thread that made them, and a thread
//! takes its own blocks first and another's only when it has none left (docs/benchmarks.md,
//! "Threads keep the states they made").

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::Scope;

use super::explore::{Entry, Level, expand, states};
use super::search::Search;

/// A run of a level's states, all made by one thread (its number in the crew).
pub(super) struct Block {
    pub(super) maker: usize,
    pub(super) entries: Vec<Entry>,
}

/// How many blocks a level is cut into per thread, at least: enough that a thread which drew
/// states with fewer successors, or ran less of the time, takes more blocks, so that the
/// threads end a level together. With a level cut in halves, a thread waited for the other 4
/// to 10 % of the time; with blocks, under 3 % (docs/benchmarks.md, "Threads take a level's
/// blocks in turn").
const BLOCKS_PER_THREAD: usize = 32;
/// The fewest states in a block, below which taking a block costs more than it balances.
const MIN_BLOCK: usize = 64;

/// Each thread's blocks still to expand, each with its place in the level.
type Queues = Arc<[Mutex<VecDeque<(usize, Vec<Entry>)>>]>;

/// What a thread expanded: each block's place in the level and what its expansion found.
type Taken = Vec<(usize, Level)>;

/// The calling thread (number 0) and the threads started beside it (1 and on), which wait
/// between levels.
pub(super) struct Crew {
    queues: Queues,
    /// Per started thread: where to tell it the next level's largest block, and where it
    /// answers with what it took. Dropping the crew ends them.
    helpers: Vec<(Sender<usize>, Receiver<Taken>)>,
}

impl Crew {
    /// A crew of `search`'s threads, started in `scope`.
    pub(super) fn start<'scope>(
        scope: &'scope Scope<'scope, '_>,
        search: &'scope Search<'scope>,
    ) -> Self {
        let threads = search.options.threads.max(1);
        let queues: Queues = (0..threads).map(|_| Mutex::default()).collect();
        let helpers = (1..threads)
            .map(|me| {
                let (go, level) = channel::<usize>();
                let (answer, answers) = channel();
                let queues = Arc::clone(&queues);
                scope.spawn(move || {
                    while let Ok(block) = level.recv() {
                        if answer.send(take(search, &queues, me, block)).is_err() {
                            break;
                        }
                    }
                });
                (go, answers)
            })
            .collect();
        Self { queues, helpers }
    }

    /// One breadth-first level: each state's successors, in blocks of the thread that made
    /// them. Each block's results come back in the order of the blocks, with the thread
    /// that expanded it (the maker of its successors), so that the next level's order does
    /// not depend on which thread took which block.
    pub(super) fn level(&self, search: &Search<'_>, frontier: Vec<Block>) -> Vec<(usize, Level)> {
        let threads = self.queues.len();
        // The successors of a block are cut at this size, so that the next level, at least
        // as large as this one, has as many blocks as this one should.
        let block = states(&frontier)
            .div_ceil(threads * BLOCKS_PER_THREAD)
            .max(MIN_BLOCK);
        for (place, Block { maker, entries }) in frontier.into_iter().enumerate() {
            lock(&self.queues[maker % threads]).push_back((place, entries));
        }
        for (go, _) in &self.helpers {
            // A thread that has ended panicked: its answer below says so.
            let _ = go.send(block);
        }
        let mut done: Vec<(usize, usize, Level)> = Vec::new();
        let mine = take(search, &self.queues, 0, block);
        done.extend(mine.into_iter().map(|(place, level)| (place, 0, level)));
        for (me, (_, answers)) in self.helpers.iter().enumerate() {
            let taken = answers
                .recv()
                .unwrap_or_else(|_| panic!("thread {} of the crew panicked", me + 1));
            done.extend(
                taken
                    .into_iter()
                    .map(|(place, level)| (place, me + 1, level)),
            );
        }
        done.sort_unstable_by_key(|&(place, _, _)| place);
        done.into_iter()
            .map(|(_, expander, level)| (expander, level))
            .collect()
    }
}

/// Thread `me`'s part of a level: its own blocks first, in order, then the others' from
/// their ends, until none is left.
fn take(search: &Search<'_>, queues: &Queues, me: usize, block: usize) -> Taken {
    let threads = queues.len();
    let mut taken = Vec::new();
    let mut unreported = 0;
    loop {
        let own = lock(&queues[me]).pop_front();
        let next = own.or_else(|| {
            (1..threads).find_map(|other| lock(&queues[(me + other) % threads]).pop_back())
        });
        let Some((place, entries)) = next else {
            search.look(unreported);
            break taken;
        };
        taken.push((place, expand(search, entries, block, &mut unreported)));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
