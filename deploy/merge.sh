#!/usr/bin/env bash
# Joins the shards' files in $REDLOCK_SIM_OUT (default: results) into the table one
# unsharded run prints; exits 1 when a run's verdicts differ from its scenario's expectation,
# 2 when a shard's file is missing, repeated or from another build. Extra arguments go to
# `redlock-sim merge` (e.g. --corpus failing-seeds.jsonl, --wide).
#
# With REDLOCK_SIM_CHECK set (a swarm: see deploy/shard.sh), joins the members' files
# (swarm-*.jsonl) instead: the states they covered and any violation, whose replayable file
# goes to $REDLOCK_SIM_OUT/counterexample.toml (`redlock-sim run` replays it); exits 1 with
# a violation, 2 when a member's file is missing, repeated or of another check. The
# arguments that only runs take (--corpus FILE, --wide) are dropped with a note, so that one
# merge step serves both.
set -euo pipefail

sim="${REDLOCK_SIM:-redlock-sim}"
out="${REDLOCK_SIM_OUT:-results}"
shopt -s nullglob
if [[ -n "${REDLOCK_SIM_CHECK:-}" ]]; then
    files=("$out"/swarm-*.jsonl)
    if [[ "${#files[@]}" -eq 0 ]]; then
        echo "no swarm member files (swarm-*.jsonl) in $out" >&2
        exit 2
    fi
    args=()
    while [[ "$#" -gt 0 ]]; do
        case "$1" in
        --corpus)
            echo "merge.sh: a swarm has no corpus; $1 ${2:-} dropped" >&2
            shift
            if [[ "$#" -gt 0 ]]; then
                shift
            fi
            ;;
        --wide)
            echo "merge.sh: a swarm has no wide table; $1 dropped" >&2
            shift
            ;;
        *)
            args+=("$1")
            shift
            ;;
        esac
    done
    exec "$sim" merge "${files[@]}" --counterexample "$out/counterexample.toml" ${args[@]+"${args[@]}"}
fi
files=("$out"/shard-*.jsonl)
if [[ "${#files[@]}" -eq 0 ]]; then
    echo "no shard files (shard-*.jsonl) in $out" >&2
    exit 2
fi
exec "$sim" merge "${files[@]}" "$@"
