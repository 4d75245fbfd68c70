#!/usr/bin/env bash
# One worker of a sharded simulator run, the same on every job engine. The engine says which
# shard this is (`redlock-sim run --shard auto`: REDLOCK_SIM_SHARD=I/N from a CI matrix,
# JOB_COMPLETION_INDEX with REDLOCK_SIM_SHARD_COUNT on Kubernetes, SLURM_ARRAY_TASK_ID and
# its siblings on Slurm); the shard's runs go to $REDLOCK_SIM_OUT/shard-I-of-N.jsonl, which
# deploy/merge.sh joins.
#
#   REDLOCK_SIM            the binary (default: redlock-sim on PATH)
#   REDLOCK_SIM_SCENARIOS  scenario files or directories, space separated
#                          (default: simulator/scenarios)
#   REDLOCK_SIM_SEEDS      seeds per scenario (default: 100)
#   REDLOCK_SIM_OUT        the directory for the shard's file (default: results)
set -euo pipefail

sim="${REDLOCK_SIM:-redlock-sim}"
out="${REDLOCK_SIM_OUT:-results}"
read -r -a scenarios <<<"${REDLOCK_SIM_SCENARIOS:-simulator/scenarios}"
mkdir -p "$out"

status=0
"$sim" run "${scenarios[@]}" --seeds "${REDLOCK_SIM_SEEDS:-100}" \
    --shard auto --jsonl "$out/shard-{shard}.jsonl" || status=$?
# Exit status 1 means a run's verdicts differ from its scenario's expectation: the merge
# reports it and fails. Retrying the shard would only repeat it (runs are deterministic), so
# the worker succeeds; 2 (bad input, a run that cannot finish) fails it.
if [[ "$status" -gt 1 ]]; then
    exit "$status"
fi
