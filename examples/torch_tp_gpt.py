#!/usr/bin/python3
"""A GPT in PyTorch with Megatron-style tensor parallelism on zen_torch.tp, trained on the KJV.

    export PYTHONPATH=$PWD/build/python OMP_NUM_THREADS=1
    zen launch -n 4 -- /usr/bin/python3 examples/torch_tp_gpt.py --tp 4
    zen launch -n 4 -- /usr/bin/python3 examples/torch_tp_gpt.py --tp 4 --straggler 1:4 \\
        --balance semi
    zen launch -n 4 -- /usr/bin/python3 examples/torch_tp_gpt.py --tp 2          # dp 2 x tp 2
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 \\
        --tee 1 examples/torch_tp_gpt.py --tp 2
    mpirun -n 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531 -x PYTHONPATH -x OMP_NUM_THREADS \\
        /usr/bin/python3 examples/torch_tp_gpt.py --tp 4

The world is dp x tp ranks: tp groups are runs of --tp consecutive ranks, dp groups the ranks
with the same tp rank (dist.new_group for each). Inside a tp group each transformer block splits
its attention heads and its MLP over the ranks, as Megatron-LM does:

    x -> LayerNorm -> QKV (column-parallel: this rank's heads) -> causal attention on those
      heads -> out-proj (row-parallel: partial sums, all_reduce) -> + x
      -> LayerNorm -> fc1 (column-parallel) -> GELU -> fc2 (row-parallel, all_reduce) -> + x

Embeddings, LayerNorms and the LM head are replicated on every rank of a tp group (their
gradients are equal there by construction), so only the four linears per block are sharded.
The dp replicas read different parts of the text and average all gradients over the dp group.

--impl zen (default) builds those linears from zen_torch.tp.ColumnParallelLinear and
RowParallelLinear on one zen_torch.tp.TPGroup, which measures each rank's speed and balances
around a slow rank (--balance none|resize|migrate|semi; docs/pytorch-tp.md). --impl megatron
is the same model on plain nn.Linear-shaped shards and two torch.distributed all_reduce autograd
functions written below: the baseline the zen layers are compared with (same weights, same
losses at --balance none).

--straggler RANK:FACTOR makes the tp GEMMs of world rank RANK (and nothing else) take FACTOR
times their wall time (zen: TPGroup.set_straggler; megatron: the same emulation below): spin
holds the core meanwhile (the GEMM repeated, then a busy wait), sleep frees it. A real slow process instead: start with --pid-dir DIR and throttle the rank
from outside with scripts/throttle.sh "$(cat DIR/rank1.pid)" 0.25 (docs/pytorch-tp.md).

Prints the loss (mean over dp) and rank 0's step time; --json gives one JSON object per line.
"""
import argparse
import collections
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


# ----------------------------------------------------------------------------- data

def load_words(path):
    """The words and punctuation of the corpus, lower case (as examples/torch_ddp_kjv.py)."""
    if path:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:  # the bible-kjv package (scripts/deps.sh), as `zen train` reads it
        text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                              capture_output=True, text=True).stdout
        text = re.sub(r"^\S+\d+:\d+ ", "", text, flags=re.M)  # drop "Ge1:1 " references
    return re.findall(r"[a-z]+(?:'[a-z]+)?|[.,;:?!]", text.lower())


def build_ids(words, vocab):
    """Token ids: the vocab-1 most frequent words, every other word one shared "rare" id."""
    counts = collections.Counter(words)
    index = {w: i for i, (w, _) in enumerate(counts.most_common(vocab - 1))}
    return torch.tensor([index.get(w, vocab - 1) for w in words], dtype=torch.int64)


def batch_at(ids, starts, seq):
    rows = ids[starts[:, None] + torch.arange(seq + 1)]
    return rows[:, :-1], rows[:, 1:]


# ----------------------------------------------------------------------------- megatron baseline

