#!/usr/bin/env bash
# run_peers.sh - zen side by side with real peers on the emulated cluster, in one go.
#
#   sudo bench/peers/run_peers.sh [BUILD_DIR] [OUT_DIR]     (defaults: build, a fresh mktemp -d)
#
# For every link speed in GBPS and host count in HOSTS it brings up scripts/cluster.sh (one
# network namespace per host, tc tbf rate limit, one rank per host) and measures, on the same
# hosts and in the same run:
#   dense   zen bench allreduce --transport tcp           (zen's own algorithms)
#           bench/mpi_allreduce via cluster.sh mpirun      (MPI_Allreduce, Open MPI tcp BTL,
#                                                           default algorithm choice and ring)
#           torch_gloo.py dense                            (torch.distributed all_reduce, gloo)
#   sparse  BUILD/bench/zen_sparse_peer (zen_sparse_allreduce, sparse result, every scheme and
#           AUTO, verified), zen bench sparse (zen_sparse_allreduce_dense: dense output, and the
#           dense scheme) and torch_gloo.py sparse (all_reduce of a sparse COO tensor on gloo),
#           for each synthetic CASE (DENSITY:OVERLAP) at ROWS x WIDTH, and for the gradients of
#           a real training run (zen train --dump-grads, replayed by all three)
#   wire    at the largest host count and the last speed: bytes per call counted at the hosts'
#           interfaces for each peer's dense allreduce and sparse allreduce (WIRE=0: skip)
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
#   ROWS (524288)  WIDTH (32)  CASES ("0.01:random 0.001:random 0.01:zipf")  SPARSE_ITERS (20)
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
PEER=$BUILD/bench/zen_sparse_peer
CLUSTER=$ROOT/scripts/cluster.sh
PY=/usr/bin/python3

HOSTS=${HOSTS:-"4 8"}
GBPS=${GBPS:-"1 10"}
DENSE=${DENSE:-"1M 64M 4"}
DENSE_ITERS=${DENSE_ITERS:-5}
ROWS=${ROWS:-524288}
WIDTH=${WIDTH:-32}
CASES=${CASES:-"0.01:random 0.001:random 0.01:zipf"}
SPARSE_ITERS=${SPARSE_ITERS:-20}
TRACE_STEPS=${TRACE_STEPS:-10}
WARMUP=${WARMUP:-2}
if [ "${QUICK:-0}" = 1 ]; then
    DENSE="1M 4M 4" DENSE_ITERS=3 ROWS=65536 WIDTH=16 SPARSE_ITERS=3 TRACE_STEPS=3 WARMUP=1
fi
read -r DMIN DMAX DFAC <<<"$DENSE"

[ "$(id -u)" = 0 ] || { echo "run_peers.sh: needs root (ip netns, tc)" >&2; exit 2; }
for b in "$ZEN" "$PEER"; do
    [ -x "$b" ] || { echo "run_peers.sh: no $b (build first: ninja -C BUILD_DIR)" >&2; exit 2; }
done
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
    if [ "$rc" != 0 ] && [ "$run $case" = "zen-sparse trace" ]; then
        # zen bench sparse compares results bit for bit with a dense sum: float gradients summed
        # in another order (dense ring, recursive doubling) differ in the last bits
        echo "  ($run $case: exit $rc, schemes not bit-identical on float data; rows kept)"
    elif [ "$rc" != 0 ]; then
        echo "  run_peers.sh: $run $case failed (exit $rc, see $LOG)" >&2
    fi
    echo "    $(($(date +%s) - t0)) s"
}


# tx_bytes of every host's eth0, one per line
tx_bytes() {
    local i
    for ((i = 0; i < H; i++)); do
        ip netns exec "zen-h$i" cat /sys/class/net/eth0/statistics/tx_bytes
    done
}

# wire OF CASE CALLS ITERFLAG CMD...: bytes one call puts on the wire, measured at the hosts'
# interfaces (payload + TCP/IP headers): CMD runs twice, with ITERFLAG 2 and ITERFLAG 6 appended,
# and the difference of the hosts' transmitted bytes over the 4 x CALLS extra calls (CALLS: calls
# per iteration) cancels start-up, rendezvous and verification traffic.
wire() {
    local of=$1 case=$2 calls=$3 flag=$4 a b
    shift 4
    a=$(tx_bytes | paste -sd ' ')
    measure wire-run "$of" "$@" "$flag" 2 >/dev/null
    b=$(tx_bytes | paste -sd ' ')
    measure wire-run "$of" "$@" "$flag" 6 >/dev/null
    local c; c=$(tx_bytes | paste -sd ' ')
    awk -v a="$a" -v b="$b" -v c="$c" -v k="$((4 * calls))" -v of="$of" -v cs="$case" \
        -v h="$H" -v g="$G" 'BEGIN {
        n = split(a, A, " "); split(b, B, " "); split(c, C, " "); mx = 0; sum = 0
        for (i = 1; i <= n; i++) {
            d = ((C[i] - B[i]) - (B[i] - A[i])) / k; sum += d; if (d > mx) mx = d
        }
        printf "{\"run\":\"wire\",\"hosts\":%d,\"gbps\":%s,\"case\":\"%s\",\"of\":\"%s\",", h, g, cs, of
        printf "\"tx_bytes_per_call_max\":%.0f,\"tx_bytes_per_call_mean\":%.0f}\n", mx, sum / n
    }' >>"$RESULTS"
}

