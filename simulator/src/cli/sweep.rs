//! `sweep`: one parameter of a scenario varied over a range, many seeds per value, and the
//! rate of each verdict against it (its outputs are written by `sweep_output.rs`).

use std::path::PathBuf;

use redlock_sim::runs::sweep::{Knob, SweepSpec, Target};

use super::inputs::load;
use super::progress::progress_bar;
use super::shard::ShardArgs;
use super::sweep_output::{self, Outputs};

// The variant's comment in main.rs is the command's help.
#[derive(clap::Args)]
pub(crate) struct SweepArgs {
    /// The scenario file.
    file: PathBuf,
    /// The parameter: client-pause, client-clock-slow, node-clock-fast, restart-delay,
    /// latency, nodes, persistence, resource-delay.
    #[arg(long)]
    param: String,
    /// The client or node it applies to (default: the first client, or the first node
    /// the scenario configures).
    #[arg(long)]
    target: Option<String>,
    /// The first value.
    #[arg(long, allow_negative_numbers = true)]
    from: Option<f64>,
    /// The last value.
    #[arg(long, allow_negative_numbers = true)]
    to: Option<f64>,
    /// How many evenly spaced values from --from to --to.
    #[arg(long, default_value_t = 11)]
    steps: usize,
    /// Explicit values instead of --from/--to/--steps (comma separated).
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    values: Vec<f64>,
    /// Seeds per value.
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Run without background noise.
    #[arg(long)]
    no_noise: bool,
    /// Worker threads (default: every core).
    #[arg(long)]
    threads: Option<usize>,
    /// Write every run as CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write the chart (SVG) here.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Write pages into this directory: index.html with the chart, each point linking
    /// to the page of one run at that value (under runs/).
    #[arg(long)]
    html: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Draw the boundary at this value instead of the parameter's own analysis.
    #[arg(long, allow_negative_numbers = true)]
    threshold: Option<f64>,
    /// The label of --threshold.
    #[arg(long, default_value = "expected boundary")]
    threshold_label: String,
    #[command(flatten)]
    shard: ShardArgs,
}

/// The values to sweep: the explicit ones, else `steps` evenly spaced from `from` to `to`.
fn values(
    from: Option<f64>,
    to: Option<f64>,
    steps: usize,
    explicit: &[f64],
) -> Result<Vec<f64>, String> {
    if !explicit.is_empty() {
        return Ok(explicit.to_vec());
    }
    let (Some(from), Some(to)) = (from, to) else {
        return Err("give --from and --to, or --values".into());
    };
    if steps < 2 {
        return Err("--steps must be at least 2".into());
    }
    Ok((0..steps)
        .map(|i| from + (to - from) * i as f64 / (steps - 1) as f64)
        .map(|v| (v * 1e9).round() / 1e9)
        .collect())
}

/// Runs the sweep (this shard's runs, when sharded) and writes what was asked.
pub(crate) fn sweep(args: &SweepArgs) -> Result<bool, String> {
    let values = values(args.from, args.to, args.steps, &args.values)?;
    let scenario = load(&args.file)?;
    let knob: Knob = args.param.parse()?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let spec = SweepSpec {
        knob,
        target: args.target.as_ref().map(|t| Target(t.clone())),
        values,
        seeds: args.seeds.max(1),
        first_seed: args.first_seed,
        noise: !args.no_noise,
        threshold: args.threshold.map(|at| (at, args.threshold_label.clone())),
        threads,
    };
    let shard = args.shard.shard;
    let total = spec.values.len() as u64 * spec.seeds;
    let bar = progress_bar(total, &format!("sweep {}", args.param));
    let started = std::time::Instant::now();
    let result = redlock_sim::runs::sweep::sweep_shard(&scenario, &spec, shard, &|done, _| {
        bar.set_position(done as u64);
    });
    bar.finish_and_clear();
    let result = result.map_err(|e| e.to_string())?;
    if let Some(path) = &args.shard.jsonl {
        sweep_output::write_jsonl(path, &scenario, &spec, &result, shard)?;
    }
    let outputs = Outputs {
        json: args.json,
        csv: args.csv.as_deref(),
        svg: args.svg.as_deref(),
    };
    sweep_output::write(&result, &outputs, Some((threads, started.elapsed())))?;
    if let Some(dir) = args.html.as_deref() {
        sweep_output::write_pages(dir, &scenario, &spec, &result, args.json)?;
    }
    if let Some(shard) = shard
        && !args.json
    {
        println!(
            "shard {shard}: {} of {total} runs; `redlock-sim merge` joins the shards' --jsonl files",
            result.runs.len()
        );
    }
    Ok(true)
}
