#!/usr/bin/env python3
"""Sparsity report of real gradients recorded by `zen train --dump-grads DIR`.

usage: bench/sparsity_report.py DIR [--tensor wte] [--partitions N]

For one tensor (default the token embedding "wte") over every step that all ranks recorded, it
prints the characteristics that decide which sparse allreduce wins (ZEN paper, Sec. 2 and 3):

  density d_G      non-zero rows / rows, per rank (mean over steps)
  overlap          |I_a & I_b| / min(|I_a|, |I_b|) for every pair of ranks (mean over steps)
  gamma^k          densification ratio d^k / d: density of the sum of the first k ranks over the
                   mean single-rank density, k = 1, 2, 4, ..., n (1 <= gamma^k <= k)
  skew s           max over P even contiguous index ranges of the range's density, over d
                   (P = --partitions, default the rank count)

The trace layout is docs/trace-format.md (little-endian; FNV-1a checksum verified here too).
"""
import argparse
import glob
import os
import re
import struct
import sys
from collections import defaultdict

FNV_PRIME = 0x100000001B3
FNV_BASIS = 0xCBF29CE484222325 ^ 0x7A656E7472616365  # seed "zentrace"
MASK = (1 << 64) - 1


def fnv1a(data):
    h = FNV_BASIS
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def read_trace(path, want, check):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 40 or data[:4] != b"ZGRD":
        sys.exit(f"{path}: not a .zgrad file")
    version, rank, world, step, count, _ = struct.unpack_from("<IIIQII", data, 4)
    if version != 1:
        sys.exit(f"{path}: version {version}, expected 1")
    if check and fnv1a(data[:-8]) != struct.unpack_from("<Q", data, len(data) - 8)[0]:
        sys.exit(f"{path}: checksum mismatch")
    off = 32
    for _ in range(count):
        (nlen,) = struct.unpack_from("<H", data, off)
        name = data[off + 2:off + 2 + nlen].decode()
        off += 2 + nlen
        rows, width, _, nnz = struct.unpack_from("<QIIQ", data, off)
        off += 24
        idx = struct.unpack_from(f"<{nnz}I", data, off) if name == want else None
        off += 4 * nnz + 4 * nnz * width
        if idx is not None:
            return rank, world, step, rows, set(idx)
    return rank, world, step, None, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--tensor", default="wte")
    ap.add_argument("--partitions", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=200, help="use at most this many steps")
    ap.add_argument("--no-checksum", action="store_true", help="skip the (slow) FNV check")
    a = ap.parse_args()

    files = glob.glob(os.path.join(a.dir, "rank*-step*.zgrad"))
    by_step = defaultdict(dict)
    for p in files:
        m = re.search(r"rank(\d+)-step(\d+)\.zgrad$", p)
        if m:
            by_step[int(m.group(2))][int(m.group(1))] = p
    if not by_step:
        sys.exit(f"no rank*-step*.zgrad files in {a.dir}")
    nranks = max(len(v) for v in by_step.values())
    steps = sorted(s for s, v in by_step.items() if len(v) == nranks)[: a.max_steps]
    P = a.partitions or nranks
    dens = [0.0] * nranks
    overlap = defaultdict(float)
    ks = [k for k in (2 ** i for i in range(0, 20)) if k <= nranks]
    gamma = defaultdict(float)
    skew = 0.0
    rows_seen = None
    for s in steps:
        sets = []
        for r in range(nranks):
            _, _, _, rows, idx = read_trace(by_step[s][r], a.tensor, not a.no_checksum)
            if rows is None:
                sys.exit(f"{by_step[s][r]}: no tensor {a.tensor}")
            rows_seen = rows
            sets.append(idx)
        d = [len(x) / rows_seen for x in sets]
        for r in range(nranks):
            dens[r] += d[r]
        for i in range(nranks):
            for j in range(i + 1, nranks):
                m = min(len(sets[i]), len(sets[j]))
                overlap[(i, j)] += len(sets[i] & sets[j]) / m if m else 0.0
        union = set()
        for k in range(1, nranks + 1):
            union |= sets[k - 1]
            dk = sum(d[:k]) / k  # mean single-rank density of the k ranks summed
            if k in ks:
                gamma[k] += (len(union) / rows_seen) / dk if dk else 0.0
        # skew of one rank's tensor (rank 0) over P even ranges, as in the paper's Def. 5
        width = -(-rows_seen // P)
        counts = [0] * P
        for i in sets[0]:
            counts[i // width] += 1
        if d[0] > 0:
            skew += max(c / width for c in counts) / d[0]
    n = len(steps)
    print(f"tensor {a.tensor}: {rows_seen} rows, {nranks} ranks, {n} steps ({a.dir})")
    print("density per rank:  " + "  ".join(f"r{r} {dens[r] / n:.4f}" for r in range(nranks)))
    if nranks > 1:
        ov = [v / n for v in overlap.values()]
        print(f"pairwise overlap:  mean {sum(ov) / len(ov):.3f}  min {min(ov):.3f}  "
              f"max {max(ov):.3f}")
    print("gamma^k:           " + "  ".join(f"k={k} {gamma[k] / n:.2f}" for k in ks))
    print(f"skew (P={P}):       {skew / n:.2f}")


if __name__ == "__main__":
    main()
