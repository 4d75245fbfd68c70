//! Many runs: the seeds of one or many scenarios split among shards, sweeps of one
//! parameter, their records as JSON Lines, the merge of a sharded run's records, the corpus
//! of failing seeds, and what `run` prints.
//!
//! | file | job |
//! |---|---|
//! | `shard.rs` | which runs one worker of many makes |
//! | `sweep/` | one parameter varied over a range, many seeds per value (`knob.rs`: the parameters) |
//! | `jsonl.rs` | one JSON line per run, as `run --jsonl` and `sweep --jsonl` write them |
//! | `merge.rs` | the shards' lines back into one run or sweep, every run there once |
//! | `swarm.rs` | a swarm member's line (`check --swarm`), and the members joined: each there once, what they covered |
//! | `corpus.rs` | the failing seeds that `run --corpus` replays first |
//! | `run_output.rs` | what `run` prints from its runs' lines |
//! | `seed_summary.rs` | `run --seeds N`'s table: one row per scenario |
//!
//! A sweep's chart and pages are views, drawn in `explain/`.

pub mod corpus;
pub mod jsonl;
pub mod merge;
pub mod run_output;
pub mod seed_summary;
pub mod shard;
pub mod swarm;
pub mod sweep;
