//! The one driver loop: runs any core [`Machine`] over real nodes and the real clock.

use super::clock::Clock;
use super::flight::Flight;
use redlock_core::Machine;

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
    // One timer for the machine, moved only when its deadline changes (a round's deadline
    // stays put while its replies come in).
    let far = clock.instant(redlock_core::Timestamp::MAX);
    let timer = tokio::time::sleep_until(far.into());
    tokio::pin!(timer);
    let mut armed: Option<redlock_core::Timestamp> = None;
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
            let at = deadline.map_or(far, |at| clock.instant(at));
            timer.as_mut().reset(at.into());
        }
        tokio::select! {
            biased;
            Some(done) = flight.next() => machine.handle_reply(done.request, done.result, clock.now()),
            () = &mut timer, if armed.is_some() => {
                armed = None;
                machine.handle_timeout(clock.now());
            }
        }
    }
}
