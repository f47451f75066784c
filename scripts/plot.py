#!/usr/bin/env python3
"""Plot `zen train --metrics FILE` output: loss curves and per-step time split.

usage: scripts/plot.py METRICS.jsonl [MORE.jsonl ...] [-o OUT.png] [--title TEXT]

Each input is one JSON object per line (step, loss, val_loss when evaluated, ms_compute,
ms_comm, ms_wait, bytes_synced, bytes_dense, ...). Several inputs are overlaid (e.g. one per
sync scheme), labelled by file name. Needs matplotlib (Debian python3-matplotlib).
"""
import argparse
import json
import os
import sys


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
    if not rows:
        sys.exit(f"{path}: no metrics")
    return rows


def smooth(values, window):
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", nargs="+")
    ap.add_argument("-o", "--output", default="train.png")
    ap.add_argument("--title", default="zen train")
    ap.add_argument("--smooth", type=int, default=10, help="moving-average window of the loss")
    args = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("matplotlib is missing: apt-get install python3-matplotlib")

    runs = [(os.path.basename(p), load(p)) for p in args.metrics]
    fig, (ax_loss, ax_time, ax_bytes) = plt.subplots(1, 3, figsize=(16, 4.5))
    for name, rows in runs:
        steps = [r["step"] for r in rows]
        loss = [r["loss"] for r in rows]
        (line,) = ax_loss.plot(steps, smooth(loss, args.smooth), label=f"{name} train")
        val = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r]
        if val:
            ax_loss.plot(*zip(*val), "o--", color=line.get_color(), label=f"{name} val")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("cross-entropy (nats/token)")
    ax_loss.set_title("loss")
    ax_loss.legend(fontsize=8)
    ax_loss.grid(alpha=0.3)

    # time split of the first run as stacked areas, the others' total step time as lines
    name, rows = runs[0]
    steps = [r["step"] for r in rows]
    parts = [smooth([r.get(k, 0.0) for r in rows], args.smooth)
             for k in ("ms_compute", "ms_comm", "ms_wait")]
    ax_time.stackplot(steps, *parts, labels=[f"{name} compute", "comm", "wait"], alpha=0.7)
    for other, orows in runs[1:]:
        ax_time.plot([r["step"] for r in orows],
                     smooth([r["ms_step"] for r in orows], args.smooth), label=f"{other} total")
    ax_time.set_xlabel("step")
    ax_time.set_ylabel("ms per step")
    ax_time.set_title("time per step")
    ax_time.legend(fontsize=8)
    ax_time.grid(alpha=0.3)

    for name, rows in runs:
        steps = [r["step"] for r in rows]
        ax_bytes.plot(steps, [r.get("bytes_synced", 0) / 1e6 for r in rows], label=f"{name} sent")
    name, rows = runs[0]
    ax_bytes.plot([r["step"] for r in rows], [r.get("bytes_dense", 0) / 1e6 for r in rows], "k:",
                  label=f"{name} dense equivalent")
    ax_bytes.set_xlabel("step")
    ax_bytes.set_ylabel("MB per rank per step")
    ax_bytes.set_title("gradient sync volume")
    ax_bytes.legend(fontsize=8)
    ax_bytes.grid(alpha=0.3)

    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
