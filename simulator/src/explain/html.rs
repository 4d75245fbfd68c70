//! The run as one self-contained HTML page (`explain --html`): the verdict in words, then
//! lanes per client (with its clock's readings beside it), per server and for the resource
//! on true time, with validity and believed windows, their overlaps, lock keys, messages
//! (bundled where dense), accesses and faults; zoom, pan and hover details; SVG for a run of
//! up to a few thousand shapes, a canvas above (page.js).
//!
//! Everything is inline — style, script and the run's data as JSON — and the page's
//! Content-Security-Policy forbids every fetch, so it opens from a CI artefact or an e-mail
//! without network. The data is the run's own record (history, judgement and the traced
//! messages and clock readings); the page draws it and derives nothing.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::derived::{Derived, LaneKind};
use super::verdict_words;
use crate::Run;
use crate::judge::history::{AccessKind, KeyEnd};
use crate::judge::judgement::Fate;
use crate::scenario::Scenario;
use crate::time::Nanos;

/// The pages' Content-Security-Policy: nothing may be fetched, connected to or submitted;
/// only the page's own inline style and script run.
pub const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     script-src 'unsafe-inline'; img-src data:; connect-src 'none'; font-src 'none'; \
     base-uri 'none'; form-action 'none'";

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

#[derive(Serialize)]
struct Lane {
    name: String,
    kind: &'static str,
}

#[derive(Serialize)]
struct Lease {
    lane: usize,
    epoch: u64,
    fence: u64,
    token: String,
    granted: Nanos,
    /// When the holder's clock first read its deadline (the validity's end in true time).
    valid_until: Option<Nanos>,
    valid_until_local: u64,
    windows: Vec<(Nanos, Nanos)>,
    released: Option<Nanos>,
    crashed: Option<Nanos>,
    extensions: usize,
}

/// A lock key on a server, in microseconds (a run has thousands):
/// (lane, epoch of its holder or `None` when no lease has its token, from, until, how it
/// ended: 0 expired, 1 removed, 2 held at the end).
type Key = (usize, Option<u64>, u64, u64, u8);

/// A message: (from lane, to lane, microseconds since the previous message was sent,
/// microseconds in flight or `None` when lost, label index).
type Message = (usize, usize, u64, Option<u64>, usize);

