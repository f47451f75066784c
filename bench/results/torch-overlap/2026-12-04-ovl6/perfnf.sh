#!/bin/bash
# Where the emulated packets' CPU goes, with the switch's bridge netfilter on and off: perf
# record -a (flat, no call graphs) over zen's tcp ring allreduce of 4 MiB (4 emulated hosts,
# 1 Gbit/s, 40 iterations out of place and 40 in place); share of the busy samples (all but the
# idle halt) in netfilter's functions (br_nf_*, nf_*, ipt_*, nft_*, *conntrack*), top symbols.
cd /work/wt/ovl6
export ZEN_CLUSTER_NAME=zov OPENBLAS_NUM_THREADS=1
for nf in nf nonf; do
  opt=; [ $nf = nf ] && opt=--bridge-nf
  scripts/cluster.sh up 4 --gbps 1 $opt >/dev/null
  echo "==== $nf $(date -u +%H:%M:%S) bridge-nf-call-iptables $(ip netns exec zov-sw sysctl -n net.bridge.bridge-nf-call-iptables) load $(cat /proc/loadavg)"
  perf record -q -a -o /tmp/ovl6/perf-$nf.data -- scripts/cluster.sh run 4 -- /work/main/build/zen bench allreduce --algo ring -b 4M -e 4M -w 3 -n 40 --transport tcp | grep '^ *4194304'
  scripts/cluster.sh down >/dev/null
  perf report -i /tmp/ovl6/perf-$nf.data --sort symbol --stdio 2>/dev/null | grep '%' > /tmp/ovl6/perf-$nf.txt
  awk '{p=$1; sub("%","",p); s=$3; if (s ~ /halt/) next; busy+=p;
        if (s ~ /^(br_nf|nf_|ipt_|nft_|ebt_)|conntrack/) nf+=p}
       END {printf "busy %.1f %% of samples; netfilter %.2f %% of samples = %.1f %% of busy\n", busy, nf, 100*nf/busy}' /tmp/ovl6/perf-$nf.txt
  grep -E 'br_nf|nf_|ipt_|nft_|conntrack' /tmp/ovl6/perf-$nf.txt | head -8
  echo "top symbols:"; head -12 /tmp/ovl6/perf-$nf.txt
done
