#!/bin/bash
# A job's first calls over shm, with and without the rings' pages prefaulted at setup
# (ZEN_SHM_PREFAULT=1 / 0). One scheme (ALLGATHER of small sparse messages: a few pages of each
# ring per call, so a 512 KiB ring takes ~28 calls to wrap once) runs 64 calls in a fresh job;
# per run it prints the median over ranks-slowest call times of calls 1-27 (the first lap of the
# rings; call 0 is the cold one) and of calls 32-63, and their ratio. Runs alternate between the
# two settings, ROUNDS times, at each of RANKS processes.
#
# Usage: bench/run_shm_first_calls.sh [ZEN]   (ZEN: the zen binary, default build/zen)
# Env:   RANKS ("4 16"), ROUNDS (5)
# Take timings under the shared lock: flock /tmp/zen-bench.lock bench/run_shm_first_calls.sh
set -euo pipefail
ZEN=${1:-build/zen}
RANKS=${RANKS:-"4 16"}
ROUNDS=${ROUNDS:-5}
export OPENBLAS_NUM_THREADS=1 # no BLAS in the sparse path; its spinning workers would add noise
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "# $(uname -srm), $(nproc) cores; $("$ZEN" --version 2>/dev/null | head -1)"
echo "# ranks prefault round  first-lap-ms  after-ms  ratio"
for n in $RANKS; do
    for r in $(seq "$ROUNDS"); do
        for pf in 0 1; do
            ZEN_SHM_PREFAULT=$pf "$ZEN" launch -n "$n" --transport shm -- "$ZEN" bench sparse \
                --rows 200000 --width 4 --density 0.01 --overlap zipf --schemes allgather \
                --iters 40 --warmup 24 --json --call-times 2>"$tmp/calls" >/dev/null
            /usr/bin/python3 - "$tmp/calls" "$n" "$pf" "$r" <<'EOF'
import statistics, sys
t = [float(l.split()[4]) / 1000 for l in open(sys.argv[1]) if l.startswith("# call allgather ")]
a, b = statistics.median(t[1:28]), statistics.median(t[32:64])
print("%7s %8s %5s %13.2f %9.2f %6.2f" % (sys.argv[2], sys.argv[3], sys.argv[4], a, b, a / b))
EOF
        done
    done
done
