#!/usr/bin/python3
"""Summarise the zen async steps of bench/torch_overlap.py --timeline files (every rank's trace):
per step, how much later the last rank issued the first bucket than the first rank did (skew),
how long the step ran on after the last rank issued its last bucket (tail), and for each bucket
the rate each rank sent at (ring bytes 2 (n-1)/n x bucket) from the moment the LAST rank's worker
entered zen_allreduce to the bucket's end, split into buckets that ended while some rank was still
in backward and the others. Medians over the steps / buckets.
usage: trace_summary.py FILE.json [...]"""
import json
import statistics as st
import sys

for path in sys.argv[1:]:
    rows = [r for r in json.load(open(path)) if r["kind"] == "optrace" and r["group"] == "zen_async"]
    skew, tail, during, after = [], [], [], []
    for k in sorted({r["round"] for r in rows}):
        rs = [r for r in rows if r["round"] == k]
        n_ranks, base = len(rs), min(r["t_bwd"] for r in rs)

        def ms(r, i, field):
            return (r["t_bwd"] - base + r["ops"][i][field]) * 1e3
        nb = len(rs[0]["ops"]) - 1
        first = [ms(r, 0, "issued_s") for r in rs]
        last_issue = max(ms(r, nb - 1, "issued_s") for r in rs)
        skew.append(max(first) - min(first))
        tail.append(max(ms(r, nb - 1, "ended_s") for r in rs) - last_issue)
        for i in range(nb):
            start = max(ms(r, i, "started_s") for r in rs)
            end = max(ms(r, i, "ended_s") for r in rs)
            sent_mb = rs[0]["ops"][i]["bytes"] * 2 * (n_ranks - 1) / n_ranks / 1e6
            (during if end < last_issue else after).append(sent_mb / (end - start) * 1e3)
    print(f"{path}: first-bucket issue skew {st.median(skew):.0f} ms, tail after the last issue "
          f"{st.median(tail):.0f} ms, MB/s sent per rank once all ranks are in a bucket: "
          f"{st.median(during):.0f} (ended during backward), {st.median(after):.0f} (after)")
