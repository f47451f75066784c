#!/bin/bash
# this tree (any_order decode, sparse global bookkeeping, tie rule): dense and top-k 5% union,
# 200 steps; 4 hosts under OpenBLAS's own kernels and the image's Haswell pin, then 8 hosts (own)
cd /work/main
export LAUNCH=cluster TOPK=0.05 STEPS=200 REPS=1 MEDIAN_FROM=10 CACHE=/tmp/mx/cache
export SYNCS="dense topk:balanced@union" TOPK_OPTS_union="--topk-rescale --topk-momentum 0.9"
export ZEN_CLUSTER_NAME=zfn4 DP=4
scripts/cluster.sh up 4 --gbps 1 >/dev/null 2>&1 || exit 1
echo "4 hosts own $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
env -u OPENBLAS_CORETYPE REP_FROM=1 bench/repro_train.sh build /tmp/mx/final-h4-own
echo "4 hosts haswell $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
OPENBLAS_CORETYPE=Haswell REP_FROM=1 bench/repro_train.sh build /tmp/mx/final-h4-haswell
scripts/cluster.sh down
export ZEN_CLUSTER_NAME=zfn8 DP=8
scripts/cluster.sh up 8 --gbps 1 >/dev/null 2>&1 || exit 1
echo "8 hosts own $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
env -u OPENBLAS_CORETYPE REP_FROM=1 bench/repro_train.sh build /tmp/mx/final-h8-own
scripts/cluster.sh down
