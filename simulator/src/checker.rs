//! Judges a history: mutual exclusion in true time, and what the protected resource applied
//! under each of the three resource modes.
//!
//! Definitions (in true time):
//!
//! - A lease's **window** runs from its grant to the first of: the end of its validity (as
//!   the holder's clock says), its release, its holder's crash.
//! - Leases are ordered by grant: that order is their **epoch**. With the linearizable token
//!   source the fencing token *is* the epoch.
//! - An access is **stale** when the resource applies it after it applied an access of a
//!   later epoch: a write from an older lease after a newer lease's access (a stale write,
//!   or a lost update when the newer lease had read).
//! - Two windows **overlap** when they intersect; the overlap is **used** when both holders'
//!   accesses were applied inside it.
//!
//! Each resource mode replays the accesses in arrival order. `plain` applies everything;
//! `fenced` rejects writes whose token is below the highest token a write carried; `strict`
//! rejects any access whose token is below the highest any access carried.
//!
//! Verdicts: `plain` is `VIOLATED` when a stale access was applied or an overlap was used,
//! else `SAFE`. A fenced mode is `VIOLATED` when it applied a stale access; else
//! `PREVENTED_BY_FENCING` when plain would have been violated or it rejected a stale access;
//! else `SAFE`. The cause is `A` when windows overlapped (Redlock's claim failed), `C` when
//! they did and a client carries an implementation fault, `B` otherwise (an access outside
//! its holder's window).

use serde::Serialize;

use crate::history::{AccessKind, History};
use crate::scenario::{Cause, ResourceMode, Scenario, Verdict};
use crate::time::Nanos;

/// The counts behind a verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Leases granted.
    pub leases: usize,
    /// Pairs of windows that overlap.
    pub overlaps: usize,
    /// Overlapping pairs whose holders both had accesses applied inside the overlap.
    pub used_overlaps: usize,
    /// Accesses that reached the resource.
    pub accesses: usize,
    /// Stale accesses applied, per mode (plain, fenced, strict).
    pub stale_applied: [usize; 3],
    /// Stale accesses rejected by the token check, per mode.
    pub stale_rejected: [usize; 3],
    /// All accesses rejected by the token check, per mode.
    pub rejected: [usize; 3],
    /// Leases whose fencing token was not above every earlier lease's (repeats and
    /// regressions).
    pub fence_regressions: usize,
}

/// What the resource did with one access in one mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fate {
    /// Never arrived (lost, or still in flight at the end).
    Lost,
    /// Applied in lease order.
    Applied,
    /// Applied after an access of a later lease: stale.
    Stale,
    /// Rejected by the token check.
    Rejected,
}

/// The checker's judgement of one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Judgement {
    /// What happened to each access, per mode (plain, fenced, strict).
    #[serde(skip)]
    pub fates: Vec<[Fate; 3]>,
    /// Verdict per mode: plain, fenced, strict.
    pub verdicts: [Verdict; 3],
    /// Why, when any verdict is not `SAFE`.
    pub cause: Option<Cause>,
    /// The counts.
    pub counts: Counts,
    /// The first problem, for the timeline and the diagram.
    pub first_problem: Option<Problem>,
}

/// The first thing that went wrong.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Problem {
    /// Two windows overlapped (leases by index).
    Overlap {
        /// The earlier lease.
        first: usize,
        /// The later lease.
        second: usize,
        /// Start of the overlap.
        from: Nanos,
        /// End of the overlap.
        until: Nanos,
    },
    /// A stale access was applied by the unfenced resource (access by index).
    StaleAccess {
        /// The stale access.
        access: usize,
        /// The access of a later epoch it came after.
        after: usize,
    },
}

/// What one mode's replay found.
struct Replay {
    applied: Vec<bool>,
    stale_applied: Vec<usize>,
    stale_rejected: usize,
    rejected: usize,
    first_stale: Option<(usize, usize)>,
}

