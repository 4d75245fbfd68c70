//! Judges a history: mutual exclusion in true time, and what the protected resource applied
//! under each of the three resource modes.
//!
//! Mutual exclusion is a property of the lock: it is `VIOLATED` as soon as two holders'
//! windows overlap, whether or not the workload touched the resource inside the overlap.
//! The resource verdicts say what that (or a holder acting after its validity) did to the
//! data.
//!
//! Definitions (in true time):
//!
//! - A lease's **windows** are the intervals during which its holder believed it held it:
//!   its clock read before the lease's deadline, from the grant to its release or its
//!   holder's crash (see [`History::windows`]). The deadline is the one the last extension
//!   set, for the whole lease: a lease extended after its deadline had passed counts as
//!   believed throughout. A clock that only moves forward gives one window; a wall clock that
//!   steps back past the deadline opens another.
//! - Leases are ordered by grant: that order is their **epoch**. With the linearizable token
//!   source the fencing token *is* the epoch.
//! - An access is **stale** when the resource applies it after it applied an access of a
//!   later epoch: a write from an older lease after a newer lease's access (a stale write,
//!   or a lost update when the newer lease had read).
//! - Two leases of different clients **overlap** when their windows intersect; the overlap
//!   is **used** when both holders' accesses were applied inside the intersection.
//!
//! Each resource mode replays the accesses in arrival order. `plain` applies everything;
//! `fenced` rejects writes whose token is below the highest token a write carried; `strict`
//! rejects any access whose token is below the highest any access carried.
//!
//! Verdicts: `exclusion` is `VIOLATED` when any two leases overlap, else `SAFE`. `plain` is
//! `VIOLATED` when a stale access was applied or an overlap was used, else `SAFE`. A fenced mode is `VIOLATED` when it applied a stale access; else
//! `PREVENTED_BY_FENCING` when plain would have been violated or it rejected a stale access;
//! else `SAFE`.
//!
//! Causes: each overlap gets its own, from the two leases and what happened to them. It is
//! `C` when a fault of one of the two holders was in effect and lengthens what that holder
//! believes (a timing fault, an extension by re-acquiring on an extended lease, a wall clock
//! that stepped back, a clock frozen by a pause, before the overlap ended), or when a key of
//! either lease was deleted by someone else while its holder still believed (only a plain
//! `DEL` does that); `A` otherwise (a node forgot a key or expired it early, or a clock ran
//! beyond the drift factor). Never `B`: a window is what its holder believes, and neither a
//! pause nor a delayed message lengthens that (only a clock that misbehaves does). The run's
//! cause is the first overlap's; without an overlap, a resource verdict other than `SAFE` is
//! `B` (a holder's access arrived after its validity).

use serde::{Deserialize, Serialize};

use crate::judge::history::{AccessKind, History, KeyEnd, LeaseRecord};
use crate::scenario::{Cause, ResourceMode, Scenario, Verdict};
use crate::time::Nanos;

/// The counts behind a verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Of those, the leases whose token equals an earlier lease's (the others are below the
    /// highest earlier token).
    pub fence_repeats: usize,
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
    /// Mutual exclusion: `VIOLATED` when any two leases' windows overlap.
    pub exclusion: Verdict,
    /// Verdict per resource mode: plain, fenced, strict.
    pub verdicts: [Verdict; 3],
    /// Why, when any verdict (mutual exclusion included) is not `SAFE`: the first overlap's
    /// cause, or `B` without an overlap.
    pub cause: Option<Cause>,
    /// The counts.
    pub counts: Counts,
    /// Every overlap, in order of their start.
    pub overlaps: Vec<Overlap>,
    /// The first problem, for the timeline and the diagram.
    pub first_problem: Option<Problem>,
}

/// Two leases of different clients whose windows intersect.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Overlap {
    /// The lease granted first (by index).
    pub first: usize,
    /// The lease granted second (by index).
    pub second: usize,
    /// Start of the first intersection of their windows.
    pub from: Nanos,
    /// End of that intersection.
    pub until: Nanos,
    /// Why the windows could overlap: `A` or `C`.
    pub cause: Cause,
    /// Whether both holders had accesses applied inside the intersection.
    pub used: bool,
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
        /// Its cause.
        cause: Cause,
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
    let order = arrival_order(history);
    let replays: Vec<Replay> = ResourceMode::ALL
        .iter()
        .map(|&m| replay(history, &order, m))
        .collect();
    let overlaps = find_overlaps(scenario, history, &replays[0]);
    let counts = count(history, &order, &replays, &overlaps);
    let verdicts = resource_verdicts(&counts);
    let exclusion = if overlaps.is_empty() {
        Verdict::Safe
    } else {
        Verdict::Violated
    };
    let cause = run_cause(&overlaps, &verdicts);
    let first_problem = first_problem(cause, &overlaps, &replays[0]);
    Judgement {
        fates: fates(history, &replays),
        exclusion,
        verdicts,
        cause,
        counts,
        overlaps,
        first_problem,
    }
}

