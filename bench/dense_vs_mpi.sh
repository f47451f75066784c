#!/bin/sh
# dense_vs_mpi.sh - zen's shm allreduce against Open MPI at its best on this host, a size curve.
#
#   sh bench/dense_vs_mpi.sh [BUILD_DIR] [OUT_DIR]        (defaults: build, a fresh mktemp -d)
#
# For every round and every process count in RANKS, interleaved (zen, MPI, zen, MPI, ...) so
# that a busy host slows both alike: `zen bench allreduce` over shm and bench/mpi_allreduce
# (MPI_Allreduce, f32 sum, same timing conventions: barrier, slowest rank, p50) over the sweeps
# SMALL and LARGE ("min max factor warmup iters"), out of place and in place (both tools run
# both). Open MPI runs in its best configuration for this host: glibc keeps freed memory
# (MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_: without them Open MPI maps, faults and
# unmaps a fresh temporary buffer on every large call, 8-13x slower at 64 MiB here), vader BTL
# with its default single copy (CMA), ranks bound as mpirun binds them (to cores when they fit,
# not at all when oversubscribed; zen launch binds round robin in both cases). Labelled extra
# columns: MPI_DEFAULT=1 the default configuration (no malloc settings), MPI_BOUND=1 Open MPI
# bound round robin like zen (--bind-to core:overload-allowed), ZEN_UNBOUND=1 zen left to the
# scheduler (zen launch --bind none).
# Output: OUT/raw.txt, one line per result: "<impl> <n> <round> <json>"; OUT/load.txt, uptime
# before every run. bench/dense_vs_mpi_table.py OUT prints the tables (medians, ratios).
set -eu
BUILD=${1:-build}
OUT=${2:-$(mktemp -d /tmp/zen-dense-mpi.XXXXXX)}
mkdir -p "$OUT"
ZEN=$BUILD/zen
MPIAR=$BUILD/bench/mpi_allreduce
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS:-"2 4 8"}
SMALL=${SMALL:-"8 64K 2 200 2000"}
LARGE=${LARGE:-"128K 256M 4 2 5"}
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
BEST="-x MALLOC_MMAP_THRESHOLD_=4294967296 -x MALLOC_TRIM_THRESHOLD_=17179869184"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC') $(nproc) cores; raw in $OUT" | tee -a "$OUT/load.txt"
sweep() { # impl n round min max factor warmup iters
    impl=$1 n=$2 r=$3
    args="-b $4 -e $5 -f $6 -w $7 -n $8 --json"
    echo "$(date -u +%H:%M:%S) $impl n=$n round=$r $4..$5: $(uptime)" >>"$OUT/load.txt"
    case $impl in
    zen) $ZEN launch -n "$n" --transport shm -- $ZEN bench allreduce $args ;;
    mpi) $MPIRUN $BEST -n "$n" "$MPIAR" $args ;;
    mpi-default) $MPIRUN -n "$n" "$MPIAR" $args ;;
    mpi-bound) $MPIRUN $BEST --bind-to core:overload-allowed -n "$n" "$MPIAR" $args ;;
    zen-unbound) $ZEN launch -n "$n" --bind none --transport shm -- $ZEN bench allreduce $args ;;
    esac | grep '^{' | sed "s/^/$impl $n $r /" >>"$OUT/raw.txt"
}
impls="zen mpi"
[ "${MPI_DEFAULT:-0}" = 1 ] && impls="$impls mpi-default"
[ "${MPI_BOUND:-0}" = 1 ] && impls="$impls mpi-bound"
[ "${ZEN_UNBOUND:-0}" = 1 ] && impls="$impls zen-unbound"
for r in $(seq "$ROUNDS"); do
    for n in $RANKS; do
        for sw in "$SMALL" "$LARGE"; do
            [ -n "$sw" ] || continue
            for impl in $impls; do
                # shellcheck disable=SC2086
                sweep "$impl" "$n" "$r" $sw
            done
        done
    done
done
/usr/bin/python3 "$(dirname "$0")/dense_vs_mpi_table.py" "$OUT"
