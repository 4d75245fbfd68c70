//! The run's page (`explain --html`) in a real browser: Chromium, headless, loads the pages
//! of catalogue scenarios; the test reads the DOM it rendered (the lanes, the clock rows,
//! the overlap marker, the verdict in the same words as the terminal's), checks in
//! Chromium's own network log that the page made no request, and keeps a screenshot of each
//! page under target/tmp/pages/.
//!
//! Chromium comes from Debian's `chromium` package (`scripts/ensure-chromium`, which
//! `scripts/test` runs); `REDLOCK_CHROMIUM` names another binary.
#![allow(clippy::unwrap_used)] // Tests fail loudly on purpose.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::text;

use serde_json::Value;

fn chromium() -> String {
    let binary = std::env::var("REDLOCK_CHROMIUM").unwrap_or_else(|_| "chromium".to_owned());
    let found = Command::new(&binary).arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "`{binary}` does not run: install Chromium with scripts/ensure-chromium (Debian's \
         package), or name a binary in REDLOCK_CHROMIUM"
    );
    binary
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pages");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=…`): its own
/// profile; background services off; every connection it might open sent to a closed
/// loopback port through a proxy, so that nothing leaves the machine whatever happens; and
/// its network log written to `net_log`.
fn headless(page: &Path, action: &str, net_log: &Path) -> Output {
    let profile = tempdir(&format!(
        "profile-{}",
        page.file_stem().unwrap().to_string_lossy()
    ));
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--proxy-server=socks5://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--hide-scrollbars",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg(action)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    output
}

fn tempdir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("redlock-sim-browser-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The URLs of the requests the page itself started: Chromium's network log keys each
/// request by the top frame's site, `file://` for a page opened from disk (its own
/// background services have other keys).
fn page_requests(net_log: &Path) -> Vec<String> {
    let log: Value = serde_json::from_str(&std::fs::read_to_string(net_log).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", net_log.display()));
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
        .as_u64()
        .unwrap();
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"].as_u64() == Some(start_job))
        .filter(|e| {
            e["params"]["network_isolation_key"]
                .as_str()
                .is_some_and(|key| key.contains("file://"))
        })
        .filter_map(|e| e["params"]["url"].as_str().map(str::to_owned))
        .collect()
}

/// The page of `scenario` written by `explain --html`, and what `explain` printed.
fn explain(scenario: &str, page: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
        .args(["explain", &format!("scenarios/{scenario}.toml"), "--html"])
        .arg(page)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.code().is_some_and(|c| c <= 1),
        "{}",
        text(&output)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The sentences under `in words:` in `explain`'s output.
fn terminal_words(printed: &str) -> Vec<String> {
    printed
        .lines()
        .skip_while(|l| *l != "in words:")
        .skip(1)
        .take_while(|l| l.starts_with("  - "))
        .map(|l| l["  - ".len()..].to_owned())
        .collect()
}

/// HTML-escaped as the page writes its text.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Expected {
    scenario: &'static str,
    lanes: &'static [&'static str],
    clients: &'static [&'static str],
    overlap: bool,
    words: &'static [&'static str],
}

fn check_page(expected: &Expected) {
    let dir = out_dir();
    let page = dir.join(format!("{}.html", expected.scenario));
    let printed = explain(expected.scenario, &page);
    let net_log = dir.join(format!("{}.netlog.json", expected.scenario));
    let dumped = headless(&page, "--dump-dom", &net_log);
    assert!(dumped.status.success(), "{}", text(&dumped));
    let dom = String::from_utf8(dumped.stdout).unwrap();

    // The script ran: it drew the lanes and said how long that took.
    assert!(
        dom.contains("data-render-ms=\""),
        "the script did not finish"
    );
    for lane in expected.lanes {
        assert!(
            dom.contains(&format!("data-lane=\"{lane}\"")),
            "{}: no lane {lane}",
            expected.scenario
        );
    }
    for client in expected.clients {
        assert!(
            dom.contains(&format!("class=\"clock\" data-client=\"{client}\"")),
            "{}: no clock row for {client}",
            expected.scenario
        );
    }
    assert_eq!(
        dom.contains("id=\"overlap-1\""),
        expected.overlap,
        "{}: the overlap marker",
        expected.scenario
    );
    assert!(
        dom.contains("class=\"window\""),
        "{}: no window",
        expected.scenario
    );
    assert!(
        dom.contains("class=\"validity\""),
        "{}: no validity",
        expected.scenario
    );
    // The verdict: the terminal's words, each in the page's list.
    let words = terminal_words(&printed);
    assert!(!words.is_empty(), "{printed}");
    for sentence in &words {
        assert!(
            dom.contains(&format!("<li>{}</li>", esc(sentence))),
            "{}: the page lacks the terminal's sentence: {sentence}",
            expected.scenario
        );
    }
    for phrase in expected.words {
        assert!(
            words.iter().any(|w| w.contains(phrase)),
            "{}: no `{phrase}` in {words:?}",
            expected.scenario
        );
    }
    let requests = page_requests(&net_log);
    assert!(
        requests.is_empty(),
        "{}: the page made requests: {requests:?}",
        expected.scenario
    );

    let screenshot = dir.join(format!("{}.png", expected.scenario));
    let _ = std::fs::remove_file(&screenshot);
    let shot = headless(
        &page,
        &format!("--screenshot={}", screenshot.display()),
        &dir.join(format!("{}.screenshot.netlog.json", expected.scenario)),
    );
    assert!(shot.status.success(), "{}", text(&shot));
    let png = std::fs::read(&screenshot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{}",
        png.len()
    );
}

