//! The verdict in plain words, as `explain` prints it and the run's page shows it: which
//! clients overlapped and from when to when in true time, the faults behind it, which
//! access went stale and what fencing did with it.

use crate::Run;
use crate::judge::history::{AccessKind, History, Note};
use crate::judge::judgement::{Fate, Overlap};
use crate::scenario::{Cause, Scenario, Verdict};
use crate::time::{Nanos, fmt_duration, fmt_ms};

/// How many overlaps are spelled out; the rest are counted.
const OVERLAPS_SPELLED: usize = 3;
/// How many faults are named before an overlap or a stale access; the latest ones.
const FAULTS_NAMED: usize = 4;

/// The verdict as sentences, in order: the overlaps, their cause and the faults before the
/// first, the first stale access, and what each resource mode did.
pub fn verdict_words(scenario: &Scenario, run: &Run) -> Vec<String> {
    let judgement = &run.judgement;
    let history = &run.history;
    let mut words = Vec::new();
    let all_safe = judgement.exclusion == Verdict::Safe
        && judgement.verdicts.iter().all(|&v| v == Verdict::Safe);
    if all_safe {
        words.push(
            "Nothing went wrong: no two clients believed they held the lease at once, and the \
             resource saw every access in lease order."
                .to_owned(),
        );
        return words;
    }
    for overlap in judgement.overlaps.iter().take(OVERLAPS_SPELLED) {
        words.push(overlap_words(scenario, history, overlap));
    }
    if judgement.overlaps.len() > OVERLAPS_SPELLED {
        words.push(format!(
            "{} more overlaps follow ({} in all).",
            judgement.overlaps.len() - OVERLAPS_SPELLED,
            judgement.overlaps.len()
        ));
    }
    let stale = first_stale(history, judgement.fates.as_slice());
    if let Some(first) = judgement.overlaps.first() {
        words.push(cause_words(scenario, history, first.cause, first.from));
    } else if let (Some((access, _)), Some(Cause::B)) = (stale, judgement.cause) {
        words.push(contract_words(scenario, history, access));
    }
    match stale {
        Some((access, after)) => words.push(stale_words(scenario, run, access, after)),
        None if judgement.exclusion == Verdict::Violated => words.push(
            "No access went stale: the overlapping holders did not use the resource out of \
             lease order."
                .to_owned(),
        ),
        None => {}
    }
    words.push(counts_words(run));
    words
}

/// Cause B without an overlap: the access sent after its lease's validity, and the pauses
/// of its client before it.
fn contract_words(scenario: &Scenario, history: &History, access: usize) -> String {
    let name = |c: usize| scenario.clients[c].name.clone();
    let a = &history.accesses[access];
    let pauses: Vec<&Note> = faults_before(history, a.sent_at)
        .into_iter()
        .filter(|n| n.who == name(a.client))
        .collect();
    let mut text = format!(
        "Cause B, the usage contract failed: {} sent its {} of epoch {} after its lease's \
         validity had ended, though no two windows overlapped.",
        name(a.client),
        kind(a.kind),
        a.epoch
    );
    if !pauses.is_empty() {
        text.push_str(&format!(" Before it: {}.", list_notes(&pauses)));
    }
    text
}

/// The first stale access, the newer one it arrived after, and what fencing did with it.
fn stale_words(scenario: &Scenario, run: &Run, access: usize, after: usize) -> String {
    let name = |c: usize| scenario.clients[c].name.clone();
    let history = &run.history;
    let (a, b) = (&history.accesses[access], &history.accesses[after]);
    let fates = run.judgement.fates[access];
    format!(
        "{}'s {} #{access} of epoch {} (fence {}) reached the resource at {}ms, after \
                 {}'s {} #{after} of the newer epoch {} at {}ms: unfenced, the resource applied \
                 it stale; with fencing on writes it was {}; with strict fencing it was {}.",
        name(a.client),
        kind(a.kind),
        a.epoch,
        a.fence,
        fmt_ms(a.arrived_at.unwrap_or_default()),
        name(b.client),
        kind(b.kind),
        b.epoch,
        fmt_ms(b.arrived_at.unwrap_or_default()),
        fate_words(fates[1]),
        fate_words(fates[2]),
    )
}

/// The stale accesses each mode applied, the ones the token check rejected, and the modes'
/// verdicts.
fn counts_words(run: &Run) -> String {
    let judgement = &run.judgement;
    let counts = &judgement.counts;
    format!(
        "Stale accesses applied: {} unfenced, {} with fencing on writes, {} with strict \
         fencing; the token check rejected {} and {}. Fencing on writes: {}; strict fencing: {}.",
        counts.stale_applied[0],
        counts.stale_applied[1],
        counts.stale_applied[2],
        counts.rejected[1],
        counts.rejected[2],
        mode_words(judgement.verdicts[1]),
        mode_words(judgement.verdicts[2]),
    )
}

fn kind(kind: AccessKind) -> &'static str {
    match kind {
        AccessKind::Read => "read",
        AccessKind::Write => "write",
    }
}

fn fate_words(fate: Fate) -> &'static str {
    match fate {
        Fate::Lost => "never applied (lost)",
        Fate::Applied => "applied",
        Fate::Stale => "applied stale",
        Fate::Rejected => "rejected",
    }
}

fn mode_words(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Safe => "SAFE, nothing out of order reached the resource",
        Verdict::PreventedByFencing => {
            "PREVENTED_BY_FENCING, the token check kept the resource in lease order"
        }
        Verdict::Violated => "VIOLATED, the token check did not keep the resource in lease order",
    }
}

