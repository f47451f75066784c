#!/bin/bash
# base = main at 0c66290 (the shim's own accumulate + zen_topk_select + merge); new = topk-shim
# (zen_topk_compress_buffers). Interleaved, the order alternating per round.
set -e
out=/tmp/topk-shim-bench/out; mkdir -p $out; cd /work/wt/topk-shim
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
echo "start $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" > $out/load.txt
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="base new"; else order="new base"; fi
  for b in $order; do
    LD_LIBRARY_PATH=/tmp/topk-shim-$b/lib PYTHONPATH=/tmp/topk-shim-$b/python \
      /usr/bin/python3 bench/topk_bucket_step.py --iters 20 --warmup 10 --tag "$b r$r" >> $out/bucket_step.jsonl
    LD_LIBRARY_PATH=/tmp/topk-shim-$b/lib /tmp/topk-shim-$b/zen bench topk --size 16M --ratio 0.01 \
      --threads 1 --json --iters 10 | grep '^{' | sed "s/^{/{\"tag\":\"$b r$r\",/" >> $out/bench_topk.jsonl
  done
  echo "round $r $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >> $out/load.txt
done
echo "end $(date -u +%FT%TZ) loadavg $(cat /proc/loadavg)" >> $out/load.txt
