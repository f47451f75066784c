#!/usr/bin/env bash
# Slow a running process from outside, the way a noisy neighbour or a thermally throttled device
# does: SIGSTOP/SIGCONT duty cycling (it runs DUTY of every PERIOD_MS), or, with --cgroup, a
# cgroup v2 cpu.max quota. zen does not know; its straggler detection sees the rank get slower.
#
#   scripts/throttle.sh PID DUTY [PERIOD_MS]         e.g. 0.25 = runs a quarter of the time
#   scripts/throttle.sh --cgroup PID DUTY [PERIOD_MS] (a writable cgroup cpu controller, v2
#                                                      cpu.max or v1 cpu.cfs_quota_us; DUTY is
#                                                      then a fraction of one CPU)
#   scripts/throttle.sh --rank R DUTY [PERIOD_MS]    the process started with ZEN_RANK=R
#
# Runs until the process exits or the script is interrupted (it always leaves the process
# running: SIGCONT on exit).
set -euo pipefail

mode=signal
if [ "${1:-}" = "--cgroup" ]; then mode=cgroup; shift; fi
if [ "${1:-}" = "--rank" ]; then
    rank=$2
    shift 2
    pid=""
    for e in /proc/[0-9]*/environ; do
        if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "ZEN_RANK=$rank"; then
            p=${e#/proc/}
            p=${p%/environ}
            # the rank itself, not a launcher or a shell that merely inherited the variable
            if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -q " train\| bench"; then
                pid=$p
                break
            fi
        fi
    done
    [ -n "$pid" ] || { echo "throttle.sh: no process with ZEN_RANK=$rank" >&2; exit 1; }
else
    pid=${1:?usage: throttle.sh [--cgroup] PID|--rank R DUTY [PERIOD_MS]}
    shift
fi
duty=${1:?duty fraction in (0, 1] required}
period_ms=${2:-20}
awk -v d="$duty" 'BEGIN { exit !(d > 0 && d <= 1) }' || { echo "throttle.sh: DUTY must be in (0, 1]" >&2; exit 2; }
kill -0 "$pid" 2>/dev/null || { echo "throttle.sh: no process $pid" >&2; exit 1; }

if [ "$mode" = cgroup ]; then
    period_us=$((period_ms * 1000))
    quota_us=$(awk -v d="$duty" -v p="$period_us" 'BEGIN { printf "%d", d * p }')
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        # cgroup v2: cpu.max "QUOTA PERIOD"
        root=/sys/fs/cgroup
        cg=$root/zen-throttle-$pid
        mkdir "$cg"
        echo "$quota_us $period_us" >"$cg/cpu.max"
    elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
        # cgroup v1 cpu controller: the same CFS bandwidth limit in two files
        root=/sys/fs/cgroup/cpu
        cg=$root/zen-throttle-$pid
        mkdir "$cg"
        echo "$period_us" >"$cg/cpu.cfs_period_us"
        echo "$quota_us" >"$cg/cpu.cfs_quota_us"
    else
        echo "throttle.sh: no writable cgroup cpu controller (v2 cpu.max or v1 cpu)" >&2
        exit 1
    fi
    # every thread of the process (v1 moves threads one by one through tasks)
    for t in /proc/"$pid"/task/*; do
        echo "${t##*/}" >"$cg/tasks" 2>/dev/null || echo "${t##*/}" >"$cg/cgroup.threads" 2>/dev/null || true
    done
    echo "$pid" >"$cg/cgroup.procs"
    echo "throttle.sh: pid $pid limited to $quota_us us per $period_us us (cgroup $cg)" >&2
    # "|| true": under set -e a failed move (the process has exited, the usual case) would end
    # the trap before the rmdir and leave the cgroup behind
    trap 'for t in $(cat "$cg/tasks" 2>/dev/null); do echo "$t" >"$root/tasks" 2>/dev/null || true; done
          echo "$pid" >"$root/cgroup.procs" 2>/dev/null || true
          rmdir "$cg" 2>/dev/null || echo "throttle.sh: could not remove $cg" >&2' EXIT
    while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done
    exit 0
fi

run_s=$(awk -v d="$duty" -v p="$period_ms" 'BEGIN { printf "%.4f", d * p / 1000 }')
stop_s=$(awk -v d="$duty" -v p="$period_ms" 'BEGIN { printf "%.4f", (1 - d) * p / 1000 }')
trap 'kill -CONT "$pid" 2>/dev/null || true' EXIT
echo "throttle.sh: pid $pid runs ${run_s}s of every ${period_ms} ms" >&2
while kill -0 "$pid" 2>/dev/null; do
    sleep "$run_s"
    kill -STOP "$pid" 2>/dev/null || break
    sleep "$stop_s"
    kill -CONT "$pid" 2>/dev/null || break
done
