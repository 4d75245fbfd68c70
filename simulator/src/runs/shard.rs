//! Sharding: which runs of a `run --seeds` or a `sweep` one worker of many does.
//!
//! Shard `I/N` (1-based, as cargo-nextest counts) takes the runs whose key hashes to
//! `I - 1` modulo `N`. The key is the run's identity alone — the scenario's name (and, in a
//! sweep, the parameter, its target and the value) with the seed — so adding scenarios,
//! seeds or values never moves another run to another shard. The hash is SipHash-1-3 with
//! zero keys over a length-prefixed encoding: fixed by its specification, not by the Rust
//! version, so that shards built by different toolchains agree.
//!
//! `--shard auto` reads the index and count from the job engine's environment
//! ([`Shard::from_env`]).

use std::fmt;
use std::hash::Hasher;
use std::str::FromStr;

use siphasher::sip::SipHasher13;

/// One shard of `count`: `index` runs from 1 to `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

/// Why a shard could not be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShardError(String);

/// The variable that names the shard outright, as `I/N` (set it from a CI matrix).
pub const SHARD_VAR: &str = "REDLOCK_SIM_SHARD";
/// The shard count beside a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` (set it to the
/// Job's `completions`: Kubernetes does not pass that on).
pub const COUNT_VAR: &str = "REDLOCK_SIM_SHARD_COUNT";

impl Shard {
    /// Shard `index` of `count` (1-based).
    ///
    /// # Errors
    ///
    /// When `count` is 0 or `index` is not within `1..=count`.
    pub fn new(index: u64, count: u64) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError(format!(
                "shard {index}/{count}: the count must be at least 1"
            )));
        }
        if index == 0 || index > count {
            return Err(ShardError(format!(
                "shard {index}/{count}: the index counts from 1 to {count}"
            )));
        }
        Ok(Self { index, count })
    }

    /// The shard's index, from 1.
    pub fn index(self) -> u64 {
        self.index
    }

    /// How many shards there are.
    pub fn count(self) -> u64 {
        self.count
    }

    /// Whether the run with this key ([`run_key`], [`sweep_key`]) belongs to this shard.
    pub fn contains(self, key: u64) -> bool {
        key % self.count == self.index - 1
    }

    /// The shard a job engine gives this process, read through `var` (the environment, or
    /// a map in tests). In order of precedence:
    ///
    /// 1. `REDLOCK_SIM_SHARD=I/N`, for a CI matrix (GitHub Actions, GitLab `parallel`) or by
    ///    hand;
    /// 2. Kubernetes Indexed Jobs: `JOB_COMPLETION_INDEX` (from 0) with
    ///    `REDLOCK_SIM_SHARD_COUNT`;
    /// 3. Slurm job arrays: `SLURM_ARRAY_TASK_ID`, counted from `SLURM_ARRAY_TASK_MIN` in
    ///    steps of `SLURM_ARRAY_TASK_STEP` (1 when unset), of `SLURM_ARRAY_TASK_COUNT`.
    ///
    /// # Errors
    ///
    /// When none is set, or a value is not a number or out of range; the message names the
    /// variable.
    pub fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Self, ShardError> {
        if let Some(value) = var(SHARD_VAR) {
            return value
                .parse()
                .map_err(|ShardError(e)| ShardError(format!("{SHARD_VAR}={value}: {e}")));
        }
        if let Some(index) = var("JOB_COMPLETION_INDEX") {
            let index = number("JOB_COMPLETION_INDEX", &index)?;
            let count = var(COUNT_VAR).ok_or_else(|| {
                ShardError(format!(
                    "JOB_COMPLETION_INDEX is set but {COUNT_VAR} is not: set it to the Job's completions"
                ))
            })?;
            let count = number(COUNT_VAR, &count)?;
            return Self::new(index.saturating_add(1), count).map_err(|ShardError(e)| {
                ShardError(format!(
                    "JOB_COMPLETION_INDEX={index} with {COUNT_VAR}={count}: {e}"
                ))
            });
        }
        if let Some(id) = var("SLURM_ARRAY_TASK_ID") {
            let id = number("SLURM_ARRAY_TASK_ID", &id)?;
            let read = |name: &str| {
                var(name).ok_or_else(|| {
                    ShardError(format!(
                        "SLURM_ARRAY_TASK_ID is set but {name} is not (is this a job array?)"
                    ))
                })
            };
            let min = number("SLURM_ARRAY_TASK_MIN", &read("SLURM_ARRAY_TASK_MIN")?)?;
            let count = number("SLURM_ARRAY_TASK_COUNT", &read("SLURM_ARRAY_TASK_COUNT")?)?;
            let step = match var("SLURM_ARRAY_TASK_STEP") {
                Some(step) => number("SLURM_ARRAY_TASK_STEP", &step)?.max(1),
                None => 1,
            };
            let offset = id.checked_sub(min).filter(|o| o % step == 0).ok_or_else(|| {
                ShardError(format!(
                    "SLURM_ARRAY_TASK_ID={id} is not SLURM_ARRAY_TASK_MIN={min} plus a multiple of \
                     the step {step}: give the array as a range, e.g. --array=0-{}",
                    count.saturating_sub(1)
                ))
            })?;
            return Self::new(offset / step + 1, count).map_err(|ShardError(e)| {
                ShardError(format!(
                    "SLURM_ARRAY_TASK_ID={id} (from {min} in steps of {step}) of \
                     SLURM_ARRAY_TASK_COUNT={count}: {e}"
                ))
            });
        }
        Err(ShardError(format!(
            "--shard auto: none of {SHARD_VAR}, JOB_COMPLETION_INDEX (Kubernetes) or \
             SLURM_ARRAY_TASK_ID (Slurm) is set"
        )))
    }
}

