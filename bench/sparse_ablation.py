#!/usr/bin/python3
"""ZEN Fig. 16/17-style ablations of BALANCED with the `zen bench sparse` switches (issue #15).

usage: bench/sparse_ablation.py trace DIR [--ranks 8] [--rounds 3] [--iters 20]
       bench/sparse_ablation.py density [--ranks 8] [--rows 1000000]
       bench/sparse_ablation.py kernel [--ranks 2] [--rows 4000000] [--rounds 5]

trace    on a recorded trace (docs/trace-format.md): k probes 1..3 (r1 = 2 x nnz), r1 in
         {1, 2, 4} x nnz (k = 3), and the pull encoding forced to hash bitmap, COO and plain
         bitmap (and auto); the configurations run interleaved, --rounds times (A B C A B C), and
         each row gives the median and min-max of the per-round p50s.
density  synthetic random tensors at rising density: bytes received by the busiest rank per pull
         encoding (Fig. 17a) and the push/pull imbalance ratio (Def. 8) against nnz per rank
         (Theorem 2: the excess over 1 shrinks like sqrt(n log n / nnz)). Bytes and imbalance do
         not depend on timing.

kernel   the partition phase alone (Algorithm 1's insertion, where k and r1 act), on a synthetic
         tensor large enough that it is not lost in the scheduling noise of the push and pull:
         k 1..3 and r1 in {1, 2, 4} x nnz, interleaved, --rounds times; the partition time of the
         slowest rank in the last iteration of each run, median (min-max) over the rounds.

Run under `flock /tmp/zen-bench.lock`; prints one line per configuration.
"""
import argparse
import json
import os
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZEN = os.path.join(ROOT, "build", "zen")

TRACE_CONFIGS = [
    ("default partition", []),
    ("k=1 r1=2nnz", ["--hash-k", "1"]),
    ("k=2 r1=2nnz", ["--hash-k", "2"]),
    ("k=3 r1=2nnz", ["--hash-k", "3"]),
    ("k=3 r1=1nnz", ["--hash-k", "3", "--hash-r1", "1"]),
    ("k=3 r1=4nnz", ["--hash-k", "3", "--hash-r1", "4"]),
    ("pull auto", ["--hash-k", "3", "--pull-format", "auto"]),
    ("pull hash-bitmap", ["--hash-k", "3", "--pull-format", "hash-bitmap"]),
    ("pull coo", ["--hash-k", "3", "--pull-format", "coo"]),
    ("pull plain-bitmap", ["--hash-k", "3", "--pull-format", "plain-bitmap"]),
]


def bench(args, extra):
    cmd = [ZEN, "bench", "sparse", "--ranks", str(args.ranks), "--schemes", "balanced",
           "--iters", str(args.iters), "--warmup", "2", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    assert rows and all(r["verified"] for r in rows), f"unverified result: {cmd}"
    return rows[0]


def trace(args):
    res = {name: [] for name, _ in TRACE_CONFIGS}
    for _ in range(args.rounds):
        for name, extra in TRACE_CONFIGS:
            res[name].append(bench(args, ["--trace", args.dir] + extra))
    print(f"trace {args.dir}, {args.ranks} inproc ranks, balanced, {args.rounds} rounds x "
          f"{args.iters} iterations; time = median (min-max) of per-round p50, ms")
    for name, rs in res.items():
        t = [r["time_us_p50"] / 1e3 for r in rs]
        r = rs[-1]
        print(f"  {name:<20} {statistics.median(t):8.2f} ({min(t):.2f}-{max(t):.2f})  "
              f"sent {r['max_bytes_sent']:>9}  recv {r['max_bytes_recv']:>9}  "
              f"ideal {r['ideal_bytes']:>9}  imb push {r['imbalance_push']:.3f} "
              f"pull {r['imbalance_pull']:.3f}  formats {r['pull_formats']}  "
              f"serial {r['partition_serial']} passes {r['partition_passes']}  "
              f"phases {r['phase_us']}")


def density(args):
    print(f"synthetic random, {args.rows} rows x 1, {args.ranks} inproc ranks, balanced (k=3)")
    for d in args.densities:
        line = f"  density {d:<7} nnz/rank {int(args.rows * d):>8}"
        for fmt in ["hash-bitmap", "coo", "plain-bitmap"]:
            r = bench(args, ["--rows", str(args.rows), "--density", str(d), "--hash-k", "3",
                             "--pull-format", fmt])
            line += f"  {fmt} recv {r['max_bytes_recv']}"
        line += f"  ideal {r['ideal_bytes']}  imb push {r['imbalance_push']:.3f} " \
                f"pull {r['imbalance_pull']:.3f}"
        print(line, flush=True)


def kernel(args):
    configs = [c for c in TRACE_CONFIGS[1:6]]
    parts = {name: [] for name, _ in configs}
    for _ in range(args.rounds):
        for name, extra in configs:
            r = bench(args, ["--rows", str(args.rows), "--density", str(args.kernel_density)] +
                      extra)
            parts[name].append(r["phase_us"][0] / 1e3)
    print(f"synthetic random, {args.rows} rows x 1, density {args.kernel_density}, {args.ranks} "
          f"inproc ranks, balanced; partition phase ms, median (min-max) of {args.rounds} runs")
    for name, t in parts.items():
        print(f"  {name:<14} {statistics.median(t):8.2f} ({min(t):.2f}-{max(t):.2f})")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("mode", choices=["trace", "density", "kernel"])
    p.add_argument("dir", nargs="?")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--kernel-density", type=float, default=0.05)
    p.add_argument("--densities", type=float, nargs="+",
                   default=[0.0001, 0.001, 0.01, 0.05, 0.2, 0.5])
    args = p.parse_args()
    if args.rows is None:
        args.rows = 4000000 if args.mode == "kernel" else 1000000
    if args.mode == "kernel":
        args.iters = 3
        kernel(args)
    elif args.mode == "trace":
        trace(args)
    else:
        args.iters = 3
        density(args)


if __name__ == "__main__":
    main()
