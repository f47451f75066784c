#!/bin/sh
# hetero_tp.sh - straggler-tolerant tensor parallelism end to end (docs/hetero-tp.md).
#
#   bench/hetero_tp.sh [BUILD_DIR]        (default: build)
#
# Trains the small GPT with `zen train` at tp = TP (dp 1) while tp rank 0 is emulated FACTOR
# times slower (--slow 0:FACTOR), for every FACTOR in FACTORS and every balance mode in MODES,
# plus one run without a straggler. Prints one line per run and a table:
#   tokens/s, speed-up over `none` at the same factor, final train loss and validation loss
#   (the loss of `migrate` must equal `none`: migration is exact; resize/semi may differ).
#
# Environment: TP (4), STEPS (60), FACTORS ("2 4 8"), MODES ("none resize migrate semi"),
# SLOW_MODE (sleep|spin, sleep), ROTATE (0: the straggler stays on rank 0; S: moves every S
# steps), MODEL (extra `zen train` model flags, default "--d-model 256 --d-ff 1024 --heads 4"),
# THREADS (BLAS threads per rank, 1), OUT (directory for the raw JSON and logs; default a
# fresh mktemp -d). Set ZEN_LOG_LEVEL=info ZEN_LOG_SUBSYS=tp to keep every balance decision
# in the per-run logs.
set -eu

BUILD=${1:-build}
ZEN=$BUILD/zen
TP=${TP:-4}
STEPS=${STEPS:-60}
FACTORS=${FACTORS:-"2 4 8"}
MODES=${MODES:-"none resize migrate semi"}
SLOW_MODE=${SLOW_MODE:-sleep}
ROTATE=${ROTATE:-0}
MODEL=${MODEL:-"--d-model 256 --d-ff 1024 --heads 4"}
THREADS=${THREADS:-1}
OUT=${OUT:-$(mktemp -d /tmp/zen-hetero-tp.XXXXXX)}
mkdir -p "$OUT"

[ -x "$ZEN" ] || { echo "hetero_tp.sh: no zen binary at $ZEN (build first)" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 || { echo "hetero_tp.sh: python3 needed for the table" >&2; exit 2; }

run() { # factor mode
    f=$1
    m=$2
    name="f${f}_${m}"
    slow="none"
    [ "$f" != 1 ] && slow="0:$f"
    # shellcheck disable=SC2086
    if ! "$ZEN" train --dp 1 --tp "$TP" --steps "$STEPS" --eval-interval 0 --sample-tokens 0 \
        --threads "$THREADS" $MODEL --slow "$slow" --slow-mode "$SLOW_MODE" \
        --slow-rotate "$ROTATE" --balance "$m" --quiet --json \
        >"$OUT/$name.json" 2>"$OUT/$name.log"; then
        echo "hetero_tp.sh: run $name failed, see $OUT/$name.log" >&2
        return 1
    fi
    echo "$f $m $(tail -n 1 "$OUT/$name.json")" >>"$OUT/results.txt"
    echo "factor $f balance $m: $(tail -n 1 "$OUT/$name.json")"
}

: >"$OUT/results.txt"
run 1 none
for f in $FACTORS; do
    for m in $MODES; do
        run "$f" "$m"
    done
done

python3 - "$OUT/results.txt" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    f, m, js = line.split(" ", 2)
    rows.append((float(f), m, json.loads(js)))
base = {f: r["tokens_per_s"] for f, m, r in rows if m == "none"}
loss = {f: r["val_loss"] for f, m, r in rows if m == "none"}
print("\n%-7s %-8s %10s %8s %10s %9s %9s" % ("factor", "balance", "tokens/s", "speedup",
                                              "train", "val", "dval"))
for f, m, r in rows:
    print("%-7g %-8s %10.0f %8.2f %10.4f %9.4f %+9.4f" % (
        f, m, r["tokens_per_s"], r["tokens_per_s"] / base[f], r["final_loss"], r["val_loss"],
        r["val_loss"] - loss[f]))
EOF
echo "raw results in $OUT"
