#!/usr/bin/python3
"""Draw `zen simulate --json` output: predicted time per scheme vs ranks, one panel per link
speed. Usage: plot_simulate.py RESULTS.jsonl OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCHEMES = ["balanced", "hierarchical", "allgather", "block", "ps", "dense"]


def main():
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    speeds = sorted({r["gbps"] for r in rows})
    fig, axes = plt.subplots(1, len(speeds), figsize=(6 * len(speeds), 4.5), squeeze=False)
    for ax, gbps in zip(axes[0], speeds):
        sel = sorted((r for r in rows if r["gbps"] == gbps), key=lambda r: r["ranks"])
        for s in SCHEMES:
            key = s + "_ms"
            if sel and key in sel[0]:
                ax.plot([r["ranks"] for r in sel], [r[key] for r in sel], marker="o", label=s)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel("predicted ms per allreduce")
        ax.set_title(f"{gbps:g} Gbit/s")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
