//! Sharded runs and sweeps: four shards, each its own process, merged back into exactly
//! what one unsharded process prints and writes; bad input named; the failing-seed corpus.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{scenario_count, sim, text};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-sim-shard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The output with the one clause that measures wall-clock time cut off: the summary line
/// ends at its event count (` in 1.2s (… events/s)`, `; on 2 thread(s) in …` follow in a
/// live run and not in a merge). Every other byte must agree.
fn without_timing(output: &[u8]) -> String {
    String::from_utf8(output.to_vec())
        .unwrap()
        .lines()
        .map(|line| match line.find(" events") {
            Some(at) if line.contains(" events in ") || line.contains(" events; on ") => {
                &line[..at + " events".len()]
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn four_shard_processes_merge_into_the_unsharded_run_byte_for_byte() {
    let dir = temp_dir("run");
    for format in [&[][..], &["--wide"][..], &["--json"][..]] {
        let mut whole_args = vec!["run", "scenarios", "--seeds", "3"];
        whole_args.extend(format);
        let whole = sim(&whole_args);
        assert!(whole.status.success(), "{}", text(&whole));
        let pattern = dir.join("run-{shard}.jsonl");
        let mut sizes = Vec::new();
        for i in 1..=4 {
            let shard = format!("{i}/4");
            let out = sim(&[
                "run",
                "scenarios",
                "--seeds",
                "3",
                "--shard",
                &shard,
                "--jsonl",
                path(&pattern),
            ]);
            assert!(out.status.success(), "{}", text(&out));
            let file = dir.join(format!("run-{i}-of-4.jsonl"));
            sizes.push(std::fs::read_to_string(&file).unwrap().lines().count());
        }
        // Every shard does a share of the work, and together they do it once.
        assert!(sizes.iter().all(|&n| n > 20), "{sizes:?}");
        let scenarios = scenario_count();
        assert_eq!(sizes.iter().sum::<usize>(), 3 * scenarios, "{sizes:?}");
        let mut merge_args = vec!["merge".to_owned()];
        merge_args
            .extend((1..=4).map(|i| path(&dir.join(format!("run-{i}-of-4.jsonl"))).to_owned()));
        merge_args.extend(format.iter().map(|s| (*s).to_owned()));
        let merged = sim(&merge_args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(merged.status.success(), "{}", text(&merged));
        if format == ["--json"] {
            assert_eq!(
                merged.stdout, whole.stdout,
                "JSON has no timing: every byte agrees"
            );
        } else {
            assert_eq!(
                without_timing(&merged.stdout),
                without_timing(&whole.stdout)
            );
        }
    }
}

#[test]
fn four_shard_processes_of_a_sweep_merge_into_its_table_csv_and_chart() {
    let dir = temp_dir("sweep");
    let sweep = [
        "sweep",
        "scenarios/rl-02-pause-15s.toml",
        "--param",
        "client-pause",
        "--from",
        "0",
        "--to",
        "20000",
        "--steps",
        "6",
        "--seeds",
        "5",
    ];
    let (csv, svg) = (dir.join("whole.csv"), dir.join("whole.svg"));
    let mut args = sweep.to_vec();
    args.extend(["--csv", path(&csv), "--svg", path(&svg)]);
    let whole = sim(&args);
    assert!(whole.status.success(), "{}", text(&whole));
    let pattern = dir.join("sweep-{shard}.jsonl");
    for i in 1..=4 {
        let shard = format!("{i}/4");
        let mut args = sweep.to_vec();
        args.extend(["--shard", &shard, "--jsonl", path(&pattern)]);
        let out = sim(&args);
        assert!(out.status.success(), "{}", text(&out));
    }
    let (merged_csv, merged_svg) = (dir.join("merged.csv"), dir.join("merged.svg"));
    let files: Vec<String> = (1..=4)
        .map(|i| path(&dir.join(format!("sweep-{i}-of-4.jsonl"))).to_owned())
        .collect();
    let mut args = vec!["merge"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["--csv", path(&merged_csv), "--svg", path(&merged_svg)]);
    let merged = sim(&args);
    assert!(merged.status.success(), "{}", text(&merged));
    assert_eq!(
        without_timing(&merged.stdout),
        without_timing(&whole.stdout)
    );
    assert_eq!(
        std::fs::read(&merged_csv).unwrap(),
        std::fs::read(&csv).unwrap()
    );
    assert_eq!(
        std::fs::read(&merged_svg).unwrap(),
        std::fs::read(&svg).unwrap()
    );
}

#[test]
fn a_shard_is_stable_when_scenarios_are_added() {
    let dir = temp_dir("stable");
    let one = dir.join("one.jsonl");
    let all = dir.join("all.jsonl");
    let out = sim(&[
        "run",
        "scenarios/rl-00-baseline.toml",
        "--seeds",
        "40",
        "--shard",
        "2/3",
        "--jsonl",
        path(&one),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let out = sim(&[
        "run",
        "scenarios",
        "--seeds",
        "40",
        "--shard",
        "2/3",
        "--jsonl",
        path(&all),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let seeds = |file: &Path| -> Vec<u64> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["scenario"] == "RL-00 baseline: no faults")
            .map(|v| v["seed"].as_u64().unwrap())
            .collect()
    };
    let alone = seeds(&one);
    assert!(!alone.is_empty() && alone.len() < 40, "{alone:?}");
    assert_eq!(alone, seeds(&all));
}

/// Two halves of two different sweeps, one of them without background noise: each shard
/// is the other's complement, and they merged into one table without a word.
#[test]
fn shards_of_a_sweep_with_noise_and_one_without_do_not_merge() {
    let dir = temp_dir("noise");
    let sweep = [
        "sweep",
        "scenarios/rl-02-pause-15s.toml",
        "--param",
        "client-pause",
        "--values",
        "0,20000",
        "--seeds",
        "4",
    ];
    let halves = [("1/2", "noisy.jsonl", false), ("2/2", "quiet.jsonl", true)];
    for (shard, file, quiet) in halves {
        let jsonl = dir.join(file);
        let mut args = sweep.to_vec();
        args.extend(["--shard", shard, "--jsonl", path(&jsonl)]);
        if quiet {
            args.push("--no-noise");
        }
        let out = sim(&args);
        assert!(out.status.success(), "{}", text(&out));
    }
    let out = sim(&[
        "merge",
        path(&dir.join("noisy.jsonl")),
        path(&dir.join("quiet.jsonl")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("noise"), "{}", text(&out));
}

#[test]
fn bad_shards_and_bad_lines_are_named_without_a_panic() {
    for (shard, says) in [
        ("0/4", "counts from 1 to 4"),
        ("5/4", "counts from 1 to 4"),
        ("1/0", "at least 1"),
        ("x/4", "not a whole number"),
        ("3", "expected I/N"),
    ] {
        let out = sim(&["run", "scenarios/rl-00-baseline.toml", "--shard", shard]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains(says), "{shard}: {}", text(&out));
        assert!(!text(&out).contains("panicked"), "{}", text(&out));
    }
    let auto = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
        .args(["run", "scenarios/rl-00-baseline.toml", "--shard", "auto"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("JOB_COMPLETION_INDEX", "3")
        .env_remove("REDLOCK_SIM_SHARD")
        .env_remove("REDLOCK_SIM_SHARD_COUNT")
        .output()
        .unwrap();
    assert_eq!(auto.status.code(), Some(2), "{}", text(&auto));
    assert!(
        text(&auto).contains("REDLOCK_SIM_SHARD_COUNT"),
        "{}",
        text(&auto)
    );

    let dir = temp_dir("bad");
    let good = dir.join("good.jsonl");
    let out = sim(&[
        "run",
        "scenarios/rl-00-baseline.toml",
        "--seeds",
        "8",
        "--shard",
        "1/2",
        "--jsonl",
        path(&good),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let first = std::fs::read_to_string(&good).unwrap();
    let first = first.lines().next().unwrap();
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        format!("{first}\n\n{{\"kind\": \"run\", \"seed\": 1\n"),
    )
    .unwrap();
    let out = sim(&["merge", path(&bad)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("bad.jsonl:3: not a run"),
        "{}",
        text(&out)
    );

    let out = sim(&["merge", path(&good)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("runs are missing"), "{}", text(&out));
    assert!(text(&out).contains("shards 1/2"), "{}", text(&out));

    let out = sim(&["merge", path(&good), path(&good)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("good.jsonl:1 and"), "{}", text(&out));
    assert!(text(&out).contains("same run"), "{}", text(&out));
}

#[test]
fn failing_seeds_go_to_the_corpus_and_are_replayed_first() {
    let dir = temp_dir("corpus");
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/rl-02-pause-15s.toml"),
    )
    .unwrap();
    // The same world with a wrong expectation: every seed "fails".
    let wrong = dir.join("wrong.toml");
    std::fs::write(
        &wrong,
        original
            .replace("plain = \"VIOLATED\"", "plain = \"SAFE\"")
            .replace("fenced = \"PREVENTED_BY_FENCING\"", "fenced = \"SAFE\"")
            .replace("strict = \"PREVENTED_BY_FENCING\"", "strict = \"SAFE\"")
            .replace("cause = \"B\"\n", ""),
    )
    .unwrap();
    let corpus = dir.join("corpus.jsonl");
    let out = sim(&[
        "run",
        path(&wrong),
        "--seeds",
        "3",
        "--corpus",
        path(&corpus),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("replayed 0 of its 0"), "{}", text(&out));
    assert!(
        text(&out).contains("added 3 failing runs"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&corpus).unwrap().lines().count(), 3);

    // Another seed range: the corpus's three come first, and are not added twice.
    let out = sim(&[
        "run",
        path(&wrong),
        "--seed",
        "100",
        "--corpus",
        path(&corpus),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = text(&out);
    let replay = out.find("replayed 3 of its 3 failing runs first").unwrap();
    assert!(out.contains("3 still fail"), "{out}");
    assert!(replay < out.find("scenario ").unwrap(), "{out}");
    assert!(out.contains("added 1 failing run"), "{out}");
    assert_eq!(std::fs::read_to_string(&corpus).unwrap().lines().count(), 4);

    // The right expectation: the corpus's runs pass now, and the run exits 0.
    let fixed = dir.join("fixed.toml");
    std::fs::write(&fixed, &original).unwrap();
    let out = sim(&["run", path(&fixed), "--corpus", path(&corpus)]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("replayed 4 of its 4 failing runs first"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("0 still fail"), "{}", text(&out));

    std::fs::write(&corpus, "{\"scenario\": 1}\n").unwrap();
    let out = sim(&["run", path(&fixed), "--corpus", path(&corpus)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("corpus.jsonl:1: not a corpus entry"),
        "{}",
        text(&out)
    );
}
