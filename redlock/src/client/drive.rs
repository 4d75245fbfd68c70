//! The one driver loop: runs any core [`Machine`] over real nodes and the real clock.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;

use tokio::time::Sleep;

use super::clock::Clock;
use super::flight::Flight;
use redlock_core::{Machine, Timestamp};

/// Runs `machine` until it produces its outcome: sends what it polls, feeds back replies
/// and timer expiries with `now` read from `clock`.
///
/// Returns `None` only if the machine stalls (nothing in flight, no timer, no outcome), which
/// the core's contract rules out; the caller reports it as an internal error, never a hang.
pub(crate) async fn drive<M: Machine>(
    machine: &mut M,
    flight: &mut Flight,
    clock: &Clock,
) -> Option<M::Outcome> {
    // One timer for the machine, made when it is first needed and moved only when its
    // deadline changes (a round's deadline stays put while its replies come in).
    let mut timer = pin!(None::<Sleep>);
    let mut armed: Option<Timestamp> = None;
    loop {
        flight.send_all(|| machine.poll_transmit());
        if let Some(outcome) = machine.poll_outcome() {
            return Some(outcome);
        }
        let deadline = machine.poll_timeout();
        if flight.is_idle() && deadline.is_none() {
            return None;
        }
        if deadline != armed {
            armed = deadline;
            if let Some(at) = deadline {
                let at = clock.instant(at);
                match timer.as_mut().as_pin_mut() {
                    Some(sleep) => sleep.reset(at.into()),
                    None => timer.set(Some(tokio::time::sleep_until(at.into()))),
                }
            }
        }
        let expired = poll_fn(|cx| match timer.as_mut().as_pin_mut() {
            Some(sleep) => sleep.poll(cx),
            None => Poll::Pending,
        });
        tokio::select! {
            biased;
            Some(done) = flight.next() => machine.handle_reply(done.request, done.result, clock.now()),
            () = expired, if armed.is_some() => {
                armed = None;
                machine.handle_timeout(clock.now());
            }
        }
    }
}
