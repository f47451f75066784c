#!/usr/bin/python3
"""Rows F1-F3 of docs/reproduction.md from flextp_rounds.sh's flextp.jsonl.

usage: flextp_table.py flextp.jsonl

One markdown row per (tp, case): the homogeneous ms/step per round, then per mode the ratio to
the same round's homogeneous run, each round's value and min-max, the validation losses seen, and
rank 0's keep fraction / migrated columns at the end. Then the verdict inputs: for each round,
whether none is the slowest mode, which mode is the fastest, and whether migrate's val loss equals
homogeneous's.
"""
import collections
import json
import sys

MODES = ["none", "resize", "migrate", "semi"]


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["tp"], r["case"])][(r["round"], r["mode"])] = r
    print("| tp | case | homogeneous ms/step per round | " + " | ".join(
        "%s: x homogeneous per round [min-max]; val; keep/mig" % m for m in MODES) + " |")
    print("|---|---|---|" + "---|" * len(MODES))
    notes = []
    for (tp, case), d in sorted(by.items()):
        rounds = sorted({k[0] for k in d})
        hom = [d[(r, "homogeneous")]["ms_step"] for r in rounds]
        cells = []
        for m in MODES:
            rat = [d[(r, m)]["ratio"] for r in rounds]
            vals = sorted({"%.4f" % d[(r, m)]["val_loss"] for r in rounds})
            km = sorted({"%.2f/%d" % (d[(r, m)]["keep_fraction"], d[(r, m)]["migrated_cols"])
                         for r in rounds})
            cells.append("%s [%.2f-%.2f]; val %s; %s" % (" / ".join("%.2f" % x for x in rat),
                                                          min(rat), max(rat), ", ".join(vals),
                                                          ", ".join(km)))
        print("| %d | %s | %s (val %s) | %s |" % (
            tp, case, " / ".join("%.0f" % x for x in hom),
            ", ".join(sorted({"%.4f" % d[(r, "homogeneous")]["val_loss"] for r in rounds})),
            " | ".join(cells)))
        for r in rounds:
            rat = {m: d[(r, m)]["ratio"] for m in MODES}
            fastest = min(rat, key=rat.get)
            slowest = max(rat, key=rat.get)
            lossless = d[(r, "migrate")]["val_loss"] == d[(r, "homogeneous")]["val_loss"]
            loads = [d[(r, m)]["load1"] for m in ["homogeneous"] + MODES]
            notes.append("tp %d %s round %d: slowest %s, fastest %s, migrate lossless %s, "
                         "load1 %.1f-%.1f" % (tp, case, r, slowest, fastest, lossless,
                                              min(loads), max(loads)))
    print()
    for n in notes:
        print("- " + n)


main()