echo "# zen vs real peers on the emulated cluster, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# machine: $(getconf _NPROCESSORS_ONLN) cores, $(uname -sr), load average" \
    "$(cut -d' ' -f1-3 /proc/loadavg); hosts [$HOSTS] x Gbit/s [$GBPS]; raw JSON in $OUT"

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

        # AUTO's cost model is told the link (as zen simulate is below): the tc rate and the
        # measured small-message latency
        lat=$(grep '"run":"zen-p2p"' "$RESULTS" | grep "\"hosts\":$H,\"gbps\":$G," |
            sed -n 's/.*"time_us_p50":\([0-9.]*\).*/\1/p' | tail -1)
        lat=${lat:-10}
        export ZEN_NET_GBPS=$G ZEN_NET_LAT_US=$lat

        sweep=(-b "$DMIN" -e "$DMAX" -f "$DFAC" -w "$WARMUP" -n "$DENSE_ITERS" --json)
        measure zen-dense dense crun "$ZEN" bench allreduce --transport tcp "${sweep[@]}"
        measure mpi-dense dense cmpirun "$MPIBENCH" "${sweep[@]}" --label mpi-tcp
        # and Open MPI forced onto its ring (tuned algorithm 4), the bandwidth-optimal one its
        # default decision rules do not always pick
        measure mpi-ring dense cmpirun --mca coll_tuned_use_dynamic_rules 1 \
            --mca coll_tuned_allreduce_algorithm 4 "$MPIBENCH" "${sweep[@]}" --label mpi-ring
        tcases=$(echo "$CASES" | tr ' ' ',')
        tmodes=(dense sparse)
        [ -n "$TRACE" ] && tmodes+=(trace --trace "$TRACE")
        # one torch process per rank runs all its workloads: importing torch takes seconds
        measure torch all crun "$PY" "$HERE/torch_gloo.py" "${tmodes[@]}" -b "$DMIN" \
            -e "$DMAX" -f "$DFAC" -w "$WARMUP" -n "$DENSE_ITERS" --rows "$ROWS" --width "$WIDTH" \
            --cases "$tcases" --threads 1
        # zen_sparse_allreduce with a sparse result, on the same workloads, timed the same way
        ptrace=()
        [ -n "$TRACE" ] && ptrace=(--trace "$TRACE")
        measure zen-peer all crun "$PEER" --rows "$ROWS" --width "$WIDTH" --cases "$tcases" \
            "${ptrace[@]}" --iters "$SPARSE_ITERS" --warmup "$WARMUP"

        schemes=all
        for c in $CASES; do
            d=${c%%:*} ov=${c##*:}
            # the dense scheme is the same ROWS x WIDTH x 4 bytes for every case: timed once
            measure zen-sparse "$c" crun "$ZEN" bench sparse --rows "$ROWS" --width "$WIDTH" \
                --density "$d" --overlap "$ov" --iters "$SPARSE_ITERS" --warmup "$WARMUP" \
                --schemes "$schemes" --json
            schemes=balanced,hierarchical,allgather,block,ps,auto
        done
        if [ -n "$TRACE" ]; then
            measure zen-sparse trace crun "$ZEN" bench sparse --trace "$TRACE" \
                --iters "$SPARSE_ITERS" --warmup "$WARMUP" --json
        fi
        if [ "$H" = "$maxh" ] && [ "$G" = "${GBPS##* }" ] && [ "${WIRE:-1}" = 1 ]; then
            # bytes on the wire, once (they do not depend on the link speed): the dense sweep's
            # top size and the first synthetic case, every peer
            echo "  wire bytes at $H hosts: each command twice (2 and 6 iterations)"
            c1=${CASES%% *}
            top=(-b "$DMAX" -e "$DMAX" -w 0 --json)
            wire zen-dense "$DMAX" 2 -n crun "$ZEN" bench allreduce --transport tcp "${top[@]}"
            wire mpi-dense "$DMAX" 2 -n cmpirun "$MPIBENCH" "${top[@]}"
            wire mpi-ring "$DMAX" 2 -n cmpirun --mca coll_tuned_use_dynamic_rules 1 \
                --mca coll_tuned_allreduce_algorithm 4 "$MPIBENCH" "${top[@]}"
            wire torch-dense "$DMAX" 1 -n crun "$PY" "$HERE/torch_gloo.py" dense -b "$DMAX" \
                -e "$DMAX" -w 0
            wire zen-auto "$c1" 1 --iters crun "$PEER" --rows "$ROWS" --width "$WIDTH" \
                --cases "$c1" --schemes auto --warmup 0
            wire torch-sparse "$c1" 1 -n crun "$PY" "$HERE/torch_gloo.py" sparse --rows "$ROWS" \
                --width "$WIDTH" --cases "$c1" -w 0
        fi
        cleanup
        unset ZEN_NET_GBPS ZEN_NET_LAT_US
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
echo "# measurements took $(($(date +%s) - T_START)) s; load average at the end:" \
    "$(cut -d' ' -f1-3 /proc/loadavg); raw JSON: $RESULTS; log: $LOG"
echo
"$PY" "$HERE/report.py" "$RESULTS"
