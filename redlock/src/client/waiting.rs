//! Waiting for a resource that another owner holds: the logs of the releases heard on its
//! keys ([`freed`](super::freed)), and a line per resource for this client's own waiters.
//!
//! What to make of a release is the core's [`Waiting`](redlock_core::Waiting): a waiter
//! feeds it its lost rounds and what the log heard, sends the marks it asks for (the
//! release scripts publish only where a waiter marked its interest) and hands it their
//! answers, and sleeps until the round it says.
//! Neither decides anything about the lease: a woken waiter runs an ordinary quorum round,
//! which the core judges as any other. They only decide *when* that round runs, so a
//! message that is lost, late or wrong costs time, never safety; and since the core counts
//! only the release of a holder the waiter saw, at most one early round per retry delay,
//! a flood of messages on a key's channel costs no rounds.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Shared;
use super::clock::Clock;
use super::flight::Flight;
use super::freed::{Freed, any_after, epoch, sequence};
use super::lock;
use super::notifications::Subscription;
use super::registry::WeakMap;
use redlock_core::{
    Bypass, LockConfig, ReleaseReport, RoundFailure, Target, Timestamp, Token, Transmit,
};

/// This client's waiters for one target, first come first served: only the first in line
/// runs rounds. Without the line, every waiter of the client would run a round at each
/// release (most of them lost, each costing a request per node), and the task that just
/// released, being the quickest to ask again, would win again and again.
#[derive(Default)]
pub(crate) struct Line {
    tickets: Mutex<VecDeque<u64>>,
    next: AtomicU64,
    moved: Notify,
    /// Whether a lease of this client holds the target: the first in line then waits for
    /// its release instead of running a round that can only lose (and whose `SET`s would
    /// queue ahead of that release on every node).
    held_here: AtomicBool,
    /// The core's count of this client's hand-offs past another process's waiter, and when
    /// the first in line may start its next round (after a release that yields).
    bypass: Mutex<(Bypass, Timestamp)>,
}

/// A place in a [`Line`]; leaving it (dropping it) lets the next one move up.
pub(crate) struct Place {
    line: Arc<Line>,
    ticket: u64,
}

impl Line {
    /// Joins the end of the line.
    pub(crate) fn join(self: &Arc<Self>) -> Place {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.tickets).push_back(ticket);
        Place {
            line: Arc::clone(self),
            ticket,
        }
    }
}

impl Place {
    fn is_first(&self) -> bool {
        lock(&self.line.tickets).front() == Some(&self.ticket)
    }

    /// Returns once this place is the first in line.
    pub(crate) async fn first(&self) {
        super::wait_for(&self.line.moved, || self.is_first()).await;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut tickets = lock(&self.line.tickets);
        let was_first = tickets.front() == Some(&self.ticket);
        tickets.retain(|ticket| *ticket != self.ticket);
        drop(tickets);
        if was_first {
            self.line.moved.notify_waiters();
        }
    }
}

/// The signals and lines of every resource someone waits for in this client.
#[derive(Default)]
pub(crate) struct Waiting {
    /// By lock key: shared with the notification tasks, which look keys up by channel name.
    freed: Arc<WeakMap<String, Freed>>,
    lines: WeakMap<Target, Line>,
}

impl Waiting {
    /// The signals of `target`'s keys, kept alive while the returned handles are.
    pub(crate) fn signals(&self, target: &Target) -> Vec<Arc<Freed>> {
        target
            .keys()
            .iter()
            .map(|key| self.freed.get_or_insert_with(key.as_str(), Freed::default))
            .collect()
    }

    /// The signals by key, for the notification tasks.
    pub(crate) fn by_key(&self) -> Arc<WeakMap<String, Freed>> {
        Arc::clone(&self.freed)
    }

    /// Joins the end of `target`'s line.
    pub(crate) fn join(&self, target: &Target) -> Place {
        self.lines.get_or_insert_with(target, Line::default).join()
    }

    /// A lease of this client was granted on `target`.
    pub(crate) fn granted(&self, target: &Target) {
        if let Some(line) = self.lines.get(target) {
            line.held_here.store(true, Ordering::Release);
        }
    }

