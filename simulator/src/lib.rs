//! A deterministic simulator for Redlock: the `redlock-quorum` core under simulated nodes,
//! networks and clocks, with a checker that says whether mutual exclusion held (no two
//! holders believed they held the lease at once), whether unfenced writes went stale, and
//! whether fencing saved the resource.
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
//! - **Protected resource**: records every access; the [`checker`] judges mutual exclusion
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

pub mod catalogue;
pub mod check;
pub mod checker;
mod client;
pub mod clock;
pub mod corpus;
pub mod explain;
pub mod history;
pub mod jsonl;
pub mod keyspace;
pub mod merge;
mod message;
mod net;
pub mod recording;
pub mod report;
pub mod run_output;
pub mod scenario;
pub mod seed_summary;
mod server;
pub mod shard;
mod store;
#[cfg(test)]
mod svg_check;
pub mod sweep;
mod text_fit;
pub mod time;
mod world;

pub use checker::{Judgement, judge};
pub use history::History;
pub use report::Report;
pub use scenario::Scenario;
pub use world::SimError;

/// Everything one run produced.
#[derive(Debug)]
pub struct Run {
    /// The verdicts and counts.
    pub report: Report,
    /// The checker's full judgement (with the first problem).
    pub judgement: Judgement,
    /// The recorded history.
    pub history: History,
    /// The event trace, when asked for.
    pub trace: Option<String>,
    /// The messages and clock readings, when the trace was asked for.
    pub recording: Option<recording::Recording>,
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
