#!/bin/sh
# flextp_rounds.sh - rows F1-F3 of docs/reproduction.md, repeated: ROUNDS (3) rounds, each one
# bench/hetero_tp.sh sweep of the straggler at tp 4 (cases f4 rot8) and one of the tp 8 profile,
# every mode (homogeneous none resize migrate semi) back to back within a case, so that a
# round's modes see about the same load. Each sweep takes the benchmark lock; the load average
# (uptime) is logged before every sweep.
#
#   bench/results/reproduction/flextp_rounds.sh BUILD_DIR OUT_DIR
#
# SLOW_MODE (sleep|spin, sleep) is the straggler emulation (sleep frees the core, spin does not);
# SWEEPS ("tp4 tp8") picks the sweeps of a round; TP4_STEPS (80) and TP8_STEPS (60) the steps.
#
# Writes OUT_DIR/rR-tp4/ and OUT_DIR/rR-tp8/ (hetero_tp.sh's OUT), OUT_DIR/load.txt, and
# OUT_DIR/flextp.jsonl: every result line with "round" added. Exits non-zero if a run failed.
set -eu
BUILD=${1:-build}
OUT=$2
ROUNDS=${ROUNDS:-3}
TP4_STEPS=${TP4_STEPS:-80}
TP8_STEPS=${TP8_STEPS:-60}
SLOW_MODE=${SLOW_MODE:-sleep}
SWEEPS=${SWEEPS:-"tp4 tp8"}
mkdir -p "$OUT"
: >"$OUT/flextp.jsonl"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for sweep in $SWEEPS; do
        echo "round $r $sweep start $(date -u +%FT%TZ) $(uptime)" >>"$OUT/load.txt"
        if [ "$sweep" = tp4 ]; then
            flock /tmp/zen-bench.lock env SLOW_MODE="$SLOW_MODE" TP=4 CASES="f4 rot8" \
                STEPS="$TP4_STEPS" WARM=20 ROTATE=25 OUT="$OUT/r$r-$sweep" bench/hetero_tp.sh "$BUILD"
        else
            flock /tmp/zen-bench.lock env SLOW_MODE="$SLOW_MODE" TP=8 CASES=profile \
                STEPS="$TP8_STEPS" WARM=20 OUT="$OUT/r$r-$sweep" bench/hetero_tp.sh "$BUILD"
        fi
        echo "round $r $sweep end   $(date -u +%FT%TZ) $(uptime)" >>"$OUT/load.txt"
        sed "s/^{/{\"round\": $r, /" "$OUT/r$r-$sweep/results.jsonl" >>"$OUT/flextp.jsonl"
    done
    r=$((r + 1))
done