    /// Whether anyone of this client stands in `target`'s line.
    pub(crate) fn has_line(&self, target: &Target) -> bool {
        self.lines
            .get(target)
            .is_some_and(|line| !lock(&line.tickets).is_empty())
    }

    /// This client released `target`'s lease `token` (`report`, from `sent_at` to `now`):
    /// tells its waiters here, without waiting for the nodes' notifications. The core's
    /// [`Bypass`] says when the first in line may start its round: at once, unless this
    /// client has passed the lease among its own waiters too often while another process
    /// waited.
    pub(crate) fn released(
        &self,
        target: &Target,
        token: Token,
        report: &ReleaseReport,
        sent_at: Timestamp,
        now: Timestamp,
    ) {
        if let Some(line) = self.lines.get(target) {
            let successor = !lock(&line.tickets).is_empty();
            {
                let mut bypass = lock(&line.bypass);
                let start = bypass.0.released(report, sent_at, now, successor);
                bypass.1 = start;
            }
            // Stored before the flag falls: the next in line reads it after.
            line.held_here.store(false, Ordering::Release);
        }
        for key in target.keys() {
            if let Some(freed) = self.freed.get(key.as_str()) {
                freed.released_here(token);
            }
        }
    }
}

/// What one acquisition needs to wait well: its place in this client's line for the target,
/// the logs of releases on its keys, its subscription to the nodes' notifications, and the
/// core's [`Waiting`](redlock_core::Waiting), which decides when its next round starts.
/// Nothing is set up until it is needed (a first round that fails, or others of the client
/// already in line), so that an acquisition that nobody contends pays for none of it.
pub(crate) struct Waiter<'a> {
    shared: &'a Shared,
    target: &'a Target,
    place: Option<Place>,
    signals: Vec<Arc<Freed>>,
    subscription: Option<Subscription>,
    /// The sequence number from which the logs are still to be read (see [`sequence`]).
    cursor: u64,
    /// When the next round starts, from what was heard; from the first lost round on.
    rounds: Option<redlock_core::Waiting>,
    /// The requests of the core's waiting marks (see [`redlock_core::Waiting::marking`]),
    /// from the first lost round on; what is still in flight when the acquisition ends
    /// finishes in the background, with the removal of the marks. In a mutex only so that
    /// the waiter is `Sync` (a `Flight` is not, and `&Waiter` is held across awaits); every
    /// use has `&mut` and takes it with `get_mut`, without locking.
    marks: Mutex<Option<Flight>>,
    /// The marks of the latest lost round not sent yet: each waits until its node answered
    /// the subscription (see [`Subscription::settled`]), or until `hold_until`.
    held: Vec<Transmit>,
    /// When the held marks go out whatever the subscription's state: a node that takes
    /// longer than a round's node timeout to subscribe is not waited for (its mark still
    /// reads the key, and the timer remains).
    hold_until: Timestamp,
}

impl<'a> Waiter<'a> {
    pub(crate) fn new(shared: &'a Shared, target: &'a Target) -> Self {
        Self {
            shared,
            target,
            place: None,
            signals: Vec::new(),
            subscription: None,
            cursor: 0,
            rounds: None,
            marks: Mutex::new(None),
            held: Vec::new(),
            hold_until: Timestamp::ZERO,
        }
    }

    pub(crate) fn joined(&self) -> bool {
        self.place.is_some()
    }

    /// Stands at the end of the line and takes the logs.
    pub(crate) fn join(&mut self) {
        let waiting = &self.shared.waiting;
        self.place = Some(waiting.join(self.target));
        self.signals = waiting.signals(self.target);
    }

    /// Returns `true` once first in line, `false` if `until` came first.
    pub(crate) async fn turn(&self, until: std::time::Instant) -> bool {
        let Some(place) = &self.place else {
            return true;
        };
        tokio::time::timeout_at(until.into(), place.first())
            .await
            .is_ok()
    }

