#!/bin/bash
# ring vs rhd allreduce at 1-4 MB on 4 emulated hosts at 1 Gbit/s, alternated 3 times.
cd /work/wt/ovl5
export ZEN_CLUSTER_NAME=zovl5 OPENBLAS_NUM_THREADS=1
echo "start $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
scripts/cluster.sh up 4 --gbps 1
for i in 1 2 3; do
  for a in ring rhd; do
    echo "==== round $i algo $a $(date -u +%H:%M:%S)"
    scripts/cluster.sh run 4 -- $PWD/build/zen bench allreduce --algo $a -b 1M -e 4M -w 3 -n 20 --transport tcp
  done
done
scripts/cluster.sh down
echo "end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
