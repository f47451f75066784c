#!/bin/sh
# A/B: broadcast and allgather on 2 shm processes, base (d628d24) vs new (main), interleaved.
NEW=/work/main/build/zen; BASE=/work/wt/base/build/zen
for r in 1 2 3 4 5; do
  for v in base new; do
    Z=$BASE; [ $v = new ] && Z=$NEW
    for coll in broadcast allgather; do
      flock /tmp/zen-bench.lock $Z launch -n 2 --transport shm -- $Z bench $coll -b 8 -e 64K -f 8 -w 500 -n 5000 --json 2>/dev/null \
        | grep '"size"\|"bytes"' | sed "s/^{/{\"round\":$r,\"v\":\"$v\",\"coll\":\"$coll\",/"
    done
  done
  echo "round $r $(uptime)" >&2
done
