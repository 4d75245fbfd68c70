//! Every scenario of the catalogue reproduces its expected verdicts, under several seeds.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};

use redlock_sim::Scenario;

const SEEDS: u64 = 5;

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the scenarios directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_scenario_matches_its_expectation_under_several_seeds() {
    let files = scenario_files();
    assert!(
        files.len() >= 40,
        "the catalogue shrank to {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for file in &files {
        let scenario = Scenario::load(file).unwrap_or_else(|e| panic!("{e}"));
        for seed in scenario.seed..scenario.seed + SEEDS {
            let run = redlock_sim::run(&scenario, seed, false)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if let Some(mismatch) = run.report.mismatch() {
                failures.push(format!("{} seed {seed}: {mismatch}", file.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "verdicts differ:\n{}",
        failures.join("\n")
    );
}

/// The catalogue covers each entry the design asks for, with both outcomes where a
/// mitigation exists (so a regression towards "always SAFE" or "always VIOLATED" shows).
#[test]
fn the_catalogue_covers_both_sides_of_each_mitigation() {
    let names: Vec<String> = scenario_files()
        .iter()
        .map(|f| f.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for prefix in [
        "rl-00", "rl-01", "rl-02-", "rl-02b", "rl-03", "rl-04-", "rl-04b", "rl-05", "rl-06",
        "rl-07", "rl-08-", "rl-08b", "rl-09", "rl-10", "rl-11", "rl-12", "rl-13a", "rl-13b",
        "rl-14", "rl-15a", "rl-15b", "rl-16", "rl-17", "rl-18", "rl-19", "ka-02", "ka-03", "nt-01",
        "nt-02", "nt-03",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(prefix)),
            "no scenario for {prefix}"
        );
    }
    let verdicts = |prefix: &str| -> Vec<String> {
        scenario_files()
            .iter()
            .filter(|f| f.file_stem().unwrap().to_string_lossy().starts_with(prefix))
            .map(|f| Scenario::load(f).unwrap().expect.plain.to_string())
            .collect()
    };
    for pair in [
        "rl-02-", "rl-02b", "rl-04-", "rl-05", "rl-06", "rl-07", "rl-08b", "rl-09", "rl-10",
        "rl-11", "rl-12", "rl-14",
    ] {
        let found = verdicts(pair);
        assert!(
            found.contains(&"SAFE".to_owned()) && found.contains(&"VIOLATED".to_owned()),
            "{pair}: {found:?}"
        );
    }
}

/// OV-01: the simulated client drives the core's probe rule. While n4 hangs, each client
/// sends it a PING probe instead of SETs, and once n4 answers again its SETs resume.
#[test]
fn a_node_that_stops_answering_is_probed_before_it_gets_a_set_again() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join("ov-01-node-stops-answering-under-load.toml");
    let scenario = Scenario::load(&file).unwrap();
    let run = redlock_sim::run(&scenario, scenario.seed, true).unwrap();
    let trace = run.trace.unwrap();
    assert!(
        run.report.mismatch().is_none(),
        "{:?}",
        run.report.mismatch()
    );
    // c1's requests to n4, with the time (ms) each was sent.
    let to_n4: Vec<(f64, &str)> = trace
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let at: f64 = words.next()?.parse().ok()?;
            (words.next()? == "c1" && words.next()? == "->" && words.next()? == "n4")
                .then_some((at, line))
        })
        .collect();
    let sets = |from: f64, to: f64| {
        to_n4
            .iter()
            .filter(|(at, line)| *at >= from && *at < to && line.contains("cmd: SetNx"))
            .count()
    };
    let probes = to_n4
        .iter()
        .filter(|(_, line)| line.contains("cmd: Ping"))
        .count();
    // Once the first requests of the hang went unanswered (the per-node timeout is 50 ms),
    // no SET until n4 answers a probe after 3 s.
    assert!(sets(0.0, 1_000.0) > 0);
    assert_eq!(sets(1_200.0, 3_000.0), 0);
    assert!(probes >= 1, "no probe");
    assert!(sets(3_000.0, 20_000.0) > 0, "n4 never got a SET again");
}

fn load(name: &str) -> Scenario {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    Scenario::load(&file).unwrap_or_else(|e| panic!("{e}"))
}

/// The round in which c2 (the second client) was granted.
fn granted_round(scenario: &Scenario, seed: u64) -> u32 {
    let run = redlock_sim::run(scenario, seed, false).unwrap();
    assert!(
        run.report.mismatch().is_none(),
        "{:?}",
        run.report.mismatch()
    );
    run.history.outcomes[1]
        .iter()
        .find_map(|outcome| match outcome {
            redlock_sim::judge::history::ClientOutcome::Acquired { round } => Some(*round),
            _ => None,
        })
        .expect("c2 was granted")
}

/// When c1's lease was released and c2's granted, true time.
fn hand_off(scenario: &Scenario, seed: u64) -> (u64, u64) {
    let run = redlock_sim::run(scenario, seed, false).unwrap();
    assert!(
        run.report.mismatch().is_none(),
        "{:?}",
        run.report.mismatch()
    );
    let leases = &run.history.leases;
    assert_eq!(leases.len(), 2, "both clients hold the resource once");
    (leases[0].released_at.unwrap(), leases[1].granted_at)
}

/// NT-01 and NT-01b: junk on the key's channel wakes nobody (as many rounds as the timer
/// alone gives), and replayed holder tokens at most double the rounds (one early round per
/// retry delay).
#[test]
fn spoofed_notifications_do_not_multiply_the_rounds() {
    let junk = load("nt-01-spoofed-notifications-flood.toml");
    let replay = load("nt-01b-replayed-holder-tokens.toml");
    let mut quiet = junk.clone();
    quiet.notifications.spoofs.clear();
    for seed in 1..=SEEDS {
        let timer = granted_round(&quiet, seed);
        let flooded = granted_round(&junk, seed);
        let replayed = granted_round(&replay, seed);
        assert!(
            flooded <= timer + 2,
            "seed {seed}: {flooded} rounds under a flood of junk, {timer} without"
        );
        assert!(
            replayed <= 2 * timer + 2,
            "seed {seed}: {replayed} rounds under replayed tokens, {timer} without"
        );
    }
}

/// NT-02 and NT-03: the holder's release notification starts the waiter's round early; a
/// lost one leaves it on its timer (granted about a second later), a late one starts it when
/// it arrives.
#[test]
fn lost_and_late_notifications_cost_time_only() {
    const MS: u64 = 1_000_000;
    let lost = load("nt-02-lost-notifications.toml");
    let late = load("nt-03-late-duplicated-notifications.toml");
    let mut heard = lost.clone();
    heard.notifications.loss = 0.0;
    for seed in 1..=SEEDS {
        let (released, granted) = hand_off(&heard, seed);
        assert!(
            granted - released < 50 * MS,
            "seed {seed}: granted {} ms after the release it was told of",
            (granted - released) / MS
        );
        let (released, granted) = hand_off(&lost, seed);
        assert!(
            granted - released > 500 * MS,
            "seed {seed}: granted {} ms after a release it never heard of",
            (granted - released) / MS
        );
        let (released, granted) = hand_off(&late, seed);
        let after = (granted - released) / MS;
        assert!(
            (300..400).contains(&after),
            "seed {seed}: granted {after} ms after a release heard 300 ms late"
        );
    }
}
