#!/usr/bin/env bash
# An emulated cluster on one machine: N network namespaces as hosts with addresses from
# 198.18.0.0/15 (the benchmarking range, RFC 2544), each host's egress rate set with tc tbf and a
# one-way delay added between any two hosts. Two ways to join them:
#   bridge  each host has a veth into one Linux bridge (namespace <name>-sw); the delay is tc netem
#           under the tbf (when the kernel has sch_netem; some sandboxed kernels do not)
#   user    each host has a TUN device eth0 (MTU 65000) held by bench/zen_netswitch, a user-space
#           switch that forwards every packet after the delay (netswitch.c); for kernels without
#           sch_netem. The rate stays tbf on each host's eth0 unless --rate-at switch, where the
#           switch paces each host's line itself.
# Default (--switch auto): user when --lat-us L > 0 is given and the kernel lacks sch_netem,
# bridge otherwise (without --lat-us on such a kernel: bridge and no delay, as before).
# Everything it makes lives in namespaces named <name>-h<I> and <name>-sw (<name> =
# $ZEN_CLUSTER_NAME, default zen) plus /tmp/<name>-netswitch.{pid,log}; `down` removes them all.
#
#   scripts/cluster.sh up N [--gbps G] [--lat-us L]   make N hosts (default 1 Gbit/s, 50 us;
#        [--switch auto|bridge|user]                  see above for when 50 us is really added)
#        [--rate-at host|switch]
#        [--bridge-nf]                                keep bridge netfilter on (see up_bridge)
#   scripts/cluster.sh down                            remove everything it made
#   scripts/cluster.sh exec I CMD [ARGS...]            run a command on host I (0-based)
#   scripts/cluster.sh addr I                          print host I's address
#   scripts/cluster.sh run N [--port P] -- CMD ARGS    run CMD on hosts 0..N-1 as tcp ranks
#                                                      (ZEN_RANK etc. set; master = host 0;
#                                                      ZEN_NET_GBPS = the line rate if unset)
#        [--per-host R]                                R ranks per host (default 1): rank i*R+j
#                                                      is process j of host i
#   scripts/cluster.sh mpirun N -- CMD ARGS            run CMD with Open MPI across hosts 0..N-1
#   scripts/cluster.sh ping I J [COUNT]                ICMP echo from host I to host J (python3)
#   scripts/cluster.sh status                          list hosts, their qdiscs and the switch
#   scripts/cluster.sh switch-stats                    the user switch's counters so far
# Needs root (ip netns, tc). Traffic stays on 198.18.0.0/24 inside the namespaces. The user
# switch is $ZEN_NETSWITCH, else $ZEN_BUILD/bench/zen_netswitch, else build/bench/zen_netswitch;
# it runs at SCHED_FIFO priority $ZEN_NETSWITCH_RT_PRIO (default 10; 0 = a normal process).
set -euo pipefail

NAME=${ZEN_CLUSTER_NAME:-zen}
[[ "$NAME" =~ ^[a-z][a-z0-9]{0,11}$ ]] || { echo "cluster.sh: bad ZEN_CLUSTER_NAME" >&2; exit 1; }
SW=${NAME}-sw
PREFIX=${NAME}-h
STATE=/tmp/${NAME}-netswitch # .pid and .log of the user switch, .gbps the line rate
SUBNET=198.18.0
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
host_ns() { echo "${PREFIX}$1"; }
host_addr() { echo "${SUBNET}.$(($1 + 1))"; }

hosts() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" | sort -V || true; }
ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# tbf bucket: 4 ms at the rate, and never below min (it must hold the largest packet)
tbf_burst() { awk -v g="$1" -v m="$2" 'BEGIN { b = int(g * 1e9 / 8 / 250); print (b < m ? m : b) }'; }

# Whether tc can make a netem qdisc here: tried on the loopback of a scratch namespace.
have_netem() {
    local ns=${NAME}-probe ok=1
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip netns exec "$ns" tc qdisc add dev lo root netem delay 1us 2>/dev/null || ok=0
    ip netns del "$ns"
    [ "$ok" = 1 ]
}

netswitch_bin() {
    local bin
    if [ -n "${ZEN_NETSWITCH:-}" ]; then
        bin=$ZEN_NETSWITCH
    elif [ -n "${ZEN_BUILD:-}" ]; then
        bin=$ZEN_BUILD/bench/zen_netswitch
    else
        bin=$HERE/../build/bench/zen_netswitch
    fi
    [ -x "$bin" ] || die "user switch needed but '$bin' is not an executable: build the" \
        "zen_netswitch target (ninja -C build zen_netswitch) or set ZEN_NETSWITCH=/path/to/it" \
        "or ZEN_BUILD=/path/to/build"
    echo "$bin"
}

