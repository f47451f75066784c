#!/usr/bin/python3
"""AUTO's calls against the fixed schemes, from `zen bench sparse --call-times` stderr.

usage: auto_calls.py CALLS_FILE [CALLS_FILE...]

Reads the `# call SCHEME ITERATION US RAN` lines (the slowest rank's time of each call; with
--warmup 0 iteration 0 is the key's first call, and the schemes take turns, one call each per
iteration). Prints, per file: each scheme's median time, the fixed scheme with the lowest median
(the best), AUTO's time over the best scheme's in the same iteration for the first 4 calls and
for the rest, the scheme AUTO ran in each call, the call from which it ran one scheme to the end,
AUTO's warm-up (the round-robin at the start: up to the last candidate's first call plus
ZEN_SPARSE_TUNE_WARM calls) and its extra time over the best scheme's in those calls, and for each fixed
scheme the call from which on AUTO's cumulative time (calls 1..k: call 0, the process's cold
first call, is left out for every scheme) stays at most that scheme's ("never": AUTO's warm-up
is not paid back within the run against that scheme).
"""
import collections
import statistics
import os
import sys

WARM = int(os.environ.get("ZEN_SPARSE_TUNE_WARM", "3"))


def main():
    for path in sys.argv[1:]:
        t = collections.defaultdict(dict)
        ran = {}
        for line in open(path):
            f = line.split()
            if len(f) >= 6 and f[0] == "#" and f[1] == "call":
                t[f[2]][int(f[3])] = float(f[4])
                if f[2] == "auto":
                    ran[int(f[3])] = f[5]
        its = sorted(t["auto"])
        fixed = {s: v for s, v in t.items() if s != "auto"}
        med = {s: statistics.median(v[i] for i in its) for s, v in fixed.items()}
        best = min(med, key=med.get)
        ratio = [t["auto"][i] / fixed[best][i] for i in its]
        runs = [ran[i] for i in its]
        settle = len(runs)
        while settle > 0 and runs[settle - 1] == runs[-1]:
            settle -= 1
        print("%s: %d calls; median ms per call: %s" % (path, len(its), ", ".join(
            "%s %.2f" % (s, med[s] / 1e3) for s in sorted(med, key=med.get))))
        print("  auto median %.2f ms; best fixed: %s" % (
            statistics.median(t["auto"].values()) / 1e3, best))
        print("  auto / best, same call: calls 0-3 median %.2f [%.2f, %.2f]; calls 4-%d median "
              "%.2f [%.2f, %.2f]" % (statistics.median(ratio[:4]), min(ratio[:4]), max(ratio[:4]),
                                     len(its) - 1, statistics.median(ratio[4:]), min(ratio[4:]),
                                     max(ratio[4:])))
        print("  auto ran: %s" % " ".join(runs))
        print("  from call %d on auto ran %s only" % (settle, runs[-1]))
        seen = []
        for k, x in enumerate(runs):
            if x not in seen:
                seen.append(x)
                last_new = k
        warm = min(last_new + WARM, len(runs))
        extra = sum(t["auto"][i] - fixed[best][i] for i in its[1:warm])
        after = statistics.median(ratio[warm:]) if warm < len(its) else float("nan")
        print("  warm-up: calls 0-%d (%d candidates: %s); calls 1-%d took %.1f ms more than %s "
              "(%.1f of its median calls); after it auto / best median %.2f" % (
                  warm - 1, len(seen), " ".join(seen), warm - 1, extra / 1e3, best,
                  extra / med[best], after))
        for s in sorted(med, key=med.get):
            ca = cs = 0.0
            hit = None
            for k, i in enumerate(its[1:], start=1):
                ca += t["auto"][i]
                cs += fixed[s][i]
                if ca <= cs and hit is None:
                    hit = k
                elif ca > cs:
                    hit = None
            print("  cumulative auto <= %s from call %s on (calls 1-%d: auto %.0f ms, %s %.0f ms)"
                  % (s, hit if hit is not None else "never", len(its) - 1, ca / 1e3, s, cs / 1e3))


main()
