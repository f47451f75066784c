#!/usr/bin/python3
"""ctest bench_sparse_ablation: BALANCED's ablation switches (ZEN Fig. 16/17) take effect.

usage: ablation_check.py ZEN_BINARY

Runs `zen bench sparse --schemes balanced --json` on 5 inproc ranks (20000 rows, density 0.05)
with the default options and with each switch, and requires every run to exit 0 with the exact
sum ("verified":true) and no sanitizer report, and each switch to change what it acts on against
the default:

--pull-format  the format of the pull blobs (pull_formats) and the bytes received. At this
               density the union of 5 ranks covers about 23% of an owner's ~4000 rows: a COO blob
               spends 32 bits per non-zero on its index, a plain bitmap 1 bit per row of the
               table (20000), the hash bitmap 1 bit per row of the owner's universe. So the
               busiest rank receives the most with coo, then plain-bitmap, then hash-bitmap, which
               AUTO (the default) picks here, receiving what a forced hash-bitmap does.
--hash-k       the probes of Algorithm 1 (the hash partition): with 1 probe per item far more
               items miss a free slot and go to serial memory than with 3 (partition_serial).
--hash-r1      the parallel-memory slots per item: 1 x nnz gives more serial items than
               4 x nnz, and 0.5 x nnz (fewer slots than items) overflows serial memory, so the
               partition takes more than one pass (partition_passes).
The default runs the counting partition on one thread (partition_serial and _passes 0); the
switches leave the owners, so the push bytes, unchanged. The communicator's hash seeds are
random per run, so byte counts move by about 1% between runs: the checks leave margins of 10%
or more, and factors of 2 on the serial counts (measured: k=1 about 215, k=3 about 36; r1=1 about
193, r1=4 about 9).
"""
import json
import re
import subprocess
import sys

zen = sys.argv[1]
BASE = ["bench", "sparse", "--ranks", "5", "--rows", "20000", "--density", "0.05",
        "--schemes", "balanced", "--iters", "1", "--warmup", "0", "--json"]
SANITIZER = re.compile(r"ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|"
                       r"SUMMARY: [A-Za-z]+Sanitizer|runtime error: ")
failures = []


def run(extra):
    p = subprocess.run([zen] + BASE + extra, capture_output=True, text=True, timeout=120)
    label = " ".join(extra) or "default"
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0 or SANITIZER.search(p.stdout + p.stderr):
        sys.exit(f"FAIL: {label}: exit status {p.returncode} (or a sanitizer report above)")
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if len(rows) != 1 or rows[0]["verified"] is not True:
        sys.exit(f"FAIL: {label}: expected one verified balanced row, got {rows}")
    r = rows[0]
    print(f"# {label:<26} recv {r['max_bytes_recv']:>6} sent {r['max_bytes_sent']:>6} "
          f"pull {r['pull_formats']} serial {r['partition_serial']} "
          f"passes {r['partition_passes']}")
    return r


def check(cond, what):
    if not cond:
        failures.append(what)


dflt = run([])
fmt = {f: run(["--pull-format", f]) for f in ["coo", "plain-bitmap", "hash-bitmap"]}
k1 = run(["--hash-k", "1"])
k3 = run(["--hash-k", "3"])
r1 = run(["--hash-r1", "1"])
r4 = run(["--hash-r1", "4"])
rhalf = run(["--hash-r1", "0.5"])

check(dflt["pull_formats"] == ["hash-bitmap"], "default: AUTO picks the hash bitmap here")
for f, r in fmt.items():
    check(r["pull_formats"] == [f], f"--pull-format {f}: the blobs have format {f}")
recv = {f: r["max_bytes_recv"] for f, r in fmt.items()}
check(recv["coo"] > 1.3 * dflt["max_bytes_recv"], "coo receives > 1.3 x the default")
check(recv["coo"] > 1.1 * recv["plain-bitmap"], "coo receives > 1.1 x plain-bitmap")
check(recv["plain-bitmap"] > 1.15 * dflt["max_bytes_recv"],
      "plain-bitmap receives > 1.15 x the default")
check(abs(recv["hash-bitmap"] - dflt["max_bytes_recv"]) < 0.05 * dflt["max_bytes_recv"],
      "hash-bitmap receives what the default (AUTO: hash bitmap) does, within 5%")
check(dflt["partition_serial"] == 0 and dflt["partition_passes"] == 0,
      "default: the counting partition (no Algorithm 1)")
for name, r in [("k=1", k1), ("k=3", k3), ("r1=1", r1), ("r1=4", r4), ("r1=0.5", rhalf)]:
    check(r["partition_passes"] >= 1, f"{name}: Algorithm 1 ran (passes >= 1)")
check(k1["partition_serial"] > 2 * k3["partition_serial"], "k=1: > 2 x the serial items of k=3")
check(r1["partition_serial"] > 2 * r4["partition_serial"],
      "r1=1: > 2 x the serial items of r1=4")
check(rhalf["partition_passes"] > 1, "r1=0.5: serial memory overflows, more than one pass")
for f in failures:
    print(f"FAIL: {f}")
print("ok" if not failures else f"{len(failures)} check(s) failed")
sys.exit(1 if failures else 0)
