#!/usr/bin/env python3
"""Single-rank CPU training throughput of `zen train` against PyTorch on the same model.

usage: bench/torch_compare.py [--zen PATH] [--threads N] [--layers 2 --d-model 128 --heads 4
                               --d-ff 512 --ctx 64 --batch 8 --seq 32 --steps 60]

Both sides train the same GPT (pre-LayerNorm blocks, learned positions, tanh-GELU MLP, untied
head, no dropout, AdamW) at the same batch, sequence length and thread count, one rank, fp32.
Both are timed per step (zen from `--metrics`, torch around zero_grad..step) and the median step
time after the first step gives tokens/s, which resists load spikes on a shared machine. Prints one line per side and
the ratio zen / torch. Needs python3-torch (Debian; install it only to run this benchmark).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def run_zen(a):
    cmd = [a.zen, "train", "--dp", "1", "--tp", "1", "--threads", str(a.threads),
           "--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads),
           "--d-ff", str(a.d_ff), "--ctx", str(a.ctx), "--batch", str(a.batch), "--seq",
           str(a.seq), "--steps", str(a.steps), "--eval-interval", "0", "--eval-batches", "1",
           "--sample-tokens", "0", "--json"]
    if a.data:
        cmd += ["--data", a.data]
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        out = subprocess.run(cmd + ["--metrics", metrics], check=True, capture_output=True,
                             text=True).stdout
        with open(metrics, encoding="utf-8") as f:
            ms = [json.loads(line)["ms_step"] / 1e3 for line in f if line.strip()]
    summary = json.loads(out.strip().splitlines()[-1])
    summary["tokens_per_s"] = a.batch * a.seq / median(ms[1:] or ms)
    return summary


def run_torch(a, vocab):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, d, h, ff):
            super().__init__()
            self.h = h
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, ff)
            self.fc2 = nn.Linear(ff, d)

        def forward(self, x):
            B, T, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (t.view(B, T, self.h, d // self.h).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.h)
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, a.d_model)
            self.wpe = nn.Embedding(a.ctx, a.d_model)
            self.blocks = nn.ModuleList(Block(a.d_model, a.heads, a.d_ff) for _ in range(a.layers))
            self.lnf = nn.LayerNorm(a.d_model)
            self.head = nn.Linear(a.d_model, vocab, bias=False)

        def forward(self, idx, targets):
            T = idx.shape[1]
            x = self.wte(idx) + self.wpe(torch.arange(T))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.lnf(x))
            return F.cross_entropy(logits.view(-1, vocab), targets.view(-1))

    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    g = torch.Generator().manual_seed(2)
    times = []
    for step in range(a.steps):
        x = torch.randint(0, vocab, (a.batch, a.seq), generator=g)
        y = torch.randint(0, vocab, (a.batch, a.seq), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    return a.batch * a.seq / median(times[1:] or times), torch.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--zen", default=os.environ.get("ZEN_BIN", os.path.join(here, "..", "build", "zen")))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--data", default=None, help="text file (default: the KJV corpus)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="alternate zen and torch runs this many times; report best and median "
                         "(the best is the least disturbed by other load on a shared machine)")
    a = ap.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("PyTorch is missing: apt-get install python3-torch (only for this benchmark)")
    zs, ts = [], []
    for _ in range(max(1, a.repeat)):
        z = run_zen(a)
        zs.append(z["tokens_per_s"])
        t, version = run_torch(a, int(z["vocab"]))
        ts.append(t)
    med = median
    print(f"model: {a.layers} layers, d_model {a.d_model}, {a.heads} heads, d_ff {a.d_ff}, "
          f"vocab {z['vocab']}, {z['params'] / 1e6:.2f}M params; batch {a.batch} x {a.seq} "
          f"tokens; {a.threads} threads; {a.steps} steps; {len(zs)} runs each")
    print(f"zen    best {max(zs):9.0f}  median {med(zs):9.0f} tokens/s")
    print(f"torch  best {max(ts):9.0f}  median {med(ts):9.0f} tokens/s   (PyTorch {version})")
    print(f"ratio zen/torch: best {max(zs) / max(ts):.2f}  median {med(zs) / med(ts):.2f}")
    try:
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    except OSError:
        pass


if __name__ == "__main__":
    main()
