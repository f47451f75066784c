#!/usr/bin/python3
"""Time the top-k DDP hook's local step, zen_torch._C.topk_compress_bucket, on one flat bucket.

One process, one thread: a bucket of --mb MB of float32 (25 MB: DDP's default bucket_cap_mb),
k = ceil(ratio * large elements) as zen_torch.hooks computes it, whole-sent ranges laid out like a
transformer bucket's norms (--small ranges of 1536 elements, evenly spaced), a fixed gaussian
gradient, and the residual (and velocity) carried from call to call as the hook does. Per
configuration (momentum 0 and 0.9, approx; momentum 0.9 exact): --warmup untimed calls, then
--iters timed ones; prints one JSON line per configuration with the median and minimum in ms.
Which build is timed is the environment's: PYTHONPATH (zen_torch) and LD_LIBRARY_PATH (libzen).

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 bench/topk_bucket_step.py
        [--mb 25] [--ratio 0.01] [--small 8] [--iters 20] [--warmup 10] [--tag NAME]
"""
import argparse
import json
import math
import statistics
import time

import torch
import zen_torch  # noqa: F401  (loads _C)
from zen_torch import _C


def ranges(n, count, width=1536):
    out = []
    for i in range(count):
        start = (i + 1) * n // (count + 1)
        out += [start, start + width]
    return torch.tensor(out, dtype=torch.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=25.0)
    ap.add_argument("--ratio", type=float, default=0.01)
    ap.add_argument("--small", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--tag", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    n = int(a.mb * (1 << 20)) // 4
    small = ranges(n, a.small)
    n_small = int((small[1::2] - small[0::2]).sum())
    k = max(1, min(n - n_small, math.ceil(a.ratio * (n - n_small))))
    g = torch.randn(n, generator=torch.Generator().manual_seed(1))
    for momentum, exact in ((0.0, False), (0.9, False), (0.9, True)):
        v = torch.zeros(n)
        u = torch.zeros(n) if momentum else None
        times, sent = [], 0
        for i in range(a.warmup + a.iters):
            t0 = time.perf_counter()
            idx, _ = _C.topk_compress_bucket(g, v, u, momentum, k, small, exact, 1)
            dt = time.perf_counter() - t0
            if i >= a.warmup:
                times.append(dt * 1e3)
                sent += idx.numel()
        print(json.dumps({"tag": a.tag, "n": n, "k": k, "whole": n_small, "momentum": momentum,
                          "exact": exact, "ms_p50": round(statistics.median(times), 3),
                          "ms_min": round(min(times), 3), "sent_per_call": sent // a.iters}),
              flush=True)


if __name__ == "__main__":
    main()