/// The accesses that reached the resource, in their arrival order (ties broken by sending
/// order): the order every mode replays them in.
fn arrival_order(history: &History) -> Vec<usize> {
    let mut order: Vec<usize> = (0..history.accesses.len())
        .filter(|&i| history.accesses[i].arrived_at.is_some())
        .collect();
    order.sort_by_key(|&i| (history.accesses[i].arrived_at, i));
    order
}

/// The counts behind the verdicts, from the replays (plain, fenced, strict) of the accesses
/// in `order` and the overlaps found.
fn count(history: &History, order: &[usize], replays: &[Replay], overlaps: &[Overlap]) -> Counts {
    let mut counts = Counts {
        leases: history.leases.len(),
        accesses: order.len(),
        overlaps: overlaps.len(),
        used_overlaps: overlaps.iter().filter(|o| o.used).count(),
        ..Counts::default()
    };
    for (i, r) in replays.iter().enumerate() {
        counts.stale_applied[i] = r.stale_applied.len();
        counts.stale_rejected[i] = r.stale_rejected;
        counts.rejected[i] = r.rejected;
    }
    let (regressions, repeats) = fence_regressions(&history.leases);
    counts.fence_regressions = regressions;
    counts.fence_repeats = repeats;
    counts
}

/// Every pair of leases of different clients whose windows intersect, in order of the
/// intersection's start, each with its cause and whether the plain resource (`plain`'s
/// replay) applied accesses of both holders inside it.
fn find_overlaps(scenario: &Scenario, history: &History, plain: &Replay) -> Vec<Overlap> {
    let leases = &history.leases;
    let applied_in = |lease: usize, intervals: &[(Nanos, Nanos)]| {
        history.accesses.iter().enumerate().any(|(i, a)| {
            a.lease == lease
                && plain.applied[i]
                && a.arrived_at
                    .is_some_and(|t| intervals.iter().any(|&(f, u)| f <= t && t < u))
        })
    };
    let mut overlaps = Vec::new();
    for a in 0..leases.len() {
        for b in a + 1..leases.len() {
            if leases[a].client == leases[b].client {
                continue;
            }
            let common = intersect(history.windows_of(a), history.windows_of(b));
            let Some(&(from, until)) = common.first() else {
                continue;
            };
            let (first, second) = if (leases[b].granted_at, b) < (leases[a].granted_at, a) {
                (b, a)
            } else {
                (a, b)
            };
            let used = applied_in(a, &common) && applied_in(b, &common);
            overlaps.push(Overlap {
                first,
                second,
                from,
                until,
                cause: overlap_cause(scenario, history, first, second, until),
                used,
            });
        }
    }
    overlaps.sort_by_key(|o| (o.from, o.first, o.second));
    overlaps
}

/// The leases whose fencing token was not above every earlier lease's, and of those the ones
/// that repeat an earlier token, in grant order (the epoch: leases with tokens from Redis
/// counters are recorded when their token is minted, which can be in another order).
fn fence_regressions(leases: &[LeaseRecord]) -> (usize, usize) {
    let mut by_grant: Vec<&LeaseRecord> = leases.iter().collect();
    by_grant.sort_by_key(|l| l.epoch);
    let (mut regressions, mut repeats) = (0, 0);
    let mut highest = None;
    for (i, lease) in by_grant.iter().enumerate() {
        if highest.is_some_and(|h| lease.fence <= h) {
            regressions += 1;
            if by_grant[..i].iter().any(|l| l.fence == lease.fence) {
                repeats += 1;
            }
        }
        highest = highest.max(Some(lease.fence));
    }
    (regressions, repeats)
}

/// The verdict of each resource mode (plain, fenced, strict): a fenced mode that applied
/// nothing stale gets the credit (`PREVENTED_BY_FENCING`) for what plain suffered or what it
/// rejected itself.
fn resource_verdicts(counts: &Counts) -> [Verdict; 3] {
    let plain_problem = counts.stale_applied[0] > 0 || counts.used_overlaps > 0;
    [0, 1, 2].map(|i| {
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
    })
}

