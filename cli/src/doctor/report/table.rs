//! The report for people: the settings, a table with one row per node, then the findings that
//! need attention, worst first, and a one-line verdict.

use std::fmt::Write as _;

use super::{NodeSummary, Report, SettingsSummary, Verdict};
use crate::doctor::finding::{Finding, Level};
use crate::duration::show;
use crate::numbers::{ms, pct, signed_pct, signed_us};
use crate::wrap::fill;

/// The report as a table followed by the findings, worst first; its prose (the settings
/// line, the findings) wrapped to `width` columns. The table's rows are not wrapped: a
/// row cut in two is harder to read than one that runs past the edge.
pub(crate) fn render(report: &Report, width: usize) -> String {
    let mut out = String::new();
    settings(&mut out, &report.settings, width);
    out.push('\n');
    nodes(&mut out, report);
    findings(&mut out, report, width);
    out.push('\n');
    verdict(&mut out, report, width);
    out
}

/// The settings the nodes were judged against, on one line.
fn settings(out: &mut String, s: &SettingsSummary, width: usize) {
    let quarantine = s
        .restart_quarantine_ms
        .map_or("off".to_owned(), |ms| show(millis(ms)));
    let line = format!(
        "{} nodes, quorum {}, ttl {}, per-node timeout {}, drift factor {}, restart quarantine {}, clock window {}",
        s.nodes,
        s.quorum,
        show(millis(s.ttl_ms)),
        show(millis(s.node_timeout_ms)),
        pct(s.drift_factor),
        quarantine,
        show(millis(s.clock_window_ms)),
    );
    let _ = writeln!(out, "{}", fill(&line, width, "  "));
}

/// One row per node, under a header, in columns as wide as their widest cell.
fn nodes(out: &mut String, report: &Report) {
    let header = [
        "NODE",
        "RTT p50/p99",
        "ROLE",
        "VERSION",
        "PERSISTENCE",
        "UPTIME",
        "EVICTION",
        "CLOCK OFFSET",
        "CLOCK RATE",
        "ACL",
    ];
    let measured = report.settings.clock_window_ms > 0;
    let rows: Vec<[String; 10]> = report.nodes.iter().map(|n| row(n, measured)).collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut text = String::new();
        for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if index + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let _ = write!(text, "{cell:width$}  ");
            }
        }
        text.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(&header.map(str::to_owned)));
    for row in &rows {
        let _ = writeln!(out, "{}", line(row));
    }
}

/// The findings above `ok`, worst first (a stable sort: within a level, in the report's
/// order), after a blank line when there are any. Findings that say the same thing about
/// several nodes are printed once, naming every node they apply to: a fleet of five nodes
/// without persistence gets one note, not five copies of it.
fn findings(out: &mut String, report: &Report, width: usize) {
    let mut groups = grouped(&report.findings);
    groups.sort_by_key(|group| std::cmp::Reverse(group.finding.level));
    if !groups.is_empty() {
        out.push('\n');
    }
    for Group { nodes, finding } in groups {
        let place = if nodes.is_empty() {
            "fleet".to_owned()
        } else {
            nodes.join(", ")
        };
        let head = format!(
            "{:7}  {place}: {}",
            finding.level.label().to_uppercase(),
            finding.summary
        );
        let _ = writeln!(out, "{}", fill(&head, width, FINDING_INDENT));
        let mut field = |label: &str, text: &str| {
            let line = format!("{FINDING_INDENT}{label:10} {text}");
            let _ = writeln!(out, "{}", fill(&line, width, FIELD_INDENT));
        };
        field("condition:", finding.condition.short());
        if let Some(scenario) = &finding.scenario {
            field("scenario:", &scenario.to_string());
        }
        if let Some(remedy) = &finding.remedy {
            field(
                if finding.level == Level::Note {
                    "note:"
                } else {
                    "fix:"
                },
                remedy,
            );
        }
    }
}

/// Where a finding's lines start, under its level.
const FINDING_INDENT: &str = "         ";
/// Where a finding's wrapped field lines continue: under the field's text.
const FIELD_INDENT: &str = "                    ";

