#!/usr/bin/python3
"""Asynchronous zen process groups: how fast async_op=True returns, and what overlap buys DDP.

  bench/torch_async.py issue --nproc 2     dist.all_reduce(t, async_op=True) on 64 MiB float32:
                                           time to return vs time its wait() takes, zen async,
                                           zen sync (ZEN_TORCH_SYNC=1) and gloo, interleaved
  bench/torch_async.py ddp --nproc 2       DDP on a GPT-shaped model: step time and exposed
                                           communication (step minus the compute-only step, the
                                           same model under ddp.no_sync()) for zen async, zen
                                           sync and gloo, interleaved step by step

Run with PYTHONPATH=build/python. Every process holds a gloo group and two zen groups over the
same ranks (one made with ZEN_TORCH_SYNC=1); the candidates alternate (A B C A B C) so load on a
shared machine hits them alike. Reported: medians over iterations (and min-max), ratios against
the same run's baselines, one JSON object per line with --json.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def groups():
    """gloo (the default group), zen async and zen sync, over the same ranks."""
    import zen_torch
    os.environ["ZEN_TORCH_SYNC"] = "1"
    zsync = dist.new_group(backend="zen")
    os.environ["ZEN_TORCH_SYNC"] = "0"
    zasync = dist.new_group(backend="zen")
    assert zen_torch.is_sync(zsync) and not zen_torch.is_sync(zasync)
    return {"zen_async": zasync, "zen_sync": zsync, "gloo": dist.group.WORLD}


def slowest(seconds, gloo):
    t = torch.tensor(seconds, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return t.tolist()


def run_issue(rank, n, args, out):
    gs = groups()
    t = torch.rand(args.mib << 18)  # float32: MiB x 2^18 elements
    rows = {name: [] for name in gs}
    for it in range(args.warmup + args.iters):
        for name, g in gs.items():
            dist.barrier(group=gs["gloo"])
            t0 = time.perf_counter()
            w = dist.all_reduce(t, group=g, async_op=True)
            t1 = time.perf_counter()
            w.wait()
            t2 = time.perf_counter()
            issue, wait = slowest([t1 - t0, t2 - t1], gs["gloo"])
            if it >= args.warmup:
                rows[name].append((issue, wait))
    if rank == 0:
        for name, r in rows.items():
            issue = statistics.median(x[0] for x in r)
            wait = statistics.median(x[1] for x in r)
            out.append({"bench": "issue", "group": name, "mib": args.mib, "nproc": n,
                        "issue_ms": issue * 1e3, "wait_ms": wait * 1e3,
                        "issue_min_ms": min(x[0] for x in r) * 1e3,
                        "issue_max_ms": max(x[0] for x in r) * 1e3,
                        "issue_over_wait": issue / wait if wait > 0 else float("inf"),
                        "iters": len(r)})


class Block(torch.nn.Module):
    """A pre-norm GPT block: causal self-attention and a 4x MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(d)
        self.attn = torch.nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab, d, layers, heads, ctx):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(ctx, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        s = ids.shape[1]
        mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        x = self.tok(ids) + self.pos(torch.arange(s))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


def run_ddp(rank, n, args, out):
    gs = groups()
    ddps = {}
    for name, g in gs.items():
        torch.manual_seed(0)
        model = GPT(args.vocab, args.dim, args.layers, 4, args.seq)
        ddps[name] = torch.nn.parallel.DistributedDataParallel(
            model, process_group=g, bucket_cap_mb=args.bucket_mb)
    gen = torch.Generator().manual_seed(rank)
    rows = {name: [] for name in list(gs) + ["compute"]}

    def step(ddp, sync):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
        dist.barrier(group=gs["gloo"])
        t0 = time.perf_counter()
        if sync:
            loss = torch.nn.functional.cross_entropy(
                ddp(ids[:, :-1]).reshape(-1, args.vocab), ids[:, 1:].reshape(-1))
            loss.backward()
        else:
            with ddp.no_sync():
                loss = torch.nn.functional.cross_entropy(
                    ddp(ids[:, :-1]).reshape(-1, args.vocab), ids[:, 1:].reshape(-1))
                loss.backward()
        return slowest([time.perf_counter() - t0], gs["gloo"])[0]

    for it in range(args.warmup + args.iters):
        for name, ddp in ddps.items():
            s = step(ddp, True)
            if it >= args.warmup:
                rows[name].append(s)
        s = step(ddps["gloo"], False)
        if it >= args.warmup:
            rows["compute"].append(s)
    if rank == 0:
        params = sum(p.numel() for p in ddps["gloo"].parameters())
        compute = statistics.median(rows["compute"])
        for name, r in rows.items():
            step_s = statistics.median(r)
            out.append({"bench": "ddp", "group": name, "nproc": n, "params": params,
                        "step_ms": step_s * 1e3, "step_min_ms": min(r) * 1e3,
                        "step_max_ms": max(r) * 1e3,
                        "exposed_comm_ms": (step_s - compute) * 1e3,
                        "sync_share": (step_s - compute) / step_s, "iters": len(r)})


def worker(rank, n, args, init, results):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    out = []
    (run_issue if args.mode == "issue" else run_ddp)(rank, n, args, out)
    if rank == 0:
        results.extend(out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["issue", "ddp"])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--mib", type=int, default=64, help="issue: tensor size")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=8.0)
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args()
    try:
        import zen_torch  # noqa: F401  (registers "zen"; fails early when PYTHONPATH is wrong)
    except ImportError as e:
        print(f"zen_torch does not import ({e}): run with PYTHONPATH=build/python",
              file=sys.stderr)
        sys.exit(1)
    with tempfile.TemporaryDirectory() as d, mp.Manager() as m:
        results = m.list()
        mp.spawn(worker, args=(args.nproc, args, "file://" + os.path.join(d, "rdv"), results),
                 nprocs=args.nproc, join=True)
        results = list(results)
    for r in results:
        if args.json:
            print(json.dumps(r))
        elif r["bench"] == "issue":
            print(f"{r['group']:>9}: issue {r['issue_ms']:8.3f} ms  wait {r['wait_ms']:8.2f} ms"
                  f"  issue/wait {100 * r['issue_over_wait']:6.2f} %")
        else:
            print(f"{r['group']:>9}: step {r['step_ms']:8.1f} ms  exposed comm "
                  f"{r['exposed_comm_ms']:7.1f} ms  ({100 * r['sync_share']:4.1f} % of the step)")


if __name__ == "__main__":
    main()
