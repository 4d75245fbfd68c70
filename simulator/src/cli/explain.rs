//! `explain`'s other outputs: the run's page and its trace in a file.

use std::path::{Path, PathBuf};

use redlock_sim::{Run, Scenario};

/// The format of `--trace-file`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TraceFormat {
    /// The text trace `--trace` prints.
    Text,
    /// Chrome's Trace Event JSON, for Perfetto (ui.perfetto.dev) or chrome://tracing.
    Chrome,
}

/// The page and the trace file.
#[derive(clap::Args)]
pub(crate) struct PageArgs {
    /// Write the run's page here: one self-contained HTML file (no network) with lanes,
    /// windows, overlaps, messages and faults, zoom and hover, and the verdict in words.
    #[arg(long)]
    html: Option<PathBuf>,
    /// Write the trace here, in --trace-format.
    #[arg(long)]
    trace_file: Option<PathBuf>,
    /// The format of --trace-file.
    #[arg(long, value_enum, default_value = "text", requires = "trace_file")]
    trace_format: TraceFormat,
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

impl PageArgs {
    /// Each option of the page and trace file, and whether it was given.
    pub(crate) fn asked(&self) -> [(&'static str, bool); 2] {
        [
            ("--html", self.html.is_some()),
            ("--trace-file", self.trace_file.is_some()),
        ]
    }

    /// Writes the page and the trace file that were asked for.
    pub(crate) fn write(&self, scenario: &Scenario, run: &Run) -> Result<(), String> {
        if let Some(path) = &self.html {
            write(path, &redlock_sim::explain::html(scenario, run))?;
            println!("page written to {}", path.display());
        }
        if let Some(path) = &self.trace_file {
            let text = match self.trace_format {
                TraceFormat::Text => run.trace.clone().unwrap_or_default(),
                TraceFormat::Chrome => redlock_sim::explain::chrome_trace(scenario, run),
            };
            write(path, &text)?;
            println!("trace written to {}", path.display());
        }
        Ok(())
    }
}