/// One printed finding and the nodes it applies to (none: the fleet).
struct Group<'a> {
    nodes: Vec<&'a str>,
    finding: &'a Finding,
}

/// The findings above `ok`, identical ones merged: the same level, check, summary,
/// condition, scenario and remedy, about nodes (each named once, in the report's order) or
/// about the fleet. A group stands where its first finding stood.
fn grouped(findings: &[Finding]) -> Vec<Group<'_>> {
    let same = |a: &Finding, b: &Finding| {
        a.node.is_some() == b.node.is_some()
            && Finding {
                node: None,
                ..a.clone()
            } == Finding {
                node: None,
                ..b.clone()
            }
    };
    let mut groups: Vec<Group<'_>> = Vec::new();
    for finding in findings.iter().filter(|f| f.level > Level::Ok) {
        let node = finding.node.as_deref();
        match groups.iter_mut().find(|g| same(g.finding, finding)) {
            Some(group) => {
                if let Some(node) = node.filter(|n| !group.nodes.contains(n)) {
                    group.nodes.push(node);
                }
            }
            None => groups.push(Group {
                nodes: node.into_iter().collect(),
                finding,
            }),
        }
    }
    groups
}

/// The counts by level and the verdict, with the exit code.
fn verdict(out: &mut String, report: &Report, width: usize) {
    let passed = report.count(Level::Ok);
    let (errors, warnings, notes) = (
        report.count(Level::Error),
        report.count(Level::Warning),
        report.count(Level::Note),
    );
    let verdict = match report.verdict {
        Verdict::Healthy => "every condition holds",
        Verdict::Failing => "a condition does not hold",
        Verdict::Unchecked => "the fleet cannot be checked",
    };
    let line = format!(
        "{passed} checks passed, {errors} error(s), {warnings} warning(s), {notes} note(s): {verdict} (exit {})",
        report.exit_code
    );
    let _ = writeln!(out, "{}", fill(&line, width, "  "));
}

fn millis(ms: u128) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// What the row of a node that answered nothing says: that it refused the credentials, that
/// it does not speak Redis, or that it could not be reached at all (refused, timed out).
fn unanswered(error: Option<&str>) -> &'static str {
    let error = error.unwrap_or_default();
    let has = |words: &[&str]| words.iter().any(|word| error.contains(word));
    if has(&[
        "NOAUTH",
        "WRONGPASS",
        "AuthenticationFailed",
        "NOPERM",
        "invalid password",
    ]) {
        "auth refused"
    } else if has(&[
        "Parse error",
        "Incompatible type",
        "protocol error",
        "Unexpected `",
    ]) {
        "not Redis"
    } else {
        "unreachable"
    }
}

/// One node's cells; `measured` tells whether clock rates were measured at all.
fn row(node: &NodeSummary, measured: bool) -> [String; 10] {
    let dash = || "-".to_owned();
    if !node.reachable {
        let mut cells: [String; 10] = Default::default();
        cells[0] = node.address.clone();
        cells[1] = unanswered(node.error.as_deref()).to_owned();
        for cell in &mut cells[2..] {
            *cell = dash();
        }
        return cells;
    }
    let rtt = node
        .round_trips
        .map_or_else(dash, |r| format!("{}/{}", ms(r.p50_ms), ms(r.p99_ms)));
    let persistence = match (node.aof_enabled, node.appendfsync.as_deref()) {
        (Some(false), _) => "none".to_owned(),
        (Some(true), Some(policy)) => format!("aof {policy}"),
        (Some(true), None) => "aof".to_owned(),
        (None, _) => dash(),
    };
    let uptime = node.uptime_s.map_or_else(dash, |s| {
        show(std::time::Duration::from_secs(s))
            .split(' ')
            .take(2)
            .collect::<Vec<_>>()
            .join(" ")
    });
    let (offset, rate) = match &node.clock {
        Some(clock) => (
            clock.offset.map_or_else(dash, |o| {
                format!(
                    "{} ±{}",
                    signed_us(o.offset_us),
                    signed_us(o.bound_us).trim_start_matches('+')
                )
            }),
            match clock.rate {
                _ if clock.steps.iter().any(|s| s.size_ms > 0.0) => "stepped".to_owned(),
                Some(r) => format!("{} ±{}", signed_pct(r.rate), pct(r.bound)),
                None if measured => "unknown".to_owned(),
                None => "not measured".to_owned(),
            },
        ),
        None if node.clock_error.is_some() => ("unknown".to_owned(), "unknown".to_owned()),
        None => (dash(), dash()),
    };
    let acl = match (&node.grants, &node.refused) {
        (Some(grants), _) if !grants.is_empty() => format!("needs {}", grants.join(" ")),
        (Some(_), _)
            if node
                .probe
                .as_ref()
                .is_some_and(|p| p.inconclusive().is_some()) =>
        {
            "unchecked".to_owned()
        }
        (Some(_), _) => "ok".to_owned(),
        (None, _) => dash(),
    };
    [
        node.address.clone(),
        rtt,
        node.role.clone().unwrap_or_else(dash),
        node.version.clone().unwrap_or_else(dash),
        persistence,
        uptime,
        node.maxmemory_policy.clone().unwrap_or_else(dash),
        offset,
        rate,
        acl,
    ]
}

