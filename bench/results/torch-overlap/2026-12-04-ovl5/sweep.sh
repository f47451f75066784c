#!/bin/bash
# One timing slot: the overlap bench at the given specs, back to back.
# usage: sweep.sh TAG "hosts batch rounds pin|free [extra args]" ...
# pin: rank r runs on core r mod (cores) (taskset), every thread of it; free: unpinned.
cd /work/wt/ovl5
export ZEN_CLUSTER_NAME=zovl5 GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=$PWD/build/python
tag=$1; shift
for spec in "$@"; do
  set -- $spec; h=$1; b=$2; r=$3; p=$4; shift 4
  name=$tag-h$h-b$b-$p$(echo "$*" | tr -d ' -')
  echo "==== $name: hosts $h batch $b rounds $r $p $* $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
  if [ $p = pin ]; then pre='exec taskset -c $((ZEN_RANK % $(nproc)))'; else pre=exec; fi
  scripts/cluster.sh up $h --gbps 1 >/dev/null && scripts/cluster.sh run $h -- bash -c "$pre /usr/bin/python3 bench/torch_overlap.py --rounds $r --batch $b --timeline /tmp/ovl5/$name.json --label '$h hosts, batch $b $p $*' $*"
  scripts/cluster.sh down >/dev/null
done
echo "end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
