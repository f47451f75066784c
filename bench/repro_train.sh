#!/bin/sh
# repro_train.sh - end-to-end training with each gradient sync scheme against dense (ZEN's
# end-to-end throughput figure at our scale), for docs/reproduction.md.
#
#   bench/repro_train.sh BUILD_DIR OUT_DIR
#
# Trains the GPT on the gcide corpus (--corpus gcide, vocabulary VOCAB = 32768: the embedding and
# the untied output head are most of the parameters) at data parallelism DP (4), tp 1, for STEPS
# (40) steps, once per sync in SYNCS:
#   dense           every gradient through the dense allreduce (the AllReduce baseline)
#   S               the embedding gradient's touched rows through scheme S, the rest dense
#   topk:S          also the dense gradients as DGC top-TOPK (0.01) with error feedback, through S
#                   (plus TOPK_OPTS, e.g. "--topk-warmup 20 --topk-rescale")
#   topk:S@TAG      the same with the options in $TOPK_OPTS_TAG instead (several top-k settings
#                   interleaved in one run; the run is named topk-S-TAG)
# LAUNCH picks the ranks: inproc (threads, default), tcp (zen launch, one process per rank) or
# cluster (scripts/cluster.sh run DP: the emulated hosts, which must be up already; run as root).
# THREADS: BLAS threads per rank (--threads); default for cluster cores / DP (at least 1): the
# emulated hosts share this machine's cores, and each rank would otherwise take all of them (its
# host looks like a whole machine), 2 DP times oversubscribed, with OpenBLAS's idle threads
# spinning in sched_yield; empty for inproc and tcp (the trainer's own cores / local ranks).
# REPS (2) rounds, the syncs interleaved in each, numbered from REP_FROM (1); REP_FROM > 1 appends
# to an earlier call's OUT_DIR (more rounds later, the lock released between them) and the target
# and times to it are recomputed over all runs. Per run one JSON line to OUT_DIR/train.jsonl:
# sync, rep, load (1-min load average before the run), blas_core (OpenBLAS's kernels), tok_s (median of per-step tokens/s after
# step MEDIAN_FROM, default 5: set it past --topk-warmup to see the steady state), tok_s_mean
# (tokens over the summed step times of those steps), wall_s (all steps' times summed, warm-ups
# included), tok_s_run (all tokens over wall_s: the whole run's rate), ms_step, comm_ms and
# wait_ms (medians; wait = for the other replicas), the medians of the sync's phases (phase_ms: pack, select, reduce, unpack, emb, buckets) and of the
# optimizer step (opt_ms), val_loss,
# curve_t/curve_loss (cumulative wall seconds and training loss per step), time_to_target_s
# (filled in afterwards: first time the 5-step mean loss reaches the target, the dense runs'
# median 5-step mean loss at step 0.8 STEPS). Timings under flock $LOCK (/tmp/zen-bench.lock).
set -eu
BUILD=$1
OUT=$2
ZEN=$(cd "$(dirname "$BUILD/zen")" && pwd)/zen
DP=${DP:-4}
STEPS=${STEPS:-40}
VOCAB=${VOCAB:-32768}
TOPK=${TOPK:-0.01}
REPS=${REPS:-2}
REP_FROM=${REP_FROM:-1}
LAUNCH=${LAUNCH:-inproc}
MEDIAN_FROM=${MEDIAN_FROM:-5}
if [ -z "${THREADS+x}" ] && [ "$LAUNCH" = cluster ]; then
    THREADS=$(($(nproc) / DP))
    [ "$THREADS" -ge 1 ] || THREADS=1
fi
THREADS=${THREADS:-}
LOCK=${LOCK:-/tmp/zen-bench.lock}
SYNCS=${SYNCS:-"dense allgather hierarchical ps block balanced auto topk:balanced topk:hierarchical topk:allgather"}
MODEL=${MODEL:-"--layers 2 --d-model 64 --heads 4 --d-ff 256 --batch 8 --seq 32 --warmup 5"}
CACHE=${CACHE:-$OUT/cache}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT/runs" "$CACHE"
[ "$REP_FROM" -gt 1 ] || : >"$OUT/train.jsonl"
# tokenise once outside the timings (the cache is shared by every run)
"$ZEN" train --corpus gcide --vocab "$VOCAB" --cache-dir "$CACHE" --steps 1 --dp 1 --tp 1 \
    --eval-interval 0 --sample-tokens 0 --quiet >/dev/null 2>&1 || true

