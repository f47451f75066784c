#!/usr/bin/python3
"""torch.distributed on the gloo backend, timed with zen bench's conventions.

One process per rank; rendezvous from the usual environment (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; zen's names ZEN_RANK, ZEN_WORLD_SIZE, ZEN_MASTER_ADDR, ZEN_MASTER_PORT, which
`zen launch` and scripts/cluster.sh run set, are used when torch's are absent). Prints one JSON
object per result on rank 0, with the same field names as `zen bench --json`. Several workloads
run in one process (`dense sparse trace`) because importing torch costs seconds per rank.

  dense:  all_reduce of an f32 tensor of each size (what DDP does for dense gradients)
  sparse: all_reduce of a sparse COO tensor rows x width (what DDP does for
          nn.Embedding(sparse=True) gradients) for each DENSITY:OVERLAP of --cases; rows drawn
          like `zen bench sparse` (random: density*rows distinct rows per rank, uniform;
          identical: the same rows on every rank; disjoint: rank-strided rows; zipf:
          density*rows draws with replacement, P(row) ~ 1/(row+1)^s, coalesced before timing)
  trace:  the gradients recorded by `zen train --dump-grads DIR` (docs/trace-format.md); one
          iteration = every tensor of every step that all ranks have, like
          `zen bench sparse --trace DIR`

Bytes: gloo's sparse all_reduce allgathers each rank's int64 indices and f32 values and sums
locally, so every rank receives the other ranks' (8 + 4 width) nnz bytes; `max_bytes_recv` is
that payload for the rank that receives most (the small size-metadata exchange not counted); for a
trace, of the call where it is largest (zen bench sparse's convention).
"""
import argparse
import json
import os
import statistics
import struct
import time

import numpy as np
import torch
import torch.distributed as dist


def env_fallback():
    for torch_name, zen_name in (("RANK", "ZEN_RANK"), ("WORLD_SIZE", "ZEN_WORLD_SIZE"),
                                 ("MASTER_ADDR", "ZEN_MASTER_ADDR"),
                                 ("MASTER_PORT", "ZEN_MASTER_PORT")):
        if torch_name not in os.environ and zen_name in os.environ:
            os.environ[torch_name] = os.environ[zen_name]


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


def emit(rank, obj):
    if rank == 0:
        print(json.dumps(obj), flush=True)


def dense(args, rank, n):
    for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor):
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
        p50, p99 = timed(lambda: dist.all_reduce(x), args.warmup, args.iters)
        algbw = nbytes / p50 / 1e9
        emit(rank, {"peer": "torch-gloo", "op": "allreduce", "ranks": n, "transport": "gloo",
                    "bytes": nbytes, "algo": "gloo", "inplace": 1, "iters": args.iters,
                    "time_us_p50": p50 * 1e6, "time_us_p99": p99 * 1e6, "algbw_gbs": algbw,
                    "busbw_gbs": algbw * 2 * (n - 1) / n})


def sparse_rows(args, density, overlap, rank, n, g):
    k = max(1, round(density * args.rows))
    if overlap == "identical":
        g.manual_seed(args.seed)
        return torch.randperm(args.rows, generator=g)[:k]
    if overlap == "disjoint":
        return torch.arange(rank, args.rows, n)[:k]
    g.manual_seed(args.seed * 7919 + rank)
    if overlap == "zipf":
        p = torch.arange(1, args.rows + 1, dtype=torch.float64).pow(-args.zipf_s)
        return torch.multinomial(p, k, replacement=True, generator=g)
    return torch.randperm(args.rows, generator=g)[:k]


def recv_bytes(nnz_local, width, n):
    """Payload the rank receiving most gets: everyone else's (8 + 4 width) nnz."""
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(n)]
    dist.all_gather(counts, torch.tensor([nnz_local], dtype=torch.int64))
    c = [int(x.item()) for x in counts]
    total = sum(c)
    return max((total - c[r]) * (8 + 4 * width) for r in range(n)), total


def time_sparse(tensors, args):
    out = [0]

    def run():
        nnz = 0
        for t in tensors:
            y = t.clone()
            dist.all_reduce(y)
            nnz += y._nnz()
        out[0] = nnz

    p50, p99 = timed(run, args.warmup, args.iters)
    return p50, p99, out[0]


