#!/usr/bin/python3
"""Tables (markdown) and PNGs of the reproduction experiments (docs/reproduction.md).

usage: bench/plot_reproduction.py comm OUT_DIR [--png OUT.png]    (bench/repro_comm.sh output)
       bench/plot_reproduction.py sim OUT_DIR [--png OUT.png]
       bench/plot_reproduction.py train RESULTS.jsonl [--png OUT.png] (bench/repro_train.sh)
       bench/plot_reproduction.py select RESULTS.jsonl                (bench/repro_flextp.sh)
       bench/plot_reproduction.py tp LABEL=OUT_DIR ... [--png OUT.png]  (bench/hetero_tp.sh runs)

comm    per workload and transport: median (min-max over reps) of each scheme's time per
        replayed trace, its speedup over dense and over the best non-ZEN sparse scheme
sim     per workload and link speed: predicted time of each scheme over the rank counts,
        normalised to dense (the paper's Fig. 8/15 axis), and the best scheme at each point
train   throughput and time to a validation loss per sync scheme, against dense
select  validation loss of each selection policy over seeds: mean, stdev, min-max
tp      straggler sweeps side by side (e.g. sleep=DIR spin=DIR): ms/step per case and mode, its
        ratio to the case's homogeneous run, validation loss, keep fraction, migrated columns
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

SCHEMES = ["dense", "allgather", "hierarchical", "ps", "block", "balanced"]
PAPER = {"dense": "AllReduce", "allgather": "AGsparse", "hierarchical": "SparCML (HC)",
         "ps": "Sparse PS", "block": "OmniReduce", "balanced": "ZEN (BP)"}


def die(msg):
    """Stop with one line on stderr and exit 1: an empty or partial result (the runs behind it
    failed) is a message, not a ZeroDivisionError."""
    sys.exit(f"plot_reproduction.py: {msg}")


def load(path):
    try:
        with open(path) as f:
            rows = [json.loads(x) for x in f if x.startswith("{")]
    except FileNotFoundError:
        die(f"{path} does not exist: run the script that writes it first (docs/reproduction.md)")
    except json.JSONDecodeError as e:
        die(f"{path}: a line is not JSON ({e}): the run that wrote it was cut short?")
    if not rows:
        die(f"{path}: no rows (the runs that write it failed? see their log)")
    return rows


def comm(a):
    rows = load(os.path.join(a.path, "measured.jsonl"))
    t = defaultdict(list)
    for r in rows:
        if r["scheme"] in SCHEMES and r.get("verified"):
            if r.get("time_us_p50", 0) > 0:
                t[(r["workload"], r["mode"], r["scheme"])].append(r["time_us_p50"] / 1000)
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    print("| workload | transport | " + " | ".join(f"{s} ({PAPER[s]})" for s in SCHEMES) +
          " | ZEN vs dense | ZEN vs best other sparse | order, fastest first |")
    print("|---|---|" + "---|" * len(SCHEMES) + "---|---|---|")
    speed = {}
    for w in workloads:
        for m in modes:
            med = {s: statistics.median(t[(w, m, s)]) for s in SCHEMES if t[(w, m, s)]}
            if "balanced" not in med or "dense" not in med:
                continue
            cells = []
            for s in SCHEMES:
                v = t[(w, m, s)]
                if len(v) > 1:
                    cells.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
                else:
                    cells.append(f"{v[0]:.1f}" if v else "")
            others = {s: v for s, v in med.items() if s not in ("balanced", "dense")}
            best_other = min(others, key=others.get) if others else "none"
            other = others.get(best_other, float("nan"))
            speed[(w, m)] = {s: med["dense"] / v for s, v in med.items()}
            print(f"| {w} | {m} | " + " | ".join(cells) +
                  f" | {med['dense'] / med['balanced']:.2f}x | "
                  f"{other / med['balanced']:.2f}x (vs {best_other}) | "
                  f"{' < '.join(sorted(med, key=med.get))} |")
    if not speed:
        die(f"{a.path}/measured.jsonl: {len(rows)} rows but no workload with verified dense and "
            "balanced times (the runs failed? see repro_comm.sh's output)")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        # one panel per workload, one group of bars per transport/cluster setting in it
        cols = min(2, len(workloads))
        rows_n = (len(workloads) + cols - 1) // cols
        per = max(len([k for k in speed if k[0] == wl]) for wl in workloads)
        fig, axes = plt.subplots(rows_n, cols, figsize=(cols * max(4, 1.1 * per + 1),
                                                        3.2 * rows_n + 0.6), squeeze=False)
        w = 0.8 / len(SCHEMES)
        for ax, wl in zip(axes.flat, workloads):
            keys = [k for k in speed if k[0] == wl]
            for i, s in enumerate(SCHEMES):
                ax.bar([k + i * w for k in range(len(keys))], [speed[k].get(s, 0) for k in keys],
                       width=w, label=f"{s} ({PAPER[s]})")
            ax.axhline(1, color="k", linewidth=0.8)
            ax.set_xticks([k + 0.4 - w / 2 for k in range(len(keys))])
            ax.set_xticklabels([k[1].replace(" ", "\n") for k in keys], fontsize=7)
            ax.set_title(wl, fontsize=9)
            ax.grid(axis="y", alpha=0.3)
            if a.log:
                ax.set_yscale("log")
        for ax in axes[:, 0]:
            ax.set_ylabel("speedup over dense (median)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(SCHEMES), fontsize=7)
        fig.suptitle(a.title or "Measured sparse allreduce on real gradient traces, 8 ranks, "
                     "shared 2-core VM", fontsize=10)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        fig.savefig(a.png, dpi=110)
        print(f"wrote {a.png}")


def sim(a):
    rows = load(os.path.join(a.path, "sim.jsonl"))
    workloads = list(dict.fromkeys(r["workload"] for r in rows))
    gbps = sorted({r["gbps"] for r in rows})
    print("| workload | Gbit/s | ranks | density | gamma^n | " +
          " | ".join(f"{s}/dense" for s in SCHEMES[1:]) + " | best | ZEN vs best other |")
    print("|---|---|---|---|---|" + "---|" * (len(SCHEMES) - 1) + "---|---|")
    for r in rows:
        d = r["dense_ms"]
        if not d or not r.get("balanced_ms"):
            die(f"{a.path}/sim.jsonl: a row with no dense or balanced time: {r}")
        other = min(r[f"{s}_ms"] for s in SCHEMES if s != "balanced")
        print(f"| {r['workload']} | {r['gbps']:g} | {r['ranks']} | {100 * r['density']:.2f}% | "
              f"{r['gamma_n']:.1f} | " +
              " | ".join(f"{r[f'{s}_ms'] / d:.2f}" for s in SCHEMES[1:]) +
              f" | {r['best']} | {other / r['balanced_ms']:.2f}x |")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(len(gbps), len(workloads),
                                 figsize=(3.6 * len(workloads), 3.2 * len(gbps)), squeeze=False)
        for i, g in enumerate(gbps):
            for j, w in enumerate(workloads):
                ax = axes[i][j]
                pts = sorted((r for r in rows if r["workload"] == w and r["gbps"] == g),
                             key=lambda r: r["ranks"])
                ns = [r["ranks"] for r in pts]
                for s in SCHEMES:
                    ax.plot(ns, [r[f"{s}_ms"] / r["dense_ms"] for r in pts], marker="o",
                            markersize=3, label=PAPER[s])
                ax.set_xscale("log", base=2)
                ax.set_title(f"{w}, {g:g} Gbit/s", fontsize=9)
                ax.set_xlabel("ranks")
                ax.set_ylabel("time / AllReduce")
                ax.grid(alpha=0.3)
                ax.set_ylim(0, 2)
        axes[0][0].legend(fontsize=7)
        fig.suptitle("zen simulate --trace (cost model, network only): predicted time "
                     "normalised to dense", fontsize=10)
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"wrote {a.png}")


def train(a):
    rows = load(a.path)
    print("| sync | runs | tokens/s median (min-max) | vs dense | ms/step median (min-max) | "
          "sync ms/step median | sync share of the step | final val loss | "
          "time to loss target, s: median (min-max) | load (1-min avg) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    by = defaultdict(list)
    for r in rows:
        by[r["sync"]].append(r)
    dense = statistics.median(x["tok_s"] for x in by["dense"]) if by["dense"] else None
    if not dense:
        die(f"{a.path}: no dense run with tokens/s to compare against (the dense runs failed?)")

    def mm(v, f):
        return f"{statistics.median(v):{f}} ({min(v):{f}}-{max(v):{f}})" if v else "n/a"

    for s, rs in by.items():
        tk = [x["tok_s"] for x in rs]
        ttl = [x["time_to_target_s"] for x in rs if x.get("time_to_target_s") is not None]
        share = statistics.median(x["comm_ms"] / x["ms_step"] for x in rs)
        loads = [x["load"] for x in rs if "load" in x]
        print(f"| {s} | {len(rs)} | {mm(tk, '.0f')} | {statistics.median(tk) / dense:.2f}x | "
              f"{mm([x['ms_step'] for x in rs], '.0f')} | "
              f"{statistics.median(x['comm_ms'] for x in rs):.1f} | {100 * share:.0f}% | "
              f"{statistics.median(x['val_loss'] for x in rs):.3f} | "
              f"{mm(ttl, '.1f')}{'' if len(ttl) == len(rs) else f', reached in {len(ttl)}/{len(rs)}'} | "
              f"{f'{min(loads):.1f}-{max(loads):.1f}' if loads else 'n/a'} |")
    if rows and "target_loss" in rows[0]:
        print(f"\nloss target: {rows[0]['target_loss']} (dense runs' median 5-step mean)")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        names = list(by)
        comm_ms = [statistics.median(x["comm_ms"] for x in by[s]) for s in names]
        step_ms = [statistics.median(x["ms_step"] for x in by[s]) for s in names]
        ax[0].bar(names, comm_ms, label="gradient sync (ms_comm)")
        ax[0].bar(names, [a - b for a, b in zip(step_ms, comm_ms)], bottom=comm_ms,
                  label="rest of the step", alpha=0.4)
        ax[0].set_ylabel("ms per step (median)")
        ax[0].set_title(a.title or "step time per sync scheme (shared, loaded host)", fontsize=9)
        ax[0].legend(fontsize=8)
        ax[0].tick_params(axis="x", labelrotation=30)
        for s in names:
            r = sorted(by[s], key=lambda x: x["tok_s"])[(len(by[s]) - 1) // 2]
            ax[1].plot(r["curve_t"], r["curve_loss"], label=f"{s} (round {r['rep']})")
        ax[1].set_xlabel("wall time (s)")
        ax[1].set_ylabel("training loss")
        ax[1].set_title("loss over time (the run of median tokens/s of each)", fontsize=9)
        ax[1].legend(fontsize=8)
        for x in ax:
            x.grid(alpha=0.3)
            x.tick_params(axis="x", labelsize=8)
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"wrote {a.png}")


def select(a):
    rows = load(a.path)
    by = defaultdict(list)
    for r in rows:
        by[r["policy"]].append(r)
    # the seed moves the loss more than the policy does: compare each run with the homogeneous
    # run of the same seed (paired difference)
    hom = {x["seed"]: x["val_loss"] for x in by.get("homogeneous", [])}
    print("| policy | seeds | val loss mean | stdev | min-max | minus homogeneous, same seed: "
          "mean (stdev) [min, max] | ms/step median |")
    print("|---|---|---|---|---|---|---|")
    for p, rs in by.items():
        v = [x["val_loss"] for x in rs]
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        dv = [x["val_loss"] - hom[x["seed"]] for x in rs if x["seed"] in hom]
        dsd = statistics.stdev(dv) if len(dv) > 1 else 0.0
        dcell = f"{statistics.mean(dv):+.4f} ({dsd:.4f}) [{min(dv):+.4f}, {max(dv):+.4f}]" \
            if dv else ""
        print(f"| {p} | {len(v)} | {statistics.mean(v):.4f} | {sd:.4f} | {min(v):.4f}-"
              f"{max(v):.4f} | {dcell} | {statistics.median(x['ms_step'] for x in rs):.1f} |")


def tp(a):
    runs = []
    for spec in [a.path] + a.more:
        label, _, d = spec.rpartition("=")
        for r in load(os.path.join(d, "results.jsonl")):
            runs.append((label or d, r))
    modes = ["homogeneous", "none", "resize", "migrate", "semi"]
    print("| emulation | tp | case | " + " | ".join(modes) + " |")
    print("|---|---|---|" + "---|" * len(modes))
    keys = list(dict.fromkeys((lab, r["tp"], r["case"]) for lab, r in runs))
    for k in keys:
        cell = {r["mode"]: r for lab, r in runs if (lab, r["tp"], r["case"]) == k}
        out = []
        for m in modes:
            r = cell.get(m)
            if not r:
                out.append("")
            elif m == "homogeneous":
                out.append(f"{r['ms_step']:.0f} ms, val {r['val_loss']:.4f}")
            else:
                out.append(f"{r['ms_step']:.0f} ({r.get('ratio', 0):.2f}x), val "
                           f"{r['val_loss']:.4f}, keep {r['keep_fraction']:.2f}, "
                           f"mig {r['migrated_cols']}")
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(out) + " |")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(1, 2, figsize=(12, 4))
        w = 0.8 / (len(modes) - 1)
        for i, m in enumerate(modes[1:]):
            ys = [next((r.get("ratio", 0) for lab, r in runs
                        if (lab, r["tp"], r["case"]) == k and r["mode"] == m), 0) for k in keys]
            vs = [next((r["val_loss"] for lab, r in runs
                        if (lab, r["tp"], r["case"]) == k and r["mode"] == m), 0) for k in keys]
            ax[0].bar([j + i * w for j in range(len(keys))], ys, width=w, label=m)
            ax[1].bar([j + i * w for j in range(len(keys))], vs, width=w, label=m)
        hom = [next((r["val_loss"] for lab, r in runs
                     if (lab, r["tp"], r["case"]) == k and r["mode"] == "homogeneous"), 0)
               for k in keys]
        for j, h in enumerate(hom):
            ax[1].hlines(h, j - w / 2, j + 3.5 * w, color="k", linewidth=1)
        ax[0].axhline(1, color="k", linewidth=1)
        for x in ax:
            x.set_xticks([j + 1.5 * w for j in range(len(keys))])
            x.set_xticklabels([f"{k[0]}\ntp {k[1]} {k[2]}" for k in keys], fontsize=8)
            x.grid(axis="y", alpha=0.3)
            x.legend(fontsize=8)
        ax[0].set_ylabel("ms/step / homogeneous (median)")
        ax[0].set_title("step time under the straggler (1 = no straggler)")
        lo = min(v for v in hom if v) - 0.02
        ax[1].set_ylim(lo, lo + 0.12)
        ax[1].set_ylabel("validation loss (black: homogeneous)")
        ax[1].set_title("accuracy cost")
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"wrote {a.png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["comm", "sim", "train", "select", "tp"])
    ap.add_argument("path")
    ap.add_argument("more", nargs="*", help="tp: further LABEL=OUT_DIR")
    ap.add_argument("--png")
    ap.add_argument("--title", help="comm, train: the plot's title")
    ap.add_argument("--log", action="store_true", help="comm: logarithmic speedup axis")
    a = ap.parse_args()
    {"comm": comm, "sim": sim, "train": train, "select": select, "tp": tp}[a.what](a)


if __name__ == "__main__":
    main()
