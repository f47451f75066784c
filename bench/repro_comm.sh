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

# run_tagged FILE WORKLOAD MODE REP COMMAND...: append COMMAND's JSON lines, tagged, to FILE; a
# failed command is reported and makes the script exit 1 at the end (a pipe into tag would return
# sed's status and hide it: the script then exited 0 after a failed run).
failed=0
run_tagged() {
    t_file=$1 t_name=$2 t_mode=$3 t_rep=$4
    shift 4
    st=0
    "$@" >"$OUT/.run.$$.json" || st=$?
    tag "$t_name" "$t_mode" "$t_rep" <"$OUT/.run.$$.json" >>"$t_file"
    rm -f "$OUT/.run.$$.json"
    if [ "$st" -ne 0 ]; then
        echo "repro_comm.sh: $t_name, $t_mode, rep $t_rep failed (exit $st)" >&2
        failed=1
    fi
}

for w in "$@"; do
    name=${w%%=*}
    rest=${w#*=}
    dir=${rest%%:*}
    tensor=
    [ "$rest" != "$dir" ] && tensor=${rest#*:}
    run_tagged "$OUT/sim.jsonl" "$name" sim 0 \
        "$ZEN" simulate --trace "$dir" ${tensor:+--tensor "$tensor"} --ranks "$SIM_RANKS" \
        --gbps "$SIM_GBPS" --no-cpu --json
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
                run_tagged "$OUT/measured.jsonl" "$name" "$mode" "$rep" \
                    flock "$LOCK" "$ZEN" bench sparse --trace "$dir" --ranks "$RANKS" \
                    --iters "$ITERS" --warmup 2 --json
            else
                run_tagged "$OUT/measured.jsonl" "$name" "$mode" "$rep" \
                    flock "$LOCK" "$ZEN" launch -n "$RANKS" -- "$ZEN" bench sparse --trace "$dir" \
                    --iters "$ITERS" --warmup 2 --json
            fi
        done
    done
    rep=$((rep + 1))
done
echo "wrote $OUT/measured.jsonl $OUT/sim.jsonl" >&2
[ "$failed" -eq 0 ] || { echo "repro_comm.sh: some runs failed (above)" >&2; exit 1; }
