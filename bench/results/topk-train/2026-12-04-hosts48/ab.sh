#!/bin/bash
# A/B: main's binary (/tmp/mx/old: merged decode) against this tree (any_order decode, sparse
# global bookkeeping), top-k 5% union and global, 80 steps, 4 and 8 emulated hosts at 1 Gbit/s
cd /work/main
unset OPENBLAS_CORETYPE
export LAUNCH=cluster TOPK=0.05 STEPS=80 REPS=1 MEDIAN_FROM=10 CACHE=/tmp/mx/cache
export SYNCS="topk:balanced@union topk:balanced@global"
export TOPK_OPTS_union="--topk-rescale --topk-momentum 0.9"
export TOPK_OPTS_global="--topk-rescale --topk-momentum 0.9 --topk-global"
for h in ${HOSTS_LIST:-4 8}; do
  export ZEN_CLUSTER_NAME=zab$h DP=$h
  scripts/cluster.sh up $h --gbps 1 >/tmp/mx/abup$h.log 2>&1 || { echo "up $h failed"; exit 1; }
  for r in ${ROUNDS:-1 2}; do
    echo "hosts $h round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
    LD_LIBRARY_PATH=/tmp/mx/old REP_FROM=$r bench/repro_train.sh /tmp/mx/old /tmp/mx/ab-old-h$h
    REP_FROM=$r bench/repro_train.sh build /tmp/mx/ab-new-h$h
  done
  scripts/cluster.sh down
done
