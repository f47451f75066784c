#!/usr/bin/env python3
"""Score AUTO's tuner replayed on recorded cells (bench/tune_replay.c).

Usage: bench/tune_replay.py REPLAY_BINARY DIR [DIR...] [--warmup N] [--by-cell] [--signal S]

Each DIR holds recorded cells as pairs NAME.jsonl (the `--json` output of `zen bench sparse`,
for every scheme's model_us) and NAME.txt (its `--call-times` stderr). For each cell the tuner
is replayed on the recorded times and scored on the timed iterations (from --warmup, 24 as in
bench/sparse_grid.sh) against the scheme whose calls were fastest there:
  p50     the replay's p50 over the fastest scheme's p50;
  paired  the median over iterations of the replay's time over the fastest scheme's in the same
          iteration;
  calls   the share of timed iterations the replay ran the fastest scheme.
The replay has no noise of its own (it is told the recorded calls' times), so a cell where it
always ran the fastest scheme scores 1: what is left is the policy's own cost, its wrong choices
and its exploration. The summary splits the two: the share of cells whose most-run scheme is
within 10% of the fastest by p50 (the decision), and the share of timed calls that were rechecks
(the exploration). `--by-cell` prints every cell.

`--hindsight A:B` also scores a chooser that is told every scheme's median time over iterations
A..B-1 of the recording and runs the lowest for the whole timed window, with no exploration: how
far calls that early predict the timed ones on this host, a reference for the tuner (which
measures each candidate only 2-3 times, at the start of the run).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

from sparse_grid_table import SCHEMES  # the grid's table, next to this script


def read_cell(base):
    pred = {}
    with open(base + ".jsonl") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("scheme") in SCHEMES and not r.get("twin") and r.get("model_us"):
                pred[r["scheme"]] = r["model_us"]
    times = {}
    with open(base + ".txt") as f:
        for line in f:
            p = line.split()
            if len(p) >= 5 and p[:2] == ["#", "call"] and p[2] in SCHEMES:
                times.setdefault(p[2], {})[int(p[3])] = float(p[4])
    return pred, times


def replay(binary, base, pred, signal):
    args = [binary] + ["%s=%g" % (s, us) for s, us in pred.items()]
    if signal:
        args.append("--signal=" + signal)
    with open(base + ".txt") as f:
        out = subprocess.run(args, stdin=f, capture_output=True, text=True, check=True).stdout
    return [(int(p[0]), p[1], float(p[2]), p[3])
            for p in (line.split() for line in out.splitlines())]


def score(binary, base, warmup, signal=None):
    pred, times = read_cell(base)
    if len(pred) < len(SCHEMES) or any(s not in times for s in SCHEMES):
        return None
    calls = [c for c in replay(binary, base, pred, signal) if c[0] >= warmup]
    if not calls:
        return None
    its = [c[0] for c in calls]
    p50 = {s: statistics.median(times[s][i] for i in its) for s in SCHEMES}
    best = min(p50, key=p50.get)
    ran = max(set(c[1] for c in calls), key=[c[1] for c in calls].count)
    return {
        "p50": statistics.median(c[2] for c in calls) / p50[best],
        "paired": statistics.median(c[2] / times[best][c[0]] for c in calls),
        "calls": sum(c[1] == best for c in calls) / len(calls),
        "best": best,
        "ran": ran,
        "decision": p50[ran] / p50[best],
        "rechecks": sum(c[3] == "recheck" for c in calls) / len(calls),
    }


def hindsight(base, warmup, first, last):
    """A chooser told every scheme's median over iterations first..last-1, scored like score()."""
    _, times = read_cell(base)
    if any(s not in times for s in SCHEMES):
        return None
    its = [i for i in times[SCHEMES[0]] if i >= warmup]
    p50 = {s: statistics.median(times[s][i] for i in its) for s in SCHEMES}
    best = min(p50, key=p50.get)
    pick = min(SCHEMES, key=lambda s: statistics.median(times[s][i] for i in range(first, last)))
    return {"p50": p50[pick] / p50[best],
            "paired": statistics.median(times[pick][i] / times[best][i] for i in its)}


def main():
    ap = argparse.ArgumentParser(description="Score AUTO's tuner replayed on recorded cells.")
    ap.add_argument("binary", help="the tune_replay executable (build/bench/tune_replay)")
    ap.add_argument("dirs", nargs="+", help="directories of NAME.jsonl + NAME.txt cells")
    ap.add_argument("--warmup", type=int, default=24, help="untimed iterations (default 24)")
    ap.add_argument("--by-cell", action="store_true", help="print every cell")
    ap.add_argument("--signal", choices=("max", "median", "mean", "min", "q75", "scaled"),
                    help="tell the tuner this statistic over the ranks' own times of a call "
                    "(`# rank-call` lines) instead of the slowest rank's; scored on the slowest")
    ap.add_argument("--hindsight", metavar="A:B",
                    help="also score a chooser told every scheme's median over iterations A..B-1")
    a = ap.parse_args()
    span = None
    if a.hindsight:
        try:
            span = tuple(int(x) for x in a.hindsight.split(":"))
            if len(span) != 2 or not 0 <= span[0] < span[1]:
                raise ValueError
        except ValueError:
            ap.error("--hindsight wants A:B with 0 <= A < B, e.g. 8:24")
    results = []
    hind = []
    for d in a.dirs:
        for name in sorted(os.listdir(d)):
            if name.endswith(".jsonl") and os.path.exists(os.path.join(d, name[:-6] + ".txt")):
                r = score(a.binary, os.path.join(d, name[:-6]), a.warmup, a.signal)
                if r:
                    results.append((name[:-6], r))
                    h = span and hindsight(os.path.join(d, name[:-6]), a.warmup, *span)
                    if h:
                        hind.append(h)
                    if a.by_cell:
                        print("%-40s best %-12s ran %-12s p50 %.2f paired %.2f calls %.0f%%" % (
                            name[:-6], r["best"], r["ran"], r["p50"], r["paired"],
                            100 * r["calls"]))
    if not results:
        sys.exit("tune_replay.py: no recorded cells in " + " ".join(a.dirs))
    for key in ("p50", "paired"):
        v = [r[key] for _, r in results]
        print("%-6s within 10%%: %.0f%% of %d cells, worst %.2f, mean %.3f" % (
            key, 100 * sum(x <= 1.10 for x in v) / len(v), len(v), max(v), statistics.mean(v)))
    print("calls on the fastest scheme: mean %.0f%%" % (
        100 * statistics.mean(r["calls"] for _, r in results)))
    print("decision (the most-run scheme) within 10%% by p50: %.0f%%; timed calls that were "
          "rechecks: %.1f%%" % (100 * statistics.mean(r["decision"] <= 1.10 for _, r in results),
                                100 * statistics.mean(r["rechecks"] for _, r in results)))
    for key in ("p50", "paired") if hind else ():
        v = [h[key] for h in hind]
        print("hindsight %d:%d %-6s within 10%%: %.0f%% of %d cells, worst %.2f" % (
            span[0], span[1], key, 100 * sum(x <= 1.10 for x in v) / len(v), len(v), max(v)))


if __name__ == "__main__":
    main()
