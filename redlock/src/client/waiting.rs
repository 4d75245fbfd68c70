//! Waiting for a resource that another owner holds: a log per lock key of the releases
//! heard on it, and a line per resource for this client's own waiters.
//!
//! What to make of a release is the core's [`Waiting`](crate::core::Waiting): a waiter
//! feeds it its lost rounds and what the log heard, and sleeps until the round it says.
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
use super::lock;
use super::notifications::Subscription;
use super::registry::WeakMap;
use crate::core::{LockConfig, NodeId, RoundFailure, Target, Timestamp, Token};

/// The releases heard on one lock key: from the nodes' notifications (the release scripts
/// `PUBLISH` the released token on the key's name) and from this client's own releases.
///
/// A log with sequence numbers rather than a flag: a waiter notes the sequence when a round
/// starts and, after the round is lost, reads what came since. A release that lands
/// *during* the round still counts.
#[derive(Default)]
pub(crate) struct Freed {
    /// How many releases were heard: moves whenever the log does.
    count: AtomicU64,
    raised: Notify,
    heard: Mutex<VecDeque<(u64, Release)>>,
}

/// One release heard on a key.
#[derive(Clone, Copy)]
pub(crate) struct Release {
    /// The node that announced it; `None` for a release by this client.
    node: Option<NodeId>,
    token: Token,
}

/// How many releases per key are kept for the waiters that have not read them yet. A
/// waiter reads the log whenever it moves, so only a flood (of tokens nobody holds, since
/// anything else is dropped) pushes a genuine release out, and that costs time only.
const KEPT: usize = 64;

/// The sequence number of the next release heard, one count for every log of the process:
/// a waiter's round can start before a log of its keys exists (logs live while someone
/// waits), and the log created later must still read as "after the round started".
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The sequence number the next release heard will have, on any key.
fn sequence() -> u64 {
    SEQUENCE.load(Ordering::Acquire)
}

impl Freed {
    /// How many releases the log has heard.
    pub(crate) fn epoch(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    fn push(&self, release: Release) {
        let mut heard = lock(&self.heard);
        // Numbered under the log's lock: a reader that locks the log after reading the
        // sequence sees every release numbered below what it read.
        let seq = SEQUENCE.fetch_add(1, Ordering::AcqRel);
        if heard.len() == KEPT {
            heard.pop_front();
        }
        heard.push_back((seq, release));
        self.count.fetch_add(1, Ordering::AcqRel);
        drop(heard);
        self.raised.notify_waiters();
    }

    /// Node `node` announced the release of `payload` on the key. A payload that is not a
    /// token cannot be anyone's release: dropped here, it wakes nobody.
    pub(crate) fn notified(&self, node: NodeId, payload: &[u8]) {
        if let Some(token) = Token::from_hex(payload) {
            self.push(Release {
                node: Some(node),
                token,
            });
        }
    }

    /// This client released `token` on the key.
    pub(crate) fn released_here(&self, token: Token) {
        self.push(Release { node: None, token });
    }

    /// The releases numbered `from` or later that the log still keeps.
    fn since(&self, from: u64) -> Vec<Release> {
        lock(&self.heard)
            .iter()
            .filter(|(seq, _)| *seq >= from)
            .map(|(_, release)| *release)
            .collect()
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

    /// This client released `target`'s lease `token`: tells its waiters here, without
    /// waiting for the nodes' notifications.
    pub(crate) fn released(&self, target: &Target, token: Token) {
        if let Some(line) = self.lines.get(target) {
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
/// core's [`Waiting`](crate::core::Waiting), which decides when its next round starts.
/// Nothing is set up until it is needed (a first round that fails, or others of the client
/// already in line), so that an acquisition that nobody contends pays for none of it.
pub(crate) struct Waiter<'a> {
    shared: &'a Shared,
    target: &'a Target,
    place: Option<Place>,
    signals: Vec<Arc<Freed>>,
    subscription: Option<Subscription>,
    /// The sequence number from which the logs are still to be read (see [`SEQUENCE`]).
    cursor: u64,
    /// When the next round starts, from what was heard; from the first lost round on.
    rounds: Option<crate::core::Waiting>,
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

    /// After the lost round `failure`: returns at `timer` (the start picked in the retry
    /// window), or earlier when the core's [`Waiting`](crate::core::Waiting) says so: the
    /// holders the round saw released a quorum of nodes (when `wake_on_release`), and no
    /// early round ran within a retry delay.
    pub(crate) async fn until_next_round(
        &mut self,
        config: &LockConfig,
        failure: &RoundFailure,
        wake_on_release: bool,
        timer: Timestamp,
        clock: &Clock,
    ) {
        let target = self.target;
        let rounds = self
            .rounds
            .get_or_insert_with(|| crate::core::Waiting::new(config, target.clone()));
        rounds.round_lost(failure, wake_on_release, timer);
        loop {
            // The epoch before reading: a release in between still wakes us.
            let seen = epoch(&self.signals);
            let from = std::mem::replace(&mut self.cursor, sequence());
            read_logs(&self.signals, target, from, rounds, clock.now());
            let now = clock.now();
            let Some(next) = rounds.next_round() else {
                return;
            };
            if now >= next {
                if rounds.is_early(now) {
                    tracing::debug!("the holder released; next round now");
                }
                return;
            }
            tokio::select! {
                () = clock.sleep_until(next) => {}
                () = any_after(&self.signals, seen) => {}
            }
        }
    }
}

/// Hands the releases `signals` (the logs of `target`'s keys, in order) heard from sequence
/// number `from` on to `rounds`. A release numbered while the logs are read may be handed
/// over twice, which changes nothing.
fn read_logs(
    signals: &[Arc<Freed>],
    target: &Target,
    from: u64,
    rounds: &mut crate::core::Waiting,
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
        // Heard after the waiter noted the epoch, before it waits: not lost.
        signals[1].released_here(Token::from_bytes([1; 16]));
        tokio::time::timeout(Duration::from_secs(1), any_after(&signals, seen))
            .await
            .expect("woken");
    }

    #[test]
    fn what_is_not_a_token_is_nobodys_release() {
        let freed = Freed::default();
        freed.notified(NodeId::new(0), b"junk");
        freed.notified(NodeId::new(0), b"");
        assert_eq!(freed.epoch(), 0);
        let from = sequence();
        let token = Token::from_bytes([2; 16]);
        freed.notified(NodeId::new(1), &token.to_hex());
        assert_eq!(freed.epoch(), 1);
        let heard = freed.since(from);
        assert!(
            matches!(heard[..], [Release { node: Some(node), token: t }] if node == NodeId::new(1) && t == token)
        );
    }

    #[test]
    fn the_log_keeps_the_latest_releases() {
        let freed = Freed::default();
        for n in 0..(KEPT + 10) {
            freed.released_here(Token::from_bytes([n as u8; 16]));
        }
        let heard = freed.since(0);
        assert_eq!(heard.len(), KEPT);
        assert!(heard[KEPT - 1].token == Token::from_bytes([(KEPT + 9) as u8; 16]));
        assert_eq!(freed.since(sequence()).len(), 0);
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