fn replay(history: &History, order: &[usize], mode: ResourceMode) -> Replay {
    let mut result = Replay {
        applied: vec![false; history.accesses.len()],
        stale_applied: Vec::new(),
        stale_rejected: 0,
        rejected: 0,
        first_stale: None,
    };
    let mut max_fence = 0u64;
    let mut newest: Option<usize> = None;
    for &index in order {
        let access = &history.accesses[index];
        let checked = match mode {
            ResourceMode::Plain => false,
            ResourceMode::Fenced => access.kind == AccessKind::Write,
            ResourceMode::Strict => true,
        };
        let newest_epoch = newest.map_or(0, |n| history.accesses[n].epoch);
        let stale = access.epoch < newest_epoch;
        if checked && access.fence < max_fence {
            result.rejected += 1;
            if stale {
                result.stale_rejected += 1;
            }
            continue;
        }
        if checked {
            max_fence = max_fence.max(access.fence);
        }
        result.applied[index] = true;
        if stale {
            result.stale_applied.push(index);
            if result.first_stale.is_none() {
                result.first_stale = newest.map(|n| (index, n));
            }
        } else if access.epoch >= newest_epoch {
            newest = Some(index);
        }
    }
    result
}

/// Judges `history` from a run of `scenario`.
pub fn judge(scenario: &Scenario, history: &History) -> Judgement {
    let leases = &history.leases;
    let mut counts = Counts {
        leases: leases.len(),
        ..Counts::default()
    };

    // Arrival order at the resource (ties broken by sending order).
    let mut order: Vec<usize> = (0..history.accesses.len())
        .filter(|&i| history.accesses[i].arrived_at.is_some())
        .collect();
    order.sort_by_key(|&i| (history.accesses[i].arrived_at, i));
    counts.accesses = order.len();

    let replays: Vec<Replay> = ResourceMode::ALL
        .iter()
        .map(|&m| replay(history, &order, m))
        .collect();
    for (i, r) in replays.iter().enumerate() {
        counts.stale_applied[i] = r.stale_applied.len();
        counts.stale_rejected[i] = r.stale_rejected;
        counts.rejected[i] = r.rejected;
    }

    // Window overlaps, and whether both holders used one.
    let mut first_overlap = None;
    let applied_in = |lease: usize, from: Nanos, until: Nanos| {
        history.accesses.iter().enumerate().any(|(i, a)| {
            a.lease == lease
                && replays[0].applied[i]
                && a.arrived_at.is_some_and(|t| from <= t && t < until)
        })
    };
    for a in 0..leases.len() {
        for b in a + 1..leases.len() {
            let from = leases[a].granted_at.max(leases[b].granted_at);
            let until = leases[a].window_end.min(leases[b].window_end);
            if from < until && leases[a].client != leases[b].client {
                counts.overlaps += 1;
                if first_overlap.is_none() {
                    first_overlap = Some(Problem::Overlap {
                        first: a,
                        second: b,
                        from,
                        until,
                    });
                }
                if applied_in(a, from, until) && applied_in(b, from, until) {
                    counts.used_overlaps += 1;
                }
            }
        }
    }

    // Token monotonicity across leases, in grant order.
    let mut highest = None;
    for lease in leases {
        if highest.is_some_and(|h| lease.fence <= h) {
            counts.fence_regressions += 1;
        }
        highest = highest.max(Some(lease.fence));
    }

    let plain_problem = counts.stale_applied[0] > 0 || counts.used_overlaps > 0;
    let verdicts = [0, 1, 2].map(|i| {
        if i == 0 {
            if plain_problem {
                Verdict::Violated
            } else {
                Verdict::Safe
            }
        } else if counts.stale_applied[i] > 0 {
            Verdict::Violated
        } else if plain_problem || counts.stale_rejected[i] > 0 {
            Verdict::PreventedByFencing
        } else {
            Verdict::Safe
        }
    });
    let cause = verdicts.iter().any(|v| *v != Verdict::Safe).then(|| {
        if counts.overlaps == 0 {
            Cause::B
        } else if scenario.has_faulty_client() {
            Cause::C
        } else {
            Cause::A
        }
    });
    let first_stale = replays[0]
        .first_stale
        .map(|(access, after)| Problem::StaleAccess { access, after });
    // Lead with what the cause is about: the overlap for A and C, the stale access for B.
    let first_problem = if matches!(cause, Some(Cause::A | Cause::C)) {
        first_overlap.or(first_stale)
    } else {
        first_stale.or(first_overlap)
    };
    let fates = (0..history.accesses.len())
        .map(|i| {
            [0, 1, 2].map(|m| {
                let r = &replays[m];
                if history.accesses[i].arrived_at.is_none() {
                    Fate::Lost
                } else if !r.applied[i] {
                    Fate::Rejected
                } else if r.stale_applied.contains(&i) {
                    Fate::Stale
                } else {
                    Fate::Applied
                }
            })
        })
        .collect();
    Judgement {
        fates,
        verdicts,
        cause,
        counts,
        first_problem,
    }
}
