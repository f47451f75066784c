#!/bin/bash
# Grid of `zen bench sparse` runs for AUTO and the cost model (issue #14):
#   ranks {4,8,16} x density {0.1%,1%,10%} x overlap {random,zipf,identical}, plus real traces.
# Per cell: every scheme's p50, AUTO's choice, AUTO / fastest, the cost model's error per scheme.
#
# Usage: bench/sparse_grid.sh [ZEN] [OUT.jsonl]   (ZEN: the zen binary, default build/zen)
# Each cell runs `zen bench sparse` (schemes interleaved call by call) in each of GRID_ROUNDS
# rounds of the whole grid; the table takes each scheme's median over the rounds.
# Env:   GRID_RANKS, GRID_DENSITIES, GRID_OVERLAPS (space lists), GRID_ROWS (200000),
#        GRID_WIDTH (4), GRID_ITERS (40), GRID_WARMUP (24: AUTO's warm-up measures up to 6
#        candidates 3 times (ZEN_SPARSE_TUNE_WARM), so the timed calls are its steady state;
#        run_us has the whole run),
#        GRID_ROUNDS (6: a scheme's p50 over 40 calls moves 10-30% between runs on a shared
#        2-core host, and a 10% question needs the median of several),
#        GRID_TWINS=1 to add every scheme's twin (`zen bench sparse --twins`, a control: what
#        a chooser that always ran the fastest scheme would score; doubles the time),
#        GRID_TRACES (trace dirs, see docs/trace-format.md), GRID_TRACE_RANKS (8),
#        GRID_LAUNCH=1 to run each cell as processes under `zen launch` (shm on one host;
#        GRID_LAUNCH_TRANSPORT=tcp for tcp) instead of inproc threads.
# Take timings under the shared lock: flock /tmp/zen-bench.lock bench/sparse_grid.sh
set -euo pipefail
ZEN=${1:-build/zen}
OUT=${2:-/tmp/zen-sparse-grid.jsonl}
RANKS=${GRID_RANKS-"4 8 16"} # set and empty: traces only
DENSITIES=${GRID_DENSITIES:-"0.001 0.01 0.1"}
OVERLAPS=${GRID_OVERLAPS:-"random zipf identical"}
ROWS=${GRID_ROWS:-200000}
WIDTH=${GRID_WIDTH:-4}
ITERS=${GRID_ITERS:-40}
WARMUP=${GRID_WARMUP:-24}
ROUNDS=${GRID_ROUNDS:-6}
TWINS=
[ "${GRID_TWINS:-0}" = 1 ] && TWINS=--twins
# OpenBLAS (linked for tensor parallelism) starts a worker per core at load that spins for about
# 0.1 s of CPU; the sparse path makes no BLAS call, so without this every rank's first calls
# share the cores with a spinner.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
: >"$OUT"
run_cell() { # ranks, then bench arguments
    local n=$1
    shift
    if [ "${GRID_LAUNCH:-0}" = 1 ]; then
        "$ZEN" launch -n "$n" --transport "${GRID_LAUNCH_TRANSPORT:-auto}" -- "$ZEN" bench sparse "$@" --iters "$ITERS" --warmup "$WARMUP" \
            $TWINS --json | grep '^{' >>"$OUT"
    else
        "$ZEN" bench sparse --ranks "$n" "$@" --iters "$ITERS" --warmup "$WARMUP" $TWINS --json >>"$OUT"
    fi
}
for round in $(seq "$ROUNDS"); do
    for n in $RANKS; do
        for d in $DENSITIES; do
            for o in $OVERLAPS; do
                run_cell "$n" --rows "$ROWS" --width "$WIDTH" --density "$d" --overlap "$o"
            done
        done
    done
    for t in ${GRID_TRACES:-}; do
        run_cell "${GRID_TRACE_RANKS:-8}" --trace "$t"
    done
    echo "sparse_grid: round $round of $ROUNDS done" >&2
done
/usr/bin/python3 "$(dirname "$0")/sparse_grid_table.py" "$OUT"
