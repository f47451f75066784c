#!/usr/bin/env bash
# Open MPI's rsh launch agent for scripts/cluster.sh: "cluster-rsh.sh HOST CMD..." runs CMD in
# the namespace of the emulated host whose address is HOST, instead of going through ssh.
set -euo pipefail
host=$1
shift
last=${host##*.}
i=$((last - 1))
# Every emulated host shares this machine's /tmp and hostname, so Open MPI's daemons would build
# their session directories in one tree and race creating its common parents ("mkdir ... File
# exists"): each host gets its own TMPDIR, as a real host has its own /tmp.
tmp=/tmp/zen-ompi-h$i
mkdir -p "$tmp"
exec ip netns exec "zen-h$i" env TMPDIR="$tmp" sh -c "$*"
