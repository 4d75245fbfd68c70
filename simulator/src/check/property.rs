//! The properties a check judges: *always* ones (a state that breaks one ends the search with
//! a counterexample) and *sometimes* ones (each must be reached somewhere, so that a model
//! that grants nothing cannot pass). `judge.rs` judges them after each step.

/// A property of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Property {
    /// *Always*: no two clients believe they hold the lease at once (their windows, as the
    /// simulator's checker defines them, never overlap in true time).
    MutualExclusion,
    /// *Always*: each grant's fencing token is higher than every earlier grant's, so a
    /// fenced resource accepts the holders' tokens in strictly increasing order (checked
    /// when the model fences).
    FencesIncrease,
    /// *Always*: a lease is released only once its work has stopped, or once no node holds
    /// its key any more (judged against each node's store and clock, not the client's
    /// belief).
    StopBeforeRelease,
    /// *Sometimes*: a client is granted the lease.
    Grant,
    /// *Sometimes*: a client that lost a round to a holder is granted the lease later.
    HandOff,
    /// *Sometimes*: a lease is extended.
    Extension,
    /// *Always*: a release that deletes its key on a node where a waiter's mark is tells
    /// that waiter (the release script publishes; checked when waiters mark,
    /// `model.waiter_marks`).
    WaiterTold,
}

impl Property {
    /// Every property, in the order reported.
    pub const ALL: [Self; 7] = [
        Self::MutualExclusion,
        Self::FencesIncrease,
        Self::StopBeforeRelease,
        Self::Grant,
        Self::HandOff,
        Self::Extension,
        Self::WaiterTold,
    ];

    /// Its name in reports and `--json`.
    pub fn name(self) -> &'static str {
        match self {
            Self::MutualExclusion => "mutual-exclusion",
            Self::FencesIncrease => "fences-increase",
            Self::StopBeforeRelease => "stop-before-release",
            Self::Grant => "grant",
            Self::HandOff => "contended-hand-off",
            Self::Extension => "extension",
            Self::WaiterTold => "waiter-told",
        }
    }

    /// `always` or `sometimes`.
    pub fn kind(self) -> &'static str {
        if self.is_always() {
            "always"
        } else {
            "sometimes"
        }
    }

    /// Whether it is an invariant (else it must be reached somewhere).
    pub fn is_always(self) -> bool {
        matches!(
            self,
            Self::MutualExclusion
                | Self::FencesIncrease
                | Self::StopBeforeRelease
                | Self::WaiterTold
        )
    }

    /// Its bit in a set of properties (as [`CheckSpec::always`](super::CheckSpec::always)
    /// holds the judged ones).
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }
}
