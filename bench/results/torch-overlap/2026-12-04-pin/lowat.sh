#!/bin/bash
# #34 lead: the tcp reader's SO_RCVLOWAT cap, 128 KiB (main) against the whole frame (4 MiB cap),
# in the overlap bench at 4 emulated hosts, batch 24; reader CPU from the per-thread lines.
cd /work/main
export ZEN_CLUSTER_NAME=zlo GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=/work/main/build/python OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
scripts/cluster.sh up 4 --gbps 1 >/dev/null || exit 1
for cap in 4096 128 4096 128; do
  echo "==== cap${cap}K $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  ZEN_XP_LOWAT_KB=$cap scripts/cluster.sh run 4 -- /usr/bin/python3 bench/torch_overlap.py --rounds 8 --batch 24
done
scripts/cluster.sh down >/dev/null
