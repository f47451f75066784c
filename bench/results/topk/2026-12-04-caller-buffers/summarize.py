import json, statistics, sys
from collections import defaultdict
d = sys.argv[1]
rows = [json.loads(l) for l in open(f"{d}/bucket_step.jsonl")]
by = defaultdict(lambda: defaultdict(list))
for r in rows:
    b = r["tag"].split()[0]
    by[(r["momentum"], r["exact"])][b].append(r["ms_p50"])
print("bucket step (25 MB, n=%d, k=%d, whole=%d), ms p50 per round:" % (rows[0]["n"], rows[0]["k"], rows[0]["whole"]))
for key, v in by.items():
    mb, mn = statistics.median(v["base"]), statistics.median(v["new"])
    print(f"  momentum {key[0]} exact {key[1]}: base {v['base']} new {v['new']} -> median base {mb:.2f} new {mn:.2f} new/base {mn/mb:.2f}")
rows = [json.loads(l) for l in open(f"{d}/bench_topk.jsonl")]
bt = defaultdict(list)
for r in rows:
    bt[r["tag"].split()[0]].append(r["elements_per_s"] / 1e6)
    assert r["in_contract"]
mb, mn = statistics.median(bt["base"]), statistics.median(bt["new"])
print(f"zen bench topk 16M ratio 0.01 threads 1, M elements/s: base {[round(x) for x in bt['base']]} new {[round(x) for x in bt['new']]} -> median base {mb:.0f} new {mn:.0f} new/base {mn/mb:.3f}; counts {sorted(set(r['count'] for r in rows))} recall {sorted(set(r['mass_recall'] for r in rows))}")
