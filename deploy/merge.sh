#!/usr/bin/env bash
# Joins the shards' files in $REDLOCK_SIM_OUT (default: results) into the table one
# unsharded run prints; exits 1 when a run's verdicts differ from its scenario's expectation,
# 2 when a shard's file is missing, repeated or from another build. Extra arguments go to
# `redlock-sim merge` (e.g. --corpus failing-seeds.jsonl, --wide).
set -euo pipefail

sim="${REDLOCK_SIM:-redlock-sim}"
out="${REDLOCK_SIM_OUT:-results}"
shopt -s nullglob
files=("$out"/shard-*.jsonl)
if [[ "${#files[@]}" -eq 0 ]]; then
    echo "no shard files (shard-*.jsonl) in $out" >&2
    exit 2
fi
exec "$sim" merge "${files[@]}" "$@"
