//! `run --seeds N`'s table: one row per scenario, however many seeds ran, with how many of
//! them matched and the seeds whose verdicts differ from the scenario's usual one. Two
//! hundred seeds of 65 scenarios printed one row each made 13,000 rows (with the wrapped
//! names repeated per seed), in which the few runs that matter were lost.

use crate::Report;
use crate::judge::report::{
    COMPACT_WIDTH, aligned, compact_widths, push_compact_row, result_cell, short_tokens_cell,
    short_verdict, wrap,
};
use crate::scenario::{Cause, Verdict};

/// How many differing seeds a row names before it says how many more there are.
const SEEDS_NAMED: usize = 8;

/// What a run concluded: mutual exclusion, the three resource modes, the cause.
type Outcome = (Verdict, [Verdict; 3], Option<Cause>);

fn outcome(report: &Report) -> Outcome {
    (report.exclusion, report.verdicts, report.cause)
}

/// What a group without runs (there is none) would show.
fn outcome_of_nothing() -> Outcome {
    (Verdict::Safe, [Verdict::Safe; 3], None)
}

/// The runs of one scenario, in run order.
struct Group<'a> {
    runs: Vec<&'a Report>,
}

impl Group<'_> {
    /// The outcome most of its seeds reached (the earliest, among equally common ones).
    fn usual(&self) -> Outcome {
        let mut tally: Vec<(Outcome, usize)> = Vec::new();
        for run in &self.runs {
            let o = outcome(run);
            match tally.iter_mut().find(|(seen, _)| *seen == o) {
                Some((_, count)) => *count += 1,
                None => tally.push((o, 1)),
            }
        }
        let mut best = tally.first().copied().unwrap_or((outcome_of_nothing(), 0));
        for &(o, count) in &tally {
            if count > best.1 {
                best = (o, count);
            }
        }
        best.0
    }

    /// A column's cell: the value when every seed agrees, else `mixed`.
    fn cell(&self, value: impl Fn(&Report) -> String) -> String {
        let first = self.runs.first().map(|r| value(r)).unwrap_or_default();
        if self.runs.iter().all(|r| value(r) == first) {
            first
        } else {
            "mixed".into()
        }
    }

    /// `1-200`, or `7 seeds` when they are not consecutive.
    fn seeds(&self) -> String {
        let seeds: Vec<u64> = self.runs.iter().map(|r| r.seed).collect();
        match (seeds.first(), seeds.last()) {
            (Some(first), Some(last)) if seeds.len() == 1 => {
                debug_assert_eq!(first, last);
                first.to_string()
            }
            (Some(&first), Some(&last))
                if seeds.windows(2).all(|w| w[1] == w[0].wrapping_add(1)) =>
            {
                format!("{first}-{last}")
            }
            _ => format!("{} seeds", seeds.len()),
        }
    }

    /// `200/200 matched`; `-` when no run was checked against its expectation.
    fn result(&self) -> String {
        if self.runs.iter().all(|r| r.unchecked) {
            return "-".into();
        }
        let matched = self.runs.iter().filter(|r| r.matches).count();
        let word = if matched == self.runs.len() {
            "matched"
        } else {
            "MATCHED"
        };
        format!("{matched}/{} {word}", self.runs.len())
    }

    /// The seeds whose outcome is not the usual one, or that did not match, each with what
    /// it reached; empty when every seed agrees and matched.
    fn differing(&self) -> Vec<String> {
        let usual = self.usual();
        self.runs
            .iter()
            .filter(|r| outcome(r) != usual || (!r.matches && !r.unchecked))
            .map(|r| {
                let verdicts = [r.exclusion, r.verdicts[0], r.verdicts[1], r.verdicts[2]]
                    .map(short_verdict)
                    .join(" ");
                let cause = r.cause.map_or_else(|| "-".into(), |c| c.to_string());
                format!("{} ({verdicts} {cause}, {})", r.seed, result_cell(r))
            })
            .collect()
    }
}

/// The runs grouped by scenario, in the order each scenario first ran.
fn groups(reports: &[Report]) -> Vec<Group<'_>> {
    let mut groups: Vec<(&str, Group<'_>)> = Vec::new();
    for report in reports {
        match groups.iter_mut().find(|(name, _)| *name == report.scenario) {
            Some((_, group)) => group.runs.push(report),
            None => groups.push((&report.scenario, Group { runs: vec![report] })),
        }
    }
    groups.into_iter().map(|(_, group)| group).collect()
}

