//! docs/guarantees.md says what the simulator says: every row of its table gives the stated
//! verdicts when run (mutual exclusion, the three resource columns and the cause), every
//! scenario of the catalogue has its row, and every sweep command in it runs (with fewer
//! seeds, into a temporary directory).
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

use redlock_sim::Scenario;
use redlock_sim::scenario::TokenSource;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn doc() -> String {
    std::fs::read_to_string(root().join("docs/guarantees.md")).unwrap()
}

#[test]
fn every_row_of_the_table_reproduces() {
    let doc = doc();
    let rows: Vec<Vec<String>> = doc
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("`redlock-sim run "))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    assert!(rows.len() >= 40, "the table lost rows: {}", rows.len());
    let mut wrong = Vec::new();
    for row in &rows {
        let [
            name,
            exclusion,
            unfenced,
            linearizable,
            quorum,
            cause,
            command,
        ] = &row[..]
        else {
            panic!("malformed row {row:?}")
        };
        let file = command
            .trim_matches('`')
            .trim_start_matches("redlock-sim run ");
        let scenario = Scenario::load(&root().join(file)).unwrap_or_else(|e| panic!("{e}"));
        let seed = scenario.seed;
        let lin = redlock_sim::run(
            &scenario.clone().with_tokens(TokenSource::Linearizable),
            seed,
            false,
        )
        .unwrap();
        let qm = redlock_sim::run(
            &scenario.with_tokens(TokenSource::QuorumMinted),
            seed,
            false,
        )
        .unwrap();
        let got = [
            lin.report.exclusion.to_string(),
            lin.report.verdicts[0].to_string(),
            lin.report.verdicts[2].to_string(),
            qm.report.verdicts[2].to_string(),
            lin.report
                .cause
                .map_or_else(|| "-".to_owned(), |c| c.to_string()),
        ];
        let stated = [
            exclusion.clone(),
            unfenced.clone(),
            linearizable.clone(),
            quorum.clone(),
            cause.clone(),
        ];
        if got != stated {
            wrong.push(format!(
                "{name}: the table says {stated:?}, the simulator {got:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let mut listed: Vec<String> = rows
        .iter()
        .map(|row| {
            let command = row.last().unwrap();
            command
                .trim_matches('`')
                .trim_start_matches("redlock-sim run ")
                .to_owned()
        })
        .collect();
    listed.sort();
    let mut catalogue: Vec<String> = std::fs::read_dir(root().join("simulator/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            format!(
                "simulator/scenarios/{}",
                p.file_name().unwrap().to_string_lossy()
            )
        })
        .collect();
    catalogue.sort();
    assert_eq!(listed, catalogue, "the table and the catalogue differ");
}

/// Splits a shell command line with double-quoted words.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !current.is_empty() {
                    words.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

#[test]
fn every_sweep_command_runs() {
    let doc = doc();
    let commands: Vec<&str> = doc
        .lines()
        .filter(|l| l.starts_with("redlock-sim sweep "))
        .collect();
    assert!(commands.len() >= 8, "sweeps missing from the document");
    let out = std::env::temp_dir().join(format!("redlock-sim-doc-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for command in commands {
        let mut args = words(command);
        args.remove(0); // redlock-sim
        // Write the chart elsewhere, with fewer seeds: CI-sized.
        for i in 0..args.len() {
            if args[i] == "--svg" || args[i] == "--csv" {
                let name = Path::new(&args[i + 1]).file_name().unwrap().to_owned();
                args[i + 1] = out.join(name).display().to_string();
            }
            if args[i] == "--seeds" {
                args[i + 1] = "2".into();
            }
        }
        let output = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
            .args(&args)
            .current_dir(root())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{command}\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let svg = args
            .iter()
            .position(|a| a == "--svg")
            .map(|i| PathBuf::from(&args[i + 1]))
            .unwrap();
        let chart = std::fs::read_to_string(svg).unwrap();
        assert!(chart.starts_with("<svg"), "{command}: no chart");
    }
    let _ = std::fs::remove_dir_all(out);
}
