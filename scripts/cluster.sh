#!/usr/bin/env bash
# An emulated cluster on one machine: N network namespaces as hosts, each with a veth into one
# bridge, egress rate and delay set with tc netem, addresses from 198.18.0.0/15 (the benchmarking
# range, RFC 2544). Everything it makes lives in namespaces named zen-h<I> and zen-sw (the
# switch), so nothing outside them is touched; `down` removes them all.
#
#   scripts/cluster.sh up N [--gbps G] [--lat-us L]   make N hosts (default 1 Gbit/s, 50 us)
#   scripts/cluster.sh down                            remove everything it made
#   scripts/cluster.sh exec I CMD [ARGS...]            run a command on host I (0-based)
#   scripts/cluster.sh addr I                          print host I's address
#   scripts/cluster.sh run N [--port P] -- CMD ARGS    run CMD on hosts 0..N-1 as tcp ranks
#                                                      (ZEN_RANK etc. set; master = host 0)
#   scripts/cluster.sh mpirun N -- CMD ARGS            run CMD with Open MPI across hosts 0..N-1
#   scripts/cluster.sh status                          list hosts and their qdiscs
# Needs root (ip netns, tc). Traffic stays on 198.18.0.0/24 inside the namespaces.
set -euo pipefail

SW=zen-sw
PREFIX=zen-h
SUBNET=198.18.0
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
host_ns() { echo "${PREFIX}$1"; }
host_addr() { echo "${SUBNET}.$(($1 + 1))"; }

hosts() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" | sort -V || true; }

cmd_up() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: N must be 1..200"
    local gbps=1 lat_us=50 delay_note=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --gbps) gbps=$2; shift 2 ;;
        --lat-us) lat_us=$2; shift 2 ;;
        *) die "up: unknown option $1" ;;
        esac
    done
    [ -z "$(hosts)" ] || die "a cluster exists already: run 'cluster.sh down' first"
    ip netns add "$SW"
    ip -n "$SW" link add br0 type bridge
    ip -n "$SW" link set br0 up
    ip -n "$SW" link set lo up
    for ((i = 0; i < n; i++)); do
        local ns; ns=$(host_ns "$i")
        ip netns add "$ns"
        ip link add "zh${i}" netns "$ns" type veth peer name "zp${i}" netns "$SW"
        ip -n "$ns" link set "zh${i}" name eth0
        ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        ip -n "$SW" link set "zp${i}" master br0
        ip -n "$SW" link set "zp${i}" up
        # egress shaping on the host side: a token bucket for the rate, netem under it for the
        # one-way delay (when the kernel has sch_netem; some sandboxed kernels do not)
        local burst
        burst=$(awk -v g="$gbps" 'BEGIN { b = int(g * 1e9 / 8 / 250); print (b < 65536 ? 65536 : b) }')
        ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "${gbps}gbit" \
            burst "$burst" latency 50ms
        if [ "$lat_us" != 0 ] && ! ip netns exec "$ns" tc qdisc add dev eth0 parent 1:1 \
            handle 10: netem delay "${lat_us}us" limit 100000 2>/dev/null; then
            delay_note=" (no added delay: this kernel lacks sch_netem)"
        fi
    done
    echo "cluster up: $n hosts ${SUBNET}.1-${SUBNET}.$n, ${gbps} Gbit/s, ${lat_us} us one way${delay_note}"
}

cmd_down() {
    for ns in $(hosts); do ip netns del "$ns"; done
    if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$SW"; then ip netns del "$SW"; fi
    rm -rf /tmp/zen-ompi-h[0-9]* # the per-host Open MPI session directories of mpirun
    echo "cluster down"
}

cmd_exec() {
    local i=${1:-}; shift || true
    [[ "$i" =~ ^[0-9]+$ ]] || die "exec: host index required"
    ip netns list | awk '{print $1}' | grep -qx "$(host_ns "$i")" || die "no host $i (cluster up?)"
    exec ip netns exec "$(host_ns "$i")" "$@"
}

cmd_run() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] || die "run: N required"
    local port=29600
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        case "$1" in
        --port) port=$2; shift 2 ;;
        *) die "run: unknown option $1" ;;
        esac
    done
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "run: command required after --"
    local pids=() rc=0
    for ((i = 0; i < n; i++)); do
        ip netns exec "$(host_ns "$i")" env ZEN_RANK="$i" ZEN_WORLD_SIZE="$n" \
            ZEN_MASTER_ADDR="$(host_addr 0)" ZEN_MASTER_PORT="$port" ZEN_LOCAL_RANK=0 \
            ZEN_LOCAL_SIZE=1 ZEN_SOCKET_IFADDR="$(host_addr "$i")" "$@" &
        pids+=($!)
    done
    for ((i = 0; i < n; i++)); do
        if ! wait "${pids[$i]}"; then
            echo "cluster.sh: rank $i (host $(host_addr "$i")) failed" >&2
            rc=1
        fi
    done
    return $rc
}

cmd_mpirun() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] || die "mpirun: N required"
    [ "${1:-}" = "--" ] && shift
    local hostfile; hostfile=$(mktemp)
    for ((i = 0; i < n; i++)); do echo "$(host_addr "$i") slots=1" >>"$hostfile"; done
    # mpirun runs on host 0; its daemons start on the other hosts through cluster-rsh.sh, which
    # maps an address to its namespace instead of using ssh.
    # (set -e would exit on a failing mpirun before the hostfile is removed: keep its status)
    local rc=0
    # host 0's own TMPDIR, like the other hosts' in cluster-rsh.sh
    mkdir -p /tmp/zen-ompi-h0
    TMPDIR=/tmp/zen-ompi-h0 ip netns exec "$(host_ns 0)" mpirun --allow-run-as-root -n "$n" \
        --hostfile "$hostfile" \
        --mca plm_rsh_agent "$HERE/cluster-rsh.sh" --mca btl tcp,self \
        --mca btl_tcp_if_include "${SUBNET}.0/24" --mca oob_tcp_if_include "${SUBNET}.0/24" \
        "$@" || rc=$?
    rm -f "$hostfile"
    return $rc
}

cmd_status() {
    for ns in $(hosts); do
        echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}')" \
            "$(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
    done
}

sub=${1:-}; shift || true
case "$sub" in
up) cmd_up "$@" ;;
down) cmd_down ;;
exec) cmd_exec "$@" ;;
addr) host_addr "${1:?host index}" ;;
run) cmd_run "$@" ;;
mpirun) cmd_mpirun "$@" ;;
status) cmd_status ;;
-h | --help | "") sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$sub' (see --help)" ;;
esac
