//! Explaining a run: a readable timeline of the first counterexample
//! ([`timeline()`], in `timeline.rs`), and a space-time diagram (SVG) with a lane per
//! client, server and the resource ([`svg()`], in `svg.rs`); the verdict in words
//! ([`verdict_words()`], in `words.rs`), printed by both the timeline and the run's page; a
//! self-contained interactive page ([`html()`], in `html.rs`); and a trace in Chrome's Trace
//! Event format ([`chrome_trace()`], in `chrome_trace.rs`) and in Perfetto's own protobuf
//! format, with a flow per message ([`perfetto::trace()`], in `perfetto.rs`).
//!
//! Every picture of the simulator is drawn here, a sweep's too: its chart
//! ([`sweep_chart`]) and its pages ([`sweep_pages`]). The views depend on the engine
//! (`world/`, `judge/`, `runs/`), never the reverse.
//!
//! | file | job |
//! |---|---|
//! | `timeline.rs` | the text timeline of a run's first counterexample |
//! | `svg.rs` | a run's space-time diagram, one function per layer |
//! | `html.rs`, `page.js`, `page.css` | a run's self-contained interactive page |
//! | `chrome_trace.rs` | a run as Chrome Trace Event JSON |
//! | `perfetto.rs` | a run as a Perfetto protobuf trace, messages as flows |
//! | `derived.rs` | what the views share, derived once from a run: lanes, windows, validity, keys' leases, fates |
//! | `words.rs` | the verdict in words, for the timeline and the page |
//! | `sweep_chart.rs` | a sweep's chart: each verdict's rate against the parameter |
//! | `sweep_pages.rs` | a sweep's index page and the page of one run per value |
//! | `text_fit.rs` | text cut to a width in a picture without a font at hand |
//! | `svg_check.rs` | (tests) the pictures rendered to pixels and checked as seen |

mod chrome_trace;
mod derived;
mod html;
pub mod perfetto;
mod svg;
#[cfg(test)]
mod svg_check;
pub mod sweep_chart;
pub mod sweep_pages;
mod text_fit;
mod timeline;
mod words;

pub use chrome_trace::chrome_trace;
pub use html::{CSP, html};
pub use svg::svg;
pub use timeline::timeline;
pub use words::verdict_words;

use crate::judge::judgement::Fate;

/// What became of an access under one resource mode, as both writers print it.
fn fate_word(fate: Fate) -> &'static str {
    match fate {
        Fate::Lost => "lost",
        Fate::Applied => "applied",
        Fate::Stale => "APPLIED STALE",
        Fate::Rejected => "rejected",
    }
}
