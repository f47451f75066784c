#!/usr/bin/python3
"""Real gradient workloads as zen traces (docs/trace-format.md), for docs/reproduction.md.

usage: bench/gen_workloads.py lstm OUTDIR [--ranks 16] [--steps 8] [--batch 32] [--seq 35]
       bench/gen_workloads.py topk OUTDIR --frac 0.01 [--ranks 8] [--steps 4]

lstm   A word-level LSTM language model (ZEN Table 1's LSTM, small) with nn.Embedding(sparse=True)
       on the GNU Collaborative International Dictionary of English (Debian dict-gcide,
       /usr/share/dictd/gcide.dict.dz, 5.4M words). The vocabulary is every word seen at least
       twice (about 109k), numbered by falling frequency as real embedding tables are (which is
       where ZEN's skew C3 comes from), plus <unk>. The output softmax covers the --out-vocab most
       frequent words (a shortlist, to keep the CPU cost down; rarer targets map to <unk>): the
       input embedding, the tensor that is synced sparsely, keeps the full vocabulary. Each rank
       reads its own contiguous shard of the corpus (rank r: the r-th 1/n of the token stream) at
       random offsets; the ranks' gradients are averaged and applied with SGD, so the steps are
       real data-parallel training steps. Every rank's embedding gradient (row sparsity, width
       --dim) is written per step as tensor "embedding".
topk   DGC-style element sparsity: the same model trained the same way, but with a dense
       embedding, and each rank keeps the --frac largest-magnitude elements of each dense
       gradient tensor (the LSTM and decoder weights: tensors "lstm.*", "decoder.*"; with error
       feedback, as DGC: what is not sent is added to the next step's gradient).
"""
import argparse
import collections
import gzip
import os
import re
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_to_trace as t2t  # noqa: E402

GCIDE = "/usr/share/dictd/gcide.dict.dz"


def load_gcide(min_count):
    if not os.path.exists(GCIDE):
        sys.exit(f"{GCIDE} missing: install dict-gcide (scripts/deps.sh)")
    text = gzip.open(GCIDE).read().decode("utf-8", "replace").lower()
    words = re.findall(r"[a-z]+(?:'[a-z]+)?", text)
    counts = collections.Counter(words)
    vocab = [w for w, c in counts.most_common() if c >= min_count]
    ids = {w: i + 1 for i, w in enumerate(vocab)}  # 0 = <unk>
    stream = np.fromiter((ids.get(w, 0) for w in words), dtype=np.int64, count=len(words))
    return stream, len(vocab) + 1


class LM(torch.nn.Module):
    def __init__(self, vocab, out_vocab, dim, sparse):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, dim, sparse=sparse)
        self.lstm = torch.nn.LSTM(dim, dim, batch_first=True)
        self.decoder = torch.nn.Linear(dim, out_vocab)

    def forward(self, x):
        h, _ = self.lstm(self.embedding(x))
        return self.decoder(h)


def batch_for(stream, rank, world, batch, seq, rng, out_vocab):
    shard = len(stream) // world
    lo = rank * shard
    starts = rng.integers(lo, lo + shard - seq - 1, size=batch)
    x = np.stack([stream[s:s + seq] for s in starts])
    y = np.stack([stream[s + 1:s + seq + 1] for s in starts])
    y = np.where(y < out_vocab, y, 0)
    return torch.from_numpy(x), torch.from_numpy(y)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["lstm", "topk"])
    ap.add_argument("outdir")
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32, help="sequences per rank per step")
    ap.add_argument("--seq", type=int, default=35)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--out-vocab", type=int, default=16384)
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--frac", type=float, default=0.01, help="topk: fraction kept per tensor")
    ap.add_argument("--lr", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    t0 = time.time()
    stream, vocab = load_gcide(a.min_count)
    print(f"gcide: {len(stream)} tokens, vocabulary {vocab} (min count {a.min_count}), "
          f"{time.time() - t0:.1f} s", flush=True)
    model = LM(vocab, a.out_vocab, a.dim, sparse=a.kind == "lstm")
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.outdir, exist_ok=True)
    residual = [dict() for _ in range(a.ranks)]  # topk error feedback per rank
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(a.steps):
        total = {n: None for n, _ in model.named_parameters()}
        losses = []
        for r in range(a.ranks):
            model.zero_grad()
            x, y = batch_for(stream, r, a.ranks, a.batch, a.seq, rng, a.out_vocab)
            loss = loss_fn(model(x).reshape(-1, a.out_vocab), y.reshape(-1))
            loss.backward()
            losses.append(loss.item())
            recs = []
            for n, p in model.named_parameters():
                g = p.grad.clone()
                total[n] = g if total[n] is None else total[n] + g
                if a.kind == "lstm" and n == "embedding.weight":
                    recs.append(t2t.records_from("embedding", g))
                elif a.kind == "topk" and n != "embedding.weight":
                    g = g + residual[r].get(n, 0)
                    rec = t2t.records_from(n.replace(".weight", ".w").replace(".bias", ".b"), g,
                                           a.frac)
                    sent = torch.zeros(g.numel())
                    sent[torch.from_numpy(rec[3].astype(np.int64))] = torch.from_numpy(rec[4])
                    residual[r][n] = g - sent.reshape(g.shape)
                    recs.append(rec)
            t2t.write_trace(os.path.join(a.outdir, f"rank{r}-step{step:06d}.zgrad"), r, a.ranks,
                            step, recs)
        with torch.no_grad():
            for n, p in model.named_parameters():
                g = total[n] / a.ranks
                p.add_(g.to_dense() if g.is_sparse else g, alpha=-a.lr)
        print(f"step {step}: mean loss {np.mean(losses):.3f}  ({time.time() - t0:.0f} s)",
              flush=True)


if __name__ == "__main__":
    main()
