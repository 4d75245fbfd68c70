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
    explain_file(&format!("scenarios/{scenario}.toml"), page)
}

/// The page of the scenario file `file` (relative to the package) written by `explain
/// --html`, and what `explain` printed.
fn explain_file(file: &str, page: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_redlock-sim"))
        .args(["explain", file, "--html"])
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

/// What `probe` (a script's body, with `page` in scope: the lanes' drawing element, and
/// `report(value)`) found in the page of `file` once its own script had drawn it: the page
/// is copied with the probe appended, loaded headless, and the probe's report read back from
/// the dumped DOM.
fn probe(file: &str, name: &str, probe: &str) -> Value {
    let dir = out_dir();
    let page = dir.join(format!("{name}.html"));
    explain_file(file, &page);
    let html = std::fs::read_to_string(&page).unwrap();
    let script = format!(
        "<script>(function () {{\n\
         const page = document.body.dataset.drawing === \"canvas\" ?\n\
           document.querySelector(\"canvas\") : document.getElementById(\"lanes\");\n\
         const report = (value) => {{ const pre = document.createElement(\"pre\");\n\
           pre.id = \"probe\"; pre.textContent = JSON.stringify(value);\n\
           document.body.appendChild(pre); }};\n{probe}\n}})();</script>\n</body>"
    );
    let probed = dir.join(format!("{name}.probe.html"));
    std::fs::write(&probed, html.replace("</body>", &script)).unwrap();
    let dumped = headless(
        &probed,
        "--dump-dom",
        &dir.join(format!("{name}.probe.netlog.json")),
    );
    assert!(dumped.status.success(), "{}", text(&dumped));
    let dom = String::from_utf8(dumped.stdout).unwrap();
    let report = dom
        .split("<pre id=\"probe\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .unwrap_or_else(|| panic!("{name}: the probe reported nothing"));
    let report = report
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&report).unwrap()
}

/// RL-02's c2 retries for 10 s (about 2,500 messages, 174 rounds): drawn one line each,
/// they made a solid grey wall over the servers' lock keys. Messages between the same lane
/// and the lanes below it, sent within one column a few pixels wide, are one bundle, and
/// hovering a bundle lists its messages.
#[test]
fn dense_messages_are_bundled_not_a_wall() {
    let found = probe(
        "scenarios/rl-02-pause-15s.toml",
        "bundles-rl-02",
        r#"
        const group = page.querySelector("g.messages");
        let drawn = 0;
        for (const shape of group.children) {
          if (shape.tagName === "line") drawn += 1;
          if (shape.tagName === "path") drawn += (shape.getAttribute("d").match(/M/g) || []).length;
        }
        let tip = "";
        for (const bundle of group.querySelectorAll(".bundle")) {
          bundle.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: 10, clientY: 10 }));
          tip = document.getElementById("tip").textContent;
          if (tip.includes("between c2")) break;
        }
        report({ drawn: drawn, tip: tip });
        "#,
    );
    let drawn = found["drawn"].as_u64().unwrap();
    // One bundle per client and column of 12 px (c2's 10 s of retries span about 740 px at
    // this window's width), some cut in two around a clock reading.
    assert!(drawn > 10 && drawn <= 100, "{drawn} message lines drawn");
    let tip = found["tip"].as_str().unwrap();
    assert!(
        tip.contains(" messages between c2 and ") && tip.contains("SET NX"),
        "the bundle's hover: {tip:?}"
    );
}