#[derive(Serialize)]
struct Access {
    index: usize,
    from: usize,
    kind: &'static str,
    epoch: u64,
    fence: u64,
    sent: Nanos,
    arrived: Option<Nanos>,
    fates: [&'static str; 3],
}

#[derive(Serialize)]
struct OverlapData {
    first: usize,
    second: usize,
    from: Nanos,
    until: Nanos,
    cause: String,
    used: bool,
}

#[derive(Serialize)]
struct Fault {
    /// The lane, or `None` for the whole world (the network, say).
    lane: Option<usize>,
    from: Nanos,
    until: Nanos,
    what: String,
}

#[derive(Serialize)]
struct Data {
    end: Nanos,
    lanes: Vec<Lane>,
    leases: Vec<Lease>,
    overlaps: Vec<OverlapData>,
    keys: Vec<Key>,
    accesses: Vec<Access>,
    faults: Vec<Fault>,
    /// Labels of the messages, each once.
    labels: Vec<String>,
    /// Messages in the order sent, in microseconds: (from lane, to lane, time since the
    /// previous message was sent, time in flight or `None` when lost, label index).
    /// Differences of whole microseconds, not instants in nanoseconds: a long run has tens of
    /// thousands of messages, and this keeps each to about 20 bytes.
    messages: Vec<Message>,
    /// Per client lane: its clock readings, (true time, reading).
    clocks: BTreeMap<usize, Vec<(Nanos, u64)>>,
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fate_name(fate: Fate) -> &'static str {
    match fate {
        Fate::Lost => "lost",
        Fate::Applied => "applied",
        Fate::Stale => "stale",
        Fate::Rejected => "rejected",
    }
}

fn data(scenario: &Scenario, run: &Run) -> Data {
    let derived = Derived::new(scenario, run);
    let end = run.report.simulated_ns.max(1);
    let (labels, messages, clocks) = recorded(&derived, run);
    Data {
        end,
        lanes: lanes(&derived),
        leases: leases(&derived, run),
        overlaps: overlaps(run),
        keys: keys(&derived, run),
        accesses: accesses(&derived, run),
        faults: faults(&derived, run, end),
        labels,
        messages,
        clocks,
    }
}

fn lanes(derived: &Derived) -> Vec<Lane> {
    derived
        .lanes
        .iter()
        .map(|lane| Lane {
            name: lane.name.clone(),
            kind: match lane.kind {
                LaneKind::Client => "client",
                LaneKind::Server => "server",
                LaneKind::Resource => "resource",
            },
        })
        .collect()
}

fn leases(derived: &Derived, run: &Run) -> Vec<Lease> {
    run.history
        .leases
        .iter()
        .zip(&derived.leases)
        .map(|(lease, view)| Lease {
            lane: lease.client,
            epoch: lease.epoch,
            fence: lease.fence,
            token: lease.token.short(),
            granted: lease.granted_at,
            valid_until: view.valid_until,
            valid_until_local: lease.valid_until_local,
            windows: view.windows.clone(),
            released: lease.released_at,
            crashed: lease.crashed_at,
            extensions: lease.extensions.len(),
        })
        .collect()
}

fn keys(derived: &Derived, run: &Run) -> Vec<Key> {
    let first_server = derived.clients();
    run.history
        .keys
        .iter()
        .zip(&derived.key_epochs)
        .map(|(key, &epoch)| {
            let ended = match key.ended {
                KeyEnd::Expired => 0,
                KeyEnd::Removed => 1,
                KeyEnd::Held => 2,
            };
            (
                first_server + key.server,
                epoch,
                key.from / 1000,
                key.until / 1000,
                ended,
            )
        })
        .collect()
}

fn accesses(derived: &Derived, run: &Run) -> Vec<Access> {
    run.history
        .accesses
        .iter()
        .zip(&derived.fates)
        .enumerate()
        .map(|(i, (a, fates))| Access {
            index: i,
            from: a.client,
            kind: match a.kind {
                AccessKind::Read => "read",
                AccessKind::Write => "write",
            },
            epoch: a.epoch,
            fence: a.fence,
            sent: a.sent_at,
            arrived: a.arrived_at,
            fates: fates.map(fate_name),
        })
        .collect()
}

fn overlaps(run: &Run) -> Vec<OverlapData> {
    run.judgement
        .overlaps
        .iter()
        .map(|o| OverlapData {
            first: o.first,
            second: o.second,
            from: o.from,
            until: o.until,
            cause: o.cause.to_string(),
            used: o.used,
        })
        .collect()
}

/// The pauses as bands, then the script's other notes as instants.
fn faults(derived: &Derived, run: &Run, end: Nanos) -> Vec<Fault> {
    let history = &run.history;
    let mut faults: Vec<Fault> = history
        .pauses
        .iter()
        .map(|&(client, from, until)| Fault {
            lane: Some(client),
            from,
            until: until.min(end),
            what: "paused (stop-the-world)".into(),
        })
        .collect();
    for note in &history.notes {
        // A pause has its band already; its notes would only repeat it.
        if note.what.starts_with("pauses") || note.what == "resumes" {
            continue;
        }
        faults.push(Fault {
            lane: derived.lane_of(&note.who),
            from: note.at,
            until: note.at,
            what: format!("{}: {}", note.who, note.what),
        });
    }
    faults
}

/// The messages' labels, the messages and the clients' clock readings, from the run's
/// recording (all empty without one).
type Recorded = (
    Vec<String>,
    Vec<Message>,
    BTreeMap<usize, Vec<(Nanos, u64)>>,
);

fn recorded(derived: &Derived, run: &Run) -> Recorded {
    let mut labels: Vec<String> = Vec::new();
    let mut messages = Vec::new();
    let mut clocks = BTreeMap::new();
    if let Some(recording) = &run.recording {
        let mut previous = 0;
        for m in &recording.messages {
            let (Some(from), Some(to)) = (derived.lane_of(&m.from), derived.lane_of(&m.to)) else {
                continue;
            };
            let sent = m.sent_at / 1000;
            let since = sent.saturating_sub(previous);
            previous = sent;
            let label = labels
                .iter()
                .position(|l| *l == m.label)
                .unwrap_or_else(|| {
                    labels.push(m.label.clone());
                    labels.len() - 1
                });
            let flight = m.arrives_at.map(|at| (at / 1000).saturating_sub(sent));
            messages.push((from, to, since, flight, label));
        }
        for (c, readings) in recording.clocks.iter().enumerate() {
            clocks.insert(c, readings.clone());
        }
    }
    (labels, messages, clocks)
}

/// The run's page: one HTML file with no external resource. Needs the run's recording
/// (a run with its trace, as `explain` makes) for the messages and clocks; without it, the
/// page has neither.
pub fn html(scenario: &Scenario, run: &Run) -> String {
    let report = &run.report;
    let data = serde_json::to_string(&data(scenario, run))
        .unwrap_or_else(|_| "{}".to_owned())
        // Inside <script>, `<` could close the element: JSON allows it escaped.
        .replace('<', "\\u003c");
    let mut out = String::with_capacity(data.len() + 32 * 1024);
    let title = format!("{} (seed {})", scenario.name, report.seed);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    header(&mut out, scenario, run, &title);
    let _ = writeln!(
        out,
        "<nav id=\"controls\">\
         <button id=\"zoom-in\" title=\"zoom in (+)\">+</button>\
         <button id=\"zoom-out\" title=\"zoom out (-)\">&minus;</button>\
         <button id=\"zoom-reset\" title=\"whole run (0)\">whole run</button>\
         <label><input type=\"checkbox\" id=\"show-messages\" checked> messages</label>\
         <span id=\"range\"></span>\
         <span class=\"hint\">wheel: zoom &middot; drag: pan &middot; hover: details</span></nav>"
    );
    let _ = writeln!(
        out,
        "<main><svg id=\"lanes\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" \
         aria-label=\"space-time diagram\"></svg><div id=\"tip\" hidden></div></main>"
    );
    let _ = writeln!(
        out,
        "<footer><p>Legend: filled bar = the holder believed it held the lease (its window); \
         dashed outline = the validity it computed, until its clock read the deadline; red band \
         = two windows overlap; brown = paused; thin red line = a fault; on a server lane, \
         the lock key; arrows = messages (grey) and accesses (green applied, red stale, black \
         rejected); a thick grey line = a bundle of the messages between a lane and the lanes \
         below it sent within 12 pixels (hover lists them, zooming in separates them). Beside \
         each client, its clock's reading at each tick.</p>\
         <p>replay: <code>redlock-sim explain {} --seed {}</code></p></footer>",
        esc(&scenario.source),
        report.seed
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"data\">{data}</script>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
    );
    out
}

/// The page's header: the title, the description, the verdicts and the verdict in words.
fn header(out: &mut String, scenario: &Scenario, run: &Run, title: &str) {
    let report = &run.report;
    let _ = writeln!(out, "<header>\n<h1>{}</h1>", esc(title));
    if !scenario.description.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"description\">{}</p>",
            esc(scenario.description.trim())
        );
    }
    let _ = writeln!(out, "<table class=\"verdicts\"><tr>");
    let cells = [
        ("mutual exclusion", report.exclusion.to_string()),
        ("plain", report.verdicts[0].to_string()),
        ("fenced", report.verdicts[1].to_string()),
        ("strict", report.verdicts[2].to_string()),
        (
            "cause",
            report.cause.map_or_else(|| "-".into(), |c| c.to_string()),
        ),
    ];
    for (name, value) in &cells {
        let _ = write!(
            out,
            "<td><span class=\"label\">{name}</span><span class=\"verdict v-{}\">{}</span></td>",
            esc(&value.to_lowercase()),
            esc(value)
        );
    }
    let _ = writeln!(out, "</tr></table>");
    let _ = writeln!(
        out,
        "<section id=\"verdict\">\n<h2>What happened</h2>\n<ol>"
    );
    for sentence in verdict_words(scenario, run) {
        let _ = writeln!(out, "<li>{}</li>", esc(&sentence));
    }
    let _ = writeln!(out, "</ol>\n</section>\n</header>");
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn page(file: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(file);
        let scenario = Scenario::load(&path).unwrap();
        let run = crate::run(&scenario, scenario.seed, true).unwrap();
        html(&scenario, &run)
    }

    #[test]
    fn the_page_is_self_contained_and_forbids_the_network() {
        let page = page("rl-05-crash-no-persistence.toml");
        assert!(page.contains("Content-Security-Policy"));
        assert!(page.contains("default-src 'none'"));
        // No element may load anything: no src, no href, no url(), no @import.
        for needle in [
            "src=", "href=", "url(", "@import", "<link", "<iframe", "<img",
        ] {
            assert!(!page.contains(needle), "{needle}");
        }
        // The verdict is in the page's own text, before any script runs.
        assert!(page.contains("both believed they held the lease"));
        assert!(page.contains("<script type=\"application/json\" id=\"data\">"));
    }

    #[test]
    fn the_same_seed_gives_the_same_page() {
        assert_eq!(
            page("rl-09-client-clock-slow-2pc.toml"),
            page("rl-09-client-clock-slow-2pc.toml")
        );
    }

    #[test]
    fn the_data_cannot_close_its_script_element() {
        let text = r#"
name = "</script><b>x</b>"
[expect]
exclusion = "SAFE"
plain = "SAFE"
fenced = "SAFE"
strict = "SAFE"
[[client]]
name = "c</script>"
steps = ["write"]
"#;
        let scenario = crate::scenario::parse(text, "inline").unwrap();
        let run = crate::run(&scenario, 1, true).unwrap();
        let page = html(&scenario, &run);
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(!page.contains("<b>x</b>"));
    }
}