    /// While a lease of this client holds the target, waits for its release (or for
    /// `fallback`, should it never come: a lease kept past its validity, say) rather than
    /// run a round that can only lose.
    pub(crate) async fn while_held_here(&self, fallback: std::time::Instant) {
        let Some(place) = &self.place else {
            return;
        };
        loop {
            // The epoch before the flag: a release clears the flag, then tells the logs,
            // so one that lands in between still wakes us. Anything else heard (other
            // owners' releases) only makes us look at the flag again.
            let seen = epoch(&self.signals);
            if !place.line.held_here.load(Ordering::Acquire) {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(fallback.into()) => return,
                () = any_after(&self.signals, seen) => {}
            }
        }
    }

    /// Returns once this client's latest release lets the first in line start its round
    /// (at once, unless it yields to another process's waiter: see [`Waiting::released`]).
    pub(crate) async fn after_yield(&self, clock: &Clock) {
        let Some(place) = &self.place else {
            return;
        };
        let start = lock(&place.line.bypass).1;
        if clock.now() < start {
            clock.sleep_until(start).await;
        }
    }

    /// A round starts at `now`: releases heard from now on count once it is lost.
    pub(crate) fn round_starts(&mut self, now: Timestamp) {
        self.cursor = sequence();
        if let Some(rounds) = &mut self.rounds {
            rounds.round_started(now);
        }
    }

    /// Subscribes to the nodes' notifications of the target's releases, once.
    pub(crate) fn listen(&mut self) {
        if self.subscription.is_none() {
            let keys = self.target.keys().iter().map(|k| k.as_str().to_owned());
            self.subscription = Some(self.shared.notifications.subscribe(keys.collect()));
        }
    }

    /// The round that ran is lost (`failure`): tells the core's
    /// [`Waiting`](redlock_core::Waiting) so, with the start `timer` picked in the retry
    /// window, and whether the holders' release may wake us earlier (`wake_on_release`).
    ///
    /// The core then marks this waiter's interest on the nodes where the round saw a
    /// holder (so that their release scripts announce its release), over the flight
    /// `marks` makes on the first lost round: on lanes of its own, so that a mark nobody
    /// polls (the next round started at once) holds up no `SET`. Each mark goes out once
    /// its node answered this waiter's subscription ([`listen`](Self::listen) first): a
    /// release announced after the mark is then heard, and one that landed before it, the
    /// mark reads (the key free or held by another). Sent before, a release between the
    /// mark and the subscription would be announced to nobody, and the waiter would sleep
    /// its retry delay. The answers are read while the waiter waits
    /// ([`until_next_round`](Self::until_next_round)).
    pub(crate) fn round_lost(
        &mut self,
        config: &LockConfig,
        failure: &RoundFailure,
        wake_on_release: bool,
        timer: Timestamp,
        marks: impl FnOnce() -> Flight,
    ) {
        let target = self.target;
        let waiter_id = &self.shared.tokens;
        let rounds = self.rounds.get_or_insert_with(|| {
            redlock_core::Waiting::new(config, target.clone())
                .marking(waiter_id.next(), config.ttl())
        });
        rounds.round_lost(failure, wake_on_release, timer);
        // The marks of an older lost round still held are replaced: the core ignores
        // their answers.
        self.held = std::iter::from_fn(|| rounds.poll_transmit()).collect();
        self.hold_until = failure.decided_at.saturating_add(config.node_timeout());
        unpoisoned(&mut self.marks).get_or_insert_with(marks);
        send_settled(
            &mut self.held,
            self.subscription.as_ref(),
            unpoisoned(&mut self.marks),
            failure.decided_at < self.hold_until,
        );
    }

