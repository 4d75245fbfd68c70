//! The binary's commands, one file each (`main.rs` only parses the command line and
//! dispatches); the library holds the logic, these read arguments, run it, and print.
//!
//! | file | job |
//! |---|---|
//! | `run.rs` | `run`: scenarios and seeds, the corpus, the table and the JSON Lines |
//! | `sweep.rs` | `sweep`: one parameter over a range of values |
//! | `sweep_output.rs` | a sweep's table, CSV, chart, pages and JSON Lines (for `sweep` and `merge`) |
//! | `merge.rs` | `merge`: the shards' JSON Lines back into one run's output |
//! | `check.rs` | `check`, and the replay of a check's counterexample by `run` and `explain` |
//! | `explain.rs` | `explain`: a run's timeline, diagram, page and trace file |
//! | `scenarios.rs` | `scenarios`: the embedded catalogue |
//! | `inputs.rs` | the scenario files a list of paths names, a scenario, a token source |
//! | `progress.rs` | the progress bar of the commands that make many runs |
//! | `shard.rs` | the sharding and JSON Lines options of `run` and `sweep` |

pub(crate) mod check;
pub(crate) mod explain;
mod inputs;
pub(crate) mod merge;
mod progress;
pub(crate) mod run;
pub(crate) mod scenarios;
mod shard;
pub(crate) mod sweep;
mod sweep_output;
