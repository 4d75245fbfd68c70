//! The releases heard on each lock key: a log per key, written by the nodes' notification
//! tasks ([`notifications`](super::notifications)) and by this client's own releases, read
//! by the waiters ([`waiting`](super::waiting)).
//!
//! Its own module because both sides use it: the notifications write into it without
//! knowing about waiters, and the waiters read it without knowing where a release was
//! heard.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::lock;
use redlock_core::{NodeId, Token};

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
    pub(crate) node: Option<NodeId>,
    /// The released token.
    pub(crate) token: Token,
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
pub(crate) fn sequence() -> u64 {
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
    pub(crate) fn since(&self, from: u64) -> Vec<Release> {
        lock(&self.heard)
            .iter()
            .filter(|(seq, _)| *seq >= from)
            .map(|(_, release)| *release)
            .collect()
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
}
