#!/bin/sh
# hetero_tp.sh - the straggler experiments of docs/hetero-tp.md (section 10), end to end.
#
#   bench/hetero_tp.sh [BUILD_DIR]        (default: build)
#
# Trains the small GPT with `zen train --dp 1 --tp TP` under emulated stragglers and writes one
# JSON object per run to $OUT/results.jsonl (bench/plot_hetero.py turns it into tables and PNGs).
# Cases (CASES, all by default):
#
#   f2 f4 f8   one static straggler on tp rank 0, 2x / 4x / 8x   (--slow 0:F)
#   rot4       one 4x straggler that moves to the next rank every ROTATE steps (rotF: F x)
#   profile    the static profile PROFILE (rank r gets F[r*k/tp]: at tp 4, 8,4,1,1)
#
# Every case runs the homogeneous reference (no straggler) first and then each mode of MODES
# back to back, so the runs compared with each other saw similar load on a shared machine
# (the ratios to the case's own homogeneous run are what to read; `hom_ms` is recorded with
# every row). Per run:
#
#   ms_step      median of the per-step `ms_step` of --metrics over steps WARM+1..STEPS (the
#                first decision rounds, link calibration and the eval step are left out)
#   ms_mean      mean over the same steps (for reference only: spikes from the shared host)
#   val_loss     validation loss after exactly STEPS steps (--eval-interval STEPS, a fixed
#                --eval-batches EVAL_BATCHES set, identical for every run)
#   keep_fraction, migrated_cols, stragglers, ms_wait, tp_ms_wait (medians for the times):
#                from the --metrics lines, written by world rank 0 (= tp rank 0, the straggler
#                in f*/profile); keep_fraction is the group's 1 - largest prune, migrated_cols
#                counts all layers and ranks, ms_wait is the dp barrier (0 at dp 1), tp_ms_wait
#                rank 0's time in tp collectives and migration waits
#   load1        the 1-minute load average when the run started
#
# Environment: TP (4), STEPS (150), WARM (30), ROTATE (40), FACTORS ("2 4 8"), CASES
# ("f2 f4 f8 rot4 profile", derived from FACTORS), MODES ("none resize migrate semi"),
# PROFILE ("8,6,4,2,1,1,1,1"), SLOW_MODE (sleep|spin, sleep), MODEL ("--d-model 256 --d-ff 2048
# --heads max(4,TP) --vocab-max 1024": the tp linears dominate the step; the output head is
# replicated on every tp rank and never balanced, so a large vocabulary hides the straggler),
# TRAIN ("--warmup 10 --batch 8 --seq 32"), EVAL_BATCHES (8), THREADS (BLAS threads per rank,
# 1), OUT (default: a fresh mktemp -d). Raw per-step metrics, summaries and logs stay in
# $OUT/runs/. Set ZEN_LOG_LEVEL=info ZEN_LOG_SUBSYS=tp to keep every balance decision in the
# per-run logs (and the results then carry each run's chosen plans per round, `plans`, and the
# last learned migration overhead: `mig_model_ms`, `mig_obs_ms`, `mig_scale`). The default sweep (25 runs) takes about 4 minutes at tp 4 and at tp 8 on a
# 2-core machine. On a shared machine wrap it in a lock, e.g.
#   flock /work/notes/bench.lock bench/hetero_tp.sh build-hetero
set -eu

BUILD=${1:-build}
ZEN=$BUILD/zen
TP=${TP:-4}
STEPS=${STEPS:-150}
WARM=${WARM:-30}
ROTATE=${ROTATE:-40}
FACTORS=${FACTORS:-"2 4 8"}
MODES=${MODES:-"none resize migrate semi"}
PROFILE=${PROFILE:-"8,6,4,2,1,1,1,1"}
SLOW_MODE=${SLOW_MODE:-sleep}
HEADS=4
[ "$TP" -gt 4 ] && HEADS=$TP
MODEL=${MODEL:-"--d-model 256 --d-ff 2048 --heads $HEADS --vocab-max 1024"}
TRAIN=${TRAIN:-"--warmup 10 --batch 8 --seq 32"}
EVAL_BATCHES=${EVAL_BATCHES:-8}
THREADS=${THREADS:-1}
OUT=${OUT:-$(mktemp -d /tmp/zen-hetero-tp.XXXXXX)}
if [ -z "${CASES:-}" ]; then
    CASES=""
    for f in $FACTORS; do CASES="$CASES f$f"; done
    CASES="$CASES rot4 profile"
fi

