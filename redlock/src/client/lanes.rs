//! Per-node ordering of the commands of one resource.
//!
//! A release must reach a node after the `SET` it cleans up, and a new round's `SET` after
//! the previous round's release: otherwise the `SET` finds the client's own old key (a lost
//! vote), or, worse, a release of an old token lands after nothing and the old `SET` lands
//! after it (a key left until its TTL). Each node's connection is ordered, so it is enough
//! that a command *starts* only once the previous command of the same resource to that node
//! has finished: its *lane*.
//!
//! One wait is not needed: a release behind a lock request written to the client's own
//! connection, which is still open, can be written right behind it (see
//! [`Gate::followable_on`]). The connection delivers the two in order, and the node runs
//! them in order, as if the release had waited. This is what the routine release does on the
//! nodes that had not answered the acquisition's `SET` when it decided.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::task::AtomicWaker;

use super::lock;
use super::registry::WeakMap;
use redlock_core::{ConnectionId, Target};

/// Opens when a command of a lane has finished (or was dropped unfinished) and every command
/// before it in the lane has too, and wakes the command waiting for it.
///
/// One waker is enough: [`Lanes::push`] hands each gate to exactly one successor, the next
/// command of the lane. (A `Notify` here cost its lock on every command, waited for or not.)
#[derive(Default)]
pub(crate) struct Gate {
    open: AtomicBool,
    opened: AtomicWaker,
    /// The connection a release may follow its command on (`0`: none; else its id + 1).
    followable: AtomicU64,
    /// The gate of the next command, if that one ended before this one's did (it gave up
    /// while waiting for it, or it is a release written behind this lock request whose
    /// answer was read first): it opens with this one (see [`OpensOnDrop`]).
    then: Mutex<Option<Arc<Self>>>,
    /// Whether `then` has been given a gate.
    chained: AtomicBool,
}

impl Gate {
    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Says that its command is a lock request written to the client's own connection
    /// `on` (which keeps the order of what is written to it): a release may be written on
    /// `on` behind it rather than wait for its answer.
    ///
    /// Only a lock request: a release by hash may be answered `NOSCRIPT` and followed by
    /// the script sent whole, after anything written behind it, so a new round's `SET`
    /// written behind a release could overtake the release.
    pub(crate) fn mark_followable(&self, on: ConnectionId) {
        if let Some(marked) = on.0.checked_add(1) {
            self.followable.store(marked, Ordering::Release);
        }
    }

    /// The connection a release may follow this gate's command on, if any (see
    /// [`Gate::mark_followable`]).
    pub(crate) fn followable_on(&self) -> Option<ConnectionId> {
        match self.followable.load(Ordering::Acquire) {
            0 => None,
            marked => Some(ConnectionId(marked - 1)),
        }
    }

    /// Ready once the gate is open; registers the task to be woken when it opens.
    pub(crate) fn poll_open(&self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.is_open() {
            return Poll::Ready(());
        }
        // Registered before the second look: an opening in between still wakes us.
        self.opened.register(cx.waker());
        if self.is_open() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Returns once the gate is open.
    pub(crate) async fn wait(&self) {
        std::future::poll_fn(|cx| self.poll_open(cx)).await;
    }

    /// Opens the gate, then every gate that was to open with it.
    fn open(&self) {
        let mut then = self.open_alone();
        while let Some(gate) = then {
            then = gate.open_alone();
        }
    }

    /// Opens the gate; returns the gate that was to open with it, if any.
    fn open_alone(&self) -> Option<Arc<Self>> {
        // Sequentially consistent, as `open_with`'s store of `chained` and load of `open`:
        // of the two loads, at least one sees the other side's store, so a gate chained as
        // this one opens is opened by one side or the other (the lock lets only one take
        // it). Opening a gate nothing was chained to, the routine case, takes no lock.
        self.open.store(true, Ordering::SeqCst);
        self.opened.wake();
        if self.chained.load(Ordering::SeqCst) {
            lock(&self.then).take()
        } else {
            None
        }
    }

    /// Opens `next` when this gate opens, or now if it has.
    fn open_with(&self, next: Arc<Self>) {
        {
            let mut then = lock(&self.then);
            // One successor per gate (`Lanes::push`): an earlier one replaced here would
            // never open.
            debug_assert!(then.is_none(), "a gate chained to twice");
            *then = Some(next);
        }
        self.chained.store(true, Ordering::SeqCst);
        if self.open.load(Ordering::SeqCst) {
            // Taken, then opened with the lock let go.
            let next = lock(&self.then).take();
            if let Some(next) = next {
                next.open();
            }
        }
    }
}

/// Opens its gate when dropped: when the command finishes, times out or is cancelled, but
/// never before the gate of the lane's previous command.
///
/// A command that gives up while it waits in its lane (a lock request cut by its round's
/// deadline, or dropped) ends before the command it waited for. Were its gate to open then,
/// the next command would be written before that earlier one: a release before the `SET` it
/// cleans up, which the node would then run after it, leaving the key until its TTL. (A
/// release written behind its lock request on one connection may also be read as answered
/// first: its gate then opens with the lock request's, a moment later.)
///
/// The price of that order: a command whose operation is kept but no longer polled (its
/// deadline is applied only when it is polled) holds up the lane behind it until it is
/// dropped, commands that give up included.
pub(crate) struct OpensOnDrop {
    gate: Arc<Gate>,
    /// The gate of the lane's previous command, while it may still be closed.
    after: Option<Arc<Gate>>,
}

impl OpensOnDrop {
    /// The opener of `gate`, whose command follows `previous` in its lane.
    pub(crate) fn new(gate: Arc<Gate>, previous: Option<&Arc<Gate>>) -> Self {
        Self {
            gate,
            after: previous.filter(|previous| !previous.is_open()).cloned(),
        }
    }

