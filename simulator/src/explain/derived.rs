//! What the views of a run have in common, derived once from the run: the lanes (a lane per
//! client, per server, and the resource's), each lease's windows and the end of its
//! validity in true time, the lease each key on a server belongs to, and what became of
//! each access under the three resource modes. The timeline, the diagram, the page and the
//! Chrome trace render these instead of each walking the history for them again.

use crate::Run;
use crate::judge::judgement::Fate;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// What a lane stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaneKind {
    Client,
    Server,
    Resource,
}

/// One lane: a client, a server or the resource, in that order.
#[derive(Debug)]
pub(super) struct Lane {
    pub(super) name: String,
    pub(super) kind: LaneKind,
}

/// One lease, as the views draw it.
#[derive(Debug)]
pub(super) struct LeaseView {
    /// When its holder believed it held it, each window cut at the end of the run.
    pub(super) windows: Vec<(Nanos, Nanos)>,
    /// When its validity ran out in true time, if it did before the run ended.
    pub(super) valid_until: Option<Nanos>,
}

/// What the views of one run share.
#[derive(Debug)]
pub(super) struct Derived {
    /// The end of the run in true time.
    pub(super) end: Nanos,
    /// The clients' lanes, then the servers', then the resource's.
    pub(super) lanes: Vec<Lane>,
    /// Per lease of the history.
    pub(super) leases: Vec<LeaseView>,
    /// Per key span of the history: the epoch of the lease whose token it holds, if any.
    pub(super) key_epochs: Vec<Option<u64>>,
    /// Per access of the history: its fate unfenced, fenced and strictly fenced.
    pub(super) fates: Vec<[Fate; 3]>,
}

impl Derived {
    /// Derives the views' common facts from `run` of `scenario`.
    pub(super) fn new(scenario: &Scenario, run: &Run) -> Self {
        let history = &run.history;
        let end = run.report.simulated_ns;
        let clients = scenario.clients.iter().map(|c| Lane {
            name: c.name.clone(),
            kind: LaneKind::Client,
        });
        let servers = scenario.servers.iter().map(|s| Lane {
            name: s.name.clone(),
            kind: LaneKind::Server,
        });
        let resource = Lane {
            name: "resource".into(),
            kind: LaneKind::Resource,
        };
        let leases = (0..history.leases.len())
            .map(|i| LeaseView {
                windows: history
                    .windows_of(i)
                    .iter()
                    .map(|&(from, until)| (from, until.min(end)))
                    .collect(),
                valid_until: history
                    .deadlines_reached
                    .get(i)
                    .copied()
                    .filter(|&t| t != Nanos::MAX),
            })
            .collect();
        let key_epochs = history
            .keys
            .iter()
            .map(|key| {
                history
                    .leases
                    .iter()
                    .find(|l| l.token == key.token)
                    .map(|l| l.epoch)
            })
            .collect();
        let fates = (0..history.accesses.len())
            .map(|i| {
                run.judgement
                    .fates
                    .get(i)
                    .copied()
                    .unwrap_or([Fate::Lost; 3])
            })
            .collect();
        Self {
            end,
            lanes: clients.chain(servers).chain([resource]).collect(),
            leases,
            key_epochs,
            fates,
        }
    }

    /// The lane of the client, server or resource called `name`.
    pub(super) fn lane_of(&self, name: &str) -> Option<usize> {
        self.lanes.iter().position(|l| l.name == name)
    }

    /// The lane of the client or server called `name`, and which of the two it is.
    pub(super) fn process_lane(&self, name: &str) -> Option<(LaneKind, usize)> {
        let lane = self.lane_of(name)?;
        let kind = self.lanes[lane].kind;
        let index = match kind {
            LaneKind::Client => lane,
            LaneKind::Server => lane - self.clients(),
            LaneKind::Resource => return None,
        };
        Some((kind, index))
    }

    /// How many clients (their lanes come first).
    pub(super) fn clients(&self) -> usize {
        self.lanes
            .iter()
            .filter(|l| l.kind == LaneKind::Client)
            .count()
    }
}
