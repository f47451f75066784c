#!/usr/bin/python3
"""One token-embedding gradient bucket: DDP's dense all_reduce vs zen_torch.rows (its non-zero rows).

Each rank makes the dense gradient of an nn.Embedding (vocab x dim float32) for --tokens uniform
random token ids (rows not hit are zero, as torch leaves them with sparse=False), then times, in
rotation, the same bucket through: zen's dense all_reduce, the rows hook's zen path
(rows_allreduce_into: zen's sparse allreduce of the non-zero rows, AUTO unless --scheme), gloo's
dense all_reduce and the hook's gloo path (all_gather of the rows). Time = the slowest rank's,
median over --iters after 2 warm-up rounds; ratios against zen's dense all_reduce of the same run.

  emulated hosts: ZEN_CLUSTER_NAME=zr scripts/cluster.sh up 4 --gbps 1
                  GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=build/python ZEN_CLUSTER_NAME=zr \\
                    scripts/cluster.sh run 4 -- /usr/bin/python3 bench/torch_rows.py
Takes RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (or zen's ZEN_* names, which cluster.sh run sets).
"""
import argparse
import os
import platform
import statistics
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--tokens", type=int, default=768,
                    help="token ids per rank and step (768: bench/torch_overlap.py's batch 24 x 32)")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--scheme", default="auto", help="zen sparse scheme of the rows path")
    args = ap.parse_args()
    for a, b in (("RANK", "ZEN_RANK"), ("WORLD_SIZE", "ZEN_WORLD_SIZE"),
                 ("MASTER_ADDR", "ZEN_MASTER_ADDR"), ("MASTER_PORT", "ZEN_MASTER_PORT")):
        if a not in os.environ and b in os.environ:
            os.environ[a] = os.environ[b]
    import zen_torch
    import zen_torch.rows
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    zen, gloo = dist.new_group(backend="zen"), dist.group.WORLD
    gen = torch.Generator().manual_seed(rank)
    hit = []

    def grad():
        x = torch.zeros(args.vocab, args.dim)
        ids = torch.randint(0, args.vocab, (args.tokens,), generator=gen)
        x.index_add_(0, ids, torch.randn(args.tokens, args.dim, generator=gen))
        hit.append(ids.unique().numel() / args.vocab)
        return x.view(-1)

    def timed(fn):
        x = grad()
        dist.barrier(group=gloo)
        t = time.perf_counter()
        fn(x)
        return time.perf_counter() - t

    paths = {
        "zen dense": lambda x: dist.all_reduce(x, group=zen),
        "zen rows": lambda x: zen_torch._C.rows_allreduce_into(x, args.dim, zen, args.scheme,
                                                               True).wait(),
        "gloo dense": lambda x: dist.all_reduce(x, group=gloo),
        "gloo rows": lambda x: zen_torch.rows._gather_rows(x, args.dim, gloo, n).wait(),
    }
    times = {k: [] for k in paths}
    names = list(paths)
    for it in range(args.iters + 2):
        for name in names[it % len(names):] + names[:it % len(names)]:
            s = torch.tensor([timed(paths[name])])
            dist.all_reduce(s, op=dist.ReduceOp.MAX, group=gloo)
            if it >= 2:
                times[name].append(s.item() * 1e3)
    if rank == 0:
        print(f"host {platform.node()}, {os.cpu_count()} cpus, load "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; world {n}, zen transport "
              f"{zen_torch.transport(zen)}; bucket {args.vocab} x {args.dim} float32 "
              f"({args.vocab * args.dim * 4 / 1e6:.1f} MB), {args.tokens} tokens per rank: "
              f"{100 * statistics.mean(hit):.1f} % of the rows non-zero on rank 0")
        base = statistics.median(times["zen dense"])
        for k, v in times.items():
            print(f"{k:>10}: median {statistics.median(v):6.1f} ms ({min(v):.1f}-{max(v):.1f}),"
                  f" {statistics.median(v) / base:.2f} x zen dense")
        print(f"zen rows ran scheme: {zen_torch.last_sparse_scheme(zen)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
