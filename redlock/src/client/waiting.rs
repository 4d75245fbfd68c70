//! Waiting for a resource that another owner holds: a signal per lock key that it may have
//! been freed, and a line per resource for this client's own waiters.
//!
//! Neither decides anything about the lease: a woken waiter runs an ordinary quorum round,
//! which the core judges as any other. They only decide *when* that round runs, so a signal
//! that is lost, late or wrong costs time, never safety.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::Shared;
use super::lock;
use super::notifications::Subscription;
use super::registry::WeakMap;
use crate::core::{Target, Token};

/// That a lock key may have been freed: raised by this client's own releases and by the
/// nodes' notifications (the release scripts `PUBLISH` on the key's name).
///
/// A counter rather than a flag: a waiter notes it before a round and, after the round
/// failed, waits for it to move. A release that lands *during* the round still wakes it.
#[derive(Default)]
pub(crate) struct Freed {
    epoch: AtomicU64,
    raised: Notify,
    /// The tokens of this client's latest rounds on the key: the nodes' notifications of
    /// their cleanup releases say nothing about the holder and must not wake anyone.
    own: Mutex<VecDeque<Token>>,
}

/// How many of the client's latest round tokens per key are recognised in notifications:
/// a cleanup's notification arrives within a round trip of the round it follows.
const OWN_TOKENS: usize = 16;

impl Freed {
    /// The number of signals so far.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Wakes every waiter of the key.
    pub(crate) fn raise(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.raised.notify_waiters();
    }

    /// A node deleted the key, which held `token` (when the notification said): wakes the
    /// waiters unless the token is one of this client's own round tokens.
    pub(crate) fn released_by(&self, token: Option<Token>) {
        if token.is_some_and(|token| lock(&self.own).contains(&token)) {
            return;
        }
        self.raise();
    }

    /// `token` is this client's: a notification of its release wakes nobody here.
    pub(crate) fn note_own(&self, token: Token) {
        let mut own = lock(&self.own);
        if own.len() == OWN_TOKENS {
            own.pop_front();
        }
        own.push_back(token);
    }
}

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

    /// The combined epoch of `target`'s signals that exist (see [`epoch`]); a signal that
    /// does not exist yet counts as 0, as it will start.
    pub(crate) fn epoch_of(&self, target: &Target) -> u64 {
        target
            .keys()
            .iter()
            .filter_map(|key| self.freed.get(key.as_str()))
            .fold(0u64, |sum, freed| sum.wrapping_add(freed.epoch()))
    }

    /// This client released `target`: wakes its waiters here, without waiting for the
    /// nodes' notifications.
    pub(crate) fn released(&self, target: &Target) {
        if let Some(line) = self.lines.get(target) {
            line.held_here.store(false, Ordering::Release);
        }
        for key in target.keys() {
            if let Some(freed) = self.freed.get(key.as_str()) {
                freed.raise();
            }
        }
    }
}

/// What one acquisition needs to wait well: its place in this client's line for the target,
/// the signals that wake it and its subscription to the nodes' notifications. Nothing is set
/// up until it is needed (a first round that fails, or others of the client already in
/// line), so that an acquisition that nobody contends pays for none of it.
pub(crate) struct Waiter<'a> {
    shared: &'a Shared,
    target: &'a Target,
    place: Option<Place>,
    signals: Vec<Arc<Freed>>,
    subscription: Option<Subscription>,
    /// The signals' combined epoch when the current round started.
    seen: u64,
    /// The current round's token, noted as the client's own once the signals exist.
    token: Option<Token>,
}

impl<'a> Waiter<'a> {
    pub(crate) fn new(shared: &'a Shared, target: &'a Target) -> Self {
        Self {
            shared,
            target,
            place: None,
            signals: Vec::new(),
            subscription: None,
            seen: 0,
            token: None,
        }
    }

    pub(crate) fn joined(&self) -> bool {
        self.place.is_some()
    }

    /// Stands at the end of the line and takes the signals.
    pub(crate) fn join(&mut self) {
        let waiting = &self.shared.waiting;
        self.place = Some(waiting.join(self.target));
        self.signals = waiting.signals(self.target);
        if let Some(token) = self.token {
            for freed in &self.signals {
                freed.note_own(token);
            }
        }
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
        // The epoch before the flag: a release clears the flag, then raises the signal, so
        // one that lands in between still wakes us.
        let seen = epoch(&self.signals);
        if !place.line.held_here.load(Ordering::Acquire) {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep_until(fallback.into()) => {}
            () = any_after(&self.signals, seen) => {}
        }
    }

    /// A round with `token` starts: a release from now on wakes the waiter, and the nodes'
    /// notifications of this token's releases (the round's cleanup) wake nobody.
    pub(crate) fn round_starts(&mut self, token: Token) {
        self.token = Some(token);
        self.seen = if self.signals.is_empty() {
            // A signal created after this point starts at 0, as this does.
            self.shared.waiting.epoch_of(self.target)
        } else {
            for freed in &self.signals {
                freed.note_own(token);
            }
            epoch(&self.signals)
        };
    }

    /// Subscribes to the nodes' notifications of the target's releases, once.
    pub(crate) fn listen(&mut self) {
        if self.subscription.is_none() {
            let keys = self.target.keys().iter().map(|k| k.as_str().to_owned());
            self.subscription = Some(self.shared.notifications.subscribe(keys.collect()));
        }
    }

    /// Returns at `start`, or earlier on a release since the round started when
    /// `wake_on_release`.
    pub(crate) async fn until(&self, start: std::time::Instant, wake_on_release: bool) {
        let woken_by = if wake_on_release {
            &self.signals[..]
        } else {
            &[]
        };
        tokio::select! {
            () = tokio::time::sleep_until(start.into()) => {}
            () = any_after(woken_by, self.seen) => {}
        }
    }
}

/// The sum of `signals`' epochs: it moves when any of them does.
pub(crate) fn epoch(signals: &[Arc<Freed>]) -> u64 {
    signals
        .iter()
        .fold(0u64, |sum, freed| sum.wrapping_add(freed.epoch()))
}

/// Returns once any of `signals` moved past the combined `seen` (see [`epoch`]); never,
/// for no signals.
pub(crate) async fn any_after(signals: &[Arc<Freed>], seen: u64) {
    loop {
        let mut raised: Vec<_> = signals
            .iter()
            .map(|freed| Box::pin(freed.raised.notified()))
            .collect();
        // Registered before the look, so a signal in between still wakes us.
        for notified in &mut raised {
            notified.as_mut().enable();
        }
        if epoch(signals) != seen {
            return;
        }
        if raised.is_empty() {
            return std::future::pending().await;
        }
        futures::future::select_all(raised).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_release_during_the_round_still_wakes_the_waiter() {
        let signals = vec![Arc::new(Freed::default()), Arc::new(Freed::default())];
        let seen = epoch(&signals);
        // Raised after the waiter noted the epoch, before it waits: not lost.
        signals[1].raise();
        tokio::time::timeout(Duration::from_secs(1), any_after(&signals, seen))
            .await
            .expect("woken");
    }

    #[test]
    fn notifications_of_the_clients_own_releases_wake_nobody() {
        let freed = Freed::default();
        let mine = Token::from_bytes([1; 16]);
        freed.note_own(mine);
        freed.released_by(Some(mine));
        assert_eq!(freed.epoch(), 0);
        freed.released_by(Some(Token::from_bytes([2; 16])));
        freed.released_by(None);
        assert_eq!(freed.epoch(), 2);
    }

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
