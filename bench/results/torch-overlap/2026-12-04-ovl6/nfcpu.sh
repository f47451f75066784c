#!/bin/bash
# Bridge netfilter's CPU cost alone: zen's tcp ring allreduce of 4 MiB on 4 emulated hosts at
# 1 Gbit/s, with the switch's bridge netfilter on (up --bridge-nf) and off (the default since
# 26021fe), alternated twice; machine-wide CPU seconds over each bench from /proc/stat.
cd /work/wt/ovl6
export ZEN_CLUSTER_NAME=zov OPENBLAS_NUM_THREADS=1
cpu() { awk '/^cpu /{print $2+$3, $4, $8, $5}' /proc/stat; }
delta() { echo "$1 $2" | awk -v hz=$(getconf CLK_TCK) '{printf "machine cpu over the bench (s): user %.2f system %.2f softirq %.2f idle %.2f\n", ($5-$1)/hz, ($6-$2)/hz, ($7-$3)/hz, ($8-$4)/hz}'; }
echo "start $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
for i in 1 2; do
  for nf in nf nonf; do
    opt=; [ $nf = nf ] && opt=--bridge-nf
    scripts/cluster.sh up 4 --gbps 1 $opt >/dev/null
    echo "==== round $i $nf $(date -u +%H:%M:%S) bridge-nf-call-iptables $(ip netns exec zov-sw sysctl -n net.bridge.bridge-nf-call-iptables)"
    c0=$(cpu)
    scripts/cluster.sh run 4 -- /work/main/build/zen bench allreduce --algo ring -b 4M -e 4M -w 3 -n 40 --transport tcp | grep -v '^#.*pid'
    delta "$c0" "$(cpu)"
    scripts/cluster.sh down >/dev/null
  done
done
echo "end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
