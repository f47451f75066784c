#!/bin/sh
# One process per rank on one host: zen over shm vs Open MPI's MPI_Allreduce vs zen over tcp,
# 64 MiB f32 sum allreduce at 2, 4 and 8 processes, plus the 8-byte round trip (zen shm vs MPI).
# Runs are interleaved (shm, mpi, tcp, shm, mpi, tcp, ...) over ROUNDS rounds so that a busy
# host slows all three alike; prints per-run busbw and the medians with min-max. Take it under
# the shared lock on a shared machine:
#   flock /tmp/zen-bench.lock sh bench/run_shm.sh build
# RANKS="" skips the allreduces; ROUNDS sets the rounds; ZEN_BASE=path/to/another/zen adds that
# build's round trip as one more interleaved column (e.g. main's, to show a change).
# Binding: `zen launch` and mpirun both bind one rank per core when the ranks fit the cores (2
# here) and leave oversubscribed ranks (4, 8) unbound (mpirun --report-bindings shows it).
# Round trip: zen bench p2p reports half a round trip (time_us_p50), so it is doubled here;
# mpi_pingpong --barrier times its rounds as zen bench p2p does (receive posted, barrier, send).
set -eu
BUILD=${1:-build}
ZEN=$BUILD/zen
MPIAR=$BUILD/bench/mpi_allreduce
MPIPP=$BUILD/bench/mpi_pingpong
ROUNDS=${ROUNDS:-3}
RANKS=${RANKS-"2 4 8"}
SWEEP="-b 64M -e 64M -w 2 -n 5 --json"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
OUT=${OUT:-$(mktemp -d /tmp/zen-shm.XXXXXX)}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); raw in $OUT"
for r in $(seq "$ROUNDS"); do
    for n in $RANKS; do
        $ZEN launch -n "$n" --transport shm -- $ZEN bench allreduce $SWEEP | grep '"inplace":0' |
            sed "s/^/shm $n $r /" >>"$OUT/ar.txt"
        $MPIRUN -n "$n" "$MPIAR" $SWEEP | grep '"inplace":0' | sed "s/^/mpi $n $r /" >>"$OUT/ar.txt"
        $ZEN launch -n "$n" --transport tcp -- $ZEN bench allreduce $SWEEP | grep '"inplace":0' |
            sed "s/^/tcp $n $r /" >>"$OUT/ar.txt"
    done
    $ZEN launch -n 2 --transport shm -- $ZEN bench p2p -b 8 -e 8 -n 5000 --mode pingpong --json |
        grep pingpong | sed "s/^/shm 2 $r /" >>"$OUT/rtt.txt"
    $MPIRUN -n 2 "$MPIPP" -n 5000 -w 500 --barrier --json | sed "s/^/mpi 2 $r /" >>"$OUT/rtt.txt"
    if [ -n "${ZEN_BASE:-}" ]; then
        $ZEN_BASE launch -n 2 --transport shm -- $ZEN_BASE bench p2p -b 8 -e 8 -n 5000 \
            --mode pingpong --json | grep pingpong | sed "s/^/base 2 $r /" >>"$OUT/rtt.txt"
    fi
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def load(name, key):
    rows = {}
    for line in open(f"{out}/{name}"):
        impl, n, r, js = line.split(" ", 3)
        rows.setdefault((impl, int(n)), []).append(json.loads(js)[key])
    return rows
import os
ar = load("ar.txt", "busbw_gbs") if os.path.exists(f"{out}/ar.txt") else {}
if ar: print("| processes | zen shm busbw | Open MPI busbw | zen tcp busbw | shm / MPI | shm / tcp |")
if ar: print("|---|---|---|---|---|---|")
fmt = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
for n in sorted({k[1] for k in ar}):
    s, m, t = ar[("shm", n)], ar[("mpi", n)], ar[("tcp", n)]
    print(f"| {n} | {fmt(s)} | {fmt(m)} | {fmt(t)} | "
          f"{statistics.median(s)/statistics.median(m):.2f}x | "
          f"{statistics.median(s)/statistics.median(t):.2f}x |")
rtt = {}
for line in open(f"{out}/rtt.txt"):
    impl, n, r, js = line.split(" ", 3)
    d = json.loads(js)
    # zen bench p2p: half a round trip; mpi_pingpong: the whole round trip
    rtt.setdefault(impl, []).append(2 * d["time_us_p50"] if "time_us_p50" in d else d["rtt_us_p50"])
print()
s, m = rtt["shm"], rtt["mpi"]
base = rtt.get("base")
print("| 8-byte round trip, p50 us | zen shm | Open MPI | zen / MPI |" + (" ZEN_BASE | base / MPI |" if base else ""))
print("|---|---|---|---|" + ("---|---|" if base else ""))
row = f"| 2 processes | {fmt(s)} | {fmt(m)} | {statistics.median(s)/statistics.median(m):.2f}x |"
if base:
    row += f" {fmt(base)} | {statistics.median(base)/statistics.median(m):.2f}x |"
print(row)
PY
