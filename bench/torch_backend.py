#!/usr/bin/python3
"""Benchmarks of the zen torch.distributed backend against gloo, in the same processes.

  bench/torch_backend.py sparse --nproc 4      sparse all_reduce of real embedding gradients
  bench/torch_backend.py dense --nproc 4       dense all_reduce, 1-64 MiB float32
  bench/torch_backend.py overhead --nproc 4    zen_torch vs `zen bench allreduce` (C) at 1 MiB

Run with PYTHONPATH=build/python, under `flock /tmp/zen-bench.lock`. Every process joins a gloo
default group and a zen group over the same ranks; the candidates run interleaved (A B C A B C)
on the same inputs. Each timing is the slowest rank's time for one call, after a barrier;
reported: median and min-max over iterations, and ratios against the baselines of the same run.

Sparse inputs are real gradients: the embedding gradient (nn.Embedding(sparse=True), as DDP
all_reduces it, uncoalesced) of the word-level KJV model of examples/torch_ddp_kjv.py, one batch
per iteration, each rank its own slice of the text.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(fn, zen):
    dist.barrier(group=zen)
    t0 = time.perf_counter()
    fn()
    t = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=zen)
    return t.item()


def embedding_grads(rank, world, count, args):
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import torch_ddp_kjv as ex
    ids, targets, vocab = ex.build_data(ex.load_words(None), 2000)
    torch.manual_seed(0)
    model = ex.WordLM(vocab, 2000, args.dim, 4, 128)
    span = len(ids) // world
    g = torch.Generator().manual_seed(99 + rank)
    grads = []
    for _ in range(count):
        start = rank * span + torch.randint(0, span - 5, (args.batch,), generator=g)
        x = ids[start[:, None] + torch.arange(4)]
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), targets[start + 4]).backward()
        grads.append(model.embed.weight.grad.clone())
    return grads


def run_sparse(rank, world, zen, args):
    grads = embedding_grads(rank, world, 8, args)
    import zen_torch
    z = grads[0].clone()
    dist.all_reduce(z, group=zen)
    d = grads[0].to_dense()
    dist.all_reduce(d)
    assert torch.allclose(z.to_dense(), d, atol=1e-5), "zen sparse sum differs from gloo dense"
    def zen_scheme(name):
        def call(t):
            zen_torch.set_sparse_scheme(zen, name)
            dist.all_reduce(t.clone(), group=zen)
        return call

    cands = {"zen sparse (auto)": zen_scheme("auto")}
    for name in args.schemes:
        cands[f"zen sparse ({name})"] = zen_scheme(name)
    cands["gloo sparse"] = lambda t: dist.all_reduce(t.clone())
    cands["gloo dense"] = lambda t: dist.all_reduce(t)
    dense = [t.to_dense() for t in grads]
    times = {k: [] for k in cands}
    for i in range(args.warmup + args.iters):
        for k, fn in cands.items():
            src = dense[i % len(grads)].clone() if k == "gloo dense" else grads[i % len(grads)]
            t = timed(lambda: fn(src), zen)
            if i >= args.warmup:
                times[k].append(t)
    zen_torch.set_sparse_scheme(zen, "auto")
    dist.all_reduce(grads[0].clone(), group=zen)
    nnz = grads[0].coalesce()._nnz()
    return times, {"rows": grads[0].shape[0], "width": grads[0].shape[1], "nnz_rows": nnz,
                   "auto_scheme": zen_torch.last_sparse_scheme(zen)}


def run_dense(rank, world, zen, args):
    times = {}
    for mib in args.sizes:
        x = torch.rand(mib * (1 << 18))
        t_zen, t_gloo = [], []
        for i in range(args.warmup + args.iters):
            a = timed(lambda: dist.all_reduce(x, group=zen), zen)
            b = timed(lambda: dist.all_reduce(x), zen)
            if i >= args.warmup:
                t_zen.append(a)
                t_gloo.append(b)
        times[f"zen {mib} MiB"] = t_zen
        times[f"gloo {mib} MiB"] = t_gloo
    return times, {}


def run_overhead(rank, world, zen, args):
    x = torch.rand(1 << 18)  # 1 MiB of float32
    t = []
    for i in range(args.warmup + args.iters):
        s = timed(lambda: dist.all_reduce(x, group=zen), zen)
        if i >= args.warmup:
            t.append(s)
    return {"zen_torch 1 MiB": t}, {}


def worker(rank, world, mode, init, args, out):
    torch.set_num_threads(1)
    import zen_torch
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    zen = dist.new_group(backend="zen")
    times, info = globals()["run_" + mode](rank, world, zen, args)
    info["zen_transport"] = zen_torch.transport(zen)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"times": times, "info": info}, f)
    dist.barrier()
    dist.destroy_process_group()


def spawn(mode, args):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(worker, args=(args.nproc, mode, "file://" + os.path.join(d, "rdv"), args, out),
                 nprocs=args.nproc, join=True)
        with open(out) as f:
            return json.load(f)


def c_bench_1mib(args):
    """p50 seconds of `zen bench allreduce` at 1 MiB, in place (libzen called from C), over the
    transport the zen group gets: ZEN_TRANSPORT if set, else auto (shm on one host)."""
    cmd = [args.zen, "launch", "-n", str(args.nproc), "--", args.zen, "bench", "allreduce",
           "--transport", os.environ.get("ZEN_TRANSPORT", "auto"), "-b", "1M", "-e", "1M", "-w", str(args.warmup), "-n",
           str(args.iters), "--json"]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    rows = [json.loads(l) for l in lines if l.startswith("{")]
    return rows


def summary(name, ts, bases=()):
    med = statistics.median(ts)
    line = f"  {name:<26} median {med * 1e3:8.3f} ms  (min {min(ts) * 1e3:.3f}, max " \
           f"{max(ts) * 1e3:.3f}, n={len(ts)})"
    for label, value in bases:
        line += f"  {value / med:6.2f}x {label}"
    print(line)
    return med


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["sparse", "dense", "overhead"])
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=256, help="sparse: examples per rank")
    p.add_argument("--dim", type=int, default=64, help="sparse: embedding width")
    p.add_argument("--schemes", nargs="*", default=["balanced", "hierarchical", "allgather"],
                   help="sparse: fixed zen schemes timed besides auto")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="dense: MiB")
    p.add_argument("--rounds", type=int, default=3, help="overhead: C / torch alternations")
    p.add_argument("--zen", default=os.path.join(ROOT, "build", "zen"), help="the zen CLI")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"host {platform.node()} ({os.cpu_count()} cpus), torch {torch.__version__}, "
          f"{args.nproc} processes, mode {args.mode}, iters {args.iters} warmup {args.warmup}",
          flush=True)
    if args.mode == "overhead":
        c, py = [], []
        for _ in range(args.rounds):
            rows = c_bench_1mib(args)
            c.append(statistics.median(r["time_us_p50"] * 1e-6 for r in rows if r["inplace"]))
            res = spawn("overhead", args)
            py.append(statistics.median(res["times"]["zen_torch 1 MiB"]))
        print(f"  C transport {rows[0]['transport']}, zen_torch transport "
              f"{res['info']['zen_transport']}")
        mc, mp_ = statistics.median(c), statistics.median(py)
        print(f"  C zen bench p50 per round (ms): {[round(v * 1e3, 3) for v in c]}")
        print(f"  zen_torch median per round (ms): {[round(v * 1e3, 3) for v in py]}")
        print(f"  shim overhead at 1 MiB: {(mp_ / mc - 1) * 100:+.1f}% "
              f"(zen_torch {mp_ * 1e3:.3f} ms vs C {mc * 1e3:.3f} ms)")
        return
    res = spawn(args.mode, args)
    times, info = res["times"], res["info"]
    if info:
        print(f"  {info}")
    if args.mode == "sparse":
        gs = statistics.median(times["gloo sparse"])
        gd = statistics.median(times["gloo dense"])
        summary("gloo dense", times["gloo dense"])
        summary("gloo sparse", times["gloo sparse"])
        for name in ["auto"] + args.schemes:
            summary(f"zen sparse ({name})", times[f"zen sparse ({name})"],
                    [("gloo sparse", gs), ("gloo dense", gd)])
    else:
        for mib in args.sizes:
            g = summary(f"gloo {mib} MiB", times[f"gloo {mib} MiB"])
            summary(f"zen {mib} MiB", times[f"zen {mib} MiB"], [("gloo", g)])


if __name__ == "__main__":
    main()