rep=$REP_FROM
while [ "$rep" -lt $((REP_FROM + REPS)) ]; do
    for s in $SYNCS; do
        topk=
        scheme=$s
        tag=
        extra=
        case $s in
        topk:*@*)
            tag=${s#*@}
            eval "extra=\${TOPK_OPTS_$tag:-}"
            topk="--topk $TOPK $extra"
            scheme=${s#topk:}
            scheme=${scheme%@*}
            ;;
        topk:*)
            topk="--topk $TOPK ${TOPK_OPTS:-}"
            scheme=${s#topk:}
            ;;
        esac
        name="$OUT/runs/${s%%:*}${topk:+-$scheme}${tag:+-$tag}-r$rep"
        # shellcheck disable=SC2086
        args="train --corpus gcide --vocab $VOCAB --cache-dir $CACHE --steps $STEPS $MODEL \
            --eval-interval $STEPS --eval-batches 8 --sample-tokens 0 --sync-scheme $scheme \
            $topk ${THREADS:+--threads $THREADS} --tp 1 --dp $DP --metrics $name.metrics.jsonl --json"
        echo "$(date -u +%H:%M:%S) rep $rep $s ($LAUNCH)" >&2
        load=$(cut -d' ' -f1 /proc/loadavg)
        # shellcheck disable=SC2086
        case $LAUNCH in
        inproc) flock "$LOCK" "$ZEN" $args >"$name.json" 2>"$name.log" ;;
        tcp) flock "$LOCK" "$ZEN" launch -n "$DP" -- "$ZEN" $args >"$name.json" 2>"$name.log" ;;
        cluster)
            flock "$LOCK" "$HERE/scripts/cluster.sh" run "$DP" -- "$ZEN" $args >"$name.json" \
                2>"$name.log"
            ;;
        *)
            echo "repro_train.sh: LAUNCH inproc|tcp|cluster" >&2
            exit 2
            ;;
        esac
        /usr/bin/python3 - "$s" "$rep" "$name" "$LAUNCH" "$load" "$MEDIAN_FROM" >>"$OUT/train.jsonl" <<'EOF'
import json, statistics, sys
s, rep, name, launch, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
skip = int(sys.argv[6])
rows = [json.loads(l) for l in open(name + ".metrics.jsonl") if l.strip()]
final = [json.loads(l) for l in open(name + ".json") if l.startswith("{")][-1]
t, acc = [], 0.0
for r in rows:
    acc += r["ms_step"] / 1000
    t.append(round(acc, 3))
tail = [r for r in rows if r["step"] > skip]
tokens = rows[0]["tokens_per_s"] * rows[0]["ms_step"] / 1000  # per step
phases = ("pack", "select", "reduce", "unpack", "emb", "buckets")
print(json.dumps({"sync": s, "rep": rep, "launch": launch, "load": load, "median_from": skip,
                  "blas_core": final.get("blas_core", "?"),
                  "tok_s": statistics.median(r["tokens_per_s"] for r in tail),
                  "tok_s_mean": round(tokens * len(tail) / sum(r["ms_step"] / 1000 for r in tail), 2),
                  "wall_s": t[-1], "tok_s_run": round(tokens * len(rows) / t[-1], 2),
                  "ms_step": statistics.median(r["ms_step"] for r in tail),
                  "comm_ms": statistics.median(r["ms_comm"] for r in tail),
                  "wait_ms": statistics.median(r["ms_wait"] for r in tail),
                  "opt_ms": statistics.median(r.get("ms_opt", 0) for r in tail),
                  "phase_ms": {p: round(statistics.median(r.get("sync_%s_ms" % p, 0) for r in tail), 3)
                               for p in phases},
                  "bytes_synced": statistics.median(r["bytes_synced"] for r in tail),
                  "bytes_dense": rows[-1]["bytes_dense"], "val_loss": final["val_loss"],
                  "emb_scheme": rows[-1]["emb_scheme"],
                  "curve_t": t, "curve_loss": [r["loss"] for r in rows]}))
EOF
    done
    rep=$((rep + 1))
done
/usr/bin/python3 - "$OUT/train.jsonl" "$STEPS" <<'EOF'
import json, statistics, sys
path, steps = sys.argv[1], int(sys.argv[2])
rows = [json.loads(l) for l in open(path)]
def smooth(c, i):
    return statistics.fmean(c[max(0, i - 4):i + 1])
at = int(0.8 * steps) - 1
dense = [smooth(r["curve_loss"], at) for r in rows if r["sync"] == "dense"]
target = statistics.median(dense)
for r in rows:
    r["target_loss"] = round(target, 4)
    r["time_to_target_s"] = next((r["curve_t"][i] for i in range(len(r["curve_loss"]))
                                  if smooth(r["curve_loss"], i) <= target), None)
with open(path, "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print("target loss %.4f (dense, 5-step mean at step %d)" % (target, at + 1), file=sys.stderr)
EOF