switch_pid() {
    local pid
    [ -f "$STATE.pid" ] || return 1
    pid=$(cat "$STATE.pid")
    [[ "$pid" =~ ^[0-9]+$ ]] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = zen_netswitch ] || return 1
    echo "$pid"
}

up_bridge() {
    local n=$1 gbps=$2 lat_us=$3
    ip netns add "$SW"
    # A switch does not run the host's firewall on the frames it forwards, but with br_netfilter
    # loaded (Docker and most container hosts load it) the bridge passes every frame through
    # iptables (br_nf_forward_ip and friends): CPU per byte taken from the same cores the ranks
    # use. The sysctls are per network namespace, so this changes only the switch's.
    # --bridge-nf keeps the host's setting (the emulation before 4 Dec 2026), for comparisons.
    local knob
    for knob in iptables ip6tables arptables; do
        [ "$bridge_nf" = 1 ] && break
        ip netns exec "$SW" sysctl -q -w "net.bridge.bridge-nf-call-$knob=0" 2>/dev/null || true
    done
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
        # one-way delay (when the kernel has sch_netem)
        ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "${gbps}gbit" \
            burst "$(tbf_burst "$gbps" 65536)" latency 50ms
        if [ "$lat_us" != 0 ] && ! ip netns exec "$ns" tc qdisc add dev eth0 parent 1:1 \
            handle 10: netem delay "${lat_us}us" limit 100000 2>/dev/null; then
            delay_note=" (no added delay: this kernel lacks sch_netem; --switch user adds it)"
        fi
    done
}

up_user() {
    local n=$1 gbps=$2 lat_us=$3 rate_at=$4 bin=$5
    for ((i = 0; i < n; i++)); do
        local ns; ns=$(host_ns "$i")
        ip netns add "$ns"
        # a persistent TUN device, so that addresses and qdiscs are set before the switch attaches
        ip -n "$ns" tuntap add dev eth0 mode tun
        ip -n "$ns" link set eth0 mtu 65000
        ip -n "$ns" addr add "$(host_addr "$i")/24" dev eth0
        ip -n "$ns" link set eth0 up
        ip -n "$ns" link set lo up
        if [ "$rate_at" = host ]; then
            ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: tbf rate "${gbps}gbit" \
                burst "$(tbf_burst "$gbps" 131072)" latency 50ms
        fi
    done
    local pace=0
    [ "$rate_at" = switch ] && pace=$gbps
    rm -f "$STATE.pid" "$STATE.log"
    # real-time priority (SCHED_FIFO): a normal-priority switch is woken milliseconds late while
    # the hosts' ranks keep both cores busy; it sleeps when nothing is due, so this costs little
    setsid "$bin" --hosts "$n" --lat-us "$lat_us" --gbps "$pace" --netns-prefix "$PREFIX" \
        --rt-prio "${ZEN_NETSWITCH_RT_PRIO:-10}" </dev/null >"$STATE.log" 2>&1 &
    echo $! >"$STATE.pid"
    local t
    for ((t = 0; t < 200; t++)); do
        grep -qx ready "$STATE.log" 2>/dev/null && return 0
        kill -0 "$(cat "$STATE.pid")" 2>/dev/null || break
        sleep 0.05
    done
    cat "$STATE.log" >&2 || true
    cmd_down >&2
    die "up: the user switch did not start ($bin)"
}

cmd_up() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 200 ] || die "up: N must be 1..200"
    local gbps=1 lat_us=50 lat_given=0 mode=auto rate_at=host bin=""
    bridge_nf=0
    delay_note=""
    while [ $# -gt 0 ]; do
        case "$1" in
        --gbps) gbps=$2; shift 2 ;;
        --lat-us) lat_us=$2; lat_given=1; shift 2 ;;
        --switch) mode=$2; shift 2 ;;
        --rate-at) rate_at=$2; shift 2 ;;
        --bridge-nf) bridge_nf=1; shift ;;
        *) die "up: unknown option $1" ;;
        esac
    done
    [[ "$gbps" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "up: --gbps must be a number"
    [[ "$lat_us" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "up: --lat-us must be a number"
    case "$mode" in auto | bridge | user) ;; *) die "up: --switch auto|bridge|user" ;; esac
    case "$rate_at" in host | switch) ;; *) die "up: --rate-at host|switch" ;; esac
    [ -z "$(hosts)" ] || die "a cluster exists already: run 'cluster.sh down' first"
    if [ "$mode" = auto ]; then
        mode=bridge
        if [ "$lat_given" = 1 ] && [ "$lat_us" != 0 ] && ! have_netem; then mode=user; fi
    fi
    [ "$rate_at" = switch ] && [ "$mode" != user ] && die "up: --rate-at switch needs the user switch"
    if [ "$mode" = user ]; then
        bin=$(netswitch_bin)
        up_user "$n" "$gbps" "$lat_us" "$rate_at" "$bin"
        delay_note=" (user switch zen_netswitch, pid $(cat "$STATE.pid"); rate at $rate_at)"
    else
        up_bridge "$n" "$gbps" "$lat_us"
    fi
    echo "$gbps" >"$STATE.gbps"
    echo "cluster up: $n hosts ${SUBNET}.1-${SUBNET}.$n, ${gbps} Gbit/s, ${lat_us} us one way${delay_note}"
}

