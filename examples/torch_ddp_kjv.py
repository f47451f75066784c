#!/usr/bin/python3
"""Word-level language model on the King James Bible with a sparse embedding, trained with DDP.

    /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 4 \
        --redirects 1 --tee 1 examples/torch_ddp_kjv.py --backend zen
    zen launch -n 4 -- /usr/bin/python3 examples/torch_ddp_kjv.py --backend gloo

(PYTHONPATH=build/python for a build tree. `torchrun` is the same as `python3 -m
torch.distributed.run`; Debian's torch 1.13.1 on Python 3.11 needs --redirects 1 --tee 1, see
docs/pytorch.md.) The model predicts the next word from the previous
--context words: a large nn.Embedding(sparse=True) over the whole vocabulary, whose gradient
touches only the words of the batch (a sparse COO all_reduce per step), then a small dense MLP
over the --out-vocab most frequent words (dense bucket all_reduce). Each rank reads a different
slice of the text. Prints the mean loss over ranks and the time per step (rank 0).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def load_words(path):
    if path:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    else:  # the bible-kjv package (scripts/deps.sh), as `zen train` reads it
        text = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True,
                              capture_output=True, text=True).stdout
        text = re.sub(r"^\S+\d+:\d+ ", "", text, flags=re.M)  # drop "Ge1:1 " references
    return re.findall(r"[a-z]+(?:'[a-z]+)?|[.,;:?!]", text.lower())


def build_data(words, out_vocab):
    counts = collections.Counter(words)
    vocab = [w for w, _ in counts.most_common()]
    index = {w: i for i, w in enumerate(vocab)}
    ids = torch.tensor([index[w] for w in words], dtype=torch.int64)
    # targets beyond the out_vocab most frequent words share one "rare word" class
    targets = torch.clamp(ids, max=out_vocab)
    return ids, targets, len(vocab)


class WordLM(torch.nn.Module):
    def __init__(self, vocab, out_vocab, dim, context, hidden):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, dim, sparse=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(context * dim, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, out_vocab + 1))

    def forward(self, x):
        return self.mlp(self.embed(x).flatten(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["zen", "gloo"], default="zen")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=256, help="examples per rank and step")
    p.add_argument("--context", type=int, default=4)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--out-vocab", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--corpus", help="a text file instead of the KJV from `bible`")
    p.add_argument("--sparse-scheme", help="zen sparse all_reduce scheme (default auto)")
    args = p.parse_args()

    if args.backend == "zen":
        import zen_torch  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)
    dist.init_process_group(args.backend)  # env:// (torchrun and `zen launch` set it)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.backend == "zen" and args.sparse_scheme:
        zen_torch.set_sparse_scheme(None, args.sparse_scheme)

    ids, targets, vocab = build_data(load_words(args.corpus), args.out_vocab)
    torch.manual_seed(0)
    model = WordLM(vocab, args.out_vocab, args.dim, args.context, args.hidden)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    if rank == 0:
        print(f"backend {args.backend}, {world} ranks, {len(ids)} words, vocab {vocab}, "
              f"embedding {vocab}x{args.dim} (sparse), batch {args.batch}/rank", flush=True)

    span = len(ids) // world  # each rank samples its own slice of the book
    g = torch.Generator().manual_seed(1234 + rank)
    offsets = torch.arange(args.context)
    times = []
    for step in range(args.steps):
        start = rank * span + torch.randint(0, span - args.context - 1, (args.batch,),
                                            generator=g)
        x = ids[start[:, None] + offsets]
        y = targets[start + args.context]
        t0 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()  # the gradient all_reduces run here
        opt.step()
        dt = time.perf_counter() - t0
        times.append(dt)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step:4d}  loss {mean.item() / world:.4f}  {dt * 1e3:8.2f} ms/step",
                  flush=True)
    if rank == 0:
        times.sort()
        print(f"median {times[len(times) // 2] * 1e3:.2f} ms/step over {args.steps} steps "
              f"({args.backend}, {world} ranks)")
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