fn overlap_words(scenario: &Scenario, history: &History, overlap: &Overlap) -> String {
    let (a, b) = (
        &history.leases[overlap.first],
        &history.leases[overlap.second],
    );
    format!(
        "{} (epoch {}) and {} (epoch {}) both believed they held the lease from {}ms to {}ms \
         in true time ({}){}.",
        scenario.clients[a.client].name,
        a.epoch,
        scenario.clients[b.client].name,
        b.epoch,
        fmt_ms(overlap.from),
        fmt_ms(overlap.until),
        fmt_duration(overlap.until - overlap.from),
        if overlap.used {
            ", and both used the resource inside it"
        } else {
            "; neither used the resource inside it"
        }
    )
}

/// The faults (notes) up to `until`, the latest [`FAULTS_NAMED`].
fn faults_before(history: &History, until: Nanos) -> Vec<&Note> {
    let before: Vec<&Note> = history.notes.iter().filter(|n| n.at <= until).collect();
    let skip = before.len().saturating_sub(FAULTS_NAMED);
    before.into_iter().skip(skip).collect()
}

fn list_notes(notes: &[&Note]) -> String {
    notes
        .iter()
        .map(|n| format!("{} {} (at {}ms)", n.who, n.what, fmt_ms(n.at)))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The clocks that run at a wrong rate or step, which no note announces.
fn clock_faults(scenario: &Scenario) -> Vec<String> {
    let mut faults = Vec::new();
    let mut describe = |who: &str, clock: &crate::time::clock::ClockModel| {
        let ppm = clock.rate_ppm();
        if ppm != 0 {
            let direction = if ppm > 0 { "fast" } else { "slow" };
            faults.push(format!(
                "{who}'s clock runs {}% {direction}",
                ppm.unsigned_abs() as f64 / 10_000.0
            ));
        }
        if !clock.steps().is_empty() {
            faults.push(format!(
                "{who}'s clock steps {} time(s)",
                clock.steps().len()
            ));
        }
    };
    for client in &scenario.clients {
        describe(&client.name, &client.clock);
    }
    for server in &scenario.servers {
        describe(&server.name, &server.clock);
    }
    faults
}

fn cause_words(scenario: &Scenario, history: &History, cause: Cause, from: Nanos) -> String {
    let mut text = match cause {
        Cause::C => {
            let faulty: Vec<&str> = scenario
                .clients
                .iter()
                .filter(|c| c.is_faulty())
                .map(|c| c.name.as_str())
                .collect();
            format!(
                "Cause C, an implementation fault of a client made it possible (faulty: {}).",
                if faulty.is_empty() {
                    "none flagged".to_owned()
                } else {
                    faulty.join(", ")
                }
            )
        }
        _ => "Cause A, Redlock's own assumptions failed: a node forgot or expired a key early, \
              or a clock ran beyond the drift factor."
            .to_owned(),
    };
    let notes = faults_before(history, from);
    if !notes.is_empty() {
        text.push_str(&format!(" Faults before it: {}.", list_notes(&notes)));
    }
    let clocks = clock_faults(scenario);
    if !clocks.is_empty() {
        text.push_str(&format!(" Clocks: {}.", clocks.join("; ")));
    }
    if notes.is_empty() && clocks.is_empty() {
        text.push_str(" No fault was scripted before it.");
    }
    text
}

/// The first access the unfenced resource applied stale (in order of arrival), and the
/// access of the newest epoch that arrived before it.
fn first_stale(history: &History, fates: &[[Fate; 3]]) -> Option<(usize, usize)> {
    let access = (0..history.accesses.len())
        .filter(|&i| fates.get(i).is_some_and(|f| f[0] == Fate::Stale))
        .min_by_key(|&i| (history.accesses[i].arrived_at, i))?;
    let arrived = history.accesses[access].arrived_at?;
    let after = (0..history.accesses.len())
        .filter(|&j| {
            let b = &history.accesses[j];
            b.arrived_at.is_some_and(|t| t <= arrived)
                && b.epoch > history.accesses[access].epoch
                && fates.get(j).is_some_and(|f| f[0] != Fate::Lost)
        })
        .max_by_key(|&j| (history.accesses[j].epoch, history.accesses[j].arrived_at))?;
    Some((access, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(file: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file);
        let scenario = Scenario::load(&path).expect("the scenario loads");
        let run = crate::run(&scenario, scenario.seed, false).expect("the run ends");
        verdict_words(&scenario, &run)
    }

    /// Durations in the sentences have three significant digits: the 15 s pause of RL-02
    /// reads `15.0 s`, not `15000.000000ms`; RL-04's overlap of about 2 ms reads in ms.
    #[test]
    fn durations_in_words_have_three_significant_digits() {
        let rl02 = words("rl-02-pause-15s.toml").join(" ");
        assert!(rl02.contains("c1 pauses for 15.0 s (at "), "{rl02}");
        assert!(!rl02.contains("000000ms"), "{rl02}");
        let rl04 = words("rl-04-node-clock-jump-bare-majority.toml").join(" ");
        let duration = rl04
            .split("in true time (")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .unwrap_or_default();
        let (number, unit) = duration.split_once(' ').unwrap_or_default();
        let digits = number.chars().filter(char::is_ascii_digit).count();
        assert!(unit == "ms" && digits == 3, "{duration}: {rl04}");
    }
}
