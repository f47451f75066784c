#!/bin/bash
# #34: the overlap bench at 4 emulated hosts, batch 24: ranks free against ranks pinned 2 per core
# (rank r on cpu r mod 2, all its threads), alternated. MODES="free free ..." picks the runs
# (run1.txt: the default; run2.txt and run3.txt: five and four free runs). Outputs in /tmp/ovp.
cd /work/main
export ZEN_CLUSTER_NAME=zpo GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=/work/main/build/python OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
scripts/cluster.sh up 4 --gbps 1 >/dev/null || exit 1
for mode in ${MODES:-pin free pin free}; do
  echo "==== $mode $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
  if [ $mode = pin ]; then pre='exec taskset -c $((ZEN_RANK % 2))'; else pre=exec; fi
  scripts/cluster.sh run 4 -- bash -c "$pre /usr/bin/python3 bench/torch_overlap.py --rounds 8 --batch 24 --timeline /tmp/ovp/$mode-$(date -u +%H%M).json --label '4 hosts, batch 24, $mode'"
done
scripts/cluster.sh down >/dev/null
