#!/usr/bin/env python3
"""Sparsity report of real gradients recorded by `zen train --dump-grads DIR`.

usage: bench/sparsity_report.py DIR [--tensor wte] [--partitions N]
       bench/sparsity_report.py LABEL=DIR[:TENSOR] ... --plot OUT.png [--markdown]


For one tensor (default the token embedding "wte") over every step that all ranks recorded, it
prints the characteristics that decide which sparse allreduce wins (ZEN paper, Sec. 2 and 3):

  density d_G      non-zero rows / rows, per rank (mean over steps)
  overlap          |I_a & I_b| / min(|I_a|, |I_b|) for every pair of ranks (mean over steps)
  gamma^k          densification ratio d^k / d: density of the sum of the first k ranks over the
                   mean single-rank density, k = 1, 2, 4, ..., n (1 <= gamma^k <= k)
  skew s           max over P even contiguous index ranges of the range's density, over d
                   (P = --partitions, default the rank count)

With several LABEL=DIR[:TENSOR] workloads (TENSOR defaults to --tensor), it prints one summary
per workload and, with --plot, draws ZEN's three characteristics side by side (paper Fig. 2-3):
C1 the distribution of pairwise overlaps over all pairs and steps, C2 gamma^k for every
k = 1..n against the bounds 1 and k, C3 the share of rank 0's non-zeros in each of 8 even
ranges. --markdown prints the summaries as one markdown table (docs/reproduction.md).

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
            return rank, world, step, rows, set(idx), width
    return rank, world, step, None, None, None


def analyse(d, tensor, partitions, max_steps, check):
    """Characteristics of one tensor of one trace directory (see the module docstring)."""
    files = glob.glob(os.path.join(d, "rank*-step*.zgrad"))
    by_step = defaultdict(dict)
    for p in files:
        m = re.search(r"rank(\d+)-step(\d+)\.zgrad$", p)
        if m:
            by_step[int(m.group(2))][int(m.group(1))] = p
    if not by_step:
        sys.exit(f"no rank*-step*.zgrad files in {d}")
    nranks = max(len(v) for v in by_step.values())
    steps = sorted(s for s, v in by_step.items() if len(v) == nranks)[:max_steps]
    P = partitions or nranks
    dens = [0.0] * nranks
    overlap = defaultdict(float)
    overlaps_all = []  # every pair at every step: the C1 distribution
    gamma = [0.0] * (nranks + 1)
    skew = 0.0
    skew_p = {8: 0.0, 128: 0.0}  # the paper's two partition counts
    share8 = [0.0] * 8  # C3: share of rank 0's non-zeros per even range
    rows_seen = None
    for s in steps:
        sets = []
        for r in range(nranks):
            _, _, _, rows, idx, width = read_trace(by_step[s][r], tensor, check)
            if rows is None:
                sys.exit(f"{by_step[s][r]}: no tensor {tensor}")
            rows_seen = rows
            sets.append(idx)
        d_r = [len(x) / rows_seen for x in sets]
        for r in range(nranks):
            dens[r] += d_r[r]
        for i in range(nranks):
            for j in range(i + 1, nranks):
                m = min(len(sets[i]), len(sets[j]))
                ov = len(sets[i] & sets[j]) / m if m else 0.0
                overlap[(i, j)] += ov
                overlaps_all.append(ov)
        union = set()
        for k in range(1, nranks + 1):
            union |= sets[k - 1]
            dk = sum(d_r[:k]) / k  # mean single-rank density of the k ranks summed
            gamma[k] += (len(union) / rows_seen) / dk if dk else 0.0
        # skew of one rank's tensor (rank 0) over P even ranges, as in the paper's Def. 5
        for parts in {P, 8, 128}:
            span = -(-rows_seen // parts)
            counts = [0] * parts
            for i in sets[0]:
                counts[i // span] += 1
            if d_r[0] > 0:
                sk = max(c / span for c in counts) / d_r[0]
                if parts == P:
                    skew += sk
                if parts in skew_p:
                    skew_p[parts] += sk
                if parts == 8:
                    for q in range(8):
                        share8[q] += counts[q] / len(sets[0])
    n = len(steps)
    return {
        "dir": d, "tensor": tensor, "rows": rows_seen, "width": width, "ranks": nranks, "steps": n,
        "density": [x / n for x in dens],
        "overlap_pairs": [v / n for v in overlap.values()], "overlaps_all": overlaps_all,
        "gamma": [0.0] + [gamma[k] / n for k in range(1, nranks + 1)],
        "partitions": P, "skew": skew / n, "skew8": skew_p[8] / n, "skew128": skew_p[128] / n,
        "share8": [x / n for x in share8],
    }


def print_summary(r):
    nranks, n = r["ranks"], r["steps"]
    print(f"tensor {r['tensor']}: {r['rows']} rows, {nranks} ranks, {n} steps ({r['dir']})")
    print("density per rank:  " + "  ".join(f"r{i} {x:.4f}" for i, x in enumerate(r["density"])))
    ov = r["overlap_pairs"]
    if ov:
        print(f"pairwise overlap:  mean {sum(ov) / len(ov):.3f}  min {min(ov):.3f}  "
              f"max {max(ov):.3f}")
    ks = [k for k in (2 ** i for i in range(0, 20)) if k <= nranks]
    print("gamma^k:           " + "  ".join(f"k={k} {r['gamma'][k]:.2f}" for k in ks))
    print(f"skew (P={r['partitions']}):       {r['skew']:.2f}   (P=8: {r['skew8']:.2f}, "
          f"P=128: {r['skew128']:.2f}; rank 0's non-zeros in the first of 8 ranges: "
          f"{100 * r['share8'][0]:.0f}%)")


def markdown(results):
    print("| workload | tensor | rows x width | ranks x steps | density d_G (mean) | overlap "
          "mean [min, max] | gamma^2 | gamma^n (n) | d^n | skew P=8 | skew P=128 | "
          "first of 8 ranges |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label, r in results:
        n = r["ranks"]
        d = sum(r["density"]) / n
        ov = r["overlap_pairs"] or [0.0]
        print(f"| {label} | `{r['tensor']}` | {r['rows']} x {r.get('width', '?')} | {n} x "
              f"{r['steps']} | {100 * d:.3f}% | {sum(ov) / len(ov):.3f} [{min(ov):.3f}, "
              f"{max(ov):.3f}] | {r['gamma'][2]:.2f} | {r['gamma'][n]:.2f} ({n}) | "
              f"{100 * d * r['gamma'][n]:.2f}% | {r['skew8']:.2f} | {r['skew128']:.1f} | "
              f"{100 * r['share8'][0]:.0f}% |")


def plot(results, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    nmax = 1
    for label, r in results:
        ax[0].hist(r["overlaps_all"], bins=30, range=(0, 1), density=True, histtype="step",
                   linewidth=1.5, label=label)
        ks = list(range(1, r["ranks"] + 1))
        ax[1].plot(ks, r["gamma"][1:], marker="o", markersize=3, label=label)
        nmax = max(nmax, r["ranks"])
    w = 0.8 / len(results)
    for i, (label, r) in enumerate(results):
        ax[2].bar([q + i * w for q in range(8)], [100 * x for x in r["share8"]], width=w,
                  label=label)
    ax[1].plot([1, nmax], [1, nmax], "k--", linewidth=0.8, label="k (disjoint)")
    ax[1].axhline(1, color="k", linestyle=":", linewidth=0.8)
    ax[0].set(title="C1: pairwise overlap |I_a & I_b| / min", xlabel="overlap ratio",
              ylabel="density of pairs")
    ax[1].set(title="C2: densification gamma^k", xlabel="k ranks summed",
              ylabel="density of the sum / d_G")
    ax[2].set(title="C3: rank 0's non-zeros per 1/8 of the rows", xlabel="even range",
              ylabel="% of non-zeros")
    for a in ax:
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", help="DIR, or LABEL=DIR[:TENSOR] for several workloads")
    ap.add_argument("--tensor", default="wte")
    ap.add_argument("--partitions", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=200, help="use at most this many steps")
    ap.add_argument("--no-checksum", action="store_true", help="skip the (slow) FNV check")
    ap.add_argument("--plot", help="draw C1-C3 for all workloads into this PNG")
    ap.add_argument("--markdown", action="store_true", help="also print a markdown table")
    a = ap.parse_args()
    results = []
    for spec in a.dirs:
        label, _, rest = spec.rpartition("=")
        d, _, tensor = rest.partition(":")
        r = analyse(d, tensor or a.tensor, a.partitions, a.max_steps, not a.no_checksum)
        print_summary(r)
        results.append((label or d, r))
    if a.markdown:
        markdown(results)
    if a.plot:
        plot(results, a.plot)


if __name__ == "__main__":
    main()
