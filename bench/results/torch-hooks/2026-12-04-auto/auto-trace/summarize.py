import re, sys, statistics, collections
# per log: for one rank (the first pid), the schemes AUTO ran per bucket in steps 10-39 (the
# step-time window) and the median of that rank's call times per scheme
for path in sys.argv[1:]:
    calls = [l for l in open(path) if "auto ran" in l]
    pid = calls[0].split(":")[1]
    mine = [l for l in calls if l.split(":")[1] == pid]
    pat = re.compile(r"auto ran (\w+): rows (\d+), nnz (\d+), ([\d.]+) us")
    rows = [pat.search(l).groups() for l in mine]
    # step 0 is one call of the whole model, then two buckets per step
    steady = rows[1 + 2 * 10:]
    print(f"{path.split('/')[-1]}: {len(rows)} calls on pid {pid}; steps 10-39:")
    for b in ("516129", "913024"):
        c = collections.Counter(s for s, r, n, t in steady if r == b)
        tot = sum(float(t) for s, r, n, t in steady if r == b)
        med = {s: statistics.median(float(t) for s2, r, n, t in steady if r == b and s2 == s) / 1e3 for s in c}
        print(f"  bucket {b}: " + ", ".join(f"{s} x{k} (median {med[s]:.1f} ms)" for s, k in c.most_common()) + f"; total {tot/1e3:.0f} ms over {sum(c.values())} calls")
