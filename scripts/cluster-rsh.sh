#!/usr/bin/env bash
# Open MPI's rsh launch agent for scripts/cluster.sh: "cluster-rsh.sh HOST CMD..." runs CMD in
# the namespace of the emulated host whose address is HOST, instead of going through ssh.
set -euo pipefail
host=$1
shift
last=${host##*.}
exec ip netns exec "zen-h$((last - 1))" sh -c "$*"
