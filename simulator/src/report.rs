//! The result of running a scenario: verdicts against expectations, counts, and output as
//! a table or JSON.

use serde::Serialize;

use crate::checker::{Counts, Judgement};
use crate::scenario::{Cause, Expectation, ResourceMode, Scenario, Verdict};
use crate::time::Nanos;

/// One run of one scenario with one seed.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// Its file.
    pub source: String,
    /// The seed that reproduces the run.
    pub seed: u64,
    /// Mutual exclusion: `VIOLATED` when two holders' windows overlapped.
    pub exclusion: Verdict,
    /// Verdicts per resource mode: plain, fenced, strict.
    pub verdicts: [Verdict; 3],
    /// The cause, when any verdict (mutual exclusion included) is not `SAFE`.
    pub cause: Option<Cause>,
    /// The counts behind the verdicts.
    pub counts: Counts,
    /// Acquisition calls, and how many ended without a lease.
    pub acquire_calls: u64,
    /// Acquisition calls that failed.
    pub acquire_failures: u64,
    /// Events processed.
    pub events: u64,
    /// Simulated time covered, in nanoseconds.
    pub simulated_ns: Nanos,
    /// What the scenario expects.
    #[serde(skip)]
    pub expected: Expectation,
    /// Whether the verdicts and cause match the expectation; `false` when the expectation
    /// was not checked, so that an unchecked run never counts as a match.
    pub matches: bool,
    /// Whether the expectation was not checked (the run changed the scenario's token source).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
}

impl Report {
    pub(crate) fn new(
        scenario: &Scenario,
        seed: u64,
        judgement: Judgement,
        calls: (u64, u64),
        events: u64,
        simulated_ns: Nanos,
    ) -> Self {
        let expected = scenario.expect.clone();
        let matches = judgement.exclusion == expected.exclusion
            && ResourceMode::ALL
                .iter()
                .enumerate()
                .all(|(i, &mode)| judgement.verdicts[i] == expected.verdict(mode))
            && judgement.cause == expected.cause
            && expected
                .fences_increase
                .is_none_or(|increase| increase == (judgement.counts.fence_regressions == 0));
        Self {
            scenario: scenario.name.clone(),
            source: scenario.source.clone(),
            seed,
            exclusion: judgement.exclusion,
            verdicts: judgement.verdicts,
            cause: judgement.cause,
            counts: judgement.counts,
            acquire_calls: calls.0,
            acquire_failures: calls.1,
            events,
            simulated_ns,
            expected,
            matches,
            unchecked: false,
        }
    }

    /// Marks the expectation as not applying to this run (it was written for another token
    /// source): the run is then neither a match nor a mismatch.
    pub fn uncheck(&mut self) {
        self.unchecked = true;
        self.matches = false;
    }

    /// Whether the run was checked and differs from the expectation.
    pub fn mismatched(&self) -> bool {
        !self.unchecked && !self.matches
    }

    /// What differs from the expectation, in words; `None` when it matches or was not
    /// checked.
    pub fn mismatch(&self) -> Option<String> {
        if !self.mismatched() {
            return None;
        }
        let mut parts = Vec::new();
        if self.exclusion != self.expected.exclusion {
            parts.push(format!(
                "mutual exclusion: got {}, expected {}",
                self.exclusion, self.expected.exclusion
            ));
        }
        for (i, mode) in ResourceMode::ALL.iter().enumerate() {
            let expected = self.expected.verdict(*mode);
            if self.verdicts[i] != expected {
                parts.push(format!(
                    "{mode}: got {}, expected {expected}",
                    self.verdicts[i]
                ));
            }
        }
        if let Some(increase) = self.expected.fences_increase
            && increase != (self.counts.fence_regressions == 0)
        {
            let got = if self.counts.fence_regressions == 0 {
                "strictly increased"
            } else {
                "repeated or regressed"
            };
            let want = if increase {
                "strictly increase"
            } else {
                "repeat or regress"
            };
            parts.push(format!("fencing tokens {got}, expected them to {want}"));
        }
        if self.cause != self.expected.cause {
            let show = |c: Option<Cause>| c.map_or_else(|| "none".to_owned(), |c| c.to_string());
            parts.push(format!(
                "cause: got {}, expected {}",
                show(self.cause),
                show(self.expected.cause)
            ));
        }
        Some(parts.join("; "))
    }
}

/// Renders reports as an aligned text table.
pub fn table(reports: &[Report]) -> String {
    let header = [
        "scenario",
        "exclusion",
        "plain",
        "fenced",
        "strict",
        "cause",
        "leases",
        "overlaps",
        "stale p/f/s",
        "rejected f/s",
        "tokens",
        "seed",
        "result",
    ];
    let rows: Vec<[String; 13]> = reports
        .iter()
        .map(|r| {
            [
                r.scenario.clone(),
                r.exclusion.to_string(),
                r.verdicts[0].to_string(),
                r.verdicts[1].to_string(),
                r.verdicts[2].to_string(),
                r.cause.map_or_else(|| "-".into(), |c| c.to_string()),
                r.counts.leases.to_string(),
                r.counts.overlaps.to_string(),
                format!(
                    "{}/{}/{}",
                    r.counts.stale_applied[0], r.counts.stale_applied[1], r.counts.stale_applied[2]
                ),
                format!("{}/{}", r.counts.rejected[1], r.counts.rejected[2]),
                tokens_cell(&r.counts),
                r.seed.to_string(),
                // An unchecked run's verdicts were not compared with anything.
                if r.unchecked {
                    "-".into()
                } else if r.matches {
                    "ok".into()
                } else {
                    "MISMATCH".into()
                },
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let mut out = line(&header.map(String::from));
    out.push('\n');
    for row in &rows {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

/// The `tokens` cell: `increasing`, or how many leases repeated an earlier lease's token and
/// how many fell below one (in grant order).
pub fn tokens_cell(counts: &Counts) -> String {
    let repeated = counts.fence_repeats;
    let regressed = counts.fence_regressions - repeated;
    match (repeated, regressed) {
        (0, 0) => "increasing".into(),
        (r, 0) => format!("{r} repeated"),
        (0, g) => format!("{g} regressed"),
        (r, g) => format!("{r} repeated, {g} regressed"),
    }
}
