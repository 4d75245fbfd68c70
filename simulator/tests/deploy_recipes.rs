//! The recipes in the repository's deploy/ folder: the shell part of each engine's recipe,
//! run as four separate worker processes with that engine's environment variables, then
//! merged; the merge must print what one unsharded run prints. The same recipes run a swarm
//! of model-checker searches (`REDLOCK_SIM_CHECK`): four members, each its own index, merged.
//!
//! Not shipped with the package: it reads the repository around it.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::text;

/// Every variable `--shard auto` reads: the test sets one engine's at a time, whatever the
/// machine running it sets.
const ENGINE_VARS: [&str; 8] = [
    "REDLOCK_SIM_SHARD",
    "REDLOCK_SIM_SHARD_COUNT",
    "JOB_COMPLETION_INDEX",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_STEP",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A command in the repository's root with the test's binary, 2 seeds per scenario, and no
/// engine's variables.
fn command(program: &str, out: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(root())
        .env("REDLOCK_SIM", env!("CARGO_BIN_EXE_redlock-sim"))
        .env("REDLOCK_SIM_SEEDS", "2")
        .env("REDLOCK_SIM_OUT", out);
    // A swarm's variables too: a sharded run's test must not run a swarm.
    for var in ENGINE_VARS.into_iter().chain([
        "REDLOCK_SIM_CHECK",
        "REDLOCK_SIM_MAX_STATES",
        "REDLOCK_SIM_MAX_MEMORY",
    ]) {
        command.env_remove(var);
    }
    command
}

/// The summary line without its wall-clock clause (a merge has none).
fn without_timing(output: &[u8]) -> String {
    String::from_utf8(output.to_vec())
        .unwrap()
        .lines()
        .map(|line| match line.find(" events in ") {
            Some(at) => &line[..at + " events".len()],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs four workers at once, `program` with `env(i)` for i in 0..4, then deploy/merge.sh.
fn four_workers_then_merge(
    engine: &str,
    program: &str,
    env: &dyn Fn(u64) -> Vec<(String, String)>,
) {
    let out = std::env::temp_dir().join(format!(
        "redlock-sim-deploy-{}-{engine}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            command(program, &out)
                .envs(env(i))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for worker in workers {
        let output = worker.wait_with_output().unwrap();
        assert!(output.status.success(), "{engine}: {}", text(&output));
    }
    for i in 1..=4 {
        assert!(
            out.join(format!("shard-{i}-of-4.jsonl")).is_file(),
            "{engine}: shard {i} wrote no file"
        );
    }
    let merged = command("deploy/merge.sh", &out).output().unwrap();
    assert!(merged.status.success(), "{engine}: {}", text(&merged));
    let whole = command(env!("CARGO_BIN_EXE_redlock-sim"), &out)
        .args(["run", "simulator/scenarios", "--seeds", "2"])
        .output()
        .unwrap();
    assert!(whole.status.success(), "{}", text(&whole));
    assert_eq!(
        without_timing(&merged.stdout),
        without_timing(&whole.stdout),
        "{engine}"
    );
}

/// Runs four swarm members at once (`program` with `env(i)` and `REDLOCK_SIM_CHECK`), then
/// deploy/merge.sh: every member wrote its record under its own index, and the merge joins
/// the four.
fn four_members_then_merge(
    engine: &str,
    program: &str,
    env: &dyn Fn(u64) -> Vec<(String, String)>,
) {
    let out = std::env::temp_dir().join(format!(
        "redlock-sim-deploy-swarm-{}-{engine}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out);
    let swarm = [
        ("REDLOCK_SIM_CHECK", "simulator/checks/teeth-s2-drift.toml"),
        ("REDLOCK_SIM_MAX_STATES", "2000"),
    ];
    let workers: Vec<_> = (0..4)
        .map(|i| {
            command(program, &out)
                .envs(env(i))
                .envs(swarm)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for worker in workers {
        let output = worker.wait_with_output().unwrap();
        assert!(output.status.success(), "{engine}: {}", text(&output));
    }
    for i in 1..=4 {
        assert!(
            out.join(format!("swarm-{i}-of-4.jsonl")).is_file(),
            "{engine}: member {i} wrote no record"
        );
    }
    // The recipes' merge step passes --corpus, which a swarm's merge drops with a note.
    let merged = command("deploy/merge.sh", &out)
        .envs(swarm)
        .args(["--corpus", "failing-seeds.jsonl"])
        .output()
        .unwrap();
    let printed = text(&merged);
    assert!(merged.status.success(), "{engine}: {printed}");
    assert!(
        printed.contains("a swarm of 4 members"),
        "{engine}: {printed}"
    );
    assert!(printed.contains("not exhaustive"), "{engine}: {printed}");
    assert!(printed.contains("--corpus"), "{engine}: {printed}");
}

#[test]
fn a_github_matrix_of_four_runs_a_swarm() {
    four_members_then_merge("github", "deploy/shard.sh", &|i| {
        vars(&[("REDLOCK_SIM_SHARD", format!("{}/4", i + 1))])
    });
}

#[test]
fn a_kubernetes_indexed_job_of_four_runs_a_swarm() {
    four_members_then_merge("kubernetes", "deploy/shard.sh", &|i| {
        vars(&[
            ("JOB_COMPLETION_INDEX", i.to_string()),
            ("REDLOCK_SIM_SHARD_COUNT", "4".to_owned()),
        ])
    });
}

#[test]
fn a_slurm_array_of_four_runs_a_swarm() {
    four_members_then_merge("slurm", "deploy/slurm-array.sbatch", &|i| {
        vars(&[
            ("SLURM_ARRAY_TASK_ID", (3 + 2 * i).to_string()),
            ("SLURM_ARRAY_TASK_MIN", "3".to_owned()),
            ("SLURM_ARRAY_TASK_MAX", "9".to_owned()),
            ("SLURM_ARRAY_TASK_STEP", "2".to_owned()),
            ("SLURM_ARRAY_TASK_COUNT", "4".to_owned()),
        ])
    });
}

fn vars(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[test]
fn a_github_matrix_of_four_merges_into_the_unsharded_run() {
    four_workers_then_merge("github", "deploy/shard.sh", &|i| {
        vars(&[("REDLOCK_SIM_SHARD", format!("{}/4", i + 1))])
    });
}

#[test]
fn a_kubernetes_indexed_job_of_four_merges_into_the_unsharded_run() {
    four_workers_then_merge("kubernetes", "deploy/shard.sh", &|i| {
        vars(&[
            ("JOB_COMPLETION_INDEX", i.to_string()),
            ("REDLOCK_SIM_SHARD_COUNT", "4".to_owned()),
        ])
    });
}

#[test]
fn a_slurm_array_of_four_merges_into_the_unsharded_run() {
    // As `sbatch --array=3-9:2` numbers its tasks: 3, 5, 7, 9. The batch script itself runs.
    four_workers_then_merge("slurm", "deploy/slurm-array.sbatch", &|i| {
        vars(&[
            ("SLURM_ARRAY_TASK_ID", (3 + 2 * i).to_string()),
            ("SLURM_ARRAY_TASK_MIN", "3".to_owned()),
            ("SLURM_ARRAY_TASK_MAX", "9".to_owned()),
            ("SLURM_ARRAY_TASK_STEP", "2".to_owned()),
            ("SLURM_ARRAY_TASK_COUNT", "4".to_owned()),
        ])
    });
}

/// The number after `key` on the line that holds it (`completions: 16`, `value: "16"`).
fn number_after(text: &str, key: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("no `{key}`"));
    let rest = &line[line.find(key).unwrap() + key.len()..];
    let digits: String = rest
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
fn each_recipe_runs_the_tested_script_with_a_consistent_count() {
    let read = |name: &str| std::fs::read_to_string(root().join("deploy").join(name)).unwrap();

    let github = read("github-actions.yml");
    assert!(github.contains("deploy/shard.sh") && github.contains("deploy/merge.sh"));
    let matrix = github
        .lines()
        .find(|l| l.trim_start().starts_with("shard: ["))
        .unwrap();
    let shards = matrix.matches(',').count() as u64 + 1;
    assert_eq!(
        number_after(&github, "REDLOCK_SIM_SHARD: ${{ matrix.shard }}/"),
        shards,
        "the count after the slash must equal the matrix's length"
    );
    assert!(shards <= 256, "GitHub runs at most 256 jobs a workflow run");

    let kubernetes = read("kubernetes-indexed-job.yaml");
    assert!(kubernetes.contains("completionMode: Indexed"));
    assert!(kubernetes.contains("command: [\"deploy/shard.sh\"]"));
    assert!(kubernetes.contains("deploy/merge.sh"));
    let count_line = kubernetes
        .split("name: REDLOCK_SIM_SHARD_COUNT")
        .nth(1)
        .unwrap();
    assert_eq!(
        number_after(count_line, "value:"),
        number_after(&kubernetes, "completions:"),
        "REDLOCK_SIM_SHARD_COUNT must equal completions"
    );

    let slurm = read("slurm-array.sbatch");
    assert!(slurm.contains("#SBATCH --array="));
    assert!(slurm.contains("exec deploy/shard.sh"));
    assert!(slurm.contains("deploy/merge.sh"));
}