/// The run's cause: the first overlap's, or `B` when without an overlap a verdict is still
/// not `SAFE` (a holder's access arrived after its validity).
fn run_cause(overlaps: &[Overlap], verdicts: &[Verdict; 3]) -> Option<Cause> {
    match overlaps.first() {
        Some(overlap) => Some(overlap.cause),
        None => verdicts
            .iter()
            .any(|v| *v != Verdict::Safe)
            .then_some(Cause::B),
    }
}

/// The problem the timeline and the diagram lead with: what the cause is about, the overlap
/// for A and C, the stale access (that the plain resource applied) for B.
fn first_problem(cause: Option<Cause>, overlaps: &[Overlap], plain: &Replay) -> Option<Problem> {
    let first_overlap = overlaps.first().map(|o| Problem::Overlap {
        first: o.first,
        second: o.second,
        from: o.from,
        until: o.until,
        cause: o.cause,
    });
    let first_stale = plain
        .first_stale
        .map(|(access, after)| Problem::StaleAccess { access, after });
    if matches!(cause, Some(Cause::A | Cause::C)) {
        first_overlap.or(first_stale)
    } else {
        first_stale.or(first_overlap)
    }
}

/// What each mode's replay did with each access.
fn fates(history: &History, replays: &[Replay]) -> Vec<[Fate; 3]> {
    (0..history.accesses.len())
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
        .collect()
}

/// The intersection of two sorted lists of disjoint intervals.
fn intersect(a: &[(Nanos, Nanos)], b: &[(Nanos, Nanos)]) -> Vec<(Nanos, Nanos)> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let from = a[i].0.max(b[j].0);
        let until = a[i].1.min(b[j].1);
        if from < until {
            out.push((from, until));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Why the windows of `first` and `second` (granted in that order) overlap, the first
/// intersection ending at `until`: `C` when an implementation fault could have produced it,
/// `A` otherwise.
fn overlap_cause(
    scenario: &Scenario,
    history: &History,
    first: usize,
    second: usize,
    until: Nanos,
) -> Cause {
    let lengthened = [first, second]
        .iter()
        .any(|&lease| belief_lengthened(scenario, history, lease, until));
    let later_grant = history.leases[second].granted_at;
    let deleted = [first, second]
        .iter()
        .any(|&lease| deleted_while_believed(scenario, history, lease, later_grant));
    if lengthened || deleted {
        Cause::C
    } else {
        Cause::A
    }
}

/// Whether a fault of `lease`'s holder that makes it believe longer than a correct client
/// was in effect before `until`: a timing fault (always), an extension that re-acquires (on a
/// lease it extended), a wall clock that stepped back, a clock that stood still during a
/// pause.
fn belief_lengthened(scenario: &Scenario, history: &History, lease: usize, until: Nanos) -> bool {
    use crate::scenario::{ClockKind, ExtendImpl, TimingImpl};
    let record = &history.leases[lease];
    let Some(spec) = scenario.clients.get(record.client) else {
        return false;
    };
    spec.timing != TimingImpl::Correct
        || (spec.extend == ExtendImpl::Reacquire && !record.extensions.is_empty())
        || (spec.clock_kind == ClockKind::Wall
            && spec
                .clock
                .steps()
                .iter()
                .any(|&(at, by)| by < 0 && at < until))
        || (spec.freeze_during_pauses
            && history
                .pauses
                .iter()
                .any(|&(client, from, _)| client == record.client && from < until))
}

/// Whether a lock key of `lease` went before its expiry, by `by`, while its holder still
/// believed it held the lease, and not in a crash or a failover of its server: deleted by
/// someone else (the owner deletes only when it releases, which ends its window).
fn deleted_while_believed(scenario: &Scenario, history: &History, lease: usize, by: Nanos) -> bool {
    let record = &history.leases[lease];
    let lost_in_crash = |server: usize, at: Nanos| {
        scenario.servers.get(server).is_some_and(|spec| {
            spec.crashes.iter().any(|c| c.at == at)
                || spec
                    .failover
                    .as_ref()
                    .is_some_and(|f| f.crash_master && f.at == at)
        })
    };
    history.keys.iter().any(|key| {
        key.token == record.token
            && key.ended == KeyEnd::Removed
            && key.until <= by
            && key.until < record.window_end
            && !lost_in_crash(key.server, key.until)
    })
}