    /// The gate it opens.
    pub(crate) fn gate(&self) -> &Arc<Gate> {
        &self.gate
    }
}

impl Drop for OpensOnDrop {
    fn drop(&mut self) {
        match self.after.take() {
            // Still closed: this gate opens with it (if it opens meanwhile, `open_with` sees
            // that).
            Some(previous) if !previous.is_open() => previous.open_with(Arc::clone(&self.gate)),
            _ => self.gate.open(),
        }
    }
}

type Slots = Mutex<Vec<Lane>>;

/// How many gates of earlier commands a lane keeps to use again (not always the ones just
/// before the last: when both are still held, the first place is taken over).
///
/// A routine acquire + release whose slower nodes answer after its decision leaves, on each
/// of those nodes, the `SET` still unanswered as the release is queued behind it, and the
/// release unanswered as the next `SET` is: each new command finds the last gate held, and
/// the one before it held by that command (which waits for it). Two spares cover that
/// rotation.
const SPARES: usize = 2;

/// One node's lane of a resource: the gate of its last command, and gates of earlier
/// commands, kept to be used again once their commands have ended and nothing holds them.
#[derive(Clone, Default)]
struct Lane {
    last: Option<Arc<Gate>>,
    spares: [Option<Arc<Gate>>; SPARES],
}

/// Closes `gate` again for a new command, if its own command has ended and nothing else holds
/// it; whether it did.
fn renewed(gate: &mut Arc<Gate>) -> bool {
    if !gate.is_open() {
        return false;
    }
    match Arc::get_mut(gate) {
        Some(ended) => {
            *ended = Gate::default();
            true
        }
        None => false,
    }
}

/// For each node, a gate that opens when the resource's last command to that node finished.
///
/// Shared by every operation on one resource within a client (the rounds of acquisitions,
/// their cleanups, the lease's extensions and release), and updated when a command is
/// *sent*, not when the operation that sent it ends: an operation that returned at its
/// decision, or was cancelled half-way, still leaves its commands in the lanes, so the next
/// command to the same node waits for them.
#[derive(Clone)]
pub(crate) struct Lanes(Arc<Slots>);

impl Lanes {
    /// Lanes of their own, shared with no resource: for the waiting marks, which must
    /// neither wait behind a round's commands nor hold up the next round's `SET` while
    /// nobody polls them (their order on each node among themselves is all that counts).
    pub(crate) fn apart() -> Self {
        Self(Arc::default())
    }

    /// Installs a new gate as node `index`'s last command: returns it, and the gate of the
    /// command it follows unless that one has ended.
    ///
    /// The last gate is used again when its command has ended and nothing else holds it (the
    /// routine case), else a spare that has (see [`SPARES`]): a lane then costs no
    /// allocation per command, stragglers included.
    pub(crate) fn push(&self, index: usize) -> (Arc<Gate>, Option<Arc<Gate>>) {
        let mut lanes = lock(&self.0);
        if lanes.len() <= index {
            lanes.resize(index + 1, Lane::default());
        }
        let lane = &mut lanes[index];
        if let Some(gate) = &mut lane.last
            && renewed(gate)
        {
            return (Arc::clone(gate), None);
        }
        let gate = lane
            .spares
            .iter_mut()
            .find_map(|spare| spare.take_if(renewed))
            .unwrap_or_default();
        let previous = lane.last.replace(Arc::clone(&gate));
        if let Some(previous) = &previous {
            // Kept in a free place, else in place of a spare still held.
            let place = lane.spares.iter().position(Option::is_none).unwrap_or(0);
            lane.spares[place] = Some(Arc::clone(previous));
        }
        (gate, previous.filter(|previous| !previous.is_open()))
    }
}

/// The lanes of every resource that has an operation or a lease alive in this client.
pub(crate) struct LaneRegistry {
    nodes: usize,
    lanes: WeakMap<Target, Slots>,
}

impl LaneRegistry {
    pub(crate) fn new(nodes: usize) -> Self {
        Self {
            nodes,
            lanes: WeakMap::default(),
        }
    }