cmd_down() {
    local pid t
    if pid=$(switch_pid); then
        kill -TERM "$pid" 2>/dev/null || true
        for ((t = 0; t < 100; t++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
        # the counters it printed on SIGTERM (the last block of its log)
        awk '/^zen_netswitch counters/ { b = "" } { b = b $0 "\n" } END { printf "%s", b }' \
            "$STATE.log" 2>/dev/null || true
    fi
    rm -f "$STATE.pid" "$STATE.log" "$STATE.gbps"
    for ns in $(hosts); do ip netns del "$ns"; done
    if ns_exists "$SW"; then ip netns del "$SW"; fi
    if [ "$NAME" = zen ]; then
        rm -rf /tmp/zen-ompi-h[0-9]* # the per-host Open MPI session directories of mpirun
    fi
    echo "cluster down"
}

cmd_exec() {
    local i=${1:-}; shift || true
    [[ "$i" =~ ^[0-9]+$ ]] || die "exec: host index required"
    ns_exists "$(host_ns "$i")" || die "no host $i (cluster up?)"
    exec ip netns exec "$(host_ns "$i")" "$@"
}

# The sparse cost model's bandwidth (ZEN_NET_GBPS) for the ranks: the emulated line rate unless
# the caller set one (without it the model assumes tcp's default, 10x the emulated 1 Gbit/s).
export_line_rate() {
    if [ -z "${ZEN_NET_GBPS:-}" ] && [ -f "$STATE.gbps" ]; then
        export ZEN_NET_GBPS; ZEN_NET_GBPS=$(cat "$STATE.gbps")
    fi
}

cmd_run() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] || die "run: N required"
    local port=29600 per=1
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
        case "$1" in
        --port) port=$2; shift 2 ;;
        --per-host) per=$2; shift 2 ;;
        *) die "run: unknown option $1" ;;
        esac
    done
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || die "run: command required after --"
    local pids=() rc=0
    # A fresh job secret (docs/security.md) in a file only we can read: on the command line or
    # in the environment of `env` it would show in ps. A secret the caller set is kept.
    local secret_file=""
    if [ -z "${ZEN_JOB_SECRET:-}" ] && [ -z "${ZEN_JOB_SECRET_FILE:-}" ]; then
        secret_file=$(mktemp /tmp/zen-secret.XXXXXX)
        head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$secret_file"
        export ZEN_JOB_SECRET_FILE="$secret_file"
    fi
    [[ "$per" =~ ^[1-9][0-9]*$ ]] || die "run: --per-host R must be a positive count"
    # The ranks of one namespace share its ZEN_HOST_ID, so the default transport (auto) joins
    # them over shm and reaches the other namespaces over tcp.
    export_line_rate
    local r i
    for ((r = 0; r < n * per; r++)); do
        i=$((r / per))
        ip netns exec "$(host_ns "$i")" env ZEN_RANK="$r" ZEN_WORLD_SIZE="$((n * per))" \
            ZEN_MASTER_ADDR="$(host_addr 0)" ZEN_MASTER_PORT="$port" ZEN_LOCAL_RANK=$((r % per)) \
            ZEN_LOCAL_SIZE="$per" ZEN_SOCKET_IFADDR="$(host_addr "$i")" ZEN_HOST_ID="$(host_ns "$i")" "$@" &
        pids+=($!)
    done
    for ((r = 0; r < n * per; r++)); do
        if ! wait "${pids[$r]}"; then
            echo "cluster.sh: rank $r (host $(host_addr $((r / per)))) failed" >&2
            rc=1
        fi
    done
    [ -n "$secret_file" ] && rm -f "$secret_file"
    return $rc
}

