#!/bin/bash
# #34: the overlap bench at 4 emulated hosts, batch 24, ring (default for 2 MB buckets) against
# recursive halving-doubling for every dense allreduce (ZEN_ALLREDUCE_ALGO=rhd), alternated twice
cd /work/main
export ZEN_CLUSTER_NAME=zrh GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=/work/main/build/python OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
scripts/cluster.sh up 4 --gbps 1 >/dev/null || exit 1
for algo in ring rhd ring rhd; do
  echo "==== $algo $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  ZEN_ALLREDUCE_ALGO=$algo scripts/cluster.sh run 4 -- /usr/bin/python3 bench/torch_overlap.py --rounds 8 --batch 24
done
scripts/cluster.sh down
