#!/usr/bin/python3
"""ctest torch_trace: bench/torch_to_trace.py on a small known gradient set.

usage: torch_trace_check.py ZEN_BINARY REPO_ROOT WORKDIR

Three ranks x two steps of an nn.Embedding(sparse=True) + nn.Linear model get converted (and a
DGC top-k copy with --topk). The files are parsed back here from the spec (docs/trace-format.md)
and every rank's reconstruction must equal torch's dense gradient; `zen bench sparse --trace`
must then read the files and verify every scheme (each rank checks the allreduce against a
locally computed dense sum of the trace data), and `zen simulate --trace` profile them.
"""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch

zen, root, work = sys.argv[1:4]
sys.path.insert(0, os.path.join(root, "bench"))
import torch_to_trace as t2t  # noqa: E402

shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
torch.manual_seed(7)
emb = torch.nn.Embedding(500, 4, sparse=True)
lin = torch.nn.Linear(4, 3)
steps, dense = [], []
for s in range(2):
    ranks, dranks = [], []
    for r in range(3):
        emb.zero_grad()
        lin.zero_grad()
        ids = torch.randint(0, 500, (6,)) if r != 2 else torch.tensor([3, 3, 499, 0])
        lin(emb(ids)).pow(2).sum().backward()
        g = {"emb": emb.weight.grad.clone(), "lin.w": lin.weight.grad.clone(),
             "lin.b": lin.bias.grad.clone()}
        ranks.append(g)
        dranks.append({k: (v.to_dense() if v.is_sparse else v).numpy().copy() for k, v in g.items()})
    steps.append(ranks)
    dense.append(dranks)
torch.save({"steps": steps}, os.path.join(work, "grads.pt"))


def parse(path):
    data = open(path, "rb").read()
    assert data[:4] == b"ZGRD", path
    assert t2t.fnv1a(data[:-8]) == struct.unpack_from("<Q", data, len(data) - 8)[0], path
    _, rank, world, step, count, _ = struct.unpack_from("<IIIQII", data, 4)
    off, out = 32, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<H", data, off)
        name = data[off + 2:off + 2 + n].decode()
        off += 2 + n
        rows, width, _, nnz = struct.unpack_from("<QIIQ", data, off)
        off += 24
        idx = np.frombuffer(data, "<u4", nnz, off)
        off += 4 * nnz
        vals = np.frombuffer(data, "<f4", nnz * width, off).reshape(nnz, width)
        off += 4 * nnz * width
        full = np.zeros((rows, width), np.float32)
        np.add.at(full, idx, vals)
        out[name] = (full, nnz)
    assert off == len(data) - 8, path
    return rank, world, step, out


def run(args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


fail = 0
for topk in (0.0, 0.25):
    out = os.path.join(work, f"trace-topk{topk}")
    run(["/usr/bin/python3", os.path.join(root, "bench", "torch_to_trace.py"),
         os.path.join(work, "grads.pt"), out] + (["--topk", str(topk)] if topk else []))
    for s in range(2):
        for r in range(3):
            rank, world, step, recs = parse(os.path.join(out, f"rank{r}-step{s:06d}.zgrad"))
            assert (rank, world, step) == (r, 3, s)
            for name, ref in dense[s][r].items():
                got, nnz = recs[name]
                ref = ref.reshape(got.shape)
                if topk:
                    # the kept elements are exact and are the largest magnitudes
                    k = int(np.ceil(topk * ref.size))
                    kept = got.reshape(-1) != 0
                    ok = nnz == k and np.array_equal(got.reshape(-1)[kept], ref.reshape(-1)[kept])
                    mag = np.abs(ref.reshape(-1))
                    ok = ok and bool(np.all(kept[mag > np.sort(mag)[-k]]))
                else:
                    ok = np.array_equal(got, ref)
                if not ok:
                    print(f"FAIL topk={topk} step {s} rank {r} {name}")
                    fail = 1
    res = run([zen, "bench", "sparse", "--trace", out, "--ranks", "3", "--iters", "1",
               "--warmup", "0", "--json"])
    lines = [json.loads(x) for x in res.splitlines() if x.startswith("{")]
    if not lines or not all(x["verified"] for x in lines) or lines[0]["tensors"] != 6:
        print(f"FAIL zen bench sparse --trace (topk={topk}):\n{res}")
        fail = 1
    else:
        print(f"topk={topk}: {len(lines)} schemes verified on {lines[0]['tensors']} tensors")
# zen simulate profiles the same trace: the embedding's rows, its width (or --width's)
for extra, width in (([], 4), (["--width", "64"], 64)):
    res = run([zen, "simulate", "--trace", os.path.join(work, "trace-topk0.0"), "--tensor", "emb",
               "--ranks", "4", "--gbps", "10", "--json"] + extra)
    j = json.loads(res.splitlines()[-1])
    if j["rows"] != 500 or j["width"] != width or not j["density"] > 0:
        print(f"FAIL zen simulate --trace {extra}: {res}")
        fail = 1
sys.exit(fail)
