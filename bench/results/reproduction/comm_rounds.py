#!/usr/bin/python3
"""Per-round ratios of bench/repro_comm.sh's measured.jsonl: for each workload and transport, the
time of dense, BLOCK, ALLGATHER and HIERARCHICAL over BALANCED's in the same round (rep), rounds
separated by " / " (docs/reproduction.md, section 3, "Per round").

usage: comm_rounds.py MEASURED.jsonl
"""
import json
import sys
from collections import defaultdict

OTHERS = ["dense", "block", "allgather", "hierarchical"]


def main():
    t = defaultdict(dict)  # (workload, mode) -> rep -> scheme -> ms
    for line in open(sys.argv[1]):
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("verified"):
            t[(r["workload"], r["mode"])].setdefault(r["rep"], {})[r["scheme"]] = \
                r["time_us_p50"] / 1000
    print("| workload, transport | dense | BLOCK (OmniReduce) | ALLGATHER (AGsparse) | "
          "HIERARCHICAL (SparCML) |")
    print("|---|---|---|---|---|")
    for (w, m), reps in t.items():
        cells = []
        for s in OTHERS:
            cells.append(" / ".join(f"{reps[k][s] / reps[k]['balanced']:.2f}"
                                    for k in sorted(reps) if s in reps[k] and
                                    "balanced" in reps[k]))
        print(f"| {w}, {m} ({len(reps)} rounds) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