/// The shard a `--shard` argument names: `I/N`, or `auto` for [`Shard::from_env`] on this
/// process's environment.
///
/// # Errors
///
/// As [`Shard::from_str`] and [`Shard::from_env`].
pub fn parse_arg(text: &str) -> Result<Shard, ShardError> {
    if text == "auto" {
        Shard::from_env(&|name| std::env::var(name).ok())
    } else {
        text.parse()
    }
}

/// `path` with `{shard}` replaced by the shard, as `2-of-4` (`all` when unsharded): one
/// `--jsonl results/shard-{shard}.jsonl` serves every worker of a job engine.
pub fn fill_path(path: &std::path::Path, shard: Option<Shard>) -> std::path::PathBuf {
    let name = shard.map_or_else(
        || "all".to_owned(),
        |s| format!("{}-of-{}", s.index, s.count),
    );
    path.to_string_lossy().replace("{shard}", &name).into()
}

fn number(name: &str, value: &str) -> Result<u64, ShardError> {
    value
        .trim()
        .parse()
        .map_err(|_| ShardError(format!("{name}={value}: not a whole number")))
}

impl FromStr for Shard {
    type Err = ShardError;

    /// `I/N`, e.g. `3/8`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (index, count) = text.split_once('/').ok_or_else(|| {
            ShardError(format!(
                "shard `{text}`: expected I/N, e.g. 1/4 (I from 1 to N), or auto"
            ))
        })?;
        let parse = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| {
                ShardError(format!(
                    "shard `{text}`: `{part}` is not a whole number; expected I/N, e.g. 1/4"
                ))
            })
        };
        Self::new(parse(index)?, parse(count)?)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The key of one run of `run --seeds`: the scenario's name and the seed.
pub fn run_key(scenario: &str, seed: u64) -> u64 {
    let mut hasher = KeyHasher::new("run");
    hasher.text(scenario);
    hasher.number(seed);
    hasher.finish()
}

/// The key of one run of a sweep: the grid point (scenario, parameter, target, value) and
/// the seed. `-0.0` counts as `0.0`.
pub fn sweep_key(scenario: &str, parameter: &str, target: &str, value: f64, seed: u64) -> u64 {
    let mut hasher = KeyHasher::new("sweep");
    hasher.text(scenario);
    hasher.text(parameter);
    hasher.text(target);
    let value = if value == 0.0 { 0.0 } else { value };
    hasher.number(value.to_bits());
    hasher.number(seed);
    hasher.finish()
}

/// SipHash-1-3 with zero keys over length-prefixed fields, so that ("ab", "c") and
/// ("a", "bc") differ.
struct KeyHasher(SipHasher13);

impl KeyHasher {
    fn new(kind: &str) -> Self {
        let mut hasher = Self(SipHasher13::new_with_keys(0, 0));
        hasher.text(kind);
        hasher
    }

    fn text(&mut self, text: &str) {
        self.number(text.len() as u64);
        self.0.write(text.as_bytes());
    }