def sparse(args, rank, n):
    g = torch.Generator()
    for case in args.cases.split(","):
        density_s, overlap = case.split(":")
        density = float(density_s)
        rows = sparse_rows(args, density, overlap, rank, n, g)
        values = torch.ones(len(rows), args.width, dtype=torch.float32)
        t = torch.sparse_coo_tensor(rows.unsqueeze(0), values, (args.rows, args.width)).coalesce()
        recv, nnz_in = recv_bytes(t._nnz(), args.width, n)
        p50, p99, nnz_out = time_sparse([t], args)
        emit(rank, {"peer": "torch-gloo", "scheme": "torch-gloo-sparse", "ranks": n,
                    "rows": args.rows, "width": args.width, "density": density,
                    "overlap": overlap, "zipf_s": args.zipf_s, "tensors": 1,
                    "time_us_p50": p50 * 1e6, "time_us_p99": p99 * 1e6,
                    "max_bytes_recv": recv, "nnz_in_total": nnz_in, "nnz_out": nnz_out})


def read_zgrad(path):
    """docs/trace-format.md, version 1: returns [(name, rows, width, indices, values)]."""
    with open(path, "rb") as f:
        b = f.read()
    magic, version, _rank, _world, _step, count, _ = struct.unpack_from("<4sIIIQII", b, 0)
    if magic != b"ZGRD" or version != 1:
        raise ValueError(f"{path}: not a version 1 .zgrad file")
    off, out = 32, []
    for _ in range(count):
        (nlen,) = struct.unpack_from("<H", b, off)
        name = b[off + 2:off + 2 + nlen].decode()
        off += 2 + nlen
        rows, width, _, nnz = struct.unpack_from("<QIIQ", b, off)
        off += 24
        idx = np.frombuffer(b, dtype="<u4", count=nnz, offset=off).astype(np.int64)
        off += 4 * nnz
        val = np.frombuffer(b, dtype="<f4", count=nnz * width, offset=off).reshape(nnz, width)
        off += 4 * nnz * width
        out.append((name, rows, width, idx, val))
    if off != len(b) - 8:
        raise ValueError(f"{path}: {len(b) - 8 - off} unexpected trailing bytes")
    return out


def trace_steps(directory, n):
    """Steps that every rank 0..n-1 has a file for, ascending (as zen bench sparse does)."""
    steps = []
    for name in os.listdir(directory):
        if name.startswith("rank0-step") and name.endswith(".zgrad"):
            steps.append(int(name[len("rank0-step"):-len(".zgrad")]))
    return [s for s in sorted(steps) if all(
        os.path.exists(os.path.join(directory, f"rank{r}-step{s:06d}.zgrad")) for r in range(n))]


def trace(args, rank, n):
    tensors, recv, nnz_in, rows, width = [], 0, 0, 0, 0
    for s in trace_steps(args.trace, n):
        for name, rows, width, idx, val in read_zgrad(
                os.path.join(args.trace, f"rank{rank}-step{s:06d}.zgrad")):
            t = torch.sparse_coo_tensor(torch.from_numpy(idx).unsqueeze(0),
                                        torch.from_numpy(val.copy()), (rows, width)).coalesce()
            r, total = recv_bytes(t._nnz(), width, n)
            recv, nnz_in = max(recv, r), nnz_in + total
            tensors.append(t)
    if not tensors:
        raise SystemExit(f"torch_gloo.py: no complete step for {n} ranks in {args.trace}")
    p50, p99, nnz_out = time_sparse(tensors, args)
    emit(rank, {"peer": "torch-gloo", "scheme": "torch-gloo-sparse", "ranks": n, "rows": rows,
                "width": width, "overlap": "trace", "trace": args.trace,
                "tensors": len(tensors), "time_us_p50": p50 * 1e6, "time_us_p99": p99 * 1e6,
                "max_bytes_recv": recv, "nnz_in_total": nnz_in, "nnz_out": nnz_out})


def size_arg(text):
    """Bytes with zen bench's K/M/G suffixes (powers of 1024)."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modes", nargs="+", choices=["dense", "sparse", "trace"])
    ap.add_argument("-b", "--min-bytes", type=size_arg, default=1 << 20)
    ap.add_argument("-e", "--max-bytes", type=size_arg, default=64 << 20)
    ap.add_argument("-f", "--factor", type=int, default=4)
    ap.add_argument("-w", "--warmup", type=int, default=3)
    ap.add_argument("-n", "--iters", type=int, default=10)
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--cases", default="0.01:random",
                    help="comma list of DENSITY:OVERLAP (random, identical, disjoint, zipf)")
    ap.add_argument("--zipf-s", type=float, default=1.1)
    ap.add_argument("--trace", help="directory of .zgrad files (zen train --dump-grads)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if "trace" in args.modes and not args.trace:
        ap.error("trace needs --trace DIR")
    torch.set_num_threads(args.threads)
    env_fallback()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    for mode in args.modes:
        {"dense": dense, "sparse": sparse, "trace": trace}[mode](args, rank, n)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
