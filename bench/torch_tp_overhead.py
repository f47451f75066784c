"""Step overhead of zen_torch.tp's layers against the same Megatron MLP block written with plain
nn.Linear shards + dist.all_reduce on the zen group (homogeneous ranks, balance none).

Usage: /usr/bin/python3 bench/torch_tp_overhead.py [--tp 4] [--hidden 256] [--rows 256]
           [--steps 20] [--rounds 5] [--threads 1] [--json]
(PYTHONPATH=build/python.) Spawns --tp processes with zen the default group. A step is forward
(column h -> 4h, gelu, row 4h -> h), backward of a squared-sum loss, SGD update and zero_grad
(plus tpg.step() for zen_torch.tp). The two models run in alternating blocks of --steps steps,
--rounds times each, in the same processes; rank 0 prints the median step time of each and the
ratio zen_torch.tp / plain (the issue's target: <= 1.10 at tp 4).
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
from torch import nn

import zen_torch  # noqa: F401  (registers the backend)
import zen_torch.tp as ztp


class _CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all_reduce of the input gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all_reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, y):
        y = y.contiguous()
        dist.all_reduce(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return g


class PlainMLP(nn.Module):
    def __init__(self, h, tp):
        super().__init__()
        self.fc1 = nn.Linear(h, 4 * h // tp)
        self.fc2 = nn.Linear(4 * h // tp, h, bias=False)
        self.b2 = nn.Parameter(torch.zeros(h))

    def forward(self, x):
        y = self.fc2(nn.functional.gelu(self.fc1(_CopyToTP.apply(x))))
        return _ReduceFromTP.apply(y) + self.b2


class ZenMLP(nn.Module):
    def __init__(self, h, tpg):
        super().__init__()
        self.fc1 = ztp.ColumnParallelLinear(h, 4 * h, tp_group=tpg)
        self.fc2 = ztp.RowParallelLinear(4 * h, h, tp_group=tpg)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


def block(model, opt, x, steps, tpg=None):
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        model(x).square().sum().backward()
        opt.step()
        opt.zero_grad()
        if tpg is not None:
            tpg.step()
        times.append(time.perf_counter() - t0)
    return times


def worker(rank, a, init):
    torch.set_num_threads(a.threads)
    dist.init_process_group("zen", init_method=init, rank=rank, world_size=a.tp)
    torch.manual_seed(0)
    # the input needs its gradient (as behind a layer norm): both models all-reduce it
    x = torch.randn(a.rows, a.hidden, requires_grad=True)
    tpg = ztp.TPGroup(balance="none")
    plain, zen = PlainMLP(a.hidden, a.tp), ZenMLP(a.hidden, tpg)
    opt_p = torch.optim.SGD(plain.parameters(), lr=1e-4)
    opt_z = torch.optim.SGD(zen.parameters(), lr=1e-4)
    block(plain, opt_p, x, 3)  # warm-up
    block(zen, opt_z, x, 3, tpg)
    tp_, tz = [], []
    for _ in range(a.rounds):
        dist.barrier()
        tp_ += block(plain, opt_p, x, a.steps)
        dist.barrier()
        tz += block(zen, opt_z, x, a.steps, tpg)
    mp_, mz = statistics.median(tp_) * 1e3, statistics.median(tz) * 1e3
    # every rank's medians, so the slowest rank's view is reported too
    med = torch.tensor([mp_, mz], dtype=torch.float64)
    allm = [torch.zeros(2, dtype=torch.float64) for _ in range(a.tp)]
    dist.all_gather(allm, med)
    if rank == 0:
        worst = torch.stack(allm).max(0).values.tolist()
        res = {"tp": a.tp, "hidden": a.hidden, "rows": a.rows, "steps": a.steps * a.rounds,
               "plain_ms": round(mp_, 3), "zen_tp_ms": round(mz, 3),
               "ratio": round(mz / mp_, 3), "ratio_worst_rank": round(worst[1] / worst[0], 3),
               "load": os.getloadavg()[0]}
        if a.json:
            print(json.dumps(res))
        else:
            print(f"tp {a.tp} MLP h={a.hidden} rows={a.rows}: plain nn.Linear + all_reduce "
                  f"{mp_:.3f} ms/step, zen_torch.tp {mz:.3f} ms/step, ratio {mz / mp_:.3f} "
                  f"(slowest rank's medians: {worst[1] / worst[0]:.3f}; load "
                  f"{res['load']:.1f})")
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tp", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    # libzen's GEMMs run in OpenBLAS, which reads its thread count when the children load it
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(a.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(worker, args=(a, "file://" + os.path.join(d, "rdv")), nprocs=a.tp, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
