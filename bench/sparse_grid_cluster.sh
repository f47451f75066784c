#!/bin/bash
# The issue #14 grid's emulated-cluster part: `zen bench sparse` (every scheme and AUTO, so the
# JSON carries the cost model's predictions) on HOSTS emulated hosts (scripts/cluster.sh, one rank
# per host) at 1 and 10 Gbit/s, synthetic 200,000 x 4 at three densities plus a recorded trace.
# The hosts share this machine's cores, so the model is told each rank's core share.
#
# Usage: bench/sparse_grid_cluster.sh BUILD_DIR OUT_PREFIX [TRACE_DIR]   (needs root)
#   writes OUT_PREFIX1.jsonl and OUT_PREFIX10.jsonl (one file per rate: the table script keys
#   cells by transport, and both rates are tcp); tabulate each with bench/sparse_grid_table.py.
# Env: HOSTS (4), GBPS ("1 10"), ITERS (20), WARMUP (24), ROUNDS (3: the table takes each scheme's
#      median over them, as bench/sparse_grid.sh), ZEN_SPARSE_CPU_SHARE (cores / HOSTS).
# Holds /tmp/zen-bench.lock, then /tmp/zen-cluster.lock, per rate.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
OUT=$2
TRACE=${3:-}
HERE=$(cd "$(dirname "$0")/.." && pwd)
HOSTS=${HOSTS:-4}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-24}
ROUNDS=${ROUNDS:-3}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} # as bench/sparse_grid.sh
export ZEN_CLUSTER_NAME=${ZEN_CLUSTER_NAME:-grid14} ZEN_BUILD=$BUILD
export ZEN_SPARSE_CPU_SHARE=${ZEN_SPARSE_CPU_SHARE:-$(awk -v c="$(nproc)" -v h="$HOSTS" \
    'BEGIN { s = c / h; print (s < 1 ? s : 1) }')}
for g in ${GBPS:-1 10}; do
    out=$OUT$g.jsonl
    : >"$out"
    flock /tmp/zen-bench.lock flock /tmp/zen-cluster.lock bash -c '
        set -euo pipefail
        cluster=$1/scripts/cluster.sh zen=$2/zen hosts=$3 out=$5 iters=$6 warmup=$7 trace=$8
        rounds=$9
        "$cluster" down >/dev/null 2>&1 || true
        "$cluster" up "$hosts" --gbps "$4" >&2
        run() {
            "$cluster" run "$hosts" -- "$zen" bench sparse "$@" --iters "$iters" \
                --warmup "$warmup" --timeout 300 --json | grep "^{" >>"$out"
        }
        for _ in $(seq "$rounds"); do
            for d in 0.001 0.01 0.1; do
                run --rows 200000 --width 4 --density "$d"
            done
            if [ -n "$trace" ]; then run --trace "$trace"; fi
        done
        "$cluster" down >&2
    ' _ "$HERE" "$BUILD" "$HOSTS" "$g" "$out" "$ITERS" "$WARMUP" "$TRACE" "$ROUNDS"
done
