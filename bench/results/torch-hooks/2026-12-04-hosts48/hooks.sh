#!/bin/bash
# the KJV DDP example at 4 and 8 emulated hosts: all_reduce, top-k 1% union, top-k 1% global,
# PowerSGD rank 4, on zen, batch 4 per rank, 3 rounds, 40 steps; OpenBLAS's own kernels
cd /work/main
unset OPENBLAS_CORETYPE
for h in ${HOSTS_LIST:-4 8}; do
  echo "hooks hosts $h $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  HOSTS=$h BACKENDS=zen HOOKS="none topk topk-global powersgd" ROUNDS=3 STEPS=40 EXTRA="--batch 4" \
    ZEN_CLUSTER_NAME=zhx$h OUT=/tmp/mx/hooks-h$h bench/torch_hooks.sh build
done