class Straggler:
    """Emulate a slow device for the megatron impl, GEMM by GEMM, as libzen does for the zen
    impl (src/tp/gemm.c): a GEMM that took t takes F x t of wall time. spin holds the core until
    then (repeating the GEMM at most floor(F-1) times while a repeat still fits, busy-waiting the
    rest); sleep adds (F-1) x t to a debt slept before the next collective (the core is free)."""

    def __init__(self, factor, mode):
        self.factor, self.mode, self.debt, self.credit = factor, mode, 0.0, 0.0

    def after_gemm(self, seconds, gemm):
        extra = (self.factor - 1.0) * seconds
        if self.mode == "sleep":
            self.debt += extra
            return
        end = time.perf_counter() + extra
        for _ in range(int(self.factor - 1.0)):
            if time.perf_counter() + seconds > end:
                break
            gemm()
        while time.perf_counter() < end:
            pass

    def pay(self):
        """Sleep the debt; oversleep is credited against the next debt (at most 2 ms)."""
        want = self.debt - self.credit
        self.debt = 0.0
        if want <= 0:
            self.credit = -want
            return
        t0 = time.perf_counter()
        time.sleep(want)
        self.credit = min(time.perf_counter() - t0 - want, 2e-3)


_STRAGGLER = None  # this rank's Straggler in the megatron impl, None when not slow
_GEMM_CPU = None  # --time-gemms: [thread CPU seconds in the shard GEMMs this step]


def _pay_debt():
    if _STRAGGLER is not None:
        _STRAGGLER.pay()


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all_reduce of the input gradient over tp backward (Megatron's f)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        _pay_debt()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _ReduceFromTP(torch.autograd.Function):
    """all_reduce of the partial sums over tp forward; identity backward (Megatron's g)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        _pay_debt()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _SlowLinear(torch.autograd.Function):
    """F.linear whose forward and backward GEMMs go through the straggler emulation and the
    --time-gemms clock."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        t0, c0 = time.perf_counter(), time.thread_time()
        y = F.linear(x, weight, bias)
        _after_gemm(t0, c0, lambda: F.linear(x, weight, bias))
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        g2, x2 = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])

        def gemms():
            return grad.matmul(weight), g2.t().mm(x2)

        t0, c0 = time.perf_counter(), time.thread_time()
        dx, dw = gemms()
        _after_gemm(t0, c0, gemms)
        return dx, dw, (g2.sum(0) if ctx.has_bias else None)


def _after_gemm(t0, c0, gemm):
    if _GEMM_CPU is not None:
        _GEMM_CPU[0] += time.thread_time() - c0
    if _STRAGGLER is not None:
        _STRAGGLER.after_gemm(time.perf_counter() - t0, gemm)


def _linear(x, weight, bias):
    if _STRAGGLER is None and _GEMM_CPU is None:
        return F.linear(x, weight, bias)
    return _SlowLinear.apply(x, weight, bias)


