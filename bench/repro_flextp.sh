#!/bin/sh
# repro_flextp.sh - ZERO-resizing's column selection (FlexTP Sec. 2.4) over several seeds:
# the priority criterion (score) against random and prefix selection, for docs/reproduction.md.
#
#   bench/repro_flextp.sh BUILD_DIR OUT.jsonl
#
# Every run trains the small GPT at --dp 1 --tp TP (4) with one static FACTOR x (4) straggler on
# tp rank 0 and --balance resize, so rank 0 drops up to ZEN_TP_RHO_MAX (0.5) of its columns; only
# ZEN_TP_PRIORITY differs between the policies. A homogeneous run (no straggler, nothing pruned)
# per seed is the accuracy reference. Seeds SEEDS ("1 2 3 4") change initialisation and data
# order; policies are interleaved within a seed so they see the same machine load. One JSON line
# per run: policy, seed, val_loss (after STEPS steps, fixed eval set), ms_step (median after
# step 20), keep_fraction (rank 0's last).
set -eu
BUILD=$1
OUT=$2
ZEN=$BUILD/zen
TP=${TP:-4}
STEPS=${STEPS:-120}
FACTOR=${FACTOR:-4}
SEEDS=${SEEDS:-"1 2 3 4"}
POLICIES=${POLICIES:-"homogeneous score random prefix"}
SLOW_MODE=${SLOW_MODE:-sleep}
MODEL=${MODEL:-"--d-model 256 --d-ff 2048 --heads 4 --vocab-max 1024"}
TRAIN=${TRAIN:-"--warmup 10 --batch 8 --seq 32"}
TMP=$(mktemp -d /tmp/zen-repro-flextp.XXXXXX)
: >"$OUT"
for seed in $SEEDS; do
    for p in $POLICIES; do
        if [ "$p" = homogeneous ]; then
            slow=""
            bal=none
            pri=score
        else
            slow="--slow 0:$FACTOR"
            bal=resize
            pri=$p
        fi
        # shellcheck disable=SC2086
        ZEN_TP_PRIORITY=$pri "$ZEN" train --dp 1 --tp "$TP" --steps "$STEPS" --seed "$seed" \
            --eval-interval "$STEPS" --eval-batches 8 --sample-tokens 0 --threads 1 $MODEL \
            $TRAIN $slow --slow-mode "$SLOW_MODE" --balance "$bal" \
            --metrics "$TMP/m.jsonl" --quiet --json >"$TMP/final.json" 2>"$TMP/log"
        /usr/bin/python3 - "$p" "$seed" "$TMP" >>"$OUT" <<'EOF'
import json, statistics, sys
p, seed, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [json.loads(l) for l in open(tmp + "/m.jsonl") if l.strip()]
final = json.loads(open(tmp + "/final.json").read().strip().splitlines()[-1])
print(json.dumps({"policy": p, "seed": seed, "val_loss": final["val_loss"],
                  "ms_step": statistics.median(r["ms_step"] for r in rows if r["step"] > 20),
                  "keep_fraction": rows[-1]["keep_fraction"],
                  "min_keep": min(r["keep_fraction"] for r in rows)}))
EOF
        tail -1 "$OUT" >&2
    done
done
rm -rf "$TMP"
