#!/bin/sh
# torch_tp.sh - examples/torch_tp_gpt.py with one slow rank: zen_torch.tp's balancing modes against
# the homogeneous run and the Megatron-style baseline (docs/pytorch-tp.md, "Measured").
#
#   bench/torch_tp.sh [BUILD_DIR]        (default: build)
#
# Every round runs each case of CASES once, in order, so the runs compared saw similar load on a
# shared machine; ROUNDS rounds. Cases:
#
#   megatron   --impl megatron, no straggler (the baseline for the zen layers' overhead)
#   hom        --impl zen --balance none, no straggler (what the others are divided by)
#   none resize migrate semi
#              --impl zen --balance MODE with --straggler SLOW --straggler-mode SLOW_MODE
#   megatron_slow  --impl megatron with the same straggler (what Megatron does with a slow rank)
#   share      --impl megatron --time-gemms, no straggler: the tp GEMMs' share of a rank's CPU
#              time per step (what --straggler slows; docs/pytorch-tp.md, "What the emulation
#              means")
#   MODE_sleep / MODE_spin   the mode with the other emulation (e.g. none_sleep, semi_sleep)
#   thr_MODE   --balance MODE with no emulation: the rank of SLOW is a real slow process,
#              throttled from outside by scripts/throttle.sh with DUTY (default 1/FACTOR): all
#              its work, not only the tp GEMMs; not in the default. THROTTLE=signal (default):
#              SIGSTOP/SIGCONT, it runs DUTY of the wall time; THROTTLE=cgroup: a CPU quota of
#              DUTY of one core (note: with more ranks than cores a rank gets less than a core
#              anyway, so a quota of 1/FACTOR slows it by less than FACTOR)
#
# Each run: `zen launch -n TP -- python3 examples/torch_tp_gpt.py --tp TP --json ...`; its JSON
# lines go to $OUT/runs/CASE.rROUND.jsonl with the 1-minute load average when it started. The
# summary (bench/torch_tp_table.py) prints per case the median over rounds of the run's median
# step time (steps WARM..STEPS), its ratio to the same round's hom run (median over rounds), the
# final validation loss, the largest per-step training-loss difference to hom, and the tp stats
# of the last round; then the tp GEMMs' share of hom's step wall time (g_wall) and the step time
# 1 + (F - 1) g_wall that it predicts for `none`.
#
# Environment: TP (4), STEPS (100), WARM (20), ROUNDS (2), SLOW ("1:4": world rank 1, 4x),
# SLOW_MODE (spin), THROTTLE (signal), DUTY (1/FACTOR), CASES ("megatron hom none resize migrate semi megatron_slow none_sleep
# semi_sleep"), ARGS (extra example options, the same for every case; the straggler numbers in
# docs/pytorch-tp.md use "--d-model 384 --d-ff 1536 --vocab 256"), OUT (a fresh mktemp -d),
# PYTHON (/usr/bin/python3: the interpreter with torch). OMP_NUM_THREADS=1 (the example also
# calls torch.set_num_threads(1)): TP ranks share the host's cores, and a 2-core host is
# oversubscribed at tp 4. The default (9 cases x 2 rounds x 100 steps) takes about 6 minutes on
# a quiet 2-core machine. On a shared machine wrap it in a lock, e.g.
#   flock /work/notes/bench.lock bench/torch_tp.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
ZEN=$BUILD/zen
PY=${PYTHON:-/usr/bin/python3}
TP=${TP:-4}
STEPS=${STEPS:-100}
WARM=${WARM:-20}
ROUNDS=${ROUNDS:-2}
SLOW=${SLOW:-1:4}
SLOW_MODE=${SLOW_MODE:-spin}
CASES=${CASES:-"megatron hom none resize migrate semi megatron_slow none_sleep semi_sleep"}
ARGS=${ARGS:-}
OUT=${OUT:-$(mktemp -d /tmp/zen-torch-tp.XXXXXX)}

[ -x "$ZEN" ] || { echo "torch_tp.sh: no zen binary at $ZEN (build first)" >&2; exit 2; }
"$PY" -c 'import torch' 2>/dev/null ||
    { echo "torch_tp.sh: $PY cannot import torch (apt-get install python3-torch)" >&2; exit 2; }
[ "$WARM" -lt "$STEPS" ] || { echo "torch_tp.sh: WARM ($WARM) must be < STEPS ($STEPS)" >&2; exit 2; }
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
mkdir -p "$OUT/runs"

# The example's options for one case.
case_args() {
    case $1 in
        megatron) echo "--impl megatron" ;;
        hom) echo "--impl zen --balance none" ;;
        none | resize | migrate | semi)
            echo "--impl zen --balance $1 --straggler $SLOW --straggler-mode $SLOW_MODE" ;;
        megatron_slow) echo "--impl megatron --straggler $SLOW --straggler-mode $SLOW_MODE" ;;
        share) echo "--impl megatron --time-gemms" ;;
        thr_*) echo "--impl zen --balance ${1#thr_} --pid-dir $OUT/pids.$1" ;;
        *_sleep | *_spin)
            mode=${1##*_}
            echo "--impl zen --balance ${1%_*} --straggler $SLOW --straggler-mode $mode" ;;
        *) echo "torch_tp.sh: unknown case '$1'" >&2; exit 2 ;;
    esac
}

# Throttle the rank whose pid file appears (the example writes it at start) while JOB runs;
# throttle.sh stops by itself when that process exits.
throttle() {
    while [ ! -s "$1" ]; do
        kill -0 "$2" 2>/dev/null || return 0
        sleep 0.1
    done
    duty=${DUTY:-$(awk -v f="${SLOW#*:}" 'BEGIN { printf "%.4f", 1 / f }')}
    flag=
    [ "${THROTTLE:-signal}" = cgroup ] && flag=--cgroup
    # shellcheck disable=SC2086  # flag is empty or one word
    "$here/../scripts/throttle.sh" $flag "$(cat "$1")" "$duty" 2>>"$OUT/throttle.log" &
}

echo "torch_tp.sh: tp $TP, $STEPS steps (median from $WARM), $ROUNDS rounds, straggler $SLOW" \
     "($SLOW_MODE), $(getconf _NPROCESSORS_ONLN) cores; output in $OUT" >&2
for round in $(seq 1 "$ROUNDS"); do
    for c in $CASES; do
        a=$(case_args "$c")
        load=$(cut -d' ' -f1 /proc/loadavg)
        f=$OUT/runs/$c.r$round.jsonl
        echo "{\"case\": \"$c\", \"round\": $round, \"load1\": $load}" >"$f"
        rm -rf "$OUT/pids.$c"
        # shellcheck disable=SC2086  # the option lists are meant to split
        "$ZEN" launch -n "$TP" -- "$PY" "$here/../examples/torch_tp_gpt.py" --tp "$TP" \
            --steps "$STEPS" --warm "$WARM" --json $a $ARGS >>"$f" 2>"$OUT/runs/$c.r$round.err" &
        job=$!
        case $c in thr_*) throttle "$OUT/pids.$c/rank${SLOW%%:*}.pid" "$job" ;; esac
        wait "$job" ||
            { echo "torch_tp.sh: case $c round $round failed, see $OUT/runs/$c.r$round.err" >&2; exit 1; }
        echo "round $round $c: load $load, $(tail -1 "$f" | cut -c1-160)" >&2
    done
done
"$PY" "$here/torch_tp_table.py" "$OUT/runs"
