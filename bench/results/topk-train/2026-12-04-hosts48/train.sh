#!/bin/bash
# zen train at 4 and 8 emulated hosts (1 Gbit/s): dense, top-k 5% union, top-k 5% global,
# interleaved, 3 rounds, 200 steps; OpenBLAS's own kernel choice (the image's pin unset)
cd /work/main
unset OPENBLAS_CORETYPE
export LAUNCH=cluster TOPK=0.05 STEPS=200 REPS=1 MEDIAN_FROM=10 CACHE=/tmp/mx/cache
export SYNCS="dense topk:balanced@union topk:balanced@global"
export TOPK_OPTS_union="--topk-rescale --topk-momentum 0.9"
export TOPK_OPTS_global="--topk-rescale --topk-momentum 0.9 --topk-global"
for h in ${HOSTS_LIST:-4 8}; do
  export ZEN_CLUSTER_NAME=zmx$h DP=$h
  scripts/cluster.sh up $h --gbps 1 >/tmp/mx/up$h.log 2>&1 || { echo "up $h failed"; exit 1; }
  for r in ${ROUNDS:-1 2 3}; do
    echo "hosts $h round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
    REP_FROM=$r bench/repro_train.sh build /tmp/mx/train-h$h
  done
  scripts/cluster.sh down
done
