#!/usr/bin/env bash
# run_peers.sh - zen side by side with real peers on the emulated cluster, in one go.
#
#   sudo bench/peers/run_peers.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, a fresh mktemp -d)
#
# For every link speed in GBPS and host count in HOSTS it brings up scripts/cluster.sh (one
# network namespace per host, tc tbf rate limit, one rank per host) and measures, on the same
# hosts and in the same run:
#   dense   zen bench allreduce --transport tcp           (zen's own algorithms)
#           bench/mpi_allreduce via cluster.sh mpirun      (MPI_Allreduce, Open MPI tcp BTL)
#           torch_gloo.py dense                            (torch.distributed all_reduce, gloo)
#   sparse  zen bench sparse (every scheme and AUTO; verified against a dense sum) and
#           torch_gloo.py sparse (all_reduce of a sparse COO tensor on gloo), for each synthetic
#           CASE (DENSITY:OVERLAP) at ROWS x WIDTH, and for the gradients of a real training run
#           (zen train --dump-grads, replayed by both)
#   model   zen simulate at the same rows/width/density/hosts/speed (synthetic random cases and
#           the trace), with the per-message latency measured by zen bench p2p on that cluster
# Every result is one JSON line in OUT_DIR/results.jsonl, tagged with "run", "hosts", "gbps",
# "case"; stderr of every command goes to OUT_DIR/log.txt. At the end bench/peers/report.py
# prints the markdown tables (ratios peer time / zen time, bytes on the wire).
# The cluster is taken down on exit, also on failure or Ctrl-C. A failing measurement is logged
# and the run goes on (its cells show as "-").
#
# Environment (defaults are the documented run, about 15 minutes on 2 cores):
#   HOSTS ("4 8")  GBPS ("1 10")  DENSE ("1M 64M 4": min max factor)  DENSE_ITERS (5)
#   ROWS (524288)  WIDTH (32)  CASES ("0.01:random 0.001:random 0.01:zipf")  SPARSE_ITERS (10)
#   TRACE_STEPS (10)  WARMUP (2)  QUICK=1 (tiny sizes, for a dry run of the whole pipeline)
# Needs root (network namespaces), Open MPI's mpirun, /usr/bin/python3 with torch (Debian
# python3-torch) and numpy.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd) || exit 2
OUT=${2:-$(mktemp -d /tmp/zen-peers.XXXXXX)}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
ZEN=$BUILD/zen
MPIBENCH=$BUILD/bench/mpi_allreduce
CLUSTER=$ROOT/scripts/cluster.sh
PY=/usr/bin/python3

HOSTS=${HOSTS:-"4 8"}
GBPS=${GBPS:-"1 10"}
DENSE=${DENSE:-"1M 64M 4"}
DENSE_ITERS=${DENSE_ITERS:-5}
ROWS=${ROWS:-524288}
WIDTH=${WIDTH:-32}
CASES=${CASES:-"0.01:random 0.001:random 0.01:zipf"}
SPARSE_ITERS=${SPARSE_ITERS:-10}
TRACE_STEPS=${TRACE_STEPS:-10}
WARMUP=${WARMUP:-2}
if [ "${QUICK:-0}" = 1 ]; then
    DENSE="1M 4M 4" DENSE_ITERS=3 ROWS=65536 WIDTH=16 SPARSE_ITERS=3 TRACE_STEPS=3 WARMUP=1
fi
read -r DMIN DMAX DFAC <<<"$DENSE"

[ "$(id -u)" = 0 ] || { echo "run_peers.sh: needs root (ip netns, tc)" >&2; exit 2; }
[ -x "$ZEN" ] || { echo "run_peers.sh: no zen binary at $ZEN (build first)" >&2; exit 2; }
[ -x "$MPIBENCH" ] && command -v mpirun >/dev/null ||
    echo "run_peers.sh: $MPIBENCH or mpirun missing: no MPI_Allreduce rows" >&2
"$PY" -c "import torch, numpy" 2>/dev/null ||
    echo "run_peers.sh: $PY cannot import torch and numpy: no torch rows" >&2

RESULTS=$OUT/results.jsonl
LOG=$OUT/log.txt
: >"$RESULTS"
: >"$LOG"
CLUSTER_UP=0
cleanup() {
    if [ "$CLUSTER_UP" = 1 ]; then "$CLUSTER" down >>"$LOG" 2>&1; fi
    CLUSTER_UP=0
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# One thread per process: 8 ranks share 2 cores, extra threads would only contend.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# gloo binds to the interface's address (inside a host namespace: eth0, not the hostname's).
export GLOO_SOCKET_IFNAME=eth0
export ZEN_TIMEOUT_S=180

PORT=29700
# measure RUN CASE CMD...: run CMD with a deadline (CMD = crun ...: as tcp ranks on the cluster's
# hosts; cmpirun ...: under Open MPI across them), tag each JSON line of its stdout with
# run/hosts/gbps/case and append it to results.jsonl
measure() {
    local run=$1 case=$2 t0 rc
    shift 2
    PORT=$((PORT + 1))
    echo "  [$run $case] $*" | sed "s|$ROOT/||g; s|$BUILD/|BUILD/|g"
    echo "### $(date -u +%T) hosts=$H gbps=$G run=$run case=$case: $*" >>"$LOG"
    case $1 in
    crun) shift; set -- "$CLUSTER" run "$H" --port "$PORT" -- "$@" ;;
    # one slot per host, so Open MPI would busy-poll; 8 spinning ranks on 2 cores would starve
    # each other, so it is told to yield when idle (as it does by itself when oversubscribed)
    cmpirun) shift; set -- "$CLUSTER" mpirun "$H" -- --mca mpi_yield_when_idle 1 "$@" ;;
    esac
    t0=$(date +%s)
    timeout -k 10 600 "$@" 2>>"$LOG" | grep '^{' |
        sed "s/^{/{\"run\":\"$run\",\"hosts\":$H,\"gbps\":$G,\"case\":\"$case\",/" >>"$RESULTS"
    rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || echo "  run_peers.sh: $run $case failed (exit $rc, see $LOG)" >&2
    echo "    $(($(date +%s) - t0)) s"
}


