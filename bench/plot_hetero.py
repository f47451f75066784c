#!/usr/bin/python3
"""Tables and PNG plots of a bench/hetero_tp.sh sweep (docs/hetero-tp.md, section 10).

    /usr/bin/python3 bench/plot_hetero.py OUT_DIR [IMG_DIR] [TIMELINE_CASES]

OUT_DIR is the sweep's $OUT (results.jsonl, runs/). Prints markdown tables (ms/step and its
ratio to the case's own homogeneous run, validation loss and its change, the balancing state
at the last step) and the target checks, and writes into IMG_DIR (default OUT_DIR):

  hetero_tpN_ms_step.png   median ms/step per case and mode (grouped bars); the case's
                           homogeneous run is the black line over its group
  hetero_tpN_val_loss.png  validation loss after the fixed step count per case and mode,
                           homogeneous as the line, change in % on every bar
  hetero_tpN_timeline_C.png  for each case C of TIMELINE_CASES (default f4,rot4): ms/step,
                           keep_fraction (1 - largest prune in the group) and migrated_cols
                           (all layers and ranks) over the steps, one line per mode

Needs matplotlib (Debian python3-matplotlib); the tables alone need only the standard library.
"""
import json
import os
import sys

MODES = ["none", "resize", "migrate", "semi"]
COLORS = {"none": "#9e9e9e", "resize": "#1f77b4", "migrate": "#2ca02c", "semi": "#d62728",
          "homogeneous": "#000000"}
CASE_LABEL = {"f2": "2x", "f4": "4x", "f8": "8x", "rot4": "4x rotating", "profile": "profile"}


def load(out):
    rows = [json.loads(l) for l in open(os.path.join(out, "results.jsonl")) if l.strip()]
    if not rows:
        sys.exit("plot_hetero.py: no results in %s" % out)
    cases = []
    for r in rows:
        if r["case"] not in cases:
            cases.append(r["case"])
    by = {(r["case"], r["mode"]): r for r in rows}
    return rows, cases, by


