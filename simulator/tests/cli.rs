//! The `redlock-sim` binary: exit codes, table, JSON, explain and its diagram.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{scenario_count, sim, text};

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlock-sim-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn the_catalogue_matches_and_exits_zero() {
    let output = sim(&["run", "scenarios", "--seeds", "2"]);
    assert!(output.status.success(), "{}", text(&output));
    let out = text(&output);
    assert!(out.contains("RL-02 pause after acquire, 15 s"), "{out}");
    assert!(out.contains("0 mismatched"), "{out}");
}

#[test]
fn a_wrong_expectation_exits_one_and_says_how_to_replay() {
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/rl-02-pause-15s.toml"),
    )
    .unwrap();
    let wrong = original
        .replace("plain = \"VIOLATED\"", "plain = \"SAFE\"")
        .replace("fenced = \"PREVENTED_BY_FENCING\"", "fenced = \"SAFE\"")
        .replace("strict = \"PREVENTED_BY_FENCING\"", "strict = \"SAFE\"")
        .replace("cause = \"B\"\n", "");
    let path = temp_file("wrong.toml", &wrong);
    let output = sim(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let out = text(&output);
    assert!(out.contains("MISMATCH"), "{out}");
    assert!(out.contains("plain: got VIOLATED, expected SAFE"), "{out}");
    assert!(out.contains("redlock-sim explain"), "{out}");
}

