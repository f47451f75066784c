#!/usr/bin/python3
"""Summarise bench/torch_tp.sh's runs: torch_tp_table.py RUNS_DIR [--json]

Each RUNS_DIR/CASE.rROUND.jsonl holds a header ({"case", "round", "load1"}) and the example's
--json lines (per step {"step", "loss", "step_s"}, then the summary). Per case: the median over
rounds of the run's median step time, the median over rounds of its ratio to the same round's
`hom` run, the validation loss, the largest per-step training-loss difference to `hom` in the
same round (over all rounds), the load averages seen, rank 0's main-thread CPU ms per step,
the tp GEMMs' share of it (the `share` case, --time-gemms) and, zen impl, how much longer the
slowest rank's tp GEMMs took per step than the median rank's (wall time, medians over steps:
the emulated or throttled slowdown as it came out). Then the tp GEMMs' share of the step's
wall time in `hom` (the median rank's GEMM wall time per step over the step time), g_wall, and
what it predicts for the straggler case `none`: 1 + (F - 1) g_wall -- on a host with fewer cores
than ranks g_wall, not the CPU share, is what a straggler's extra GEMM time is added to
(docs/pytorch-tp.md, "What the emulation means"). --json: one object per case instead.
"""
import glob
import json
import os
import statistics
import sys


def read_runs(d):
    runs = {}  # (case, round) -> {"load1", "losses", "summary"}
    for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
        run = {"losses": []}
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                obj = json.loads(line)
                if "case" in obj:
                    key = (obj["case"], obj["round"])
                    run["load1"] = obj["load1"]
                elif "step" in obj:
                    run["losses"].append(obj["loss"])
                elif obj.get("summary"):
                    run["summary"] = obj
        if "summary" in run:
            runs[key] = run
        else:
            print(f"torch_tp_table.py: {path} has no summary (the run failed?)", file=sys.stderr)
    return runs


def median_of(mine, key, scale=1.0):
    """The median over rounds of a summary value (None when a round lacks it)."""
    if not all(key in run["summary"] for run in mine.values()):
        return None
    return statistics.median(run["summary"][key] for run in mine.values()) * scale


def slow_gemm_x(ms):
    """The slowest rank's tp GEMM wall time per step over the median rank's (None without)."""
    ms = [t for t in ms or [] if t > 0]
    return max(ms) / statistics.median(ms) if len(ms) > 1 else None


def wall_share(summary):
    """The median rank's tp GEMM wall time per step over the step time (None without)."""
    ms = [t for t in summary.get("rank_gemm_wall_ms") or [] if t > 0]
    return statistics.median(ms) / (summary["median_step_s"] * 1e3) if ms else None


def median_over(mine, f):
    """The median over rounds of f(summary), None when a round has none."""
    xs = [f(run["summary"]) for run in mine.values()]
    return statistics.median(xs) if xs and None not in xs else None


def straggler_factor(rows_by_case):
    """F of the `none` case's straggler ("RANK:F"), None without one."""
    row = rows_by_case.get("none")
    spec = (row or {}).get("straggler") or []
    return float(spec[0].split(":")[1]) if spec else None


def print_prediction(rows):
    by = {r["case"]: r for r in rows}
    hom, f = by.get("hom"), straggler_factor(by)
    if not hom or hom["gemm_wall_share"] is None:
        return
    g = hom["gemm_wall_share"]
    line = (f"hom: the median rank's tp GEMMs take {100 * g:.1f}% of the step's wall time "
            "(g_wall, median of rounds)")
    if f is not None and by["none"]["x_hom"] is not None:
        line += (f"; 1 + ({f:g} - 1) g_wall = {1 + (f - 1) * g:.2f}x predicted for none, "
                 f"{by['none']['x_hom']:.2f}x measured")
    print(line)


def case_rows(runs):
    cases = list(dict.fromkeys(c for c, _ in runs))
    rows = []
    for c in cases:
        mine = {r: run for (cc, r), run in runs.items() if cc == c}
        ms = [run["summary"]["median_step_s"] * 1e3 for run in mine.values()]
        ratios, diffs = [], []
        for r, run in mine.items():
            hom = runs.get(("hom", r))
            if hom is None:
                continue
            ratios.append(run["summary"]["median_step_s"] / hom["summary"]["median_step_s"])
            n = min(len(run["losses"]), len(hom["losses"]))
            diffs.append(max(abs(a - b) for a, b in zip(run["losses"][:n], hom["losses"][:n])))
        last = mine[max(mine)]["summary"]
        slow = [x for x in (slow_gemm_x(run["summary"].get("rank_gemm_wall_ms")) for run in mine.values())
                if x is not None]
        rows.append({"case": c, "rounds": len(mine), "ms_step": statistics.median(ms),
                     "ms_each": [round(x, 1) for x in ms],
                     "x_hom": statistics.median(ratios) if ratios else None,
                     "x_hom_each": [round(x, 3) for x in ratios],
                     "max_loss_diff_vs_hom": max(diffs) if diffs else None,
                     "val_loss": last.get("val_loss"), "final_loss": last.get("final_loss"),
                     "load1": [run["load1"] for run in mine.values()],
                     "cpu_ms_step": median_of(mine, "median_step_cpu_s", 1e3),
                     "gemm_share": median_of(mine, "gemm_share"),
                     "gemm_share_proc": median_of(mine, "gemm_share_proc"),
                     "slow_gemm_x_each": [round(x, 2) for x in slow],
                     "gemm_wall_share": median_over(mine, wall_share),
                     "straggler": last.get("straggler"), "tp_stats": last.get("tp_stats")})
    return rows


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    rows = case_rows(read_runs(sys.argv[1]))
    if "--json" in sys.argv[2:]:
        for row in rows:
            print(json.dumps(row))
        return 0
    print("| case | ms/step (median of rounds) | x hom (per round) | max abs loss diff vs hom "
          "| val loss | load1 | CPU ms/step | slowest rank's GEMMs x median's |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = (f"{r['x_hom']:.2f} ({', '.join(f'{x:.2f}' for x in r['x_hom_each'])})"
                 if r["x_hom"] is not None else "-")
        diff = f"{r['max_loss_diff_vs_hom']:.1e}" if r["max_loss_diff_vs_hom"] is not None else "-"
        val = f"{r['val_loss']:.4f}" if r["val_loss"] is not None else "-"
        cpu = f"{r['cpu_ms_step']:.1f}" if r["cpu_ms_step"] is not None else "-"
        slow = ", ".join(map(str, r["slow_gemm_x_each"])) or "-"
        print(f"| {r['case']} | {r['ms_step']:.1f} ({', '.join(map(str, r['ms_each']))}) | "
              f"{ratio} | {diff} | {val} | {', '.join(map(str, r['load1']))} | {cpu} | {slow} |")
    for r in rows:
        if r["gemm_share"] is not None:
            print(f"{r['case']}: the tp GEMMs are {100 * r['gemm_share']:.1f}% of rank 0's "
                  f"main-thread CPU time per step, {100 * r['gemm_share_proc']:.1f}% of its "
                  "process's (medians)")
    print_prediction(rows)
    for r in rows:
        if r["tp_stats"]:
            print(f"{r['case']} tp stats (last round, rank 0): {json.dumps(r['tp_stats'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
