#!/bin/bash
# rounds 2-3 of final.sh's 4-host pairs (appends)
cd /work/main
export LAUNCH=cluster TOPK=0.05 STEPS=200 REPS=1 MEDIAN_FROM=10 CACHE=/tmp/mx/cache
export SYNCS="dense topk:balanced@union" TOPK_OPTS_union="--topk-rescale --topk-momentum 0.9"
export ZEN_CLUSTER_NAME=zfn4 DP=4
scripts/cluster.sh up 4 --gbps 1 >/dev/null 2>&1 || exit 1
for r in 2 3; do
  echo "round $r own $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  env -u OPENBLAS_CORETYPE REP_FROM=$r bench/repro_train.sh build /tmp/mx/final-h4-own
  echo "round $r haswell $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  OPENBLAS_CORETYPE=Haswell REP_FROM=$r bench/repro_train.sh build /tmp/mx/final-h4-haswell
done
scripts/cluster.sh down
