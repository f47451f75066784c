#!/bin/bash
# The token embedding's bucket alone (bench/torch_rows.py) at 4 and 2 emulated hosts, 1 Gbit/s;
# arguments go to the bench (rowsbench-balanced.txt: HOSTS=4 rowsbench.sh --scheme balanced).
cd /work/main
export ZEN_CLUSTER_NAME=zq GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=$PWD/build/python OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
for h in ${HOSTS:-4 2}; do
scripts/cluster.sh down >/dev/null 2>&1
scripts/cluster.sh up $h --gbps 1 || exit 1
echo "=== $h hosts $(date -u +%H:%M:%S)"
scripts/cluster.sh run $h -- /usr/bin/python3 bench/torch_rows.py "$@"
scripts/cluster.sh down
done
