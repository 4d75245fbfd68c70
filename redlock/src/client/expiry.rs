//! One timer for all the requests of a flight.
//!
//! Every request has a deadline (the per-node timeout). A tokio timer per request costs two
//! operations on the runtime's timer wheel, each under a lock that every worker thread
//! shares, and a clone of the runtime's handle: on two cores that was about a seventh of the
//! client's CPU per healthy acquire + release (`benches/cpu.rs`). So the requests of a
//! flight only record their deadlines here, and whoever drives the flight keeps a single
//! timer no later than the earliest one ([`Expiry::sooner`]); when it fires, the flight tells
//! the expiry how far time has reached ([`Expiry::reach`]), which wakes the requests now due
//! and names the next deadline.
//! A request reads no clock: it has passed its deadline when the flight's timer has.

use std::future::Future;
use std::sync::Mutex;
use std::task::{Poll, Waker};

use tokio::time::Instant;

use super::lock;

/// The deadlines of one flight's requests.
#[derive(Default)]
pub(crate) struct Expiry {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Requests waiting for their answer, by slot: deadline, and the waker to call then.
    waiting: Vec<Option<(Instant, Waker)>>,
    /// How far the flight's timer has reached: a deadline at or before it has passed.
    reached: Option<Instant>,
    /// The earliest deadline recorded since the flight last asked ([`Expiry::sooner`]).
    sooner: Option<Instant>,
}

impl State {
    fn passed(&self, at: Instant) -> bool {
        self.reached.is_some_and(|reached| at <= reached)
    }
}

/// A request's deadline passed before it finished.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Elapsed;

/// A request's place among the waiting; it leaves when the request finishes or is dropped.
struct Slot<'a> {
    expiry: &'a Expiry,
    index: Option<usize>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index {
            lock(&self.expiry.state).waiting[index] = None;
        }
    }
}

impl Expiry {
    /// Runs `future` until it completes or the flight's timer reaches `at`.
    pub(crate) async fn timeout_at<F: Future>(
        &self,
        at: Instant,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        let mut future = std::pin::pin!(future);
        let mut slot = Slot {
            expiry: self,
            index: None,
        };
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(Ok(output));
            }
            let mut state = lock(&self.state);
            if state.passed(at) {
                return Poll::Ready(Err(Elapsed));
            }
            match slot.index {
                Some(index) => {
                    if let Some((_, waker)) = &mut state.waiting[index]
                        && !waker.will_wake(cx.waker())
                    {
                        waker.clone_from(cx.waker());
                    }
                }
                None => {
                    let entry = Some((at, cx.waker().clone()));
                    let index = match state.waiting.iter().position(Option::is_none) {
                        Some(free) => {
                            state.waiting[free] = entry;
                            free
                        }
                        None => {
                            state.waiting.push(entry);
                            state.waiting.len() - 1
                        }
                    };
                    slot.index = Some(index);
                    state.sooner = Some(state.sooner.map_or(at, |sooner| sooner.min(at)));
                }
            }
            Poll::Pending
        })
        .await
    }

    /// The earliest deadline recorded since the last call, if any: the flight's timer must
    /// fire no later than that.
    pub(crate) fn sooner(&self) -> Option<Instant> {
        lock(&self.state).sooner.take()
    }

    /// The earliest deadline not passed yet, if any request waits for one.
    fn earliest(state: &State) -> Option<Instant> {
        state
            .waiting
            .iter()
            .flatten()
            .map(|(at, _)| *at)
            .filter(|at| !state.passed(*at))
            .min()
    }

    /// Requests waiting for an answer or their deadline.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        lock(&self.state).waiting.iter().flatten().count()
    }

    /// The flight's timer has reached `now`: wakes every request whose deadline has passed,
    /// and returns the earliest deadline still ahead.
    pub(crate) fn reach(&self, now: Instant) -> Option<Instant> {
        let (due, next): (Vec<Waker>, _) = {
            let mut state = lock(&self.state);
            let newly = |at: Instant| at <= now && !state.passed(at);
            let due = state
                .waiting
                .iter()
                .flatten()
                .filter(|(at, _)| newly(*at))
                .map(|(_, waker)| waker.clone())
                .collect();
            state.reached = Some(state.reached.map_or(now, |reached| reached.max(now)));
            (due, Self::earliest(&state))
        };
        // Woken outside the lock: a waker may poll (and lock) at once.
        due.into_iter().for_each(Waker::wake);
        next
    }
}

#[cfg(test)]
mod tests {
    use std::future::{pending, ready};
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn an_answer_ready_when_the_deadline_has_passed_still_counts() {
        let expiry = Expiry::default();
        let at = Instant::now();
        expiry.reach(at + Duration::from_millis(1));
        assert_eq!(expiry.timeout_at(at, ready(7)).await, Ok(7));
        assert_eq!(expiry.timeout_at(at, pending::<u8>()).await, Err(Elapsed));
    }

    #[tokio::test]
    async fn reaching_a_deadline_wakes_only_the_requests_due() {
        let expiry = Expiry::default();
        let now = Instant::now();
        let (early, late) = (now + Duration::from_secs(1), now + Duration::from_secs(2));
        let mut first = Box::pin(expiry.timeout_at(early, pending::<()>()));
        let mut second = Box::pin(expiry.timeout_at(late, pending::<()>()));
        assert!((&mut first).now_or_never().is_none());
        assert!((&mut second).now_or_never().is_none());
        assert_eq!(expiry.sooner(), Some(early));
        assert_eq!(expiry.sooner(), None, "asked already");
        assert_eq!(expiry.reach(early), Some(late));
        assert_eq!((&mut first).now_or_never(), Some(Err(Elapsed)));
        assert!((&mut second).now_or_never().is_none());
        // A request dropped unfinished leaves its place.
        drop(second);
        assert_eq!(expiry.reach(early), None);
        drop(first);
        assert_eq!(expiry.waiting(), 0);
    }
}
