#!/bin/bash
# A 512x512 matmul loop in each of 4 ranks of an emulated 4-host cluster, pinned the way the
# afternoon sweep pinned them (cpu = rank mod $(nproc)) and free. nproc honours OMP_NUM_THREADS,
# so with OMP_NUM_THREADS=1 it prints 1 and every "pinned" rank lands on cpu 0.
# Output of the run at 22:23 UTC: pin2.txt.
cd /work/main
export ZEN_CLUSTER_NAME=zpn OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
scripts/cluster.sh up 4 --gbps 1 >/dev/null || exit 1
scripts/cluster.sh run 4 -- bash -c 'exec taskset -c $((ZEN_RANK % $(nproc))) /usr/bin/python3 /tmp/mx/pin.py pin$ZEN_RANK-$(nproc)'
scripts/cluster.sh run 4 -- bash -c 'exec /usr/bin/python3 /tmp/mx/pin.py free$ZEN_RANK'
scripts/cluster.sh down >/dev/null
