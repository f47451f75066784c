#!/bin/sh
# Mixed shm+tcp against all-tcp on an emulated cluster (scripts/cluster.sh): HOSTS namespaces with
# PER ranks each, every host's egress limited to GBPS Gbit/s. `--transport auto` (the default) joins
# the ranks of a host over shm and the hosts over tcp; tcp runs the same processes all over tcp.
# Alternated over ROUNDS rounds (auto, tcp, auto, tcp, ...): 64 MiB f32 dense allreduce and a sparse
# allreduce (zen bench sparse, verified against a dense sum on every rank). Prints the medians with
# min-max. Needs root; take both locks, in this order, and a cluster name of your own:
#   flock /tmp/zen-bench.lock flock /tmp/zen-cluster.lock env ZEN_CLUSTER_NAME=me \
#       sh bench/run_cluster_mixed.sh build
# Environment: HOSTS (4), PER (2), GBPS (1), ROUNDS (3), PORT (first rendezvous port, 29700),
# SPARSE (the sparse options below). The cluster is brought up and torn down here.
set -eu
BUILD=${1:-build}
ZEN=$BUILD/zen
HOSTS=${HOSTS:-4}
PER=${PER:-2}
GBPS=${GBPS:-1}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-29700}
SPARSE=${SPARSE:-"--rows 1000000 --width 4 --density 0.01 --schemes auto,balanced,hierarchical --iters 10 --warmup 2"}
DENSE="-b 64M -e 64M -w 2 -n 8"
HERE=$(cd "$(dirname "$0")" && pwd)
CL="$HERE/../scripts/cluster.sh"
OUT=${OUT:-$(mktemp -d /tmp/zen-mixed.XXXXXX)}
trap '"$CL" down >/dev/null 2>&1 || true' EXIT
"$CL" down >/dev/null 2>&1 || true
"$CL" up "$HOSTS" --gbps "$GBPS" >/dev/null
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg);" \
    "$HOSTS hosts x $PER ranks, $GBPS Gbit/s; raw in $OUT"
for r in $(seq "$ROUNDS"); do
    for t in auto tcp; do
        "$CL" run "$HOSTS" --per-host "$PER" --port "$PORT" -- env ZEN_TRANSPORT=$t \
            "$ZEN" bench allreduce $DENSE --json | sed "s/^/$t $r /" >>"$OUT/dense.txt"
        PORT=$((PORT + 1))
        "$CL" run "$HOSTS" --per-host "$PER" --port "$PORT" -- env ZEN_TRANSPORT=$t \
            "$ZEN" bench sparse $SPARSE --json | sed "s/^/$t $r /" >>"$OUT/sparse.txt"
        PORT=$((PORT + 1))
    done
done
/usr/bin/python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
fmt = lambda v: f"{statistics.median(v):.4f} ({min(v):.4f}-{max(v):.4f})"
dense, sparse, names, chosen = {}, {}, {}, {}
for line in open(f"{out}/dense.txt"):
    t, r, js = line.split(" ", 2)
    if not js.startswith("{"):
        continue
    d = json.loads(js)
    names[t] = d.get("transport", t)
    dense.setdefault((t, d.get("inplace", 0)), []).append(d["busbw_gbs"])
for line in open(f"{out}/sparse.txt"):
    t, r, js = line.split(" ", 2)
    if not js.startswith("{"):
        continue
    d = json.loads(js)
    assert d["verified"], line
    if d.get("chosen"):
        chosen.setdefault(t, []).append(d["chosen"])
    sparse.setdefault((t, d["scheme"]), []).append(d["time_us_p50"] / 1000)
print(f"| dense 64 MiB busbw GB/s | {names.get('auto', 'auto')}, out-of-place | tcp, out-of-place "
      f"| {names.get('auto', 'auto')}, in-place | tcp, in-place |")
print("|---|---|---|---|---|")
print(f"| | {fmt(dense[('auto', 0)])} | {fmt(dense[('tcp', 0)])} | {fmt(dense[('auto', 1)])} "
      f"| {fmt(dense[('tcp', 1)])} |")
print()
print("| sparse scheme, p50 ms | mixed (auto) | all-tcp | mixed / tcp |")
print("|---|---|---|---|")
for scheme in sorted({k[1] for k in sparse}):
    a, t = sparse[("auto", scheme)], sparse[("tcp", scheme)]
    print(f"| {scheme} | {fmt(a)} | {fmt(t)} | {statistics.median(a)/statistics.median(t):.2f}x |")
print()
print("AUTO chose:", {t: sorted(set(v)) for t, v in chosen.items()})
PY