#[cfg(test)]
mod tests {
    use super::{Group, grouped};
    use crate::doctor::catalogue::{self, Condition};
    use crate::doctor::finding::{Check, Finding, Level};

    fn note(node: Option<&str>, summary: &str) -> Finding {
        let finding = Finding::new(Level::Note, Check::Persistence, Condition::Memory, summary)
            .shown_by(catalogue::RL05_NO_PERSISTENCE)
            .remedy("appendfsync always");
        match node {
            Some(node) => finding.at(node),
            None => finding,
        }
    }

    fn shown<'a>(groups: &'a [Group<'a>]) -> Vec<(Vec<&'a str>, &'a str)> {
        groups
            .iter()
            .map(|g| (g.nodes.clone(), g.finding.summary.as_str()))
            .collect()
    }

    #[test]
    fn a_node_that_answered_nothing_says_why() {
        let cases = [
            (Some("\"NOAUTH\": Authentication required."), "auth refused"),
            (
                Some("Password authentication failed - AuthenticationFailed"),
                "auth refused",
            ),
            (
                Some("Incompatible type - Parse error at 1 Unexpected `84`"),
                "not Redis",
            ),
            (Some("Connection refused (os error 111)"), "unreachable"),
            (None, "unreachable"),
        ];
        for (error, cell) in cases {
            assert_eq!(super::unanswered(error), cell, "{error:?}");
        }
    }

    #[test]
    fn identical_findings_about_several_nodes_are_one() {
        let findings = [
            note(Some("a:1"), "no append-only file"),
            note(Some("b:1"), "up 1s"),
            note(Some("b:1"), "no append-only file"),
            note(Some("c:1"), "no append-only file"),
            Finding::new(Level::Ok, Check::Persistence, Condition::Memory, "fine").at("d:1"),
        ];
        assert_eq!(
            shown(&grouped(&findings)),
            [
                (vec!["a:1", "b:1", "c:1"], "no append-only file"),
                (vec!["b:1"], "up 1s"),
            ]
        );
    }

    #[test]
    fn findings_that_differ_in_anything_but_the_node_stay_apart() {
        let mut warning = note(Some("b:1"), "no append-only file");
        warning.level = Level::Warning;
        let mut other_remedy = note(Some("c:1"), "no append-only file");
        other_remedy.remedy = Some("something else".into());
        let findings = [
            note(Some("a:1"), "no append-only file"),
            warning,
            other_remedy,
            // The fleet's finding is not a node's, even with the same words.
            note(None, "no append-only file"),
            note(None, "no append-only file"),
        ];
        assert_eq!(
            shown(&grouped(&findings)),
            [
                (vec!["a:1"], "no append-only file"),
                (vec!["b:1"], "no append-only file"),
                (vec!["c:1"], "no append-only file"),
                (vec![], "no append-only file"),
            ]
        );
    }
}
