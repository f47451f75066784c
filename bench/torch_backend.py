#!/usr/bin/python3
"""Benchmarks of the zen torch.distributed backend against gloo, in the same processes.

  bench/torch_backend.py sparse --nproc 4      sparse all_reduce of real embedding gradients
  bench/torch_backend.py dense --nproc 4       dense all_reduce, 1-64 MiB float32
  bench/torch_backend.py dense --nproc 2 --bytes 8 64 512 4K 32K 256K 1M 8M 64M   a size curve
  bench/torch_backend.py overhead --nproc 4    the shim vs libzen called from C, at 1 MiB

--rounds N repeats a run in fresh processes and ends with the median of the per-round medians.
sparse: zen AUTO and every fixed scheme (--schemes), with the scheme AUTO ran on each call
("auto_choices"). overhead: in the same processes, alternated call by call, zen_allreduce timed
inside C against the group's allreduce and dist.all_reduce; each round also runs `zen bench
allreduce` (a C program, its own processes) before the torch processes.

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
    auto_choices = {}

    def zen_scheme(name):
        def call(t):
            zen_torch.set_sparse_scheme(zen, name)
            dist.all_reduce(t.clone(), group=zen)
        return call

    def zen_auto(t):
        zen_scheme("auto")(t)
        chosen = zen_torch.last_sparse_scheme(zen)  # what AUTO ran on this call
        auto_choices[chosen] = auto_choices.get(chosen, 0) + 1

    cands = {"zen sparse (auto)": zen_auto}
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
    nnz = grads[0].coalesce()._nnz()
    return times, {"rows": grads[0].shape[0], "width": grads[0].shape[1], "nnz_rows": nnz,
                   "auto_choices": auto_choices}


def size_bytes(text):
    """'8', '4K', '64M' -> bytes."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    return int(text[:-1] if mult > 1 else text) * mult


def size_label(b):
    for unit, v in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= v and b % v == 0:
            return f"{b // v} {unit}"
    return f"{b} B"


def dense_sizes(args):
    """--bytes when given, else --sizes (MiB): the byte sizes of the dense curve."""
    return [size_bytes(b) for b in args.bytes] if args.bytes else [m << 20 for m in args.sizes]