/// Whether `reports` hold more than one run of some scenario, so that a table of one row per
/// scenario says less than one per run.
pub fn has_several_seeds(reports: &[Report]) -> bool {
    groups(reports).iter().any(|group| group.runs.len() > 1)
}

/// One row per scenario within [`COMPACT_WIDTH`] columns: each verdict, the cause and the
/// tokens when every seed agrees (`mixed` when they do not), the seeds run, and how many
/// matched; under a row whose seeds disagree or did not all match, the seeds that differ
/// from the usual outcome, with their verdicts (excl plain fenced strict cause).
pub fn summary_table(reports: &[Report]) -> String {
    let header = [
        "scenario", "excl", "plain", "fenced", "strict", "cause", "tokens", "seeds", "result",
    ];
    let groups = groups(reports);
    let rows: Vec<[String; 9]> = groups
        .iter()
        .map(|g| {
            [
                g.runs
                    .first()
                    .map(|r| r.scenario.clone())
                    .unwrap_or_default(),
                g.cell(|r| short_verdict(r.exclusion).into()),
                g.cell(|r| short_verdict(r.verdicts[0]).into()),
                g.cell(|r| short_verdict(r.verdicts[1]).into()),
                g.cell(|r| short_verdict(r.verdicts[2]).into()),
                g.cell(|r| r.cause.map_or_else(|| "-".into(), |c| c.to_string())),
                g.cell(|r| short_tokens_cell(&r.counts)),
                g.seeds(),
                g.result(),
            ]
        })
        .collect();
    let widths = compact_widths(&header, &rows);
    let mut out = aligned(&header.map(String::from), &widths);
    out.push('\n');
    for (row, group) in rows.iter().zip(&groups) {
        push_compact_row(&mut out, row, &widths);
        let differing = group.differing();
        if !differing.is_empty() {
            let mut named = differing
                .iter()
                .take(SEEDS_NAMED)
                .cloned()
                .collect::<Vec<_>>();
            if differing.len() > SEEDS_NAMED {
                named.push(format!("and {} more", differing.len() - SEEDS_NAMED));
            }
            let text = format!("seeds that differ: {}", named.join(", "));
            for line in wrap(&text, COMPACT_WIDTH - 2) {
                out.push_str("  ");
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

    use super::*;
    use crate::Scenario;

    fn runs(file: &str, seeds: std::ops::Range<u64>) -> Vec<Report> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file);
        let scenario = Scenario::load(&path).unwrap();
        seeds
            .map(|seed| crate::run(&scenario, seed, false).unwrap().report)
            .collect()
    }

    #[test]
    fn two_hundred_seeds_make_one_row_with_the_count_matched() {
        let reports = runs("rl-00-baseline.toml", 1..201);
        let table = summary_table(&reports);
        let rows: Vec<&str> = table.lines().collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(
            rows[1].contains("1-200") && rows[1].ends_with("200/200 matched"),
            "{table}"
        );
        assert!(has_several_seeds(&reports));
        assert!(!has_several_seeds(&reports[..1]));
    }

    #[test]
    fn the_seeds_that_differ_are_named_under_their_scenario() {
        let mut reports = runs("rl-00-baseline.toml", 1..11);
        reports.extend(runs("rl-02-pause-5s.toml", 1..4));
        // Seed 4 of the baseline as if it had found an overlap it did not expect.
        reports[3].exclusion = Verdict::Violated;
        reports[3].verdicts[0] = Verdict::Violated;
        reports[3].cause = Some(Cause::A);
        reports[3].matches = false;
        let table = summary_table(&reports);
        let lines: Vec<&str> = table.lines().collect();
        assert!(
            lines[1].contains("mixed") && lines[1].ends_with("9/10 MATCHED"),
            "{table}"
        );
        assert_eq!(
            lines[2], "  seeds that differ: 4 (VIOL VIOL SAFE SAFE A, MISMATCH)",
            "{table}"
        );
        assert!(
            lines[3].starts_with("RL-02") && lines[3].ends_with("3/3 matched"),
            "{table}"
        );
        assert!(
            table
                .lines()
                .all(|line| line.chars().count() <= COMPACT_WIDTH),
            "{table}"
        );
    }

    #[test]
    fn many_differing_seeds_are_counted_past_the_first_few() {
        let mut reports = runs("rl-00-baseline.toml", 1..31);
        for report in &mut reports[..20] {
            report.exclusion = Verdict::Violated;
        }
        let table = summary_table(&reports);
        // The usual outcome is the violation (20 of 30): the ten safe seeds differ.
        assert!(table.contains("seeds that differ: 21 (SAFE"), "{table}");
        assert!(table.contains("and 2 more"), "{table}");
    }
}
