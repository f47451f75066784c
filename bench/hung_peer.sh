#!/usr/bin/env bash
# Hung-peer attribution (docs/security.md): SIGSTOP one rank (rank 2) of a ring allreduce loop
# and time until a survivor names it, or run without a stop and look for false alarms.
# usage: bench/hung_peer.sh RANKS HEARTBEAT_S|default STOP(1|0) [SECONDS] [TRANSPORT]
# TRANSPORT: zen launch --transport (auto: shm on one host, the default; tcp; shm).
# Run from the repo root with build/zen built, under flock /tmp/zen-bench.lock.
n=$1; hb=$2; stop=$3; secs=${4:-60}; tr=${5:-auto}
[ "$hb" != default ] && export ZEN_HEARTBEAT_S=$hb
log=$(mktemp)
./build/zen launch -n $n --transport $tr -- ./build/zen bench allreduce --algo ring -b 256K -e 4M -w 1 -n 100000 >/dev/null 2>$log &
L=$!
sleep 4
if [ "$stop" = 1 ]; then
  victim=$(pgrep -P $L | sort -n | sed -n 3p)
  t0=$(date +%s.%N)
  kill -STOP $victim
  # wait until a survivor names it
  while ! grep -q "sent nothing" $log; do sleep 0.05; done
  t1=$(date +%s.%N)
  echo "transport=$tr ranks=$n hb=$hb named after $(echo "$t1 - $t0" | bc) s"
  sleep 2; kill -KILL $victim 2>/dev/null
  wait $L
  grep -o "rank [0-9]* sent nothing" $log | sort | uniq -c
else
  sleep $secs
  if grep -q "sent nothing" $log; then echo "FALSE ALARM transport=$tr hb=$hb"; grep "sent nothing" $log | head -3; else echo "transport=$tr ranks=$n hb=$hb no alarm in ${secs}s"; fi
  kill -TERM $L; wait $L 2>/dev/null
fi
rm -f $log