    /// The lanes of `target`, shared with every live operation and lease on it.
    pub(crate) fn of(&self, target: &Target) -> Lanes {
        let nodes = self.nodes;
        Lanes(
            self.lanes
                .get_or_insert_with(target, || Mutex::new(vec![Lane::default(); nodes])),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(name: &str) -> Target {
        Target::one("lock:", name).unwrap()
    }

    #[tokio::test]
    async fn a_command_waits_for_its_gate_to_open() {
        use futures::FutureExt;
        let gate = Arc::new(Gate::default());
        let mut waiting = Box::pin(gate.wait());
        assert!((&mut waiting).now_or_never().is_none());
        let opener = OpensOnDrop::new(Arc::clone(&gate), None);
        tokio::spawn(async move { drop(opener) });
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting)
            .await
            .expect("the gate's opening wakes its waiter");
        // Open: no wait at all.
        assert!(gate.wait().now_or_never().is_some());
    }

    #[test]
    fn a_command_follows_the_last_one_unless_it_has_ended_whose_gate_is_then_used_again() {
        let lanes = LaneRegistry::new(2).of(&target("a"));
        let (first, previous) = lanes.push(1);
        assert!(previous.is_none());
        let first_at = Arc::as_ptr(&first);
        // Not ended: the next command follows it, with a gate of its own.
        let (second, previous) = lanes.push(1);
        assert!(Arc::ptr_eq(previous.as_ref().unwrap(), &first));
        assert!(!Arc::ptr_eq(&second, &first));
        drop((OpensOnDrop::new(first, None), previous));
        // The last one ended, but is still held (a command that waited for it has not let
        // go): the first one's gate, ended and held by nobody, is used again.
        let held = Arc::clone(&second);
        drop(OpensOnDrop::new(second, None));
        let (third, previous) = lanes.push(1);
        assert!(previous.is_none() && !third.is_open());
        assert_eq!(Arc::as_ptr(&third), first_at);
        // Not ended, and no spare free: a new gate.
        let (fourth, previous) = lanes.push(1);
        assert!(Arc::ptr_eq(previous.as_ref().unwrap(), &third));
        assert!(!Arc::ptr_eq(&fourth, &held) && Arc::as_ptr(&fourth) != first_at);
        drop((held, previous, OpensOnDrop::new(third, None)));
        drop(OpensOnDrop::new(fourth, None));
        // Ended and held by nobody: the same gate again, closed.
        let before = Arc::as_ptr(&lock(&lanes.0)[1].last.clone().unwrap());
        let (fifth, previous) = lanes.push(1);
        assert!(previous.is_none() && !fifth.is_open());
        assert_eq!(Arc::as_ptr(&fifth), before);
        // Another node's lane is apart.
        assert!(lanes.push(0).1.is_none());
    }

    #[test]
    fn a_command_that_gives_up_before_the_one_it_waits_for_opens_the_lane_only_after_it() {
        let lanes = LaneRegistry::new(1).of(&target("a"));
        let (gate, _) = lanes.push(0);
        let first = OpensOnDrop::new(gate, None);
        // Two commands wait behind the first, and give up (are cut) before it ends.
        let (gate, previous) = lanes.push(0);
        let second = OpensOnDrop::new(gate, previous.as_ref());
        let (gate, previous) = lanes.push(0);
        let third = OpensOnDrop::new(gate, previous.as_ref());
        let (fourth, previous) = lanes.push(0);
        let behind_third = previous.unwrap();
        drop((third, second));
        assert!(
            !behind_third.is_open(),
            "the fourth may not go before the first"
        );
        drop(first);
        assert!(behind_third.is_open(), "opened with the first");
        // Ended after the command before it: its gate opens at once, and the lane is free.
        drop(OpensOnDrop::new(fourth, Some(&behind_third)));
        assert!(lanes.push(0).1.is_none());
    }

    #[test]
    fn a_gate_chained_while_the_one_before_opens_opens_all_the_same() {
        // The two ends race on two threads: whichever way they meet, the second's gate opens.
        for _ in 0..2_000 {
            let lanes = LaneRegistry::new(1).of(&target("a"));
            let (gate, _) = lanes.push(0);
            let first = OpensOnDrop::new(gate, None);
            let (gate, previous) = lanes.push(0);
            let second = OpensOnDrop::new(gate, previous.as_ref());
            let behind_second = lanes.push(0).1.unwrap();
            let ends = [
                std::thread::spawn(move || drop(first)),
                std::thread::spawn(move || drop(second)),
            ];
            for end in ends {
                end.join().unwrap();
            }
            assert!(behind_second.is_open());
        }
    }

    #[test]
    fn operations_on_one_resource_share_its_lanes_while_any_is_alive() {
        let registry = LaneRegistry::new(3);
        let first = registry.of(&target("a"));
        let second = registry.of(&target("a"));
        assert!(Arc::ptr_eq(&first.0, &second.0));
        assert!(!Arc::ptr_eq(&first.0, &registry.of(&target("b")).0));
        drop((first, second));
        // Nothing alive: a fresh set of lanes, no gate left from before.
        let again = registry.of(&target("a"));
        assert!(lock(&again.0).iter().all(|lane| lane.last.is_none()));
    }
}
