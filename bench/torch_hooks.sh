#!/bin/sh
# torch_hooks.sh - DDP gradient-compression hooks side by side on the KJV GPT
# (examples/torch_topk_kjv.py): DDP's default all_reduce, zen top-k (union), zen top-k (global),
# PowerSGD (rank 4) and the fp16 hook, each on backend zen and on gloo (where the top-k hook
# gathers the selections with all_gather), interleaved case by case, ROUNDS rounds. Prints one
# JSON result per run, then per case the median step time, its ratio to the same backend's
# default all_reduce, and the validation loss after STEPS steps against that baseline's.
#
#   bench/torch_hooks.sh [BUILD_DIR]                 on this host, NPROC ranks (`zen launch`)
#   HOSTS=4 bench/torch_hooks.sh [BUILD_DIR]         on HOSTS emulated hosts at GBPS Gbit/s
#                                                    (scripts/cluster.sh, ZEN_CLUSTER_NAME=zhook
#                                                    unless set; brought up and taken down here)
# Environment: NPROC (4), ROUNDS (2), STEPS (60), RATIO (0.01), GBPS (1), BACKENDS ("zen gloo"),
# HOOKS ("none topk topk-global powersgd fp16"), OUT (a directory for the logs; default a new
# temporary one), EXTRA (more example options, e.g. "--layers 4"), RUN_TIMEOUT (seconds one run
# may take, default 900: then it is killed and reported as "did not exit"). A run that fails (e.g.
# topk-global before libzen has global top-k) is reported as failed and the rest go on.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
py=/usr/bin/python3
nproc=${NPROC:-4} rounds=${ROUNDS:-2} steps=${STEPS:-60} ratio=${RATIO:-0.01} gbps=${GBPS:-1}
hosts=${HOSTS:-0} limit=${RUN_TIMEOUT:-900}
out=${OUT:-$(mktemp -d /tmp/torch_hooks.XXXXXX)}
mkdir -p "$out"
export PYTHONPATH="$build/python" OMP_NUM_THREADS=1
cluster="$here/scripts/cluster.sh"
if [ "$hosts" -gt 0 ]; then
    export ZEN_CLUSTER_NAME="${ZEN_CLUSTER_NAME:-zhook}" GLOO_SOCKET_IFNAME=eth0
    export ZEN_BUILD="$build"
    "$cluster" up "$hosts" --gbps "$gbps" >"$out/cluster.log" 2>&1 ||
        { echo "torch_hooks.sh: cluster up failed (see $out/cluster.log)" >&2; exit 1; }
    trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
    where="$hosts emulated hosts at $gbps Gbit/s"
else
    where="1 host, $nproc ranks"
fi
echo "# torch_hooks.sh: $where, $steps steps, ratio $ratio, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "# load: $(uptime)"
# timeout puts the run in its own process group, out of reach of a Ctrl-C at the terminal: pass
# INT and TERM on to it (timeout hands them to `zen launch`, which hands them to the ranks) and
# stop, instead of leaving the run going on (and, on a trap that does not exit, going on to the
# next one).
child=
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM
results="$out/results.jsonl"
: >"$results"
r=1
while [ "$r" -le "$rounds" ]; do
    for backend in ${BACKENDS:-zen gloo}; do
        for hook in ${HOOKS:-none topk topk-global powersgd fp16}; do
            case $hook in
            topk-global) opts="--hook topk --global" ;;
            *) opts="--hook $hook" ;;
            esac
            log="$out/$backend-$hook-$r.log"
            set -- "$py" "$here/examples/torch_topk_kjv.py" --backend "$backend" $opts \
                --steps "$steps" --ratio "$ratio" ${EXTRA:-}
            if [ "$hosts" -gt 0 ]; then
                set -- "$cluster" run "$hosts" -- "$@"
            else
                set -- "$build/zen" launch -n "$nproc" -- "$@"
            fi
            rc=0
            timeout -k 10 "$limit" "$@" >"$log" 2>&1 &
            child=$!
            wait "$child" || rc=$?
            child=
            if [ "$rc" = 0 ] && grep -q '^result ' "$log"; then
                line=$(grep '^result ' "$log" | sed 's/^result //')
                echo "$line" | sed "s/^{/{\"round\": $r, \"case\": \"$hook\", /" >>"$results"
                echo "$backend $hook round $r: $line" | cut -c1-160
            elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
                # a run that printed its result but did not exit is not a result either
                echo "$backend $hook round $r: did not exit within $limit s ($(tail -n1 "$log" |
                    cut -c1-160)); log $log"
            else
                why=$(grep -m1 -i 'error' "$log" || tail -n1 "$log")
                echo "$backend $hook round $r: failed, exit $rc ($(echo "$why" | cut -c1-200))"
            fi
        done
    done
    r=$((r + 1))
done
echo "# load: $(uptime)"
"$py" - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = {}
for r in rows:
    cases.setdefault((r["backend"], r["case"]), []).append(r)
print(f"{'backend':8s} {'hook':12s} {'runs':>4s} {'step ms':>9s} {'vs none':>8s} "
      f"{'val loss':>9s} {'vs none':>8s}")
for (backend, case), rs in sorted(cases.items()):
    ms = statistics.median(r["step_ms"] for r in rs)
    loss = statistics.median(r["val_loss"] for r in rs)
    base = cases.get((backend, "none"))
    vs_ms = vs_loss = ""
    if base:
        vs_ms = f"{ms / statistics.median(r['step_ms'] for r in base):.2f}x"
        vs_loss = f"{100 * (loss / statistics.median(r['val_loss'] for r in base) - 1):+.2f}%"
    print(f"{backend:8s} {case:12s} {len(rs):4d} {ms:9.1f} {vs_ms:>8s} {loss:9.4f} {vs_loss:>8s}")
PY
echo "# logs: $out"
