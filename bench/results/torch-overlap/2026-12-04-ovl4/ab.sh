#!/bin/bash
# A/B at 4 then 2 emulated hosts: base = /work/main/build (46c43ca), new = this worktree's build.
cd /work/wt/ovl4
export ZEN_CLUSTER_NAME=zovl GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
one() { # tag hosts rounds pythonpath
  echo "==== $1 hosts $2 rounds $3 $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
  scripts/cluster.sh up $2 --gbps 1 >/dev/null && PYTHONPATH=$4 scripts/cluster.sh run $2 -- /usr/bin/python3 bench/torch_overlap.py --rounds $3 --timeline /tmp/ovl4/ab-$1.json
  scripts/cluster.sh down >/dev/null
}
one base4 4 6 /work/main/build/python
one new4 4 6 $PWD/build/python
one new2 2 10 $PWD/build/python
one base2 2 10 /work/main/build/python
echo "end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
