//! The chaos run at a larger scale, for as long as asked: clients over real `redis-server`
//! nodes behind fault proxies, a seeded schedule of pauses, kills, restarts, partitions
//! and latency spikes, and a summary at the end.
//!
//! ```sh
//! cargo run --release --example soak -- --duration 60s --seed 7
//! cargo run --release --example soak -- --duration 10m --clients 32 --resources 8
//! cargo run --release --example soak -- --duration 60s --unsafe   # restarts lose keys
//! ```
//!
//! Exits with status 1 when a promise was broken (an overlap, a call over its bound, an
//! unexpected error, an episode after which acquisitions did not resume, a key left
//! behind), 0 otherwise. With `--unsafe` the nodes run without persistence, so an immediate
//! restart after `kill -9` forgets keys: overlaps are then possible and expected now and
//! then, and are reported without failing the run.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use redlock_tests::Persistence;
use redlock_tests::chaos::{self, ChaosConfig};

/// Soak the Redlock client under random faults.
#[derive(Debug, Parser)]
struct Args {
    /// How long to run: `90s`, `10m`, `2h`, `500ms`.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    duration: Duration,
    /// The seed of the fault schedule (default: `REDLOCK_CHAOS_SEED`, else random).
    #[arg(long)]
    seed: Option<u64>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Resources they contend for.
    #[arg(long, default_value_t = 4)]
    resources: usize,
    /// Nodes in the fleet.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Lease TTL in milliseconds.
    #[arg(long, default_value_t = 1_000)]
    ttl_ms: u64,
    /// Run the nodes without persistence: the unsafe configuration.
    #[arg(long = "unsafe")]
    unsafe_restarts: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a number then ms, s, m or h"))?;
    let seconds = match unit {
        "ms" => return Ok(Duration::from_millis(number)),
        "s" | "" => number,
        "m" => number.saturating_mul(60),
        "h" => number.saturating_mul(3_600),
        other => return Err(format!("`{text}`: unknown unit `{other}` (ms, s, m or h)")),
    };
    Ok(Duration::from_secs(seconds))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seed = match args.seed {
        Some(seed) => seed,
        None => match ChaosConfig::seed_from_env() {
            Ok(seed) => seed,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
    };
    let config = ChaosConfig {
        nodes: args.nodes,
        clients: args.clients,
        resources: args.resources,
        ttl: Duration::from_millis(args.ttl_ms),
        persistence: if args.unsafe_restarts {
            Persistence::None
        } else {
            Persistence::AppendFsyncAlways
        },
        target_acquisitions: u64::MAX,
        max_duration: args.duration,
        progress_every: Some(Duration::from_secs(10)),
        ..ChaosConfig::new(seed)
    };
    println!(
        "soak: seed {seed}, {:?}, {} clients on {} resources over {} nodes ({:?}), ttl {:?}",
        config.max_duration,
        config.clients,
        config.resources,
        config.nodes,
        config.persistence,
        config.ttl
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(chaos::run(&config)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("the soak could not run: {e}");
            return ExitCode::from(2);
        }
    };
    println!("{report}");
    let mut problems = report.problems();
    if args.unsafe_restarts {
        // Overlaps (and the overruns that come with them) are the point of the unsafe run.
        problems.retain(|p| !p.contains("overlap"));
    }
    if problems.is_empty() {
        println!("no promise broken");
        ExitCode::SUCCESS
    } else {
        for problem in &problems {
            println!("BROKEN: {problem}");
        }
        ExitCode::FAILURE
    }
}