def run_dense(rank, world, zen, args):
    """Both backends on the same float32 tensor, allocated once per size and reused for every
    call (as DDP reuses its buckets), alternated call by call."""
    times = {}
    for nbytes in dense_sizes(args):
        mib = size_label(nbytes)
        x = torch.rand(max(1, nbytes // 4))
        t_zen, t_gloo = [], []
        for i in range(args.warmup + args.iters):
            a = timed(lambda: dist.all_reduce(x, group=zen), zen)
            b = timed(lambda: dist.all_reduce(x), zen)
            if i >= args.warmup:
                t_zen.append(a)
                t_gloo.append(b)
        times[f"zen {mib}"] = t_zen
        times[f"gloo {mib}"] = t_gloo
    return times, {}


def run_overhead(rank, world, zen, args):
    """1 MiB in-place all_reduce three ways, alternated call by call on one buffer: libzen's
    zen_allreduce timed inside C (the baseline), the group's allreduce method (the C++ shim
    without torch's Python wrapper) and dist.all_reduce (what a script calls)."""
    import zen_torch
    x = torch.rand(1 << 18)  # 1 MiB of float32
    opts = dist.AllreduceOptions()

    def c_call():  # times itself: the slowest rank's seconds in zen_allreduce alone
        dist.barrier(group=zen)
        t = torch.tensor([zen_torch._C._time_raw_allreduce(zen, x)], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=zen)
        return t.item()

    cands = {"C zen_allreduce": c_call,
             "shim pg.allreduce": lambda: timed(lambda: zen.allreduce([x], opts).wait(), zen),
             "dist.all_reduce": lambda: timed(lambda: dist.all_reduce(x, group=zen), zen)}
    times = {k: [] for k in cands}
    names = list(cands)
    for i in range(args.warmup + args.iters):
        x.fill_(1.0 / world)  # keeps the in-place sums finite
        for k in names[i % 3:] + names[:i % 3]:  # rotated: no candidate always goes first
            s = cands[k]()
            if i >= args.warmup:
                times[k].append(s)
    return times, {}


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
           "--transport", os.environ.get("ZEN_TRANSPORT", "auto"), "-b", "1M", "-e", "1M", "-w",
           str(args.warmup), "-n", str(args.iters), "--json"]
    lines = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
    rows = [json.loads(l) for l in lines if l.startswith("{")]
    return rows


def summary(name, ts, bases=()):
    """One line for one run: median and min-max of its times, speed-ups against bases."""
    return print_line(name, ts, f"median {statistics.median(ts) * 1e3:8.3f} ms  (min "
                      f"{min(ts) * 1e3:.3f}, max {max(ts) * 1e3:.3f}, n={len(ts)})", bases)


def round_summary(name, meds, bases=()):
    """One line over rounds: the median of the per-round medians and their min-max."""
    return print_line(name, meds, f"median of {len(meds)} rounds "
                      f"{statistics.median(meds) * 1e3:8.3f} ms  (rounds "
                      f"{min(meds) * 1e3:.3f}-{max(meds) * 1e3:.3f})", bases)


def print_line(name, ts, text, bases):
    med = statistics.median(ts)
    line = f"  {name:<26} {text}"
    for label, value in bases:
        line += f"  {value / med:6.2f}x {label}"
    print(line)
    return med


def overhead(args):
    c, py = [], {}
    for r in range(args.rounds):
        rows = c_bench_1mib(args)
        c.append(statistics.median(x["time_us_p50"] * 1e-6 for x in rows if x["inplace"]))
        res = spawn("overhead", args)
        print(f"round {r + 1}: `zen bench allreduce` (C process) p50 {c[-1] * 1e3:.3f} ms; "
              f"in the torch processes, alternated call by call:", flush=True)
        cts = res["times"]["C zen_allreduce"]
        for k, ts in res["times"].items():
            py.setdefault(k, []).append(statistics.median(ts))
            summary(k, ts, [] if k.startswith("C ") else [("C", statistics.median(cts))])
            if not k.startswith("C "):  # paired: this call against the C call of its iteration
                d = statistics.median(a - b for a, b in zip(ts, cts))
                py.setdefault(k + " paired", []).append(d)
                print(f"    median of per-iteration differences to C: {d * 1e6:+.1f} us")
    print(f"  transports: zen bench {rows[0]['transport']}, zen_torch "
          f"{res['info']['zen_transport']}")
    print("over rounds:")
    base = round_summary("C zen_allreduce", py["C zen_allreduce"])
    for k in ("shim pg.allreduce", "dist.all_reduce"):
        m = round_summary(k, py[k])
        d = statistics.median(py[k + " paired"])
        print(f"    overhead over C in the same processes: {(m / base - 1) * 100:+.1f}% "
              f"(medians); paired per-call difference {d * 1e6:+.1f} us = "
              f"{d / base * 100:+.1f}% of C")
    mc = round_summary("`zen bench allreduce` p50", c)
    m = statistics.median(py["dist.all_reduce"])
    print(f"    dist.all_reduce over `zen bench allreduce` (separate processes): "
          f"{(m / mc - 1) * 100:+.1f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["sparse", "dense", "overhead"])
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=256, help="sparse: examples per rank")
    p.add_argument("--dim", type=int, default=64, help="sparse: embedding width")
    p.add_argument("--schemes", nargs="*",
                   default=["balanced", "hierarchical", "allgather", "block", "ps", "dense"],
                   help="sparse: fixed zen schemes timed besides auto")
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="dense: MiB")
    p.add_argument("--bytes", nargs="+", help="dense: sizes in bytes (8 4K 64M), instead of --sizes")
    p.add_argument("--rounds", type=int, default=1,
                   help="fresh process sets, one after the other (overhead: each after a C run)")
    p.add_argument("--zen", default=os.path.join(ROOT, "build", "zen"), help="the zen CLI")
    args = p.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"host {platform.node()} ({os.cpu_count()} cpus, load {os.getloadavg()[0]:.2f}), "
          f"torch {torch.__version__}, {args.nproc} processes, mode {args.mode}, iters "
          f"{args.iters} warmup {args.warmup}, rounds {args.rounds}", flush=True)
    if args.mode == "overhead":
        overhead(args)
        return
    meds = {}
    for r in range(args.rounds):
        res = spawn(args.mode, args)
        times, info = res["times"], res["info"]
        print(f"round {r + 1} (load {os.getloadavg()[0]:.2f}): {info}")
        for k, ts in times.items():
            meds.setdefault(k, []).append(statistics.median(ts))
        report(args, times, summary)
        sys.stdout.flush()
    if args.rounds > 1:
        print("over rounds:")
        report(args, meds, round_summary)


def report(args, series, line):
    """One line per candidate with its speed-ups; line is summary (one run's times) or
    round_summary (the per-round medians)."""
    if args.mode == "sparse":
        gs = line("gloo sparse", series["gloo sparse"])
        gd = line("gloo dense", series["gloo dense"])
        for name in ["auto"] + args.schemes:
            line(f"zen sparse ({name})", series[f"zen sparse ({name})"],
                 [("gloo sparse", gs), ("gloo dense", gd)])
    else:
        for nbytes in dense_sizes(args):
            label = size_label(nbytes)
            g = line(f"gloo {label}", series[f"gloo {label}"])
            line(f"zen {label}", series[f"zen {label}"], [("gloo", g)])


if __name__ == "__main__":
    main()
