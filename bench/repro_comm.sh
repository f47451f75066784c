#!/bin/sh
# repro_comm.sh - sparse-allreduce time per scheme on recorded gradient traces, measured
# (inproc threads and tcp processes) and predicted (zen simulate), for docs/reproduction.md.
#
#   bench/repro_comm.sh BUILD_DIR OUT_DIR NAME=TRACE_DIR[:TENSOR] ...
#
# For each workload NAME (a trace directory of bench/gen_workloads.py or zen train --dump-grads):
#   measured   `zen bench sparse --trace` at RANKS ranks (8), inproc and over tcp with one process
#              per rank (zen launch), REPS (2) rounds, the workloads and transports interleaved
#              so every scheme of one line saw the same load; every scheme's result is verified
#              against a dense sum. One JSON line per scheme to OUT_DIR/measured.jsonl with
#              "workload", "mode" and "rep" added.
#   predicted  `zen simulate --trace` (network only, --no-cpu: the paper's GPUs do the local work)
#              at SIM_RANKS (16,32,64,128) and SIM_GBPS (25,100: the paper's testbeds A and B),
#              profiled on TENSOR (default the first tensor of the files), to OUT_DIR/sim.jsonl.
# ITERS (10) timed iterations per scheme and run. Timings run under flock $LOCK
# (/tmp/zen-bench.lock) so they do not overlap other benchmarks on a shared host.
set -eu
BUILD=$1
OUT=$2
shift 2
ZEN=$BUILD/zen
RANKS=${RANKS:-8}
REPS=${REPS:-2}
ITERS=${ITERS:-10}
SIM_RANKS=${SIM_RANKS:-16,32,64,128}
SIM_GBPS=${SIM_GBPS:-25,100}
LOCK=${LOCK:-/tmp/zen-bench.lock}
MODES=${MODES:-"inproc tcp"}
mkdir -p "$OUT"
: >"$OUT/measured.jsonl"
: >"$OUT/sim.jsonl"

tag() { sed -n "s/^{/{\"workload\":\"$1\",\"mode\":\"$2\",\"rep\":$3,/p"; }

for w in "$@"; do
    name=${w%%=*}
    rest=${w#*=}
    dir=${rest%%:*}
    tensor=
    [ "$rest" != "$dir" ] && tensor=${rest#*:}
    "$ZEN" simulate --trace "$dir" ${tensor:+--tensor "$tensor"} --ranks "$SIM_RANKS" \
        --gbps "$SIM_GBPS" --no-cpu --json | tag "$name" sim 0 >>"$OUT/sim.jsonl"
done

rep=1
while [ "$rep" -le "$REPS" ]; do
    for w in "$@"; do
        name=${w%%=*}
        rest=${w#*=}
        dir=${rest%%:*}
        for mode in $MODES; do
            echo "rep $rep $name $mode" >&2
            if [ "$mode" = inproc ]; then
                flock "$LOCK" "$ZEN" bench sparse --trace "$dir" --ranks "$RANKS" \
                    --iters "$ITERS" --warmup 2 --json | tag "$name" "$mode" "$rep" \
                    >>"$OUT/measured.jsonl"
            else
                flock "$LOCK" "$ZEN" launch -n "$RANKS" -- "$ZEN" bench sparse --trace "$dir" \
                    --iters "$ITERS" --warmup 2 --json | tag "$name" "$mode" "$rep" \
                    >>"$OUT/measured.jsonl"
            fi
        done
    done
    rep=$((rep + 1))
done
echo "wrote $OUT/measured.jsonl $OUT/sim.jsonl" >&2
