//! Explaining a run: a readable timeline of the first counterexample
//! ([`timeline()`], in `timeline.rs`), and a space-time diagram (SVG) with a lane per
//! client, server and the resource ([`svg()`], in `svg.rs`).

mod svg;
mod timeline;

pub use svg::svg;
pub use timeline::timeline;

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
