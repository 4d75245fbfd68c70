//! The report for scripts: `--json`, one pretty-printed document in the report's serde shape.

use super::Report;

/// The report as JSON (one document, pretty-printed).
pub(crate) fn render(report: &Report) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| {
        // Every field is plain data; this cannot fail, but a report is better than a panic.
        format!("{{\"error\": \"cannot encode the report: {e}\"}}")
    })
}
