//! What a traced run records for its diagrams besides the history: every message with its
//! send and arrival in true time, and each client's clock readings. Kept apart from the
//! [`History`](crate::History), which is the same with and without a trace.

use serde::Serialize;

use crate::time::Nanos;

/// One message on the simulated network.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MessageRecord {
    /// The sender's display name.
    pub from: String,
    /// The receiver's display name.
    pub to: String,
    /// Sent, true time.
    pub sent_at: Nanos,
    /// The first delivery, true time (`None`: lost).
    pub arrives_at: Option<Nanos>,
    /// What it carries, in a few words.
    pub label: String,
}

/// The extra record of a traced run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Recording {
    /// Every message, in the order sent.
    pub messages: Vec<MessageRecord>,
    /// Per client, (true time, the client's clock reading) at evenly spaced instants and on
    /// both sides of every step, in time order: enough to draw the clock beside its lane.
    pub clocks: Vec<Vec<(Nanos, u64)>>,
}

/// How many evenly spaced readings of each clock a recording keeps.
pub(crate) const CLOCK_SAMPLES: u64 = 200;
