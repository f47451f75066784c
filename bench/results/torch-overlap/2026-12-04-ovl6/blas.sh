#!/bin/bash
cd /work/main
export ZEN_CLUSTER_NAME=zob GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=/work/main/build/python OPENBLAS_NUM_THREADS=1
scripts/cluster.sh up 4 --gbps 1
for ct in own Haswell; do
  echo "==== $ct $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  if [ $ct = own ]; then pre="env -u OPENBLAS_CORETYPE"; else pre="env OPENBLAS_CORETYPE=Haswell"; fi
  $pre scripts/cluster.sh run 4 -- /usr/bin/python3 bench/torch_overlap.py --rounds 8 --batch 24
done
scripts/cluster.sh down