echo "# zen vs real peers on the emulated cluster, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr); hosts [$HOSTS] x Gbit/s [$GBPS]; raw JSON in $OUT"

TRACE=$OUT/trace
maxh=0
for H in $HOSTS; do [ "$H" -gt "$maxh" ] && maxh=$H; done
echo "# recording a gradient trace: zen train --dp $maxh --tp 1 --steps $TRACE_STEPS --dump-grads"
if ! "$ZEN" train --dp "$maxh" --tp 1 --steps "$TRACE_STEPS" --sample-tokens 0 --quiet \
    --dump-grads "$TRACE" >>"$LOG" 2>&1; then
    echo "run_peers.sh: zen train --dump-grads failed: no trace rows (see $LOG)" >&2
    TRACE=
fi

T_START=$(date +%s)
for G in $GBPS; do
    for H in $HOSTS; do
        echo "## $H hosts, $G Gbit/s"
        "$CLUSTER" up "$H" --gbps "$G" --lat-us 0 >>"$LOG" 2>&1 || {
            echo "run_peers.sh: cluster up $H failed (see $LOG)" >&2
            exit 1
        }
        CLUSTER_UP=1
        # the latency the model is given: half a round trip of 8 bytes between two hosts
        measure zen-p2p lat "$CLUSTER" run 2 --port 29650 -- "$ZEN" bench p2p --transport tcp \
            --mode pingpong -b 8 -e 8 -w 20 -n 200 --json

        sweep=(-b "$DMIN" -e "$DMAX" -f "$DFAC" -w "$WARMUP" -n "$DENSE_ITERS" --json)
        measure zen-dense dense crun "$ZEN" bench allreduce --transport tcp "${sweep[@]}"
        measure mpi-dense dense cmpirun "$MPIBENCH" "${sweep[@]}" --label mpi-tcp
        tcases=$(echo "$CASES" | tr ' ' ',')
        tmodes=(dense sparse)
        [ -n "$TRACE" ] && tmodes+=(trace --trace "$TRACE")
        # one torch process per rank runs all its workloads: importing torch takes seconds
        measure torch all crun "$PY" "$HERE/torch_gloo.py" "${tmodes[@]}" -b "$DMIN" \
            -e "$DMAX" -f "$DFAC" -w "$WARMUP" -n "$DENSE_ITERS" --rows "$ROWS" --width "$WIDTH" \
            --cases "$tcases" --threads 1

        for c in $CASES; do
            d=${c%%:*} ov=${c##*:}
            # the dense scheme is the dense sweep's top size when ROWS x WIDTH x 4 equals it
            measure zen-sparse "$c" crun "$ZEN" bench sparse --rows "$ROWS" --width "$WIDTH" \
                --density "$d" --overlap "$ov" --iters "$SPARSE_ITERS" --warmup "$WARMUP" --json
        done
        if [ -n "$TRACE" ]; then
            measure zen-sparse trace crun "$ZEN" bench sparse --trace "$TRACE" \
                --iters "$SPARSE_ITERS" --warmup "$WARMUP" --json
        fi
        cleanup

        lat=$(grep '"run":"zen-p2p"' "$RESULTS" | grep "\"hosts\":$H,\"gbps\":$G," |
            sed -n 's/.*"time_us_p50":\([0-9.]*\).*/\1/p' | tail -1)
        lat=${lat:-10}
        for c in $CASES; do
            d=${c%%:*} ov=${c##*:}
            case $ov in random | identical | disjoint) ;; *) continue ;; esac
            measure zen-sim "$c" "$ZEN" simulate --ranks "$H" --gbps "$G" --lat-us "$lat" \
                --rows "$ROWS" --width "$WIDTH" --density "$d" --overlap "$ov" --json
        done
        [ -n "$TRACE" ] && measure zen-sim trace "$ZEN" simulate --ranks "$H" --gbps "$G" \
            --lat-us "$lat" --trace "$TRACE" --json
    done
done
echo "# measurements took $(($(date +%s) - T_START)) s; raw JSON: $RESULTS; log: $LOG"
echo
"$PY" "$HERE/report.py" "$RESULTS"
