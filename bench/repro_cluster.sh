#!/bin/sh
# repro_cluster.sh - sparse-allreduce time per scheme on recorded gradient traces on the emulated
# cluster (scripts/cluster.sh: one network namespace per host, egress rate-limited by tc tbf), at
# several host counts and link rates, for docs/reproduction.md. Needs root (ip netns, tc).
#
#   bench/repro_cluster.sh BUILD_DIR OUT_DIR NAME=TRACE_DIR ...
#
# For each link rate G in GBPS (1 10) and host count H in HOSTS (8 16): brings up H hosts at G
# Gbit/s, runs `zen bench sparse --trace` with one process per host (cluster.sh run H) on every
# workload, and takes the hosts down again. The whole (G, H) block holds flock $LOCK
# (/tmp/zen-bench.lock) and then $CLUSTER_LOCK (/tmp/zen-cluster.lock), always in that order, and
# releases both between blocks so other users of the host get a turn. LOCAL (e.g. "16") adds the
# same replays as inproc threads and as tcp processes on the plain host (zen launch) at those rank
# counts, for comparison with the oversubscribed cluster (no namespaces, no rate limit), each
# rank count under $LOCK once. HOSTS="" or GBPS="" skips the cluster.
# A trace recorded with fewer ranks than H cannot be replayed at H: when TRACE_DIR.H exists
# (e.g. build/workloads/topk1.16) it is used at H ranks instead of TRACE_DIR.
# ITERS (3) timed iterations and 1 warm-up per scheme; REPS (1) rounds per block, numbered from
# REP_FROM (1: set it to add later rounds to the same OUT_DIR). ZEN_CLUSTER_NAME (repro). Every scheme's
# result is verified against a dense sum. One JSON line per scheme is appended to
# OUT_DIR/measured.jsonl (never truncated: a cut run loses nothing) with "workload", "mode"
# ("cluster H@G", "inproc N", "tcp N"), "hosts", "gbps", "rep" and "load" (1-min load average
# before the run) added; bench/plot_reproduction.py comm OUT_DIR tabulates it.
set -eu
BUILD=$(cd "$1" && pwd)
OUT=$2
shift 2
ZEN=$BUILD/zen
HERE=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER=$HERE/scripts/cluster.sh
GBPS=${GBPS:-"1 10"}
HOSTS=${HOSTS:-"8 16"}
LOCAL=${LOCAL:-}
ITERS=${ITERS:-3}
REPS=${REPS:-1}
REP_FROM=${REP_FROM:-1} # the first round's number, to add rounds to an earlier OUT_DIR
LOCK=${LOCK:-/tmp/zen-bench.lock}
CLUSTER_LOCK=${CLUSTER_LOCK:-/tmp/zen-cluster.lock}
export ZEN_CLUSTER_NAME="${ZEN_CLUSTER_NAME:-repro}"
export ZEN_BUILD="$BUILD"
mkdir -p "$OUT"
touch "$OUT/measured.jsonl"

trace_for() { # trace directory of workload spec $1 at $2 ranks
    d=${1#*=}
    d=${d%%:*}
    if [ -d "$d.$2" ]; then echo "$d.$2"; else echo "$d"; fi
}

tag() { # workload mode hosts gbps rep load
    sed -n "s/^{/{\"workload\":\"$1\",\"mode\":\"$2\",\"hosts\":$3,\"gbps\":$4,\"rep\":$5,\"load\":$6,/p"
}

load1() { cut -d' ' -f1 /proc/loadavg; }

# run_tagged WORKLOAD MODE HOSTS GBPS REP LOAD COMMAND...: append COMMAND's JSON lines, tagged, to
# measured.jsonl and return COMMAND's status (a pipe into tag would return sed's and hide a failed
# run: the script then exited 0).
run_tagged() {
    t1=$1 t2=$2 t3=$3 t4=$4 t5=$5 t6=$6
    shift 6
    st=0
    "$@" >"$OUT/.run.$$.json" || st=$?
    tag "$t1" "$t2" "$t3" "$t4" "$t5" "$t6" <"$OUT/.run.$$.json" >>"$OUT/measured.jsonl"
    rm -f "$OUT/.run.$$.json"
    [ "$st" -eq 0 ] || echo "repro_cluster.sh: $t1, $t2, rep $t5 failed (exit $st)" >&2
    return "$st"
}

# One (G, H) block; runs under both locks (the script calls itself with _block).
if [ "${1:-}" = _block ]; then
    g=$2
    h=$3
    shift 3
    "$CLUSTER" down >/dev/null 2>&1 || true
    "$CLUSTER" up "$h" --gbps "$g" >&2
    rc=0
    rep=$REP_FROM
    while [ "$rep" -lt $((REP_FROM + REPS)) ]; do
        for w in "$@"; do
            name=${w%%=*}
            dir=$(trace_for "$w" "$h")
            echo "$(date -u +%H:%M:%S) cluster $h@${g}G $name rep $rep ($dir)" >&2
            l=$(load1)
            run_tagged "$name" "cluster $h@${g}G" "$h" "$g" "$rep" "$l" \
                "$CLUSTER" run "$h" -- "$ZEN" bench sparse --trace "$dir" --iters "$ITERS" \
                --warmup 1 --timeout 300 --json || rc=1
        done
        rep=$((rep + 1))
    done
    "$CLUSTER" down >&2
    exit $rc
fi

# The same replays on the plain host at N ranks, under $LOCK once for all of them.
if [ "${1:-}" = _local ]; then
    n=$2
    shift 2
    rc=0
    rep=$REP_FROM
    while [ "$rep" -lt $((REP_FROM + REPS)) ]; do
        for w in "$@"; do
            name=${w%%=*}
            dir=$(trace_for "$w" "$n")
            echo "$(date -u +%H:%M:%S) inproc/tcp $n $name rep $rep ($dir)" >&2
            l=$(load1)
            run_tagged "$name" "inproc $n" 0 0 "$rep" "$l" \
                "$ZEN" bench sparse --trace "$dir" --ranks "$n" --iters "$ITERS" --warmup 1 \
                --json || rc=1
            l=$(load1)
            run_tagged "$name" "tcp $n" 0 0 "$rep" "$l" \
                "$ZEN" launch -n "$n" --transport tcp -- "$ZEN" bench sparse --trace "$dir" \
                --iters "$ITERS" --warmup 1 --json || rc=1
        done
        rep=$((rep + 1))
    done
    exit $rc
fi

for g in $GBPS; do
    for h in $HOSTS; do
        flock "$LOCK" flock "$CLUSTER_LOCK" "$0" "$BUILD" "$OUT" _block "$g" "$h" "$@"
    done
done
for n in $LOCAL; do
    flock "$LOCK" "$0" "$BUILD" "$OUT" _local "$n" "$@"
done
echo "appended to $OUT/measured.jsonl" >&2
