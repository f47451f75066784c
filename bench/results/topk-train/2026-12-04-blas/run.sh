#!/bin/bash
# 3 rounds; each: OpenBLAS pinned Haswell (this image's env) then OpenBLAS's own choice (Cooperlake)
cd /work/main
export ZEN_CLUSTER_NAME=zfin LAUNCH=cluster TOPK=0.05 STEPS=200 REPS=1 MEDIAN_FROM=10 CACHE=/tmp/t1/cache
export SYNCS="dense topk:balanced@rsm9nw" TOPK_OPTS_rsm9nw="--topk-rescale --topk-momentum 0.9"
scripts/cluster.sh up 4 --gbps 1
for r in ${ROUNDS:-1 2 3}; do
  echo "round $r $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  OPENBLAS_CORETYPE=Haswell REP_FROM=$r bench/repro_train.sh build /tmp/fin-haswell
  env -u OPENBLAS_CORETYPE REP_FROM=$r bench/repro_train.sh build /tmp/fin-own
done
scripts/cluster.sh down