[ -x "$ZEN" ] || { echo "hetero_tp.sh: no zen binary at $ZEN (build first)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "hetero_tp.sh: python3 needed" >&2; exit 2; }
if [ "$WARM" -ge "$STEPS" ]; then
    echo "hetero_tp.sh: WARM ($WARM) must be < STEPS ($STEPS)" >&2
    exit 2
fi
mkdir -p "$OUT/runs"
RESULTS=$OUT/results.jsonl
: >"$RESULTS"

# Summarise one run into a JSON line: run <case> <mode> <slow> <rotate> <load1> <wall_s> <hom_ms>
summarise() {
    python3 - "$@" <<'EOF'
import json, statistics, sys
(out, case, mode, slow, rotate, load1, wall, hom_ms, steps, warm, tp, slow_mode) = sys.argv[1:]
steps, warm = int(steps), int(warm)
name = "%s/runs/%s_%s" % (out, case, mode)
rows = [json.loads(l) for l in open(name + ".metrics.jsonl") if l.strip()]
final = json.loads(open(name + ".json").read().strip().splitlines()[-1])
tail = [r for r in rows if r["step"] > warm]
if len(rows) != steps or not tail:
    sys.exit("hetero_tp.sh: %s: %d metrics lines, expected %d" % (name, len(rows), steps))
ms = [r["ms_step"] for r in tail]
res = {
    "tp": int(tp), "case": case, "mode": mode, "slow": slow, "rotate": int(rotate),
    "slow_mode": slow_mode, "steps": steps, "warm": warm,
    "ms_step": statistics.median(ms), "ms_mean": statistics.fmean(ms),
    "ms_wait": statistics.median(r["ms_wait"] for r in tail),
    "tp_ms_wait": statistics.median(r.get("tp_ms_wait", 0) for r in tail),
    "ms_compute": statistics.median(r["ms_compute"] for r in tail),
    "val_loss": final["val_loss"], "final_loss": final["final_loss"],
    "tokens_per_s": final["tokens_per_s"],
    "keep_fraction": rows[-1]["keep_fraction"],
    "min_keep_fraction_seen": min(r["keep_fraction"] for r in rows),
    "migrated_cols": rows[-1]["migrated_cols"],
    "max_migrated_cols": max(r["migrated_cols"] for r in rows),
    "stragglers": rows[-1]["stragglers"], "balance": rows[-1]["balance"],
    "load1": float(load1), "wall_s": float(wall), "params": final["params"],
}
# With ZEN_LOG_LEVEL=info ZEN_LOG_SUBSYS=tp the log holds every decision: keep the plans chosen
# (label counts over the rounds) and the last learned migration cost (model, observed, scale).
import re
plans, learn = {}, None
try:
    for l in open(name + ".log"):
        m = re.search(r"round \d+: .*predicted saving [-\d.]+ ms, ([A-Za-z ]+) \(link", l)
        if m:
            plans[m.group(1)] = plans.get(m.group(1), 0) + 1
        m = re.search(r"learning: last period ([\d.]+) ms/step.*observed ([-\d.]+) ms vs "
                      r"modelled ([\d.]+) ms, scale ([\d.]+) after (\d+)", l)
        if m and int(m.group(5)) > 0:
            learn = [float(x) for x in m.groups()]
except OSError:
    pass
if plans:
    res["plans"] = plans
if learn:
    res["mig_obs_ms"], res["mig_model_ms"], res["mig_scale"] = learn[1], learn[2], learn[3]
    res["mig_periods"] = int(learn[4])
if hom_ms != "-":
    res["hom_ms"] = float(hom_ms)
    res["ratio"] = res["ms_step"] / res["hom_ms"]
print(json.dumps(res, sort_keys=True))
EOF
}

# run <case> <mode> <slow spec> <rotate steps>; prints the median ms/step
run() {
    # POSIX sh has no locals: the r_ prefix keeps the caller's slow/rot untouched
    r_case=$1
    r_mode=$2
    r_slow=$3
    r_rot=$4
    name="$OUT/runs/${r_case}_${r_mode}"
    bal=$r_mode
    [ "$r_mode" = homogeneous ] && bal=none
    load1=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    if ! "$ZEN" train --dp 1 --tp "$TP" --steps "$STEPS" --eval-interval "$STEPS" \
        --eval-batches "$EVAL_BATCHES" --sample-tokens 0 --threads "$THREADS" $MODEL $TRAIN \
        --slow "$r_slow" --slow-mode "$SLOW_MODE" --slow-rotate "$r_rot" --balance "$bal" \
        --metrics "$name.metrics.jsonl" --quiet --json >"$name.json" 2>"$name.log"; then
        echo "hetero_tp.sh: run ${r_case}_$r_mode failed, see $name.log" >&2
        return 1
    fi
    wall=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
        "$t0" "$(date +%s.%N)")
    line=$(summarise "$OUT" "$r_case" "$r_mode" "$r_slow" "$r_rot" "$load1" "$wall" "$HOM_MS" \
        "$STEPS" "$WARM" "$TP" "$SLOW_MODE")
    echo "$line" >>"$RESULTS"
    echo "$line" | python3 -c "
import json, sys
r = json.loads(sys.stdin.read())
print('%-8s %-12s %7.1f ms/step %6s  val %.4f  keep %.2f  migrated %4d  load %.1f  %5.1f s' % (
    r['case'], r['mode'], r['ms_step'], ('x%.2f' % r['ratio']) if 'ratio' in r else '',
    r['val_loss'], r['keep_fraction'], r['migrated_cols'], r['load1'], r['wall_s']),
    file=sys.stderr)
print('%.4f' % r['ms_step'])"
}

echo "hetero_tp.sh: tp $TP, $STEPS steps (median after $WARM), cases:$CASES, modes: $MODES," \
    "out $OUT" >&2
"$ZEN" info 2>/dev/null | head -2 >"$OUT/machine.txt" || true
for c in $CASES; do
    rot=0
    case $c in
    f*) slow="0:${c#f}" ;;
    rot*)
        slow="0:${c#rot}"
        rot=$ROTATE
        ;;
    profile) slow="profile:$PROFILE" ;;
    *)
        echo "hetero_tp.sh: unknown case $c" >&2
        exit 2
        ;;
    esac
    HOM_MS=-
    HOM_MS=$(run "$c" homogeneous none 0)
    for m in $MODES; do
        run "$c" "$m" "$slow" "$rot" >/dev/null
    done
done
echo "hetero_tp.sh: results in $RESULTS (plots: /usr/bin/python3 bench/plot_hetero.py $OUT)" >&2
