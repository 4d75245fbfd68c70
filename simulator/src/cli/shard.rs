//! The sharding and JSON Lines options that `run` and `sweep` share.

use std::path::PathBuf;

/// Sharding and JSON Lines output, shared by `run` and `sweep`.
#[derive(clap::Args)]
pub(crate) struct ShardArgs {
    /// Run only shard I of N (1 <= I <= N), or `auto`: from REDLOCK_SIM_SHARD=I/N,
    /// JOB_COMPLETION_INDEX with REDLOCK_SIM_SHARD_COUNT (Kubernetes), or
    /// SLURM_ARRAY_TASK_ID, _MIN and _COUNT (Slurm).
    #[arg(long, value_parser = redlock_sim::runs::shard::parse_arg)]
    pub(crate) shard: Option<redlock_sim::runs::shard::Shard>,
    /// Write one JSON line per run here, for `redlock-sim merge`; `{shard}` in the path
    /// becomes the shard, as `2-of-4` (`all` when unsharded).
    #[arg(long)]
    pub(crate) jsonl: Option<PathBuf>,
}