#[test]
fn an_overlap_after_a_crash_without_persistence() {
    check_page(&Expected {
        scenario: "rl-05-crash-no-persistence",
        lanes: &["c1", "c2", "n0", "n1", "n2", "n3", "n4", "resource"],
        clients: &["c1", "c2"],
        overlap: true,
        words: &[
            "c1 (epoch 1) and c2 (epoch 2) both believed they held the lease from",
            "Cause A",
            "n2 crashes",
            "with fencing on writes it was rejected",
        ],
    });
}

#[test]
fn a_stale_write_after_a_pause_without_an_overlap() {
    check_page(&Expected {
        scenario: "rl-02-pause-15s",
        lanes: &["c1", "c2", "n0", "n4", "resource"],
        clients: &["c1", "c2"],
        overlap: false,
        words: &[
            "Cause B",
            "c1 pauses for 15.0 s",
            "c1's write #2 of epoch 1 (fence 1)",
            "the resource applied it stale",
        ],
    });
}

#[test]
fn an_overlap_from_a_slow_client_clock() {
    check_page(&Expected {
        scenario: "rl-09-client-clock-slow-2pc",
        lanes: &["c1", "c2", "resource"],
        clients: &["c1", "c2"],
        overlap: true,
        words: &["both believed they held the lease", "clock runs 2% slow"],
    });
}

/// The check of the network log finds a request when there is one: a page with an image
/// on a closed loopback port.
#[test]
fn the_network_check_sees_a_request_when_a_page_makes_one() {
    let dir = out_dir();
    let page = dir.join("control-with-request.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><img src=\"http://127.0.0.1:9/x.png\"><p>x</p></body></html>",
    )
    .unwrap();
    let net_log = dir.join("control-with-request.netlog.json");
    let output = headless(&page, "--dump-dom", &net_log);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(page_requests(&net_log), ["http://127.0.0.1:9/x.png"]);
}

/// `sweep --html`: the index's chart has a link per point, each to a page that exists and
/// renders; the index makes no request either.
#[test]
fn a_sweep_index_links_each_point_to_a_run_page() {
    let dir = out_dir().join("sweep-rl-02");
    let _ = std::fs::remove_dir_all(&dir);
    let output = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
        .args([
            "sweep",
            "scenarios/rl-02-pause-15s.toml",
            "--param",
            "client-pause",
            "--from",
            "0",
            "--to",
            "20000",
            "--steps",
            "5",
            "--seeds",
            "3",
            "--html",
        ])
        .arg(&dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let index = dir.join("index.html");
    let net_log = dir.join("index.netlog.json");
    let dumped = headless(&index, "--dump-dom", &net_log);
    assert!(dumped.status.success(), "{}", text(&dumped));
    let dom = String::from_utf8(dumped.stdout).unwrap();
    let links: Vec<&str> = dom
        .split("<a href=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .collect();
    // One link per point in the chart, and one per row of the table.
    assert_eq!(dom.matches("class=\"point-link\"").count(), 5, "{dom}");
    assert_eq!(links.len(), 10, "{links:?}");
    for link in &links {
        assert!(link.starts_with("runs/"), "{link}");
        assert!(dir.join(link).is_file(), "{link}");
    }
    // The paused runs above the validity: the linked run shows the stale write.
    let last = std::fs::read_to_string(dir.join(links[4])).unwrap();
    assert!(
        last.contains("the resource applied it stale"),
        "{}",
        links[4]
    );
    assert!(page_requests(&net_log).is_empty());
}
