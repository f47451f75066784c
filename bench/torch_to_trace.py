#!/usr/bin/python3
"""Write PyTorch gradients as zen gradient traces (docs/trace-format.md, `.zgrad` version 1).

usage: bench/torch_to_trace.py IN.pt OUTDIR [--topk F]

IN.pt (torch.save) holds {"steps": [[{name: tensor, ...} for each rank] for each step]}, the
gradients each rank computed at each step. Every tensor becomes one record of
OUTDIR/rank<R>-step<S>.zgrad:

  sparse COO (nn.Embedding(sparse=True).weight.grad)  row sparsity: the coalesced rows, width d
  dense 2-D                                            row sparsity: the rows with a non-zero
  dense other shapes                                   element sparsity of the flattened tensor
  any tensor with --topk F                             element sparsity: the ceil(F * numel)
                                                       largest magnitudes (DGC-style top-k)

As a module, `write_trace` and `records_from` are what bench/gen_workloads.py uses.
The checksum is the format's seeded FNV-1a 64, computed here byte by byte (pure Python: about
2-3 s per MB, fine for the small traces of bench/).
"""
import argparse
import math
import os
import struct
import sys

import numpy as np

from sparsity_report import fnv1a  # the trace format's seeded FNV-1a 64, one copy in bench/


def write_trace(path, rank, world, step, records):
    """records: list of (name, rows, width, idx uint32[nnz], vals float32[nnz, width]).
    Written to path.tmp and renamed, as the format requires of writers."""
    parts = [b"ZGRD", struct.pack("<IIIQII", 1, rank, world, step, len(records), 0)]
    for name, rows, width, idx, vals in records:
        nm = name.encode()
        if len(nm) > 255 or width < 1 or rows >= 1 << 32:
            raise ValueError(f"{name}: name, width or rows outside the format")
        idx = np.ascontiguousarray(idx, dtype="<u4")
        vals = np.ascontiguousarray(vals, dtype="<f4").reshape(len(idx), width)
        if len(idx) and int(idx.max()) >= rows:
            raise ValueError(f"{name}: index {int(idx.max())} not below rows {rows}")
        parts += [struct.pack("<H", len(nm)), nm, struct.pack("<QIIQ", rows, width, 0, len(idx)),
                  idx.tobytes(), vals.tobytes()]
    body = b"".join(parts)
    body += struct.pack("<Q", fnv1a(body))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(body)
    os.replace(tmp, path)


def topk_elements(flat, frac):
    """Indices (ascending) and values of the ceil(frac * n) largest |x| of a 1-D array."""
    k = max(1, math.ceil(frac * flat.size))
    idx = np.argpartition(np.abs(flat), flat.size - k)[flat.size - k:]
    idx.sort()
    return idx.astype(np.uint32), flat[idx].astype(np.float32)


def records_from(name, t, topk=0.0):
    """One trace record from a torch tensor (see the module docstring for the mapping)."""
    import torch
    if t.is_sparse:
        t = t.coalesce()
        idx = t.indices()[0].numpy().astype(np.uint32)
        vals = t.values().reshape(len(idx), -1).numpy()
        if topk:
            t = t.to_dense()
        else:
            return (name, t.shape[0], vals.shape[1] if vals.ndim > 1 else 1, idx, vals)
    a = t.detach().to(torch.float32).numpy()
    if topk:
        idx, vals = topk_elements(a.reshape(-1), topk)
        return (name, a.size, 1, idx, vals)
    if a.ndim == 2:
        idx = np.nonzero(np.any(a != 0, axis=1))[0].astype(np.uint32)
        return (name, a.shape[0], a.shape[1], idx, a[idx])
    flat = a.reshape(-1)
    idx = np.nonzero(flat)[0].astype(np.uint32)
    return (name, flat.size, 1, idx, flat[idx])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="torch.save'd {'steps': [[{name: grad} per rank] per step]}")
    ap.add_argument("outdir")
    ap.add_argument("--topk", type=float, default=0.0, help="keep this fraction per tensor")
    a = ap.parse_args()
    import torch
    data = torch.load(a.input)
    steps = data["steps"]
    if not steps or not steps[0]:
        sys.exit(f"{a.input}: no steps or no ranks")
    world = len(steps[0])
    os.makedirs(a.outdir, exist_ok=True)
    for s, ranks in enumerate(steps):
        if len(ranks) != world:
            sys.exit(f"{a.input}: step {s} has {len(ranks)} ranks, step 0 has {world}")
        for r, grads in enumerate(ranks):
            recs = [records_from(n, g, a.topk) for n, g in grads.items()]
            write_trace(os.path.join(a.outdir, f"rank{r}-step{s:06d}.zgrad"), r, world, s, recs)
    print(f"{len(steps)} steps x {world} ranks -> {a.outdir}")


if __name__ == "__main__":
    main()
