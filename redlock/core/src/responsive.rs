//! Whether a node may be sent a new lock write: not while one of its requests went
//! unanswered, until a probe shows that it answers again.
//!
//! A node that stops (`SIGSTOP`, a suspended VM, a long fork) keeps its connections open,
//! and what the client writes to them waits in socket buffers. Under load those buffers
//! fill; from then on redis-rs stops writing, and a request that the per-node timeout cuts
//! before it is written is never sent. If that happens to the release queued behind a
//! `SET` that *was* written, the node executes the `SET` when it resumes and its key stays
//! until the TTL. So once a request on a connection timed out unanswered, no new `SET` goes
//! out on that connection; a single `PING` probe is sent instead, queued behind everything
//! already written, and when it answers the node has worked through its backlog and takes
//! writes again. Releases are never held back (they delete, never create), and a new
//! connection starts with nothing queued on it.

use super::ConnectionId;

/// One node's state: answering, or silent on a connection since a request timed out there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) enum Responsiveness {
    #[default]
    Answering,
    /// A request on `connection` timed out unanswered; no probe is out.
    Silent { connection: ConnectionId },
    /// A probe is out on `connection`; nothing else may be written until it answers.
    Probing { connection: ConnectionId },
}

/// What a lock write on a connection should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum WriteGate {
    Open,
    /// Send the probe first.
    Probe,
    /// A probe is out and has not answered.
    Closed,
}

impl Responsiveness {
    /// A request on `connection` timed out without an answer.
    pub(super) fn unanswered(&mut self, connection: ConnectionId) {
        match *self {
            // The probe out on this connection keeps its place.
            Self::Probing {
                connection: probing,
            } if probing == connection => {}
            _ => *self = Self::Silent { connection },
        }
    }

    /// Whether a lock write may go out on `connection`; hands out the probe when one is due.
    pub(super) fn write(&mut self, connection: ConnectionId) -> WriteGate {
        match *self {
            Self::Answering => WriteGate::Open,
            // The silent connection was replaced: the new one has no backlog.
            Self::Silent { connection: silent } | Self::Probing { connection: silent }
                if silent != connection =>
            {
                *self = Self::Answering;
                WriteGate::Open
            }
            Self::Silent { .. } => {
                *self = Self::Probing { connection };
                WriteGate::Probe
            }
            Self::Probing { .. } => WriteGate::Closed,
        }
    }

    /// The probe on `connection` answered (`true`: the node took writes again) or was given
    /// up (`false`: the next write sends another).
    pub(super) fn probed(&mut self, connection: ConnectionId, answered: bool) {
        if *self != (Self::Probing { connection }) {
            return;
        }
        *self = if answered {
            Self::Answering
        } else {
            Self::Silent { connection }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const C1: ConnectionId = ConnectionId(1);
    const C2: ConnectionId = ConnectionId(2);

    #[test]
    fn one_probe_at_a_time_until_it_answers() {
        let mut node = Responsiveness::default();
        assert_eq!(node.write(C1), WriteGate::Open);
        node.unanswered(C1);
        assert_eq!(node.write(C1), WriteGate::Probe);
        assert_eq!(node.write(C1), WriteGate::Closed);
        // Another timeout while the probe is out does not hand out a second one.
        node.unanswered(C1);
        assert_eq!(node.write(C1), WriteGate::Closed);
        node.probed(C1, false);
        assert_eq!(node.write(C1), WriteGate::Probe);
        node.probed(C1, true);
        assert_eq!(node.write(C1), WriteGate::Open);
    }

    #[test]
    fn a_new_connection_has_no_backlog() {
        let mut node = Responsiveness::default();
        node.unanswered(C1);
        assert_eq!(node.write(C1), WriteGate::Probe);
        assert_eq!(node.write(C2), WriteGate::Open);
        // The old probe's answer changes nothing any more.
        node.probed(C1, false);
        assert_eq!(node.write(C2), WriteGate::Open);
    }

    #[derive(Clone, Copy, Debug)]
    enum Step {
        Unanswered(u64),
        Write(u64),
        Probed(u64, bool),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (1..3u64).prop_map(Step::Unanswered),
            (1..3u64).prop_map(Step::Write),
            (1..3u64, any::<bool>()).prop_map(|(c, a)| Step::Probed(c, a)),
        ]
    }

    proptest! {
        /// Once a request timed out on a connection, no write goes out on it until a probe
        /// handed out on it answered; and at most one probe is out at a time.
        #[test]
        fn no_write_on_a_silent_connection_before_its_probe_answers(steps in prop::collection::vec(step(), 0..60)) {
            let mut node = Responsiveness::default();
            // Per connection: silent since a timeout, and the probe out (if any).
            let mut silent: Option<u64> = None;
            let mut probe_out: Option<u64> = None;
            for step in steps {
                match step {
                    Step::Unanswered(c) => {
                        node.unanswered(ConnectionId(c));
                        silent = Some(c);
                        if probe_out != Some(c) {
                            probe_out = None;
                        }
                    }
                    Step::Write(c) => match node.write(ConnectionId(c)) {
                        WriteGate::Open => {
                            // Open only on a connection that is not the silent one.
                            prop_assert_ne!(silent, Some(c));
                            silent = None;
                            probe_out = None;
                        }
                        WriteGate::Probe => {
                            prop_assert_eq!(silent, Some(c));
                            prop_assert_eq!(probe_out, None);
                            probe_out = Some(c);
                        }
                        WriteGate::Closed => prop_assert_eq!(probe_out, Some(c)),
                    },
                    Step::Probed(c, answered) => {
                        node.probed(ConnectionId(c), answered);
                        if probe_out == Some(c) {
                            probe_out = None;
                            if answered {
                                silent = None;
                            }
                        }
                    }
                }
            }
        }
    }
}
