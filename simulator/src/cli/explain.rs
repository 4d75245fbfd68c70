//! `explain`: the first counterexample of one scenario as a timeline, a space-time diagram,
//! a page and a trace file; on a check file, its counterexample step by step.

use std::path::{Path, PathBuf};

use redlock_sim::{Run, Scenario};

use super::inputs::load;

// The variant's comment in main.rs is the command's help.
#[derive(clap::Args)]
pub(crate) struct ExplainArgs {
    /// The scenario file.
    file: PathBuf,
    /// The seed (default: the scenario's own).
    #[arg(long)]
    seed: Option<u64>,
    /// Write the space-time diagram (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also print the full event trace.
    #[arg(long)]
    trace: bool,
    #[command(flatten)]
    pages: PageArgs,
}

impl ExplainArgs {
    /// The first option given that only a scenario's run can serve.
    fn scenario_only_option(&self) -> Option<&'static str> {
        [
            ("--seed", self.seed.is_some()),
            ("--svg", self.svg.is_some()),
            ("--trace", self.trace),
        ]
        .into_iter()
        .chain(self.pages.asked())
        .find_map(|(option, given)| given.then_some(option))
    }
}

/// Explains one scenario's run (or replays a check's counterexample): `Ok(false)` when its
/// verdicts differ from the file's expectations.
pub(crate) fn explain(args: &ExplainArgs) -> Result<bool, String> {
    if super::check::is_check_file(&args.file) {
        if let Some(option) = args.scenario_only_option() {
            // A check's counterexample is a path through the model, not a simulated run:
            // there is no seed to choose and no run to draw.
            return Err(format!(
                "{option} is for scenarios: {} is a check, whose counterexample `explain` \
                 prints step by step (drop {option})",
                args.file.display()
            ));
        }
        return super::check::explain(&args.file);
    }
    let scenario = load(&args.file)?;
    let seed = args.seed.unwrap_or(scenario.seed);
    let run = redlock_sim::run(&scenario, seed, true).map_err(|e| e.to_string())?;
    print!("{}", redlock_sim::explain::timeline(&scenario, &run));
    if args.trace {
        println!(
            "\nfull trace:\n{}",
            run.trace.as_deref().unwrap_or_default()
        );
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, redlock_sim::explain::svg(&scenario, &run))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("\nspace-time diagram written to {}", path.display());
    }
    args.pages.write(&scenario, &run)?;
    Ok(run.report.matches)
}

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
    /// Write the run here in Perfetto's protobuf trace format (ui.perfetto.dev opens it): a
    /// track per lane, windows, keys and accesses as slices, each message a flow from its
    /// send to its arrival. For runs too long for the Chrome JSON.
    #[arg(long)]
    perfetto: Option<PathBuf>,
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

impl PageArgs {
    /// Each option of the page and trace file, and whether it was given.
    pub(crate) fn asked(&self) -> [(&'static str, bool); 3] {
        [
            ("--html", self.html.is_some()),
            ("--trace-file", self.trace_file.is_some()),
            ("--perfetto", self.perfetto.is_some()),
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
        if let Some(path) = &self.perfetto {
            std::fs::write(path, redlock_sim::explain::perfetto::trace(scenario, run))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            println!("Perfetto trace written to {}", path.display());
        }
        Ok(())
    }
}