cmd_mpirun() {
    local n=${1:-}; shift || true
    [[ "$n" =~ ^[0-9]+$ ]] || die "mpirun: N required"
    [ "$NAME" = zen ] || die "mpirun: only with the default ZEN_CLUSTER_NAME (cluster-rsh.sh)"
    [ "${1:-}" = "--" ] && shift
    local hostfile; hostfile=$(mktemp)
    for ((i = 0; i < n; i++)); do echo "$(host_addr "$i") slots=1" >>"$hostfile"; done
    # mpirun runs on host 0; its daemons start on the other hosts through cluster-rsh.sh, which
    # maps an address to its namespace instead of using ssh.
    # (set -e would exit on a failing mpirun before the hostfile is removed: keep its status)
    local rc=0
    # host 0's own TMPDIR, like the other hosts' in cluster-rsh.sh
    mkdir -p /tmp/zen-ompi-h0
    export_line_rate
    local gbps_env=()
    [ -n "${ZEN_NET_GBPS:-}" ] && gbps_env=(-x ZEN_NET_GBPS)
    TMPDIR=/tmp/zen-ompi-h0 ip netns exec "$(host_ns 0)" mpirun --allow-run-as-root -n "$n" \
        --hostfile "$hostfile" "${gbps_env[@]}" \
        --mca plm_rsh_agent "$HERE/cluster-rsh.sh" --mca btl tcp,self \
        --mca btl_tcp_if_include "${SUBNET}.0/24" --mca oob_tcp_if_include "${SUBNET}.0/24" \
        "$@" || rc=$?
    rm -f "$hostfile"
    return $rc
}

# ICMP echo with a raw socket (no ping binary needed); prints each round trip and a summary line
# "rtt min/median/max = A/B/C ms, R/COUNT replies"; fails when no reply came back.
cmd_ping() {
    local i=${1:-} j=${2:-} count=${3:-5}
    [[ "$i" =~ ^[0-9]+$ && "$j" =~ ^[0-9]+$ && "$count" =~ ^[0-9]+$ ]] || die "ping I J [COUNT]"
    ns_exists "$(host_ns "$i")" || die "no host $i (cluster up?)"
    ip netns exec "$(host_ns "$i")" /usr/bin/python3 - "$(host_addr "$j")" "$count" <<'PY'
import os, socket, struct, sys, time
dst, count = sys.argv[1], int(sys.argv[2])
sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
ident = os.getpid() & 0xFFFF

def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF

rtts = []
for seq in range(count):
    payload = bytes(range(56))
    head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    pkt = struct.pack("!BBHHH", 8, 0, checksum(head + payload), ident, seq) + payload
    t0 = time.monotonic()
    sock.sendto(pkt, (dst, 0))
    deadline = t0 + 2.0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            print("seq %d: no reply" % seq)
            break
        sock.settimeout(left)
        try:
            data = sock.recv(4096)
        except socket.timeout:
            continue
        t1 = time.monotonic()
        ihl = (data[0] & 15) * 4
        typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if typ == 0 and rid == ident and rseq == seq:
            rtts.append((t1 - t0) * 1e3)
            print("seq %d: rtt %.3f ms" % (seq, rtts[-1]))
            break
    time.sleep(0.02)
if not rtts:
    sys.exit("no replies from %s" % dst)
r = sorted(rtts)
print("rtt min/median/max = %.3f/%.3f/%.3f ms, %d/%d replies" % (r[0], r[len(r) // 2], r[-1], len(r), count))
PY
}

cmd_status() {
    for ns in $(hosts); do
        echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 | awk '{print $4}')" \
            "$(ip netns exec "$ns" tc qdisc show dev eth0 | head -1)"
    done
    local pid
    if pid=$(switch_pid); then echo "user switch: zen_netswitch pid $pid"; fi
}

cmd_switch_stats() {
    local pid lines
    pid=$(switch_pid) || die "no user switch running"
    lines=$(wc -l <"$STATE.log")
    kill -USR1 "$pid"
    sleep 0.2
    tail -n +"$((lines + 1))" "$STATE.log"
}

sub=${1:-}; shift || true
case "$sub" in
up) cmd_up "$@" ;;
down) cmd_down ;;
exec) cmd_exec "$@" ;;
addr) host_addr "${1:?host index}" ;;
run) cmd_run "$@" ;;
mpirun) cmd_mpirun "$@" ;;
ping) cmd_ping "$@" ;;
status) cmd_status ;;
switch-stats) cmd_switch_stats ;;
-h | --help | "") sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$sub' (see --help)" ;;
esac
