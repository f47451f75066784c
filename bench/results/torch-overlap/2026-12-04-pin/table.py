#!/usr/bin/python3
"""One markdown row per bench run in pinovl.sh outputs: mode (ranks free or pinned 2 per core),
steps, compute-only, zen sync's share of its step, zen async's and gloo's exposed time over zen
sync's (median-based; in brackets the median of the paired per-round values), zen async's step
over gloo's, met (exposed <= 50 % of zen sync's and step <= gloo's)."""
import re
import sys

for path in sys.argv[1:]:
    run = None
    for line in open(path):
        m = re.match(r"==== (\S+) (\d\d:\d\d):\d\d load", line)
        if m:
            run = {"mode": m[1], "t": m[2]}
            continue
        if run is None:
            continue
        m = re.match(r"\s*(zen_async|zen_sync|gloo): step\s+([\d.]+) ms .*exposed comm\s+([\d.]+) ms.*?([\d.]+) % of zen sync's\)", line)
        if m:
            cur = m[1]
            run[cur] = {"step": float(m[2]), "exp": float(m[3]), "pct": float(m[4])}
            continue
        m = re.match(r"\s*exposed, paired step by step:\s+[-\d.]+ ms \(\s*([-\d.]+) %", line)
        if m:
            run[cur]["paired"] = float(m[1])
            continue
        m = re.match(r"\s*compute-only: step\s+([\d.]+) ms", line)
        if m:
            a, s, g = run["zen_async"], run["zen_sync"], run["gloo"]
            ratio = a["step"] / g["step"]
            met = a["pct"] <= 50 and ratio <= 1
            why = "" if met else " (" + ", ".join(
                w for w, bad in (("exposed", a["pct"] > 50), ("step", ratio > 1)) if bad) + ")"
            print(f"| {run['t']} | {run['mode']} | {a['step']:.0f} ms | {s['step']:.0f} ms | "
                  f"{g['step']:.0f} ms | {float(m[1]):.0f} ms | {100 * s['exp'] / s['step']:.1f} % | "
                  f"{a['pct']:.1f} % ({a['paired']:.1f} %) | {g['pct']:.1f} % ({g['paired']:.1f} %) | "
                  f"{ratio:.3f} | {'**yes**' if met else 'no' + why} |")
            run = None
