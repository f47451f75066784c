#!/usr/bin/python3
"""A small GPT on the King James Bible, trained with DDP and a gradient-compression comm hook.

    zen launch -n 4 -- /usr/bin/python3 examples/torch_topk_kjv.py --hook topk --ratio 0.01
    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 \
        --redirects 1 --tee 1 examples/torch_topk_kjv.py --backend gloo --hook powersgd
    mpirun -n 4 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=29531 -x PYTHONPATH \
        /usr/bin/python3 examples/torch_topk_kjv.py --hook topk --global

(PYTHONPATH=build/python for a build tree; launchers as for examples/torch_ddp_kjv.py, and
scripts/cluster.sh run, whose ZEN_RANK etc. stand in for RANK etc.; bench/torch_hooks.sh
compares the hooks.) Words
are tokens: the --vocab most frequent words, the rest one "rare word" token. The model is a GPT
(token and position embeddings, --layers pre-norm transformer blocks with a causal mask, an
untied output head): every gradient is dense, so without a hook DDP all_reduces all of it.

--hook none: DDP's default all_reduce. topk: zen_torch.hooks.topk_hook (top --ratio per bucket
with error feedback and a warm-up of --warmup-steps per stage; --global: global top-k; on gloo
the same selection goes through all_gather). powersgd: torch's PowerSGD hook, rank
--powersgd-rank. fp16: torch's fp16 compression hook. Each rank trains on its own stream of the
first 95% of the text; the validation loss is the mean over the last 5% (the same batches on
every --eval-every step and at the end). Rank 0 prints a final line
`result {json}` with the median step time and the final validation loss.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_ddp_kjv import load_words  # noqa: E402


def tokens(words, vocab):
    counts = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    order = sorted(counts, key=lambda w: (-counts[w], w))[:vocab]
    index = {w: i for i, w in enumerate(order)}
    return torch.tensor([index.get(w, vocab) for w in words], dtype=torch.int64)


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab, dim, heads, layers, context):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.zeros(context, dim))
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.full((context, context), -math.inf), 1))

    def forward(self, x):
        t = x.shape[1]
        h = self.tok(x) + self.pos[:t]
        for b in self.blocks:
            h = b(h, self.mask[:t, :t])
        return self.head(self.ln(h))


def register_hook(args, ddp, group):
    """The chosen hook on ddp; returns its state (or None)."""
    if args.hook == "topk":
        from zen_torch import hooks
        state = hooks.TopKState(group, ratio=args.ratio, warmup_steps=args.warmup_steps,
                                mode="global" if args.global_topk else "union",
                                scheme=args.sparse_scheme)
        ddp.register_comm_hook(state, hooks.topk_hook)
        return state
    if args.hook == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
        state = ps.PowerSGDState(group, matrix_approximation_rank=args.powersgd_rank,
                                 start_powerSGD_iter=2)
        ddp.register_comm_hook(state, ps.powerSGD_hook)
        return state
    if args.hook == "fp16":
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(group, default_hooks.fp16_compress_hook)
    return None


def batch(ids, lo, hi, n, context, g):
    start = torch.randint(lo, hi - context - 1, (n,), generator=g)
    x = ids[start[:, None] + torch.arange(context + 1)]
    return x[:, :-1], x[:, 1:]


# The tensors validate() all_reduces, alive until the process ends. Torch 1.13's gloo worker
# drops its last reference to a finished Work under the process group's lock; when that Work holds
# the only reference to a tensor whose Python object is gone, freeing it takes the GIL. The main
# thread, which holds the GIL while DDP's reducer destroys the group at exit, then waits for that
# lock forever: a gloo run that printed its result did not exit (seen under load, stacks:
# ~ProcessGroupGloo on the main thread, PyEval_AcquireThread on a gloo worker).
_reduced = []


def validate(model, val, world):
    with torch.no_grad():
        total = sum(torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
                    for x, y in val)
    t = torch.tensor([total / len(val)])
    _reduced.append(t)
    dist.all_reduce(t)
    return t.item() / world


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["zen", "gloo"], default="zen")
    p.add_argument("--hook", choices=["none", "topk", "powersgd", "fp16"], default="topk")
    p.add_argument("--ratio", type=float, default=0.01, help="top-k share per bucket")
    p.add_argument("--global", dest="global_topk", action="store_true", help="global top-k")
    p.add_argument("--warmup-steps", type=int, default=5, help="steps per top-k warm-up stage")
    p.add_argument("--sparse-scheme", default="auto")
    p.add_argument("--powersgd-rank", type=int, default=4)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--eval-every", type=int, default=0, help="0: at the end only")
    p.add_argument("--batch", type=int, default=16, help="sequences per rank and step")
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--corpus", help="a text file instead of the KJV from `bible`")
    return p.parse_args()


def main():
    args = parse()
    # scripts/cluster.sh run sets zen's names, mpirun Open MPI's; torch's env:// reads its own
    # (under mpirun export MASTER_ADDR and MASTER_PORT, as for examples/torch_ddp_kjv.py)
    for name, alts in (("RANK", ("ZEN_RANK", "OMPI_COMM_WORLD_RANK")),
                       ("WORLD_SIZE", ("ZEN_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")),
                       ("MASTER_ADDR", ("ZEN_MASTER_ADDR",)), ("MASTER_PORT", ("ZEN_MASTER_PORT",))):
        for alt in alts:
            if name not in os.environ and alt in os.environ:
                os.environ[name] = os.environ[alt]
    if args.backend == "zen":
        import zen_torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)  # env:// (torchrun and `zen launch` set it)
    rank, world = dist.get_rank(), dist.get_world_size()
    ids = tokens(load_words(args.corpus), args.vocab)
    split = len(ids) * 95 // 100
    torch.manual_seed(0)
    model = GPT(args.vocab + 1, args.dim, args.heads, args.layers, args.context)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = register_hook(args, ddp, dist.group.WORLD)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    vg = torch.Generator().manual_seed(99)  # every rank the same validation batches
    val = [batch(ids, split, len(ids), args.batch, args.context, vg) for _ in range(4)]
    nparams = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"backend {args.backend}, hook {args.hook}, {world} ranks, {len(ids)} tokens, "
              f"{nparams} parameters ({nparams * 4 / 1e6:.1f} MB of gradient)", flush=True)
    g = torch.Generator().manual_seed(1234 + rank)
    times, curve = [], []
    for step in range(args.steps):
        x, y = batch(ids, 0, split, args.batch, args.context, g)
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(ddp(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()  # the gradient sync (the hook) runs here
        opt.step()
        times.append(time.perf_counter() - t0)
        if args.eval_every and (step + 1) % args.eval_every == 0 and step + 1 < args.steps:
            curve.append((step + 1, validate(model, val, world)))
            if rank == 0:
                print(f"step {step + 1:5d}  val {curve[-1][1]:.4f}  "
                      f"{times[-1] * 1e3:8.2f} ms/step", flush=True)
    curve.append((args.steps, validate(model, val, world)))
    steady = sorted(times[min(len(times) // 4, 10):]) or sorted(times)
    result = {"backend": args.backend, "hook": args.hook, "ratio": args.ratio,
              "global": args.global_topk, "ranks": world, "steps": args.steps,
              "step_ms": round(steady[len(steady) // 2] * 1e3, 3),
              "val_loss": round(curve[-1][1], 5), "curve": curve}
    if args.hook == "topk":
        result["sent_per_step"] = state.sent // args.steps
    if rank == 0:
        print("result " + json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
