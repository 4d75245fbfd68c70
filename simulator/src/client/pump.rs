//! The one driving loop: runs any core [`Machine`] as far as it can go without an event.
//!
//! The simulator's counterpart of the tokio client's `drive`: drain the commands, take the
//! outcome, otherwise report when the machine wants its timer. Every machine the simulated
//! client runs (acquire, extend, keep-alive, release) goes through here.

use redlock_core::{Machine, Timestamp, Transmit};

/// Where a machine stands after a pump.
#[derive(Debug)]
pub(super) enum Pumped<O> {
    /// It produced an outcome (a machine with several, like the keep-alive, may produce
    /// more: pump it again).
    Outcome(O),
    /// It waits for a reply, or for its timer at this reading of the client's clock.
    Waiting(Option<Timestamp>),
}

/// Sends everything `machine` has queued through `send`, then takes its outcome, if any.
pub(super) fn pump<M: Machine>(
    machine: &mut M,
    mut send: impl FnMut(Transmit),
) -> Pumped<M::Outcome> {
    while let Some(transmit) = machine.poll_transmit() {
        send(transmit);
    }
    match machine.poll_outcome() {
        Some(outcome) => Pumped::Outcome(outcome),
        None => Pumped::Waiting(machine.poll_timeout()),
    }
}
