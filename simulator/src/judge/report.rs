//! The result of running a scenario: verdicts against expectations, counts, and output as
//! a table or JSON.

use serde::{Deserialize, Serialize};

use crate::judge::judgement::{Counts, Judgement};
use crate::scenario::{Cause, Expectation, ResourceMode, Scenario, Verdict};
use crate::time::Nanos;

/// One run of one scenario with one seed.
///
/// A report read back from JSON (from a shard's JSON Lines) has no expectation: its
/// [`Report::mismatch`] is not meaningful, and the line carries that text instead.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    #[serde(skip, default = "Expectation::unknown")]
    pub expected: Expectation,
    /// Whether the verdicts and cause match the expectation; `false` when the expectation
    /// was not checked, so that an unchecked run never counts as a match.
    pub matches: bool,
    /// Whether the expectation was not checked (the run changed the scenario's token source).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
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

/// Renders reports as an aligned text table with every column and the full scenario names
/// (`run --wide`): as wide as its longest name, about 250 columns for the catalogue.
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
                result_cell(r),
            ]
        })
        .collect();
    let widths = column_widths(&header, &rows);
    let mut out = aligned(&header.map(String::from), &widths);
    out.push('\n');
    for row in &rows {
        out.push_str(&aligned(row, &widths));
        out.push('\n');
    }
    out
}

/// The width of the default table (`run` without `--wide`): an ordinary terminal's, with
/// room to spare.
pub const COMPACT_WIDTH: usize = 100;

/// The narrowest the scenario column gets, however wide the other cells are (a 20-digit
/// seed): narrower, names would break into too many lines to read.
const MIN_NAME_WIDTH: usize = 20;

/// Explains the compact table's abbreviations; each line fits [`COMPACT_WIDTH`].
pub const COMPACT_LEGEND: &str = "\
excl: mutual exclusion; VIOL: VIOLATED; PREV: PREVENTED_BY_FENCING
tokens: incr = increasing, N rep = N leases repeated a token, N reg = N got a smaller one
cause: A = Redlock's claim failed (a node forgot a key, a clock misbehaved); B = the usage
  contract failed (a pause, a delayed message, long work); C = a client's implementation fault
--wide: every column (leases, overlaps, stale and rejected accesses) and one line per run
";

/// Renders reports as a table that fits [`COMPACT_WIDTH`] columns: the verdicts abbreviated
/// (see [`COMPACT_LEGEND`]), the counts left to `--wide` and `--json`, and each scenario's
/// name wrapped at word boundaries. A run's first line holds every cell; its name's further
/// lines start with two spaces and hold nothing else, so a reader scanning the verdict
/// columns sees one line per run.
pub fn compact_table(reports: &[Report]) -> String {
    let header = [
        "scenario", "excl", "plain", "fenced", "strict", "cause", "tokens", "seed", "result",
    ];
    let rows: Vec<[String; 9]> = reports
        .iter()
        .map(|r| {
            [
                r.scenario.clone(),
                short_verdict(r.exclusion).into(),
                short_verdict(r.verdicts[0]).into(),
                short_verdict(r.verdicts[1]).into(),
                short_verdict(r.verdicts[2]).into(),
                r.cause.map_or_else(|| "-".into(), |c| c.to_string()),
                short_tokens_cell(&r.counts),
                r.seed.to_string(),
                result_cell(r),
            ]
        })
        .collect();
    let widths = compact_widths(&header, &rows);
    let mut out = aligned(&header.map(String::from), &widths);
    out.push('\n');
    for row in &rows {
        push_compact_row(&mut out, row, &widths);
    }
    out
}

/// The widths of a compact table's columns: each as wide as its widest cell, but the first
/// (the scenario's name, which wraps) only as wide as the others leave of
/// [`COMPACT_WIDTH`] (two spaces between columns), down to a floor.
pub(crate) fn compact_widths<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
) -> [usize; N] {
    let mut widths = column_widths(header, rows);
    let others: usize = widths[1..].iter().map(|w| w + 2).sum();
    widths[0] = widths[0].min(COMPACT_WIDTH.saturating_sub(others).max(MIN_NAME_WIDTH));
    widths
}

/// Appends a compact table's row: its first line holds every cell, and the name's further
/// lines start with two spaces and hold nothing else.
pub(crate) fn push_compact_row(out: &mut String, row: &[String], widths: &[usize]) {
    let mut lines = wrap(&row[0], widths[0]).into_iter();
    let mut first = row.to_vec();
    first[0] = lines.next().unwrap_or_default();
    out.push_str(&aligned(&first, widths));
    out.push('\n');
    for more in lines {
        out.push_str("  ");
        out.push_str(&more);
        out.push('\n');
    }
}

/// Splits `text` into lines of at most `width` characters at spaces; continuation lines get
/// two characters less, for the indent that marks them. A word longer than a line is cut.
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for mut word in text.split_whitespace() {
        loop {
            let room = if lines.is_empty() {
                width
            } else {
                width.saturating_sub(2).max(1)
            };
            let used = line.chars().count();
            let length = word.chars().count();
            if used == 0 && length <= room {
                line.push_str(word);
                break;
            }
            if used > 0 && used + 1 + length <= room {
                line.push(' ');
                line.push_str(word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word longer than a whole line: cut it.
            let cut = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
            lines.push(word[..cut].to_owned());
            word = &word[cut..];
            if word.is_empty() {
                break;
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

pub(crate) fn column_widths<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
) -> [usize; N] {
    let mut widths = header.map(str::len);
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

/// One line of cells, each padded to its column's width, two spaces apart, without trailing
/// blanks.
pub(crate) fn aligned(cells: &[String], widths: &[usize]) -> String {
    cells
        .iter()
        .zip(widths)
        .map(|(c, &w)| format!("{c:<w$}"))
        .collect::<Vec<_>>()
        .join("  ")
        .trim_end()
        .to_owned()
}

/// The `result` cell: an unchecked run's verdicts were not compared with anything.
pub(crate) fn result_cell(report: &Report) -> String {
    if report.unchecked {
        "-".into()
    } else if report.matches {
        "ok".into()
    } else {
        "MISMATCH".into()
    }
}

/// A verdict in at most four characters (the compact table's legend spells them out).
pub(crate) fn short_verdict(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Safe => "SAFE",
        Verdict::Violated => "VIOL",
        Verdict::PreventedByFencing => "PREV",
    }
}

/// [`tokens_cell`] in the compact table's abbreviations.
pub(crate) fn short_tokens_cell(counts: &Counts) -> String {
    let repeated = counts.fence_repeats;
    let regressed = counts.fence_regressions - repeated;
    match (repeated, regressed) {
        (0, 0) => "incr".into(),
        (r, 0) => format!("{r} rep"),
        (0, g) => format!("{g} reg"),
        (r, g) => format!("{r} rep {g} reg"),
    }
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

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_breaks_at_spaces_and_indents_for_continuations() {
        assert_eq!(
            wrap("RL-05 node crash with appendfsync everysec", 20),
            ["RL-05 node crash", "with appendfsync", "everysec"]
        );
        assert_eq!(wrap("short", 20), ["short"]);
        assert_eq!(wrap("", 20), [""]);
    }

    #[test]
    fn wrap_cuts_a_word_longer_than_a_line() {
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "ef", "gh", "ij"]);
        for line in wrap("a-very-long-unbroken-scenario-name and more", 10) {
            assert!(line.chars().count() <= 10, "{line}");
        }
    }
}