    /// Returns when the core's [`Waiting`](redlock_core::Waiting) says the next round
    /// starts: at the timer of the [lost round](Self::round_lost), or earlier once the
    /// holders it saw released a quorum of nodes (when it may wake on a release), and no
    /// early round ran within a retry delay. At once if no round was lost.
    pub(crate) async fn until_next_round(&mut self, clock: &Clock) {
        let Self {
            target,
            signals,
            cursor,
            rounds,
            marks,
            subscription,
            held,
            hold_until,
            ..
        } = self;
        let Some(rounds) = rounds else {
            return;
        };
        let marks = unpoisoned(marks);
        loop {
            // The epoch before reading: a release in between still wakes us.
            let seen = epoch(signals);
            // Read before the look at the subscription: a node that settles in between
            // still wakes us.
            let settling = subscription.as_ref().map(|s| (s, s.epoch()));
            let from = std::mem::replace(cursor, sequence());
            read_logs(signals, target, from, rounds, clock.now());
            let now = clock.now();
            send_settled(held, subscription.as_ref(), marks, now < *hold_until);
            let Some(next) = rounds.next_round() else {
                return;
            };
            if now >= next {
                if rounds.is_early(now) {
                    tracing::debug!("the holder released; next round now");
                }
                return;
            }
            // A mark's answer may say the holder is gone already.
            // (No shared borrow of the flight lives across the await: the future is `Send`
            // while `Flight` is not `Sync`.)
            let in_flight = marks.as_mut().filter(|flight| !flight.is_idle());
            let answered = async move {
                match in_flight {
                    Some(flight) => flight.next().await,
                    None => std::future::pending().await,
                }
            };
            // Held marks: woken when a node settles, and at the end of the hold.
            let (settling, wake) = if held.is_empty() {
                (None, next)
            } else {
                (settling, next.min(*hold_until))
            };
            let settled = async move {
                match settling {
                    Some((subscription, seen)) => subscription.settled_after(seen).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = clock.sleep_until(wake) => {}
                () = any_after(signals, seen) => {}
                () = settled => {}
                Some(done) = answered => rounds.handle_reply(done.request, done.result, clock.now()),
            }
        }
    }
}

impl Drop for Waiter<'_> {
    /// The acquisition ends, whichever way: the core removes its marks from the nodes. The
    /// removals (and any mark still in flight, which goes first on its node's lane) finish
    /// in the background when the flight is dropped.
    fn drop(&mut self) {
        if let (Some(rounds), Some(flight)) = (&mut self.rounds, unpoisoned(&mut self.marks)) {
            rounds.stop();
            flight.send_all(|| rounds.poll_transmit());
        }
    }
}

/// Sends the `held` marks whose node answered the `subscription` (all of them once
/// `holding` is over, or without a subscription) over the marks' flight.
fn send_settled(
    held: &mut Vec<Transmit>,
    subscription: Option<&Subscription>,
    flight: &mut Option<Flight>,
    holding: bool,
) {
    let Some(flight) = flight else {
        return;
    };
    let mut ready = Vec::new();
    held.retain(|mark| {
        let send = !holding || subscription.is_none_or(|s| s.settled(mark.node));
        if send {
            ready.push(mark.clone());
        }
        !send
    });
    let mut ready = ready.into_iter();
    flight.send_all(|| ready.next());
}

/// The marks' flight, from `&mut` (no lock taken; a poisoned mutex is used as it is, since
/// nothing panics while it is held: it never is).
fn unpoisoned(marks: &mut Mutex<Option<Flight>>) -> &mut Option<Flight> {
    marks
        .get_mut()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands the releases `signals` (the logs of `target`'s keys, in order) heard from sequence
/// number `from` on to `rounds`. A release numbered while the logs are read may be handed
/// over twice, which changes nothing.
fn read_logs(
    signals: &[Arc<Freed>],
    target: &Target,
    from: u64,
    rounds: &mut redlock_core::Waiting,
    now: Timestamp,
) {
    for (freed, key) in signals.iter().zip(target.keys()) {
        for release in freed.since(from) {
            match release.node {
                Some(node) => {
                    rounds.notified(node, key.as_str().as_bytes(), &release.token.to_hex(), now);
                }
                None => rounds.released_here(release.token, now),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_line_moves_in_arrival_order() {
        let line = Arc::new(Line::default());
        let a = line.join();
        let b = line.join();
        let c = line.join();
        assert!(a.is_first() && !b.is_first());
        // Leaving from the middle does not let anyone jump ahead.
        drop(b);
        assert!(!c.is_first());
        let waiting = tokio::spawn(async move {
            c.first().await;
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("moved up")
            .unwrap();
    }
}