    fn number(&mut self, n: u64) {
        self.0.write(&n.to_le_bytes());
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn parses_i_of_n_from_one() {
        assert_eq!("1/4".parse::<Shard>().unwrap(), Shard::new(1, 4).unwrap());
        assert_eq!("4/4".parse::<Shard>().unwrap().to_string(), "4/4");
        for bad in ["0/4", "5/4", "1/0", "a/4", "1/b", "3", "", "-1/4"] {
            let error = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(
                error.contains(&format!("`{bad}`")) || error.contains(bad),
                "{error}"
            );
        }
        assert!(
            "0/4"
                .parse::<Shard>()
                .unwrap_err()
                .to_string()
                .contains("from 1 to 4")
        );
    }

    #[test]
    fn every_key_is_in_exactly_one_shard() {
        let shards: Vec<Shard> = (1..=4).map(|i| Shard::new(i, 4).unwrap()).collect();
        let mut sizes = [0; 4];
        for seed in 0..4000 {
            let key = run_key("RL-00 baseline", seed);
            let owners: Vec<usize> = (0..4).filter(|&i| shards[i].contains(key)).collect();
            assert_eq!(owners.len(), 1);
            sizes[owners[0]] += 1;
        }
        // A fair hash: each shard gets about a quarter.
        assert!(sizes.iter().all(|&n| (800..1200).contains(&n)), "{sizes:?}");
    }

    #[test]
    fn keys_are_fixed_by_the_algorithm_not_the_toolchain() {
        // Pinned: a change here moves runs between shards of different builds.
        assert_eq!(run_key("RL-00 baseline", 1), run_key("RL-00 baseline", 1));
        assert_ne!(run_key("ab", 1), run_key("a", 1));
        assert_ne!(
            sweep_key("s", "p", "c1", 1.0, 1),
            sweep_key("s", "p", "c1", 2.0, 1)
        );
        assert_eq!(
            sweep_key("s", "p", "c1", 0.0, 1),
            sweep_key("s", "p", "c1", -0.0, 1)
        );
        assert_eq!(run_key("RL-00 baseline", 1), 0x699f_c004_0b3e_53d2);
    }

    #[test]
    fn a_path_names_its_shard() {
        let shard = Shard::new(2, 4).ok();
        assert_eq!(
            fill_path(std::path::Path::new("out/shard-{shard}.jsonl"), shard),
            std::path::Path::new("out/shard-2-of-4.jsonl")
        );
        assert_eq!(
            fill_path(std::path::Path::new("out/{shard}.jsonl"), None),
            std::path::Path::new("out/all.jsonl")
        );
    }

    #[test]
    fn auto_reads_each_engine() {
        let shard = |pairs: &[(&str, &str)]| Shard::from_env(&env(pairs)).map(|s| s.to_string());
        assert_eq!(shard(&[("REDLOCK_SIM_SHARD", "2/8")]).unwrap(), "2/8");
        assert_eq!(
            shard(&[
                ("JOB_COMPLETION_INDEX", "0"),
                ("REDLOCK_SIM_SHARD_COUNT", "4")
            ])
            .unwrap(),
            "1/4"
        );
        assert_eq!(
            shard(&[
                ("SLURM_ARRAY_TASK_ID", "7"),
                ("SLURM_ARRAY_TASK_MIN", "5"),
                ("SLURM_ARRAY_TASK_COUNT", "4")
            ])
            .unwrap(),
            "3/4"
        );
        assert_eq!(
            shard(&[
                ("SLURM_ARRAY_TASK_ID", "8"),
                ("SLURM_ARRAY_TASK_MIN", "0"),
                ("SLURM_ARRAY_TASK_STEP", "4"),
                ("SLURM_ARRAY_TASK_COUNT", "4")
            ])
            .unwrap(),
            "3/4"
        );
        // The explicit variable wins.
        assert_eq!(
            shard(&[("REDLOCK_SIM_SHARD", "1/2"), ("SLURM_ARRAY_TASK_ID", "1")]).unwrap(),
            "1/2"
        );
    }

    #[test]
    fn auto_says_which_variable_is_wrong() {
        let error = |pairs: &[(&str, &str)]| Shard::from_env(&env(pairs)).unwrap_err().to_string();
        assert!(error(&[]).contains("none of"));
        assert!(error(&[("JOB_COMPLETION_INDEX", "0")]).contains("REDLOCK_SIM_SHARD_COUNT"));
        assert!(
            error(&[
                ("JOB_COMPLETION_INDEX", "4"),
                ("REDLOCK_SIM_SHARD_COUNT", "4")
            ])
            .contains("from 1 to 4")
        );
        assert!(error(&[("JOB_COMPLETION_INDEX", "x")]).contains("JOB_COMPLETION_INDEX=x"));
        assert!(error(&[("REDLOCK_SIM_SHARD", "9/4")]).contains("REDLOCK_SIM_SHARD=9/4"));
        assert!(
            error(&[
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_ARRAY_TASK_MIN", "5"),
                ("SLURM_ARRAY_TASK_COUNT", "4")
            ])
            .contains("SLURM_ARRAY_TASK_MIN=5")
        );
        assert!(error(&[("SLURM_ARRAY_TASK_ID", "3")]).contains("SLURM_ARRAY_TASK_MIN"));
    }
}
