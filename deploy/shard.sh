#!/usr/bin/env bash
# One worker of a sharded simulator run, or one member of a swarm of model-checker
# searches, the same on every job engine. The engine says which shard (or member) this is
# (`--shard auto` / `--swarm auto`: REDLOCK_SIM_SHARD=I/N from a CI matrix,
# JOB_COMPLETION_INDEX with REDLOCK_SIM_SHARD_COUNT on Kubernetes, SLURM_ARRAY_TASK_ID and
# its siblings on Slurm). A sharded run's runs go to $REDLOCK_SIM_OUT/shard-I-of-N.jsonl, a
# swarm member's record to $REDLOCK_SIM_OUT/swarm-I-of-N.jsonl; deploy/merge.sh joins them.
#
#   REDLOCK_SIM            the binary (default: redlock-sim on PATH)
#   REDLOCK_SIM_SCENARIOS  scenario files or directories, space separated
#                          (default: simulator/scenarios)
#   REDLOCK_SIM_SEEDS      seeds per scenario (default: 100)
#   REDLOCK_SIM_OUT        the directory for the shard's file (default: results)
#   REDLOCK_SIM_CHECK      a check file: run `check --swarm auto` on it instead (a swarm
#                          member: its own order of steps and hash seed)
#   REDLOCK_SIM_MAX_STATES, REDLOCK_SIM_MAX_MEMORY
#                          a swarm member's bounds (--max-states, --max-memory; default:
#                          none, and half the memory available)
set -euo pipefail

sim="${REDLOCK_SIM:-redlock-sim}"
out="${REDLOCK_SIM_OUT:-results}"
mkdir -p "$out"

status=0
if [[ -n "${REDLOCK_SIM_CHECK:-}" ]]; then
    bounds=()
    if [[ -n "${REDLOCK_SIM_MAX_STATES:-}" ]]; then
        bounds+=(--max-states "$REDLOCK_SIM_MAX_STATES")
    fi
    if [[ -n "${REDLOCK_SIM_MAX_MEMORY:-}" ]]; then
        bounds+=(--max-memory "$REDLOCK_SIM_MAX_MEMORY")
    fi
    "$sim" check "$REDLOCK_SIM_CHECK" --swarm auto ${bounds[@]+"${bounds[@]}"} \
        --jsonl "$out/swarm-{shard}.jsonl" || status=$?
else
    read -r -a scenarios <<<"${REDLOCK_SIM_SCENARIOS:-simulator/scenarios}"
    "$sim" run "${scenarios[@]}" --seeds "${REDLOCK_SIM_SEEDS:-100}" \
        --shard auto --jsonl "$out/shard-{shard}.jsonl" || status=$?
fi
# Exit status 1 means a run's verdicts differ from its scenario's expectation, or a swarm
# member found a violation: the merge reports it and fails. Retrying the worker would only
# repeat it (runs and members are deterministic), so the worker succeeds; 2 (bad input, a
# run that cannot finish) fails it.
if [[ "$status" -gt 1 ]]; then
    exit "$status"
fi
