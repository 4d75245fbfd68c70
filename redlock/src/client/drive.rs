//! The one driver loop: runs any core [`Machine`] over real nodes and the real clock.

use super::clock::Clock;
use super::flight::{Flight, Next};
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
    // The machine's deadline rides on the flight's timer (one timer for the operation), and
    // is read into an instant only when it changes (a round's deadline stays put while its
    // replies come in).
    let mut armed: Option<Timestamp> = None;
    let mut until = None;
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
            until = deadline.map(|at| clock.instant(at).into());
        }
        match flight.next_until(until).await? {
            Next::Done(done) => machine.handle_reply(done.request, done.result, clock.now()),
            Next::Due => {
                armed = None;
                machine.handle_timeout(clock.now());
            }
        }
    }
}
