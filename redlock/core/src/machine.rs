//! The shape every state machine of the core shares, so one driver loop can run them all.

use super::{NodeFailure, Reply, RequestId, Timestamp, Transmit};

/// A sans-IO state machine: commands come out of `poll_transmit`, replies and timer expiries
/// go in through `handle_reply` and `handle_timeout`, and the result comes out of
/// `poll_outcome`.
///
/// A driver repeats, until an outcome appears:
///
/// 1. drain [`poll_transmit`](Machine::poll_transmit) and send each command;
/// 2. take [`poll_outcome`](Machine::poll_outcome); stop when there is one;
/// 3. wait for the next reply or for [`poll_timeout`](Machine::poll_timeout), whichever comes
///    first, and feed it in with `now` read from the driver's clock.
///
/// Any call may queue new commands or produce the outcome, so step 1 always comes first.
pub trait Machine {
    /// What the machine finally produces.
    type Outcome;

    /// The next command to send, if any.
    fn poll_transmit(&mut self) -> Option<Transmit>;

    /// Feeds the reply to `request` (or why there is none), received at `now`.
    ///
    /// Replies to requests of earlier rounds, duplicates and replies after the decision are
    /// ignored.
    fn handle_reply(
        &mut self,
        request: RequestId,
        reply: Result<Reply, NodeFailure>,
        now: Timestamp,
    );

    /// Tells the machine that its timer, as last returned by `poll_timeout`, may have fired.
    /// Calling it early is harmless.
    fn handle_timeout(&mut self, now: Timestamp);

    /// When `handle_timeout` must be called next, if the machine is waiting for one.
    #[must_use]
    fn poll_timeout(&self) -> Option<Timestamp>;

    /// The result, once. Every command the result depends on (cleanup releases included) has
    /// been queued before it appears.
    #[must_use]
    fn poll_outcome(&mut self) -> Option<Self::Outcome>;
}