def label(case, by):
    r = by.get((case, "none"))
    base = CASE_LABEL.get(case, case)
    if case.startswith("rot") and r:
        base += " /%d" % r["rotate"]
    if case == "profile" and r:
        # rank r of tp gets F[r*k/tp] (zen_cli_tp_parse_slow in tools/tp_emulation.c): show what this tp ran
        f = r["slow"].split(":", 1)[1].split(",")
        base += " " + ",".join(f[i * len(f) // r["tp"]] for i in range(r["tp"]))
    return base


def tables(rows, cases, by):
    tp = rows[0]["tp"]
    print("#### tp %d: ms/step (median after step %d) and ratio to the case's homogeneous run\n"
          % (tp, rows[0]["warm"]))
    print("| case | homogeneous | " + " | ".join(MODES) + " | load avg |")
    print("|---|---:|" + "---:|" * len(MODES) + "---:|")
    for c in cases:
        h = by.get((c, "homogeneous"))
        cells = []
        loads = [by[(c, m)]["load1"] for m in ["homogeneous"] + MODES if (c, m) in by]
        for m in MODES:
            r = by.get((c, m))
            cells.append("%.1f (%.2fx)" % (r["ms_step"], r["ratio"]) if r else "-")
        print("| %s | %s | %s | %.1f-%.1f |" % (label(c, by), "%.1f" % h["ms_step"] if h else "-",
                                                 " | ".join(cells), min(loads), max(loads)))
    print("\n#### tp %d: validation loss after %d steps (change vs homogeneous)\n"
          % (tp, rows[0]["steps"]))
    print("| case | homogeneous | " + " | ".join(MODES) + " |")
    print("|---|---:|" + "---:|" * len(MODES))
    for c in cases:
        h = by.get((c, "homogeneous"))
        cells = []
        for m in MODES:
            r = by.get((c, m))
            if not r:
                cells.append("-")
            elif h:
                cells.append("%.4f (%+.2f%%)" % (r["val_loss"],
                                                 100 * (r["val_loss"] / h["val_loss"] - 1)))
            else:
                cells.append("%.4f" % r["val_loss"])
        print("| %s | %s | %s |" % (label(c, by), "%.4f" % h["val_loss"] if h else "-",
                                    " | ".join(cells)))
    print("\n#### tp %d: balancing state of tp rank 0 at the last step (metrics line)\n" % tp)
    print("| case | mode | stragglers | keep_fraction (min seen) | migrated_cols (max seen) "
          "| tp_ms_wait median |")
    print("|---|---|---:|---:|---:|---:|")
    for c in cases:
        for m in MODES:
            r = by.get((c, m))
            if r:
                print("| %s | %s | %d | %.2f (%.2f) | %d (%d) | %.1f |" % (
                    label(c, by), m, r["stragglers"], r["keep_fraction"],
                    r["min_keep_fraction_seen"], r["migrated_cols"], r["max_migrated_cols"],
                    r.get("tp_ms_wait", 0)))
    print()


def loss_trace(out, case, mode):
    f = os.path.join(out, "runs", "%s_%s.metrics.jsonl" % (case, mode))
    return [json.loads(l)["loss"] for l in open(f) if l.strip()] if os.path.exists(f) else None


def targets(out, by):
    """The issue's targets for one 4x straggler (case f4): print met / not met."""
    h, s, z, m = (by.get(("f4", k)) for k in ("homogeneous", "semi", "resize", "migrate"))
    if not h:
        return
    print("#### targets (case f4, tp %d)\n" % h["tp"])
    if s:
        print("- semi ms/step within 1.3x of homogeneous: %.2fx -> %s" %
              (s["ratio"], "met" if s["ratio"] <= 1.3 else "NOT met"))
    if z:
        d = 100 * (z["val_loss"] / h["val_loss"] - 1)
        print("- resize val loss within 3%% of homogeneous: %+.2f%% -> %s" %
              (d, "met" if abs(d) <= 3 else "NOT met"))
    if m:
        # migration is exact up to fp reassociation (helpers' partial sums are added in another
        # order), so report bit equality and equality to 1e-4 relative separately
        rel = abs(m["val_loss"] / h["val_loss"] - 1)
        a, b = loss_trace(out, "f4", "homogeneous"), loss_trace(out, "f4", "migrate")
        trace = ""
        if a and b:
            diff = [i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y]
            trace = "; per-step training loss (6 digits) %s, max |diff| %.1e" % (
                "identical" if not diff else "identical up to step %d" % (diff[0] - 1),
                max(abs(x - y) for x, y in zip(a, b)))
        print("- migrate val loss equal to homogeneous: %.6g vs %.6g (%.1e relative%s) -> %s" %
              (m["val_loss"], h["val_loss"], rel, trace,
               "met (equal as printed, 6 digits)" if rel == 0 else
               "met up to fp reassociation (< 1e-4)" if rel < 1e-4 else "NOT met"))
    print()


def grouped(ax, cases, by, key, fmt_bar):
    import numpy as np
    width = 0.8 / len(MODES)
    x = np.arange(len(cases))
    for i, m in enumerate(MODES):
        vals = [by[(c, m)][key] if (c, m) in by else np.nan for c in cases]
        bars = ax.bar(x - 0.4 + width * (i + 0.5), vals, width, label=m, color=COLORS[m])
        for b, c in zip(bars, cases):
            txt = fmt_bar(c, m)
            if txt:
                ax.annotate(txt, (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=6, rotation=90,
                            xytext=(0, 2), textcoords="offset points")
    for j, c in enumerate(cases):
        h = by.get((c, "homogeneous"))
        if h:
            ax.hlines(h[key], j - 0.45, j + 0.45, colors=COLORS["homogeneous"], linewidth=2,
                      label="homogeneous" if j == 0 else None)
    ax.set_xticks(x)
    ax.set_xticklabels([label(c, by) for c in cases])


def plots(out, img, rows, cases, by, timeline_cases):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tp, steps = rows[0]["tp"], rows[0]["steps"]
    os.makedirs(img, exist_ok=True)
    written = []

    fig, ax = plt.subplots(figsize=(8, 4.2))
    grouped(ax, cases, by, "ms_step",
            lambda c, m: "%.2fx" % by[(c, m)]["ratio"] if (c, m) in by else "")
    ax.set_ylabel("ms/step (median, steps %d-%d)" % (rows[0]["warm"] + 1, steps))
    ax.set_title("tp %d: ms/step per straggler case (ratio to the case's homogeneous run)" % tp,
                 fontsize=10)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.12)
    ax.legend(fontsize=8, ncol=5, loc="upper left")
    fig.tight_layout()
    p = os.path.join(img, "hetero_tp%d_ms_step.png" % tp)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    fig, ax = plt.subplots(figsize=(8, 4.2))

    def dval(c, m):
        h, r = by.get((c, "homogeneous")), by.get((c, m))
        return "%+.2f%%" % (100 * (r["val_loss"] / h["val_loss"] - 1)) if h and r else ""
    grouped(ax, cases, by, "val_loss", dval)
    vals = [r["val_loss"] for r in rows]
    lo, hi = min(vals), max(vals)
    pad = max(hi - lo, 0.01)
    ax.set_ylim(lo - pad, hi + 1.2 * pad)
    ax.set_ylabel("validation loss after %d steps" % steps)
    ax.set_title("tp %d: validation loss at equal steps (axis zoomed; change vs homogeneous)"
                 % tp, fontsize=10)
    ax.legend(fontsize=8, ncol=5, loc="upper left")
    fig.tight_layout()
    p = os.path.join(img, "hetero_tp%d_val_loss.png" % tp)
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    for tc in timeline_cases:
        p = timeline(out, img, tp, tc, by, plt)
        if p:
            written.append(p)
    return written


def rolling_median(v, w):
    """Centred running median: one preempted step on the shared host does not hide the trend."""
    h = w // 2
    return [sorted(v[max(0, i - h):i + h + 1])[len(v[max(0, i - h):i + h + 1]) // 2]
            for i in range(len(v))]


def timeline(out, img, tp, timeline_case, by, plt):
    series = {}
    for m in ["homogeneous"] + MODES:
        f = os.path.join(out, "runs", "%s_%s.metrics.jsonl" % (timeline_case, m))
        if os.path.exists(f):
            series[m] = [json.loads(l) for l in open(f) if l.strip()]
    if not series:
        return None
    fig, axs = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
    for m, rs in series.items():
        st = [r["step"] for r in rs]
        axs[0].plot(st, rolling_median([r["ms_step"] for r in rs], 5), label=m, color=COLORS[m],
                    linewidth=1)
        if m in ("resize", "migrate", "semi"):
            ls = "--" if m == "semi" else "-"  # semi often equals resize: keep both visible
            axs[1].plot(st, [r["keep_fraction"] for r in rs], label=m, color=COLORS[m],
                        drawstyle="steps-post", linestyle=ls)
            axs[2].plot(st, [r["migrated_cols"] for r in rs], label=m, color=COLORS[m],
                        drawstyle="steps-post", linestyle=ls)
    axs[0].set_ylabel("ms/step\n(median of 5 steps)")
    axs[0].set_ylim(bottom=0)
    axs[0].legend(fontsize=7, ncol=5)
    axs[1].set_ylabel("keep_fraction\n(1 - largest prune)")
    axs[1].set_ylim(0, 1.05)
    axs[1].legend(fontsize=7)
    axs[2].set_ylabel("migrated_cols\n(all layers, ranks)")
    axs[2].legend(fontsize=7)
    axs[2].set_xlabel("step")
    axs[0].set_title("tp %d, %s: per-step time and balancing state" %
                     (tp, label(timeline_case, by)), fontsize=10)
    fig.tight_layout()
    p = os.path.join(img, "hetero_tp%d_timeline_%s.png" % (tp, timeline_case))
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return p


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    img = sys.argv[2] if len(sys.argv) > 2 else out
    timeline_cases = (sys.argv[3] if len(sys.argv) > 3 else "f4,rot4").split(",")
    rows, cases, by = load(out)
    tables(rows, cases, by)
    targets(out, by)
    for p in plots(out, img, rows, cases, by, timeline_cases):
        print("wrote", p)


if __name__ == "__main__":
    main()
