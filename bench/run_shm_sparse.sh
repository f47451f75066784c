#!/bin/sh
# `zen bench sparse` with 8 ranks as 8 processes over shm (zen launch) against 8 threads of one
# process (inproc), interleaved over ROUNDS rounds; prints the p50 time per scheme (median over
# rounds, min-max) and the ratio shm / inproc. Under the shared lock on a shared machine:
#   flock /tmp/zen-bench.lock sh bench/run_shm_sparse.sh build
set -eu
BUILD=${1:-build}
ZEN=$BUILD/zen
ROUNDS=${ROUNDS:-3}
ARGS=${ARGS:-"--rows 200000 --width 4 --density 0.01 --iters 10 --warmup 3 --json"}
OUT=${OUT:-$(mktemp -d /tmp/zen-shm-sparse.XXXXXX)}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $ARGS; raw in $OUT"
for r in $(seq "$ROUNDS"); do
    $ZEN launch -n 8 -- $ZEN bench sparse $ARGS | sed "s/^/shm $r /" >>"$OUT/sp.txt"
    $ZEN bench sparse --ranks 8 $ARGS | sed "s/^/inproc $r /" >>"$OUT/sp.txt"
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = {}
for line in open(f"{sys.argv[1]}/sp.txt"):
    impl, r, js = line.split(" ", 2)
    d = json.loads(js)
    rows.setdefault((d["scheme"], impl), []).append(d["time_us_p50"])
fmt = lambda v: f"{statistics.median(v)/1000:.2f} ({min(v)/1000:.2f}-{max(v)/1000:.2f})"
print("| scheme | 8 processes, shm (ms) | 8 threads, inproc (ms) | shm / inproc |")
print("|---|---|---|---|")
for scheme in sorted({k[0] for k in rows}):
    s, i = rows.get((scheme, "shm")), rows.get((scheme, "inproc"))
    if s and i:
        print(f"| {scheme} | {fmt(s)} | {fmt(i)} | {statistics.median(s)/statistics.median(i):.2f}x |")
PY
