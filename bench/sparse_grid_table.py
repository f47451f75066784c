#!/usr/bin/python3
"""Summarise `zen bench sparse --json` lines (bench/sparse_grid.sh) into a markdown table.

One row per cell (ranks, density, overlap or trace): every scheme's p50 in ms, AUTO's choice,
AUTO / fastest, the same paired by iteration (`auto_over_paired` of the fastest scheme: AUTO's
call over that scheme's call in the same iteration, median over the iterations, then over the
rounds; the two calls saw the same load, so this is the steadier of the two on a noisy host), and
the cost model's error median over the cell's schemes, |model - measured| /
measured (model = the prediction AUTO logged, stats.predicted_s: with its online calibration of
latency and core share, before any per-scheme correction), and AUTO's whole run (warm-up calls
included, `run_us`) over the whole run of the scheme with the fastest p50: what AUTO's warm-up
tries and rechecks cost over the run. The footer gives the share of cells with AUTO within 10% of
the fastest, the worst AUTO / fastest, the median model error over every (cell, scheme), how good
the decision alone is (the chosen scheme's own p50 / the fastest), and the median and worst
whole-run ratio, and model / measured per scheme (median: where the error comes from). Several
files (grid chunks, rounds) are read in order; a cell measured in several rounds counts once,
with each scheme's median p50 (and model, whole run) over the rounds and AUTO's most frequent
choice: the run-to-run spread of a shared host is then a third smaller with 3 rounds.

With `zen bench sparse --twins` (GRID_TWINS=1) every scheme also runs as an independent twin, and
two more columns give the fastest scheme's twin over it, by p50 and paired: what a chooser that
always ran the fastest scheme at no cost would score here, the resolution of the measure itself.
"""
import json
import statistics
import sys

SCHEMES = ["balanced", "hierarchical", "allgather", "block", "ps", "dense"]


def lines(paths):
    for path in paths:
        yield from open(path)


def combine(runs):
    """One scheme's rounds of a cell: the median p50, model and whole run; AUTO's most frequent
    choice."""
    r = dict(runs[-1])
    for field in ("time_us_p50", "run_us", "model_us"):
        vals = [x[field] for x in runs if x.get(field)]
        r[field] = statistics.median(vals) if vals else None
    chosen = [x["chosen"] for x in runs]
    r["chosen"] = max(chosen, key=chosen.count)
    twin = [x["twin_over_paired"] for x in runs if x.get("twin_over_paired")]
    r["twin_over_paired"] = statistics.median(twin) if twin else None
    paired = [x["auto_over_paired"] for x in runs if x.get("auto_over_paired")]
    r["paired"] = {s: statistics.median(p[s] for p in paired if s in p)
                   for s in SCHEMES if any(s in p for p in paired)}
    return r


def cells(paths):
    out, order = {}, []
    for line in lines(paths):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        key = (r["transport"], r["ranks"], r["overlap"], round(r["density"], 6), r["rows"], r["width"])
        if key not in out:
            out[key] = {}
            order.append(key)
        out[key].setdefault(r["scheme"] + ("~twin" if r.get("twin") else ""), []).append(r)
    return [(k, {s: combine(v) for s, v in out[k].items()}) for k in order]