/// The probe that finds labels crossed by lines: every clock reading against every message
/// and access line, and the overlap markers and labels against the time axis's labels.
const LABELS_CLEAR: &str = r#"
    const box = (e) => { const b = e.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
    const meets = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];
    // Whether the segment crosses the box (Liang-Barsky clipping).
    function crosses([x0, y0, x2, y2], b) {
      const dx = x2 - x0, dy = y2 - y0;
      let t0 = 0, t1 = 1;
      for (const [p, q] of [[-dx, x0 - b[0]], [dx, b[2] - x0], [-dy, y0 - b[1]], [dy, b[3] - y0]]) {
        if (p === 0) { if (q < 0) return false; continue; }
        const r = q / p;
        if (p < 0) t0 = Math.max(t0, r); else t1 = Math.min(t1, r);
      }
      return t0 < t1;
    }
    const readings = [...page.querySelectorAll(".clock-reading")];
    // Each line, and each straight piece of a path (M x y L x y).
    const lines = [...page.querySelectorAll("g.messages line, g.accesses line")]
      .map((l) => ["x1", "y1", "x2", "y2"].map((k) => +l.getAttribute(k)));
    for (const p of page.querySelectorAll("g.messages path, g.accesses path")) {
      for (const m of p.getAttribute("d").matchAll(/M([\d.-]+) ([\d.-]+)L([\d.-]+) ([\d.-]+)/g)) {
        lines.push([+m[1], +m[2], +m[3], +m[4]]);
      }
    }
    const crossed = [];
    for (const r of readings) {
      const b = box(r);
      for (const l of lines) if (crosses(l, b)) crossed.push(r.textContent + " at " + b[0].toFixed(0));
    }
    const ticks = [...page.querySelectorAll(".tick-label")].map(box);
    const flags = [...page.querySelectorAll(".overlaps .overlap-marker, .overlaps .overlap-label")];
    const onAxis = flags.filter((f) => ticks.some((t) => meets(box(f), t))).map((f) => f.outerHTML);
    report({ readings: readings.length, lines: lines.length, flags: flags.length,
      crossed: crossed, onAxis: onAxis });
"#;

/// Labels clear of lines: on RL-02 the retries crossed c2's clock readings; on RL-05 and
/// RL-09 the overlap's flag sat on the time axis's labels. Read from the boxes Chromium laid
/// out.
#[test]
fn labels_stay_clear_of_lines() {
    for (file, flags) in [
        ("rl-02-pause-15s", false),
        ("rl-05-crash-no-persistence", true),
        ("rl-09-client-clock-slow-2pc", true),
    ] {
        let found = probe(
            &format!("scenarios/{file}.toml"),
            &format!("labels-{file}"),
            LABELS_CLEAR,
        );
        assert!(found["readings"].as_u64().unwrap() > 4, "{file}: {found}");
        assert!(found["lines"].as_u64().unwrap() > 4, "{file}: {found}");
        assert_eq!(
            found["flags"].as_u64().unwrap() > 0,
            flags,
            "{file}: {found}"
        );
        assert_eq!(found["crossed"], Value::Array(vec![]), "{file}: crossed");
        assert_eq!(found["onAxis"], Value::Array(vec![]), "{file}: on the axis");
    }
}

/// The 30 s run (tests/fixtures/) has thousands of shapes: its lanes are drawn on a canvas,
/// and hovering still finds what lies under the pointer: c1's first lease, found along the
/// top half of its lane, where its validities are drawn and no message line reaches (they
/// leave from the lane's middle). RL-02's page, small, keeps its SVG.
#[test]
fn a_large_run_is_drawn_on_a_canvas_with_hover() {
    let found = probe(
        "tests/fixtures/thirty-seconds-of-contention.toml",
        "canvas-30s",
        r#"
        const rows = JSON.parse(page.dataset.rows);
        const box = page.getBoundingClientRect();
        const y = box.top + rows[0][0] + 8;
        let tip = "";
        for (let x = box.left; x < box.right && !tip.startsWith("c1, epoch "); x += 1) {
          page.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: x, clientY: y }));
          const shown = document.getElementById("tip");
          tip = shown.hidden ? "" : shown.textContent;
        }
        report({ drawing: document.body.dataset.drawing, tag: page.tagName,
          shapes: Number(document.body.dataset.shapes),
          svgChildren: document.getElementById("lanes").childElementCount, tip: tip });
        "#,
    );
    assert_eq!(found["drawing"], "canvas", "{found}");
    assert_eq!(found["tag"], "CANVAS", "{found}");
    assert_eq!(found["svgChildren"], 0, "{found}");
    assert!(found["shapes"].as_u64().unwrap() > 2_000, "{found}");
    let tip = found["tip"].as_str().unwrap();
    assert!(
        tip.starts_with("c1, epoch 1 (fence 1") && tip.contains("validity it computed: until"),
        "{tip:?}"
    );
    let small = probe(
        "scenarios/rl-02-pause-15s.toml",
        "svg-rl-02",
        "report({ drawing: document.body.dataset.drawing, tag: page.tagName });",
    );
    assert_eq!(small["drawing"], "svg", "{small}");
}
