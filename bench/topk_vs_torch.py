#!/usr/bin/python3
"""torch.topk against `zen bench topk` on one thread, interleaved (issue #35's selection target).

For n = 2^24 (16.8M) float32 gaussian values and k = 1% and 0.1%, each round times
torch.topk(x.abs(), k) (torch.set_num_threads(1)) and then runs `zen bench topk --threads 1 --json`
on the same size and ratio (its own gaussian data, same distribution), so both see the same
machine load. Prints one line per measurement and, per ratio, the medians and their ratio with
zen's elements/s, count/k and mass recall. Target: >= 20x torch.topk, >= 300 M elements/s,
count in [0.8k, 1.3k], mass recall >= 0.99.

    /usr/bin/python3 bench/topk_vs_torch.py [--zen build/zen] [--rounds 3] [--size 16M]
                                            [--mode approx|exact] [--iters 5]
Exit status: 0 when every round met the target, 1 when one missed it, 2 usage.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--zen", default=os.path.join(here, "..", "build", "zen"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", default="16M")
    ap.add_argument("--mode", default="approx", choices=["approx", "exact"])
    ap.add_argument("--iters", type=int, default=5, help="zen's timed calls per round")
    a = ap.parse_args()
    torch.set_num_threads(1)
    n = parse_size(a.size)
    torch.manual_seed(1)
    x = torch.randn(n)
    res = {r: {"torch": [], "zen": [], "rows": []} for r in (0.01, 0.001)}
    print(f"# topk_vs_torch: n={n} torch {torch.__version__} threads 1 | load {os.getloadavg()}")
    for rnd in range(a.rounds):
        for ratio in res:
            k = -(-int(ratio * n * 1e6) // int(1e6))  # ceil without float drift
            t0 = time.perf_counter()
            torch.topk(x.abs(), k, sorted=False)
            tt = time.perf_counter() - t0
            out = subprocess.run([a.zen, "bench", "topk", "--size", str(n), "--ratio", str(ratio),
                                  "--threads", "1", "--mode", a.mode, "--iters", str(a.iters),
                                  "--seed", str(rnd + 1), "--json"],
                                 check=False, capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr, file=sys.stderr)
                return 1
            row = json.loads(out.stdout.strip().splitlines()[-1])
            tz = row["time_us_p50"] * 1e-6
            res[ratio]["torch"].append(tt)
            res[ratio]["zen"].append(tz)
            res[ratio]["rows"].append(row)
            print(f"round {rnd} ratio {ratio}: torch.topk {tt * 1e3:.1f} ms ({n / tt / 1e6:.1f} M/s)"
                  f" | zen {tz * 1e3:.1f} ms ({row['elements_per_s'] / 1e6:.1f} M/s) count/k "
                  f"{row['count'] / row['k']:.3f} recall {row['mass_recall']:.4f}", flush=True)
    ok = True
    for ratio, r in res.items():
        tt, tz = statistics.median(r["torch"]), statistics.median(r["zen"])
        eps = n / tz
        cnt = [row["count"] / row["k"] for row in r["rows"]]
        rec = min(row["mass_recall"] for row in r["rows"])
        met = tt / tz >= 20 and eps >= 300e6 and min(cnt) >= 0.8 and max(cnt) <= 1.3 and rec >= 0.99
        ok = ok and met
        print(f"ratio {ratio}: median torch.topk {tt * 1e3:.1f} ms, zen {tz * 1e3:.1f} ms -> "
              f"{tt / tz:.1f}x, zen {eps / 1e6:.0f} M elements/s, count/k {min(cnt):.3f}.."
              f"{max(cnt):.3f}, min mass recall {rec:.4f}: {'target met' if met else 'MISSED'}")
    print(f"# load after: {os.getloadavg()}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
