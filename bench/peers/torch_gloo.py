#!/usr/bin/python3
"""torch.distributed on the gloo backend, timed with zen bench's conventions.

One process per rank; rendezvous from the usual environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT -- `zen launch` and scripts/cluster.sh run set them). Prints one JSON object per
result on rank 0, with the same field names as `zen bench --json`.

  dense:  all_reduce of an f32 tensor of each size (what DDP does for dense gradients)
  sparse: all_reduce of a sparse COO tensor rows x width (what DDP does for
          nn.Embedding(sparse=True) gradients), non-zero rows drawn like `zen bench sparse`
          (--overlap random: each rank picks density*rows rows uniformly; identical: the same
          rows on every rank; disjoint: rank-strided rows)
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # an iteration ends when the last rank ends
        times.append(t.item())
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))]


def sizes(lo, hi, factor):
    s = lo
    while s <= hi:
        yield s
        s *= factor


def dense(args, rank, n):
    for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor):
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        p50, p99 = timed(lambda: dist.all_reduce(x), args.warmup, args.iters)
        algbw = nbytes / p50 / 1e9
        if rank == 0:
            print(json.dumps({"peer": "torch-gloo", "op": "allreduce", "ranks": n,
                              "transport": "gloo", "bytes": nbytes,
                              "time_us_p50": p50 * 1e6, "time_us_p99": p99 * 1e6,
                              "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (n - 1) / n}),
                  flush=True)


def sparse_rows(args, rank, n, g):
    k = max(1, int(args.density * args.rows))
    if args.overlap == "identical":
        g.manual_seed(args.seed)
        return torch.randperm(args.rows, generator=g)[:k]
    if args.overlap == "disjoint":
        return torch.arange(rank, args.rows, n)[:k]
    g.manual_seed(args.seed + rank)
    return torch.randperm(args.rows, generator=g)[:k]


def sparse(args, rank, n):
    g = torch.Generator()
    rows = sparse_rows(args, rank, n, g)
    values = torch.ones(len(rows), args.width, dtype=torch.float32)
    t = torch.sparse_coo_tensor(rows.unsqueeze(0), values, (args.rows, args.width)).coalesce()
    wire = [0]

    def run():
        y = t.clone()
        dist.all_reduce(y)
        wire[0] = y._nnz()

    p50, p99 = timed(run, args.warmup, args.iters)
    if rank == 0:
        print(json.dumps({"peer": "torch-gloo", "scheme": "torch-gloo-sparse", "ranks": n,
                          "rows": args.rows, "width": args.width, "density": args.density,
                          "overlap": args.overlap, "time_us_p50": p50 * 1e6,
                          "time_us_p99": p99 * 1e6, "nnz_out": wire[0]}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["dense", "sparse"])
    ap.add_argument("-b", "--min-bytes", type=int, default=1 << 20)
    ap.add_argument("-e", "--max-bytes", type=int, default=64 << 20)
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("-w", "--warmup", type=int, default=3)
    ap.add_argument("-n", "--iters", type=int, default=10)
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--overlap", choices=["random", "identical", "disjoint"], default="random")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    (dense if args.mode == "dense" else sparse)(args, rank, n)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