def main(paths):
    errors, ratios, runs, picks, spent, paired = [], [], [], [], [], []
    twins, twins_paired = [], []  # the control: the fastest scheme's twin over it
    has_twins = any(k.endswith("~twin") for _, c in cells(paths) for k in c)
    bias = {s: [] for s in SCHEMES}  # model / measured per scheme: where the error comes from
    print("| transport | ranks | density | overlap | " + " | ".join(SCHEMES) +
          " | AUTO chose | AUTO ms | AUTO / fastest | paired | model err (median) |"
          " AUTO run / fastest run |" + (" twin / fastest | twin paired |" if has_twins else ""))
    print("|" + "---|" * (len(SCHEMES) + 10 + (2 if has_twins else 0)))
    for key, c in cells(paths):
        transport, n, overlap, density, _, _ = key
        times = {s: c[s]["time_us_p50"] / 1e3 for s in SCHEMES if s in c}
        if not times or "auto" not in c:
            continue
        fastest = min(times.values())
        auto = c["auto"]["time_us_p50"] / 1e3
        ratio = auto / fastest
        ratios.append(ratio)
        if c["auto"]["chosen"] in times:  # the decision alone: its scheme's own p50
            picks.append(times[c["auto"]["chosen"]] / fastest)
        errs = []
        for s in SCHEMES:
            model = c[s].get("model_us") if s in c else None
            if model and times.get(s, 0) > 0:
                errs.append(abs(model / 1e3 - times[s]) / times[s])
                bias[s].append(model / 1e3 / times[s])
        errors.extend(errs)
        med = statistics.median(errs) if errs else float("nan")
        best = min(times, key=times.get)
        pair = c["auto"].get("paired", {}).get(best)
        if pair:
            paired.append(pair)
        run = (c["auto"].get("run_us", 0) / c[best]["run_us"]) if c[best].get("run_us") else None
        if run:
            runs.append(run)
            # the whole run's extra over the fastest's, in calls of the fastest scheme: what the
            # warm-up, profile and rechecks cost once, whatever the run's length
            spent.append((c["auto"]["run_us"] - c[best]["run_us"]) / 1e3 / fastest)
        twin_cols = ""
        if has_twins:
            tw = c.get(best + "~twin")
            t_ratio = tw["time_us_p50"] / 1e3 / fastest if tw else None
            t_pair = tw.get("twin_over_paired") if tw else None
            if t_ratio:
                twins.append(t_ratio)
            if t_pair:
                twins_paired.append(t_pair)
            twin_cols = " %s | %s |" % ("%.2f" % t_ratio if t_ratio else "-",
                                        "%.2f" % t_pair if t_pair else "-")
        cols = " | ".join(("**%.2f**" if times.get(s) == fastest else "%.2f") % times[s]
                          if s in times else "-" for s in SCHEMES)
        print("| %s | %d | %.4g | %s | %s | %s | %.2f | %.2f | %s | %.0f%% | %s |%s" %
              (transport, n, density, overlap, cols, c["auto"]["chosen"], auto, ratio,
               "%.2f" % pair if pair else "-", 100 * med, "%.2f" % run if run else "-",
               twin_cols))
    if ratios:
        within = sum(1 for r in ratios if r <= 1.10) / len(ratios)
        print()
        print("cells %d: AUTO within 10%% of the fastest in %.0f%%, worst AUTO / fastest %.2f; "
              "model error median %.0f%% over %d (cell, scheme) pairs" %
              (len(ratios), 100 * within, max(ratios),
               100 * statistics.median(errors) if errors else float("nan"), len(errors)))
    if paired:
        print("paired (median over iterations of AUTO's call / the fastest scheme's call in the "
              "same iteration): within 10%% in %.0f%% of %d cells, worst %.2f" %
              (100 * sum(1 for r in paired if r <= 1.10) / len(paired), len(paired), max(paired)))
    if any(bias.values()):
        print("model / measured, median per scheme: " +
              ", ".join("%s %.2f" % (s, statistics.median(b)) for s, b in bias.items() if b))
    if picks:
        print("AUTO's choice run on its own (the decision, without AUTO's run-to-run noise): "
              "within 10%% of the fastest in %.0f%%, worst %.2f" %
              (100 * sum(1 for r in picks if r <= 1.10) / len(picks), max(picks)))
    if twins:
        print("control, the fastest scheme's twin (a chooser that always ran it, at no cost): "
              "within 10%% of it by p50 in %.0f%% of %d cells, worst %.2f; paired within 10%% in "
              "%.0f%%, worst %.2f" %
              (100 * sum(1 for r in twins if r <= 1.10) / len(twins), len(twins), max(twins),
               100 * sum(1 for r in twins_paired if r <= 1.10) / max(len(twins_paired), 1),
               max(twins_paired) if twins_paired else float("nan")))
    if runs:
        print("whole run (warm-up included): AUTO / fastest scheme median %.2f, worst %.2f; "
              "AUTO's extra = %.1f (median), %.1f (worst) calls of the fastest scheme" %
              (statistics.median(runs), max(runs), statistics.median(spent), max(spent)))


if __name__ == "__main__":
    main(sys.argv[1:] or ["/tmp/zen-sparse-grid.jsonl"])
