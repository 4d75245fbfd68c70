//! Explaining a run: a readable timeline of the first counterexample
//! ([`timeline()`], in `timeline.rs`), and a space-time diagram (SVG) with a lane per
//! client, server and the resource ([`svg()`], in `svg.rs`); the verdict in words
//! ([`verdict_words()`], in `words.rs`), printed by both the timeline and the run's page; a
//! self-contained interactive page ([`html()`], in `html.rs`); and a trace in Chrome's Trace
//! Event format for Perfetto ([`chrome_trace()`], in `chrome_trace.rs`).

mod chrome_trace;
mod html;
mod svg;
mod timeline;
mod words;

pub use chrome_trace::chrome_trace;
pub use html::{CSP, html};
pub use svg::svg;
pub use timeline::timeline;
pub use words::verdict_words;

use crate::checker::Fate;

/// What became of an access under one resource mode, as both writers print it.
fn fate_word(fate: Fate) -> &'static str {
    match fate {
        Fate::Lost => "lost",
        Fate::Applied => "applied",
        Fate::Stale => "APPLIED STALE",
        Fate::Rejected => "rejected",
    }
}
