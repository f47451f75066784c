#!/bin/bash
# #34: the overlap bench at 4 emulated hosts, 1 Gbit/s, batch 24, 8 rounds, one run per argument:
# "plain" (DDP's own all_reduce for every candidate) or "rows" (--rows: every candidate's DDP with
# zen_torch.rows.rows_hook). run1.txt: `ab.sh plain rows`; run2.txt: `ab.sh rows plain rows plain
# rows plain`; run3.txt: `ab.sh plain rows` six times over. Run under the timing lock.
cd /work/main
export ZEN_CLUSTER_NAME=zq GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=$PWD/build/python OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
scripts/cluster.sh down >/dev/null 2>&1
scripts/cluster.sh up 4 --gbps 1 || exit 1
for v in "$@"; do
  extra=""; [ "$v" = rows ] && extra="--rows"
  echo "=== $v $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
  scripts/cluster.sh run 4 -- /usr/bin/python3 bench/torch_overlap.py --rounds 8 --batch 24 $extra
done
scripts/cluster.sh down
