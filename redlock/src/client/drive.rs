//! The one driver loop: runs any core [`Machine`] over real nodes and the real clock.

use super::clock::Clock;
use super::flight::Flight;
use crate::core::Machine;

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
    loop {
        while let Some(transmit) = machine.poll_transmit() {
            flight.send(transmit);
        }
        if let Some(outcome) = machine.poll_outcome() {
            return Some(outcome);
        }
        let timer = machine.poll_timeout();
        if flight.is_idle() && timer.is_none() {
            return None;
        }
        let expiry = async {
            match timer {
                Some(at) => tokio::time::sleep_until(clock.instant(at).into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            Some(done) = flight.next() => machine.handle_reply(done.request, done.result, clock.now()),
            () = expiry => machine.handle_timeout(clock.now()),
        }
    }
}