#[test]
fn a_malformed_file_exits_two_naming_file_line_and_field() {
    let path = temp_file(
        "malformed.toml",
        "name = \"x\"\n[expect]\nexclusion = \"SAFE\"\nplain = \"SAFE\"\nfenced = \"SAFE\"\nstrict = \"SAFE\"\n[[client]]\nname = \"c1\"\nsteps = [\"wrte\"]\n",
    );
    let output = sim(&["run", path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    let out = text(&output);
    assert!(out.contains("malformed.toml:9:"), "{out}");
    assert!(out.contains("client[0].steps[0]"), "{out}");
    let missing = sim(&["run", "no-such-file.toml"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn json_output_parses() {
    let output = sim(&[
        "run",
        "scenarios/rl-00-baseline.toml",
        "--json",
        "--seed",
        "3",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let reports: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(reports[0]["seed"], 3);
    assert_eq!(reports[0]["exclusion"], "SAFE");
    assert_eq!(reports[0]["verdicts"][0], "SAFE");
    assert_eq!(reports[0]["matches"], true);
}

#[test]
fn explain_prints_the_counterexample_and_writes_the_diagram() {
    let svg = temp_file("diagram.svg", "");
    let output = sim(&[
        "explain",
        "scenarios/rl-04-node-clock-jump-bare-majority.toml",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let out = text(&output);
    assert!(
        out.contains("first problem: the windows of c1 (epoch 1) and c2 (epoch 2) overlap"),
        "{out}"
    );
    assert!(out.contains("APPLIED STALE"), "{out}");
    let diagram = std::fs::read_to_string(&svg).unwrap();
    assert!(
        diagram.starts_with("<svg") && diagram.contains("epoch 2"),
        "{diagram}"
    );
}

/// The sweep's CSV, read the way a spreadsheet or a script reads it: by header name. Every
/// row has as many fields as the header, and each named column holds what its name says.
#[test]
fn the_sweep_csv_reads_by_header_name() {
    let csv = temp_file("sweep.csv", "");
    let output = sim(&[
        "sweep",
        "scenarios/rl-00-baseline.toml",
        "--param",
        "latency",
        "--values",
        "1,2",
        "--seeds",
        "3",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 6, "{text}");
    for row in &rows {
        assert_eq!(row.len(), header.len(), "a row under {header:?}: {row:?}");
    }
    let column = |name: &str| -> Vec<&str> {
        let i = header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column `{name}` in {header:?}"));
        rows.iter().map(|r| r[i]).collect()
    };
    let numbers = |name: &str| -> Vec<u64> {
        column(name)
            .iter()
            .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: {v}")))
            .collect()
    };
    assert_eq!(column("value"), ["1", "1", "1", "2", "2", "2"]);
    assert_eq!(numbers("seed"), [1, 2, 3, 1, 2, 3]);
    assert!(column("exclusion").iter().all(|v| *v == "SAFE"), "{text}");
    assert!(column("plain").iter().all(|v| *v == "SAFE"), "{text}");
    assert_eq!(numbers("leases"), [2; 6], "{text}");
    let calls = numbers("acquire_calls");
    let failures = numbers("acquire_failures");
    assert!(calls.iter().all(|&c| c == 2), "{text}");
    assert!(failures.iter().all(|&f| f == 0), "{text}");
    // A run of this scenario takes dozens of events: far more than any count above.
    assert!(numbers("events").iter().all(|&e| e > 10), "{text}");
}

/// An overlap of believed windows that no access fell into: the lock failed, and says so,
/// in the table, in JSON and in `explain`, while the resource verdicts stay SAFE.
#[test]
fn an_overlap_nobody_used_violates_mutual_exclusion() {
    let file = "scenarios/rl-09-client-clock-slow-2pc-unused-overlap.toml";
    let output = sim(&["run", file, "--json"]);
    assert!(output.status.success(), "{}", text(&output));
    let reports: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(reports[0]["exclusion"], "VIOLATED");
    assert_eq!(reports[0]["verdicts"][0], "SAFE");
    assert_eq!(reports[0]["cause"], "A");
    assert_eq!(reports[0]["counts"]["overlaps"], 1);
    assert_eq!(reports[0]["counts"]["used_overlaps"], 0);

    // The default table abbreviates VIOLATED; the wide one spells it out.
    for (flags, violated) in [(&[][..], "VIOL"), (&["--wide"][..], "VIOLATED")] {
        let table = text(&sim(&[&["run", file][..], flags].concat()));
        let row = table
            .lines()
            .find(|l| l.starts_with("RL-09"))
            .unwrap_or_else(|| panic!("{table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert!(
            cells
                .windows(5)
                .any(|w| w == [violated, "SAFE", "SAFE", "SAFE", "A"]),
            "{row}"
        );
    }

    let explained = text(&sim(&["explain", file]));
    assert!(
        explained.contains("verdicts: mutual exclusion VIOLATED; resource plain SAFE"),
        "{explained}"
    );
    assert!(
        explained.contains("first problem: the windows of c1 (epoch 1) and c2 (epoch 2) overlap"),
        "{explained}"
    );
}

#[test]
fn another_token_source_leaves_the_expectation_unchecked_and_says_so() {
    // The file expects fencing to fail with quorum-minted tokens; linearizable tokens make
    // the fenced verdict differ from that expectation, which must not read as a match.
    let output = sim(&[
        "run",
        "scenarios/fence-quorum-crash-no-persistence.toml",
        "--tokens",
        "linearizable",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let out = text(&output);
    // The row under the header: the run's cells, its name's first words leading.
    let row = out.lines().nth(1).unwrap();
    assert!(row.starts_with("fencing: quorum-minted"), "{out}");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert!(
        cells
            .windows(5)
            .any(|w| w == ["VIOL", "VIOL", "PREV", "PREV", "A"]),
        "{out}"
    );
    assert_eq!(cells.last(), Some(&"-"), "{out}");
    assert!(
        out.contains("0 matched, 0 mismatched, 1 unchecked"),
        "{out}"
    );
    assert!(!out.contains("MISMATCH"), "{out}");

    let output = sim(&[
        "run",
        "scenarios/fence-quorum-crash-no-persistence.toml",
        "--tokens",
        "linearizable",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let reports: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(reports[0]["unchecked"], true, "{reports}");
    assert_eq!(reports[0]["matches"], false, "{reports}");
}

/// The table fits an ordinary terminal: no line of the whole catalogue's output, its
/// legend and summary included, is wider than 100 columns, every run has its row (with
/// `--each-seed`), and every scenario's name is there in full once its wrapped lines are
/// joined.
#[test]
fn the_each_seed_table_fits_100_columns_for_the_whole_catalogue() {
    let output = sim(&["run", "scenarios", "--seeds", "2", "--each-seed"]);
    assert!(output.status.success(), "{}", text(&output));
    let out = String::from_utf8(output.stdout).unwrap();
    for line in out.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("scenario  "), "{out}");
    // A run's first line ends with its result; its name's further lines start with spaces.
    let mut names = Vec::new();
    for line in &lines[1..] {
        if line.is_empty() {
            break;
        }
        if let Some(more) = line.strip_prefix("  ") {
            let name: &mut String = names.last_mut().unwrap();
            name.push(' ');
            name.push_str(more);
        } else {
            assert!(line.ends_with(" ok"), "{line}");
            // Names never hold two spaces in a row: the first run of them ends the cell.
            names.push(line.split("  ").next().unwrap().to_owned());
        }
    }
    let files = scenario_count();
    assert_eq!(names.len(), 2 * files, "{out}");
    assert!(
        names.contains(
            &"RL-05 node crash with appendfsync everysec, before the fsync (no restart quarantine)"
                .to_owned()
        ),
        "{names:#?}"
    );
    assert!(
        out.contains("VIOL: VIOLATED; PREV: PREVENTED_BY_FENCING"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{} runs of {files} scenarios: {} matched, 0 mismatched",
            2 * files,
            2 * files
        )),
        "{out}"
    );
}

/// `--wide` keeps the full table: one line per run with every column, whatever its width.
#[test]
fn the_wide_table_has_every_column_and_one_line_per_run() {
    let output = sim(&[
        "run",
        "scenarios/rl-05-crash-everysec-before-fsync.toml",
        "--wide",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let out = String::from_utf8(output.stdout).unwrap();
    let header: Vec<&str> = out
        .lines()
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
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
            "result"
        ]
    );
    let row = out.lines().nth(1).unwrap();
    assert!(
        row.starts_with(
            "RL-05 node crash with appendfsync everysec, before the fsync (no restart quarantine)  "
        ),
        "{out}"
    );
    assert!(
        row.contains("VIOLATED") && row.contains("PREVENTED_BY_FENCING"),
        "{out}"
    );
    assert!(out.lines().nth(2).unwrap().is_empty(), "{out}");
    assert!(
        !out.contains("VIOL:"),
        "the wide table needs no legend: {out}"
    );
}

/// In a pipe, a long run prints exactly its table: no progress bar, no carriage return, no
/// escape sequence, nothing on stderr.
#[test]
fn a_run_in_a_pipe_shows_no_progress() {
    let output = sim(&[
        "run",
        "scenarios/rl-00-baseline.toml",
        "scenarios/rl-01-long-work.toml",
        "--seeds",
        "20",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(output.stderr.is_empty(), "{}", text(&output));
    assert!(!output.stdout.contains(&b'\r'), "{}", text(&output));
    assert!(!output.stdout.contains(&0x1b), "{}", text(&output));
    let sweep = sim(&[
        "sweep",
        "scenarios/rl-00-baseline.toml",
        "--param",
        "latency",
        "--values",
        "1,2",
        "--seeds",
        "5",
    ]);
    assert!(sweep.status.success(), "{}", text(&sweep));
    assert!(sweep.stderr.is_empty(), "{}", text(&sweep));
    assert!(
        !sweep.stdout.contains(&b'\r') && !sweep.stdout.contains(&0x1b),
        "{}",
        text(&sweep)
    );
}

/// On a terminal the same run draws its progress on stderr (`script` gives it one), and
/// clears it before the table.
#[test]
fn a_run_on_a_terminal_shows_progress() {
    let command = format!(
        "{} run scenarios/rl-00-baseline.toml --seeds 300 >/dev/null",
        env!("CARGO_BIN_EXE_redlock-sim")
    );
    let output = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("script(1), from util-linux, gives the run a terminal");
    assert!(output.status.success(), "{}", text(&output));
    let terminal = String::from_utf8_lossy(&output.stdout);
    assert!(terminal.contains("/300 runs"), "{terminal:?}");
    assert!(terminal.contains('\r'), "{terminal:?}");
}

/// `--seeds N` prints one row per scenario, not one per run: 200 seeds of a scenario are
/// one row that says `200/200 matched` (13,000 rows for the catalogue before); the legend
/// names the cause letters, and help in a pipe fits 80 columns.
#[test]
fn many_seeds_make_one_row_per_scenario_and_help_fits_a_pipe() {
    let output = sim(&[
        "run",
        "scenarios/rl-00-baseline.toml",
        "scenarios/rl-05-crash-no-persistence.toml",
        "--seeds",
        "200",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let out = String::from_utf8(output.stdout).unwrap();
    let table: Vec<&str> = out.lines().take_while(|line| !line.is_empty()).collect();
    let rows: Vec<&&str> = table
        .iter()
        .filter(|line| !line.starts_with("  "))
        .collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[1].ends_with("1-200  200/200 matched"), "{out}");
    assert!(
        rows[2].contains("VIOL") && rows[2].ends_with("200/200 matched"),
        "{out}"
    );
    assert!(out.contains("cause: A = Redlock's claim failed"), "{out}");
    assert!(
        out.contains("400 runs of 2 scenarios: 400 matched"),
        "{out}"
    );

    for args in [&["--help"][..], &["run", "--help"], &["check", "--help"]] {
        let help = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
            .args(args)
            .env_remove("COLUMNS")
            .output()
            .unwrap();
        let help = String::from_utf8(help.stdout).unwrap();
        let widest = help.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(
            widest <= 80,
            "redlock-sim {args:?}: {widest} columns:\n{help}"
        );
    }
}

/// The catalogue is in the binary: run from a directory without `scenarios/`, `run
/// --catalogue` runs every scenario and matches, `scenarios list` names them, `show` prints
/// a file exactly, `export` writes them all, `explain` takes `catalogue:NAME`, and an
/// unknown name is a clear error.
#[test]
fn the_catalogue_travels_with_the_binary() {
    let elsewhere = tempfile::tempdir().unwrap();
    let sim_in = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
            .args(args)
            .current_dir(elsewhere.path())
            .output()
            .unwrap()
    };
    let scenarios = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let files = scenario_count();

    let run = sim_in(&["run", "--catalogue"]);
    assert!(run.status.success(), "{}", text(&run));
    assert!(
        text(&run).contains(&format!(
            "{files} runs of {files} scenarios: {files} matched"
        )),
        "{}",
        text(&run)
    );

    let list = sim_in(&["scenarios", "list"]);
    let listed = String::from_utf8(list.stdout).unwrap();
    assert!(
        listed.lines().any(|l| l.starts_with("rl-00-baseline  ")),
        "{listed}"
    );
    assert!(listed.contains(&format!("{files} scenarios")), "{listed}");

    let show = sim_in(&["scenarios", "show", "rl-02-pause-5s"]);
    let on_disk = std::fs::read_to_string(scenarios.join("rl-02-pause-5s.toml")).unwrap();
    assert_eq!(String::from_utf8(show.stdout).unwrap(), on_disk);

    let out = elsewhere.path().join("catalogue");
    let export = sim_in(&["scenarios", "export", out.to_str().unwrap()]);
    assert!(export.status.success(), "{}", text(&export));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), files);
    assert_eq!(
        std::fs::read_to_string(out.join("rl-02-pause-5s.toml")).unwrap(),
        on_disk
    );

    let explain = sim_in(&["explain", "catalogue:rl-05-crash-no-persistence"]);
    assert!(explain.status.success(), "{}", text(&explain));
    assert!(
        text(&explain).contains("RL-05 node crash"),
        "{}",
        text(&explain)
    );

    let unknown = sim_in(&["run", "catalogue:rl-99-nothing"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    assert!(text(&unknown).contains("no scenario `rl-99-nothing` in the catalogue"));
}

#[test]
fn the_sweep_page_table_has_the_columns_of_the_text_table() {
    let dir = tempfile::tempdir().unwrap();
    let output = sim(&[
        "sweep",
        "scenarios/rl-02-pause-15s.toml",
        "--param",
        "client-pause",
        "--values",
        "0,20000",
        "--seeds",
        "1",
        "--html",
        dir.path().to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let out = text(&output);
    let header = out
        .lines()
        .find(|line| line.trim_start().starts_with("value"))
        .unwrap_or_else(|| panic!("no table header: {out}"));
    let index = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    // The text table's columns, two words each except the first two and the last.
    let words: Vec<&str> = header.split_whitespace().collect();
    let mut columns: Vec<String> = words[..2].iter().map(ToString::to_string).collect();
    columns.extend(
        words[2..words.len() - 1]
            .chunks(2)
            .map(|pair| pair.join(" ")),
    );
    columns.push(words[words.len() - 1].to_owned());
    for column in &columns {
        assert!(
            index.contains(&format!("<th>{column}</th>")),
            "the page lacks `{column}`: {index}"
        );
    }
    let row = index
        .lines()
        .find(|line| line.starts_with("<tr><td>"))
        .unwrap();
    // Each column, and the link to the run.
    assert_eq!(row.matches("<td>").count(), columns.len() + 1, "{row}");
}
