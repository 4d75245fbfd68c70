//! A deterministic simulator for Redlock: the `redlock-quorum` core under simulated nodes,
//! networks and clocks, with a judge that says whether mutual exclusion held (no two
//! holders believed they held the lease at once), whether unfenced writes went stale, and
//! whether fencing saved the resource.
//!
//! # Layout
//!
//! One wing per job; the engine at the bottom, the views and the binary on top. No file
//! imports from a wing above its own.
//!
//! | entry | job |
//! |---|---|
//! | `time/` | true time in nanoseconds, and each process's clock as a function of it |
//! | `scenario/` | scenario files (raw TOML, translation, errors) and the embedded catalogue |
//! | `net/` | the simulated network, and the messages it carries |
//! | `node/` | the simulated Redis servers and their keyspace |
//! | `client/` | the simulated client: the core's machines driven in virtual time, its faults |
//! | `world/` | the event queue, the dispatch, the scenario's script of faults |
//! | `judge/` | the history a run records, the judgement of it, the report of verdicts |
//! | `runs/` | many runs: shards, sweeps, JSON Lines, merge, the corpus, `run`'s tables |
//! | `explain/` | every picture: timeline, diagram, page, Chrome trace, a sweep's chart and pages |
//! | `check/` | the model checker: every interleaving of the core's machines in a bounded model |
//! | `cli/`, `main.rs` | the `redlock-sim` binary (the `cli` feature): one file per command |
//! | `lib.rs` | this map, and [`run`]: one scenario with one seed, judged |
//!
//! # What is simulated
//!
//! - **True time** in integer nanoseconds and one event queue ordered by (time, sequence
//!   number); **one seeded ChaCha8 generator** decides everything random. The same scenario
//!   and seed give a byte-identical trace.
//! - **Clocks per process**: offset, rate error (ppm), steps; a client clock may stop while
//!   its process is suspended. Servers expire keys by their own clock with absolute expiry,
//!   as Redis does; clients measure rounds and validity by theirs.
//! - **Network**: per-link latency, loss, duplication, spikes, scripted delays, symmetric and
//!   one-way partitions, FIFO per link.
//! - **Servers**: keys with expiry, the operations of the client's scripts, persistence
//!   (none, everysec, always), crashes and delayed restarts, asynchronous replicas and
//!   failovers (with `WAIT 1` as an option).
//! - **Clients**: a workload loop (acquire, a critical section of reads, writes, sleeps,
//!   checks, extensions, pauses, release) driving the very same [`redlock_core`] machines
//!   as the tokio client. Implementation faults (plain `DEL`, extend as re-acquire, wall
//!   clock, no elapsed check, late start time) are switches of the driver, never changes to
//!   the core.
//! - **Protected resource**: records every access; the [`judge`](mod@judge) judges mutual exclusion
//!   from the holders' windows, and replays the accesses unfenced, fenced on writes and
//!   strictly fenced.
//!
//! # Example
//!
//! ```
//! let text = r#"
//! name = "two clients, no faults"
//! [expect]
//! exclusion = "SAFE"
//! plain = "SAFE"
//! fenced = "SAFE"
//! strict = "SAFE"
//! [lock]
//! retries = 100
//! [[client]]
//! name = "c1"
//! steps = ["write", "sleep 1000", "write"]
//! [[client]]
//! name = "c2"
//! start_ms = 100
//! steps = ["write"]
//! "#;
//! let scenario = redlock_sim::scenario::parse(text, "inline").unwrap();
//! let run = redlock_sim::run(&scenario, 7, false).unwrap();
//! assert!(run.report.matches, "{:?}", run.report.mismatch());
//! assert_eq!(run.report.counts.leases, 2);
//! ```

pub mod check;
mod client;
pub mod explain;
pub mod judge;
mod net;
pub mod node;
pub mod runs;
pub mod scenario;
pub mod time;
mod world;

pub use judge::history::History;
pub use judge::judgement::{Judgement, judge};
pub use judge::report::Report;
pub use scenario::Scenario;
pub use world::SimError;

/// Everything one run produced.
#[derive(Debug)]
pub struct Run {
    /// The verdicts and counts.
    pub report: Report,
    /// The judge's full judgement (with the first problem).
    pub judgement: Judgement,
    /// The recorded history.
    pub history: History,
    /// The event trace, when asked for.
    pub trace: Option<String>,
    /// The messages and clock readings, when the trace was asked for.
    pub recording: Option<judge::recording::Recording>,
}

/// Runs `scenario` with `seed`; records the event trace when `trace` is set.
///
/// # Errors
///
/// [`SimError::StepLimit`] when the run needs more events than the scenario allows.
pub fn run(scenario: &Scenario, seed: u64, trace: bool) -> Result<Run, SimError> {
    let outcome = world::World::new(scenario, seed, trace).run()?;
    let judgement = judge(scenario, &outcome.history);
    let report = Report::new(
        scenario,
        seed,
        judgement.clone(),
        (
            outcome.history.acquire_calls,
            outcome.history.acquire_failures,
        ),
        outcome.events,
        outcome.ended_at,
    );
    Ok(Run {
        report,
        judgement,
        history: outcome.history,
        trace: outcome.trace,
        recording: outcome.recording,
    })
}