class MegatronColumn(torch.nn.Module):
    """Y_r = X W_r^T + b_r with W_r rows [r*out/tp, (r+1)*out/tp) of the full weight."""

    def __init__(self, in_features, out_features, group, tp, bias=True):
        super().__init__()
        self.group = group
        self.weight = torch.nn.Parameter(torch.empty(out_features // tp, in_features))
        self.bias = torch.nn.Parameter(torch.zeros(out_features // tp)) if bias else None

    def forward(self, x):
        return _linear(_CopyToTP.apply(x, self.group), self.weight, self.bias)


class MegatronRow(torch.nn.Module):
    """Y = sum_r X_r W_r^T + b with W_r columns [r*in/tp, (r+1)*in/tp); b replicated."""

    def __init__(self, in_features, out_features, group, tp, bias=True):
        super().__init__()
        self.group = group
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features // tp))
        self.bias = torch.nn.Parameter(torch.zeros(out_features)) if bias else None

    def forward(self, x):
        y = _ReduceFromTP.apply(_linear(x, self.weight, None), self.group)
        return y + self.bias if self.bias is not None else y


# ----------------------------------------------------------------------------- the model

class Layers:
    """Makes the tp linears of one impl. Each gets .tp_kind ("column"/"row") and .full_shape
    (out, in) so init_weights can hand it its slice of a full weight."""

    def __init__(self, impl, group, tp, tpg=None):
        self.impl, self.group, self.tp, self.tpg = impl, group, tp, tpg

    def _make(self, kind, in_features, out_features):
        if self.tp == 1 and self.impl == "megatron":  # one process: the plain model
            m = torch.nn.Linear(in_features, out_features)
        elif self.impl == "megatron":
            cls = MegatronColumn if kind == "column" else MegatronRow
            m = cls(in_features, out_features, self.group, self.tp)
        else:
            import zen_torch.tp as ztp
            if kind == "column":
                m = ztp.ColumnParallelLinear(in_features, out_features, bias=True,
                                             gather_output=False, group=self.group,
                                             tp_group=self.tpg)
            else:
                m = ztp.RowParallelLinear(in_features, out_features, bias=True,
                                          input_is_parallel=True, group=self.group,
                                          tp_group=self.tpg)
        m.tp_kind, m.full_shape = kind, (out_features, in_features)
        return m

    def column(self, in_features, out_features):
        return self._make("column", in_features, out_features)

    def row(self, in_features, out_features):
        return self._make("row", in_features, out_features)


class Block(torch.nn.Module):
    def __init__(self, d_model, heads, d_ff, layers):
        super().__init__()
        tp = layers.tp
        self.local_heads, self.head_dim = heads // tp, d_model // heads
        self.ln1 = torch.nn.LayerNorm(d_model)
        # QKV's output rows are ordered head by head, (q, k, v) within a head, so the contiguous
        # row block a column-parallel rank holds is whole heads: heads r*heads/tp onward.
        self.qkv = layers.column(d_model, 3 * d_model)
        self.proj = layers.row(d_model, d_model)
        self.ln2 = torch.nn.LayerNorm(d_model)
        self.fc1 = layers.column(d_model, d_ff)
        self.fc2 = layers.row(d_ff, d_model)

    def attention(self, x):
        b, t, _ = x.shape
        qkv = self.qkv(x).view(b, t, self.local_heads, 3, self.head_dim)
        q, k, v = (qkv[:, :, :, i].transpose(1, 2) for i in range(3))  # (b, heads/tp, t, hd)
        att = q.matmul(k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        y = att.matmul(v).transpose(1, 2).reshape(b, t, self.local_heads * self.head_dim)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, seq, d_model, heads, d_ff, n_layers, layers):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d_model)
        self.pos = torch.nn.Embedding(seq, d_model)
        self.blocks = torch.nn.ModuleList(Block(d_model, heads, d_ff, layers)
                                          for _ in range(n_layers))
        self.ln_f = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for block in self.blocks:
            h = block(h)
        return self.head(self.ln_f(h))


@torch.no_grad()
def init_weights(model, seed, tp_rank, tp):
    """Every rank draws the same full weights (module order, one generator) and keeps its shard,
    so both impls, every tp and a single process start from one model."""
    g = torch.Generator().manual_seed(seed)
    for _, m in model.named_modules():
        if hasattr(m, "tp_kind"):
            out_f, in_f = m.full_shape
            w = torch.randn(out_f, in_f, generator=g) * 0.02
            if hasattr(m, "load_full_weight"):  # zen_torch.tp: its shard, canonical order
                m.load_full_weight(w, torch.zeros(out_f))
                continue
            if m.tp_kind == "column":
                rows = out_f // tp
                m.weight.copy_(w[tp_rank * rows:(tp_rank + 1) * rows])
            else:
                cols = in_f // tp
                m.weight.copy_(w[:, tp_rank * cols:(tp_rank + 1) * cols])
            m.bias.zero_()
        elif isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
            m.weight.copy_(torch.randn(m.weight.shape, generator=g) * 0.02)
            if getattr(m, "bias", None) is not None:
                m.bias.zero_()


# ----------------------------------------------------------------------------- setup

def parse_straggler(text):
    try:
        rank, factor = text.split(":")
        rank, factor = int(rank), float(factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not RANK:FACTOR (e.g. 1:4)")
    if rank < 0 or not factor >= 1.0:
        raise argparse.ArgumentTypeError(f"'{text}': RANK must be >= 0 and FACTOR >= 1")
    return rank, factor


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Launch with `zen launch -n N --`, torchrun or mpirun (see the module docstring "
               "and docs/pytorch-tp.md). Exit 0 done, 1 failed, 2 usage.")
    p.add_argument("--tp", type=int, default=2, help="tensor-parallel size (divides the world; "
                   "dp = world / tp)")
    p.add_argument("--impl", choices=["zen", "megatron"], default="zen")
    p.add_argument("--balance", choices=["none", "resize", "migrate", "semi"], default="none",
                   help="zen impl: what the tp group does about a slow rank")
    p.add_argument("--priority", choices=["score", "random", "prefix"], default="score",
                   help="zen impl: which columns resize drops first")
    p.add_argument("--period", type=int, default=10, help="zen impl: steps between decisions")
    p.add_argument("--straggler", type=parse_straggler, action="append", default=[],
                   metavar="RANK:FACTOR", help="world rank RANK's tp GEMMs take FACTOR x their "
                   "wall time (repeatable)")
    p.add_argument("--straggler-mode", choices=["spin", "sleep"], default="spin")
    p.add_argument("--backend", choices=["zen", "gloo"], default="zen",
                   help="process groups (--impl zen needs zen)")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warm", type=int, default=10,
                   help="steps left out of the median step time")
    p.add_argument("--seed", type=int, default=0, help="weights; the data order is seed + dp rank")
    p.add_argument("--batch", type=int, default=8, help="sequences per dp replica and step")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--vocab", type=int, default=1024, help="most frequent words kept (+ rare)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam")
    p.add_argument("--eval-batches", type=int, default=4,
                   help="held-out batches for the final validation loss (0: none)")
    p.add_argument("--corpus", help="a text file instead of the KJV from `bible`")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--pid-dir", help="write DIR/rank<R>.pid (for scripts/throttle.sh)")
    p.add_argument("--time-gemms", action="store_true",
                   help="megatron impl, tp >= 2: measure the thread CPU time of the tp GEMMs "
                   "(the work --straggler slows) and its share of the step's")
    args = p.parse_args(argv)
    if args.tp < 1 or args.steps < 1 or args.warm < 0:
        p.error("--tp and --steps must be >= 1, --warm >= 0")
    if args.heads % args.tp or args.d_ff % args.tp or args.d_model % args.heads:
        p.error(f"--heads ({args.heads}) and --d-ff ({args.d_ff}) must be multiples of --tp "
                f"({args.tp}), --d-model ({args.d_model}) of --heads")
    if args.impl == "zen" and args.backend != "zen":
        p.error("--impl zen runs its layers on zen process groups: use --backend zen")
    if args.impl == "megatron" and args.balance != "none":
        p.error("--balance is a zen_torch.tp feature: use --impl zen")
    if args.time_gemms and (args.impl != "megatron" or args.tp < 2):
        p.error("--time-gemms times the megatron impl's shard GEMMs: use --impl megatron and "
                "--tp >= 2")
    return args


def init_process_group(backend):
    """env:// from torchrun or `zen launch`; under mpirun, the rank from Open MPI's variables."""
    if "RANK" in os.environ or "OMPI_COMM_WORLD_RANK" not in os.environ:
        dist.init_process_group(backend)
    else:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        dist.init_process_group(backend, rank=int(os.environ["OMPI_COMM_WORLD_RANK"]),
                                world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))


def make_groups(world, tp, backend):
    """Every rank creates every group, in the same order (dist.new_group's rule); returns this
    rank's tp and dp groups."""
    rank, dp = dist.get_rank(), world // tp
    tp_group = dp_group = None
    for d in range(dp):
        g = dist.new_group(list(range(d * tp, (d + 1) * tp)), backend=backend)
        if rank // tp == d:
            tp_group = g
    for t in range(tp):
        g = dist.new_group(list(range(t, world, tp)), backend=backend)
        if rank % tp == t:
            dp_group = g
    return tp_group, dp_group


def make_tp_group(args, tp_group, tp_rank, dp_rank):
    """The zen_torch.tp group (zen impl) or this rank's Straggler (megatron impl)."""
    global _STRAGGLER, _GEMM_CPU
    _STRAGGLER = None
    _GEMM_CPU = [0.0] if args.time_gemms else None
    mine = [(r % args.tp, f) for r, f in args.straggler if r // args.tp == dp_rank]
    if args.impl == "megatron":
        for r, f in mine:
            if r == tp_rank and f > 1.0:
                _STRAGGLER = Straggler(f, args.straggler_mode)
        return None
    try:
        import zen_torch.tp as ztp
    except ImportError as e:
        sys.exit(f"torch_tp_gpt.py: --impl zen needs zen_torch.tp ({e}); build python/ or use "
                 "--impl megatron")
    tpg = ztp.TPGroup(group=tp_group, balance=args.balance, priority=args.priority,
                      period=args.period)
    for r, f in mine:  # every rank of the group sets the same emulation
        tpg.set_straggler(r, f, mode=args.straggler_mode)
    return tpg


# ----------------------------------------------------------------------------- training

def sync_dp_gradients(params, dp_group, dp, tpg):
    """Average every gradient over the dp replicas: one flat all_reduce. A zen tp group under
    a balance plan keeps its weights' columns permuted, each tp group its own way: the gradients
    go to canonical order for the sum and back for the optimizer."""
    if tpg is not None:
        tpg.canonical_grads(True)
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=dp_group)
    flat /= dp
    offset = 0
    for p, g in zip(params, grads):
        n = g.numel()
        if p.grad is None:
            p.grad = g
        p.grad.copy_(flat[offset:offset + n].view_as(g))
        offset += n
    if tpg is not None:
        tpg.canonical_grads(False)


def dp_mean(value, dp_group, dp):
    if dp == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t, group=dp_group)
    return t.item() / dp


@torch.no_grad()
def evaluate(model, ids, lo, hi, args):
    g = torch.Generator().manual_seed(999)  # the same held-out batches for every run
    total = 0.0
    for _ in range(args.eval_batches):
        starts = torch.randint(lo, hi - args.seq - 1, (args.batch,), generator=g)
        x, y = batch_at(ids, starts, args.seq)
        total += F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    return total / args.eval_batches


def emit(args, rank, obj, text):
    if rank != 0:
        return
    print(json.dumps(obj) if args.json else text, flush=True)


def rank_medians(values, tpg, tp_group):
    """Every tp rank's median of its values (collective over the tp group): here each rank's
    tp GEMM wall time per step, emulated slowness included (what a straggler's factor does)."""
    t = torch.zeros(tpg.size, dtype=torch.float64)
    t[tpg.rank] = statistics.median(values) if values else 0.0
    dist.all_reduce(t, group=tp_group)
    return t.tolist()


def train(args, model, tpg, ids, tp_group, dp_group, dp, dp_rank):
    rank = dist.get_rank()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=args.lr)
    if tpg is not None:
        tpg.attach_optimizer(opt)  # Adam's moments follow the columns a balance plan permutes
    split = len(ids) * 9 // 10  # the last tenth is held out
    span = split // dp  # each dp replica samples its own slice of the training text
    g = torch.Generator().manual_seed(args.seed + dp_rank)
    times, losses, cpu, proc_cpu, gemm_cpu, gemm_wall = [], [], [], [], [], []
    for step in range(args.steps):
        starts = dp_rank * span + torch.randint(0, span - args.seq - 1, (args.batch,),
                                                generator=g)
        x, y = batch_at(ids, starts, args.seq)
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        if _GEMM_CPU is not None:
            _GEMM_CPU[0] = 0.0
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=False)
        loss.backward()
        if dp > 1:
            sync_dp_gradients(params, dp_group, dp, tpg)
        opt.step()
        if tpg is not None:
            tpg.step()
            gemm_wall.append(tpg.stats()["ms_compute"])
        _pay_debt()
        dt = time.perf_counter() - t0
        times.append(dt)
        cpu.append(time.thread_time() - c0)
        proc_cpu.append(time.process_time() - p0)  # with the backend's threads
        if _GEMM_CPU is not None:
            gemm_cpu.append(_GEMM_CPU[0])
        losses.append(dp_mean(loss.item(), dp_group, dp))
        emit(args, rank, {"step": step, "loss": losses[-1], "step_s": dt},
             f"step {step:4d}  loss {losses[-1]:.6f}  {dt * 1e3:8.2f} ms")
    w = args.warm if args.warm < len(times) else 0
    summary = {"summary": True, "impl": args.impl, "balance": args.balance,
               "tp": args.tp, "dp": dp, "steps": args.steps,
               "straggler": [f"{r}:{f}" for r, f in args.straggler],
               "straggler_mode": args.straggler_mode,
               "median_step_s": statistics.median(times[w:]),
               "median_step_cpu_s": statistics.median(cpu[w:]),
               "median_step_proc_cpu_s": statistics.median(proc_cpu[w:]), "final_loss": losses[-1]}
    if gemm_cpu:  # the share of the main thread's (process's) CPU time per step in the tp GEMMs
        summary["median_gemm_cpu_s"] = statistics.median(gemm_cpu[w:])
        summary["gemm_share"] = statistics.median(g / c for g, c in zip(gemm_cpu[w:], cpu[w:]))
        summary["gemm_share_proc"] = statistics.median(
            g / c for g, c in zip(gemm_cpu[w:], proc_cpu[w:]))
    if args.eval_batches > 0:
        summary["val_loss"] = dp_mean(evaluate(model, ids, split, len(ids), args), dp_group, dp)
    if tpg is not None:
        summary["tp_stats"] = tpg.stats()
        summary["rank_gemm_wall_ms"] = rank_medians(gemm_wall[w:], tpg, tp_group)
    summary["losses"] = losses
    return summary


