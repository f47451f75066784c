#!/bin/bash
# One timing slot: the overlap bench at the given specs, back to back.
# usage: sweep.sh TAG "hosts batch rounds nf|nonf [extra bench args]" ...
# nf: cluster.sh up --bridge-nf (the switch keeps bridge netfilter, the emulation before
# 26021fe); nonf: the default since 26021fe (net.bridge.bridge-nf-call-* = 0 in the switch).
cd /work/wt/ovl6
export ZEN_CLUSTER_NAME=zov GLOO_SOCKET_IFNAME=eth0 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONPATH=/work/main/build/python
tag=$1; shift
# machine-wide CPU seconds (user, system, softirq, idle) between two /proc/stat samples: the
# bridge's netfilter runs in softirq context, charged to whatever task the CPU was running
cpu() { awk '/^cpu /{print $2+$3, $4, $8, $5}' /proc/stat; }
delta() { echo "$1 $2" | awk -v hz=$(getconf CLK_TCK) '{printf "machine cpu over the run (s): user %.1f system %.1f softirq %.1f idle %.1f\n", ($5-$1)/hz, ($6-$2)/hz, ($7-$3)/hz, ($8-$4)/hz}'; }
for spec in "$@"; do
  set -- $spec; h=$1; b=$2; r=$3; nf=$4; shift 4
  name=$tag-h$h-b$b-$nf$(echo "$*" | tr -d ' -')
  opt=; [ $nf = nf ] && opt=--bridge-nf
  echo "==== $name: hosts $h batch $b rounds $r $nf $* $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
  scripts/cluster.sh up $h --gbps 1 $opt >/dev/null
  echo "switch bridge-nf-call-iptables: $(ip netns exec zov-sw sysctl -n net.bridge.bridge-nf-call-iptables 2>&1)"
  c0=$(cpu)
  scripts/cluster.sh run $h -- /usr/bin/python3 bench/torch_overlap.py --rounds $r --batch $b --timeline /tmp/ovl6/$name.json --label "$h hosts, batch $b" "$@"
  delta "$c0" "$(cpu)"
  scripts/cluster.sh down >/dev/null
done
echo "end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
