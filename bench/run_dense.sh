#!/bin/sh
# run_dense.sh - the dense allreduce comparison of docs/benchmarks.md, in one go.
#
#   bench/run_dense.sh [BUILD_DIR]        (default: build)
#
# Runs, for one size (default 64 MiB of f32):
#   p2p at 2 ranks over inproc and tcp           zen bench p2p
#   zen allreduce at 2, 4, 8 ranks over inproc    zen bench allreduce --ranks N
#   zen allreduce at 2, 4, 8 ranks over tcp       zen launch -n N -- zen bench allreduce
#   MPI_Allreduce at 2, 4, 8 ranks               mpirun -n N BUILD_DIR/bench/mpi_allreduce
#     twice: Open MPI's default (shared memory between local ranks, "mpi-native") and forced onto
#     its tcp BTL (--mca btl self,tcp, "mpi-tcp"), the like-for-like baseline of zen's tcp
# and prints the ratios the targets are stated in:
#   busbw / p2p bandwidth at 2 ranks (inproc, tcp): target >= 0.70
#   zen busbw / MPI_Allreduce busbw at 4 and 8 ranks: target >= 1.00
# busbw is the out-of-place p50 number (nccl-tests convention); the in-place one is listed too.
# The p2p bandwidth is the one-way stream ("uni"); the bidirectional per-direction number is
# shown next to it, since a ring rank sends and receives at the same time.
#
# Environment: SIZE (64M), RANKS ("2 4 8"), WARMUP (5), ITERS (20), ALGO (auto),
# OUT (directory for the raw JSON; default a fresh mktemp -d), MPIRUN (mpirun).
#
# $SWEEP is expanded unquoted on purpose: it is a list of options.
# shellcheck disable=SC2086
set -eu

BUILD=${1:-build}
ZEN=$BUILD/zen
MPIBENCH=$BUILD/bench/mpi_allreduce
SIZE=${SIZE:-64M}
RANKS=${RANKS:-"2 4 8"}
WARMUP=${WARMUP:-5}
ITERS=${ITERS:-20}
ALGO=${ALGO:-auto}
MPIRUN=${MPIRUN:-mpirun}
OUT=${OUT:-$(mktemp -d /tmp/zen-dense.XXXXXX)}
mkdir -p "$OUT"

[ -x "$ZEN" ] || { echo "run_dense.sh: no zen binary at $ZEN (build first)" >&2; exit 2; }
HAVE_MPI=1
if [ ! -x "$MPIBENCH" ] || ! command -v "$MPIRUN" >/dev/null 2>&1; then
    echo "run_dense.sh: $MPIBENCH or $MPIRUN missing: MPI_Allreduce columns skipped" >&2
    HAVE_MPI=0
fi

SWEEP="-b $SIZE -e $SIZE -w $WARMUP -n $ITERS --json"

# run NAME CMD...: echo the command, keep its JSON in $OUT/NAME.json
run() {
    name=$1
    shift
    echo "\$ $*"
    "$@" >"$OUT/$name.json" || echo "run_dense.sh: $name failed (exit $?); its numbers show as -" >&2
}

# field FILE KEY PATTERN...: KEY's value on the first line of FILE containing every PATTERN
field() {
    f=$1
    key=$2
    shift 2
    [ -f "$f" ] || { echo "-"; return; }
    awk -v key="$key" -v pats="$*" '
        BEGIN { n = split(pats, P, " ") }
        {
            for (i = 1; i <= n; i++) if (index($0, P[i]) == 0) next
            if (match($0, "\"" key "\":[^,}]*")) {
                v = substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
                gsub(/"/, "", v); print v; found = 1; exit
            }
        }
        END { if (!found) print "-" }' "$f"
}

# ratio A B: A / B with 2 decimals, "-" when either is missing
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}

echo "# zen dense allreduce comparison, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# machine: $("$ZEN" info --json | head -1 | sed 's/.*"machine":"\([^"]*\)".*/\1/')"
echo "# size $SIZE f32 sum, warmup $WARMUP, iters $ITERS, algo $ALGO; raw JSON in $OUT"
echo

run p2p_inproc "$ZEN" bench p2p --transport inproc $SWEEP
run p2p_tcp "$ZEN" launch -n 2 -- "$ZEN" bench p2p --transport tcp $SWEEP
for n in $RANKS; do
    run "inproc_$n" "$ZEN" bench allreduce --transport inproc --ranks "$n" --algo "$ALGO" $SWEEP
    run "tcp_$n" "$ZEN" launch -n "$n" -- "$ZEN" bench allreduce --transport tcp --algo "$ALGO" \
        $SWEEP
    if [ "$HAVE_MPI" = 1 ]; then
        run "mpi_$n" "$MPIRUN" --allow-run-as-root --oversubscribe -n "$n" "$MPIBENCH" $SWEEP
        run "mpitcp_$n" "$MPIRUN" --allow-run-as-root --oversubscribe --mca btl self,tcp \
            -n "$n" "$MPIBENCH" --label mpi-tcp $SWEEP
    fi
done

echo
echo "# p2p at 2 ranks (GB/s, p50)"
printf '%-8s %10s %10s %10s\n' transport uni bidir pingpong
for t in inproc tcp; do
    printf '%-8s %10s %10s %10s\n' "$t" \
        "$(field "$OUT/p2p_$t.json" bw_gbs '"mode":"uni"')" \
        "$(field "$OUT/p2p_$t.json" bw_gbs '"mode":"bidir"')" \
        "$(field "$OUT/p2p_$t.json" bw_gbs '"mode":"pingpong"')"
done

echo
echo "# allreduce busbw (GB/s, p50; out-of-place / in-place) and algorithm"
printf '%-6s %-22s %-22s %-22s %-22s\n' ranks inproc tcp mpi-native mpi-tcp
for n in $RANKS; do
    row=""
    for t in inproc tcp mpi mpitcp; do
        f="$OUT/${t}_$n.json"
        oop=$(field "$f" busbw_gbs '"inplace":0')
        inp=$(field "$f" busbw_gbs '"inplace":1')
        algo=$(field "$f" algo '"inplace":0')
        row="$row$(printf '%-22s ' "$oop / $inp ($algo)")"
    done
    printf '%-6s %s\n' "$n" "$row"
done

echo
echo "# ratios (targets: busbw/p2p >= 0.70 at 2 ranks; zen/MPI >= 1.00 at 4 and 8 ranks;"
echo "# the target compares with mpi-native; zen tcp / mpi-tcp is the like-for-like view)"
for t in inproc tcp; do
    bus=$(field "$OUT/${t}_2.json" busbw_gbs '"inplace":0')
    uni=$(field "$OUT/p2p_$t.json" bw_gbs '"mode":"uni"')
    bidir=$(field "$OUT/p2p_$t.json" bw_gbs '"mode":"bidir"')
    echo "2 ranks $t: busbw/p2p(uni) = $(ratio "$bus" "$uni")  (busbw/p2p(bidir) = $(ratio "$bus" "$bidir"))"
done
for n in $RANKS; do
    [ "$n" -gt 2 ] || continue
    mpi=$(field "$OUT/mpi_$n.json" busbw_gbs '"inplace":0')
    mpitcp=$(field "$OUT/mpitcp_$n.json" busbw_gbs '"inplace":0')
    for t in inproc tcp; do
        bus=$(field "$OUT/${t}_$n.json" busbw_gbs '"inplace":0')
        echo "$n ranks $t: zen busbw / MPI busbw = $(ratio "$bus" "$mpi")  (/ mpi-tcp = $(ratio "$bus" "$mpitcp"))"
    done
done