def run(args):
    """Train as the arguments say; returns the summary (with every step's loss in "losses")."""
    torch.set_num_threads(1)  # tp 4 on a 2-core host is already oversubscribed
    if args.backend == "zen":
        import zen_torch  # noqa: F401  (registers the backend)
    init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % args.tp:
        sys.exit(f"torch_tp_gpt.py: --tp {args.tp} does not divide the world size {world}")
    for r, _ in args.straggler:
        if r >= world:
            sys.exit(f"torch_tp_gpt.py: --straggler rank {r} is outside the world (0..{world - 1})")
    if args.pid_dir:
        os.makedirs(args.pid_dir, exist_ok=True)
        with open(os.path.join(args.pid_dir, f"rank{rank}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    dp, tp_rank, dp_rank = world // args.tp, rank % args.tp, rank // args.tp
    tp_group, dp_group = make_groups(world, args.tp, args.backend)
    tpg = make_tp_group(args, tp_group, tp_rank, dp_rank)

    ids = build_ids(load_words(args.corpus), args.vocab)
    model = GPT(args.vocab, args.seq, args.d_model, args.heads, args.d_ff, args.layers,
                Layers(args.impl, tp_group, args.tp, tpg))
    init_weights(model, args.seed, tp_rank, args.tp)
    nparams = sum(p.numel() for p in model.parameters())
    emit(args, rank, {"config": vars(args) | {"world": world, "dp": dp,
                                               "params_per_rank": nparams}},
         f"{args.impl}: dp {dp} x tp {args.tp}, {len(ids)} words, vocab {args.vocab}, "
         f"{nparams} parameters per rank, balance {args.balance}, straggler "
         f"{args.straggler or 'none'} ({args.straggler_mode})")
    summary = train(args, model, tpg, ids, tp_group, dp_group, dp, dp_rank)
    emit(args, rank, {k: v for k, v in summary.items() if k != "losses"},
         f"median {summary['median_step_s'] * 1e3:.2f} ms/step (steps {args.warm}..), final "
         f"loss {summary['final_loss']:.6f}" +
         (f", validation loss {summary['val_loss']:.6f}" if "val_loss" in summary else "") +
         (f"\ntp stats: {summary['tp_stats']}" if "tp_stats" in summary else ""))
    dist.destroy_process_group()
    return summary


def main(argv=None):
    run(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
