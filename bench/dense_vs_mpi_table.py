#!/usr/bin/env python3
"""Tables for bench/dense_vs_mpi.sh: per process count, size and in-place flag, the median
(over rounds) p50 time of zen and of Open MPI, their ratio (zen / MPI time: below 1 zen is
faster) and busbw; the range over rounds in brackets.

    python3 bench/dense_vs_mpi_table.py OUT_DIR
"""
import json
import statistics
import sys


def load(path):
    rows = {}
    for line in open(path):
        impl, n, r, js = line.split(" ", 3)
        d = json.loads(js)
        key = (impl, int(n), d["bytes"], d["inplace"])
        rows.setdefault(key, []).append(d)
    return rows


def fmt_size(b):
    for unit, v in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= v and b % v == 0:
            return f"{b // v} {unit}iB"
    return f"{b} B"


def main():
    rows = load(sys.argv[1] + "/raw.txt")
    impls = sorted({k[0] for k in rows})
    for n in sorted({k[1] for k in rows}):
        for inplace in (0, 1):
            print(f"\n### {n} processes, {'in place' if inplace else 'out of place'}\n")
            print("| size | zen algo | zen us | MPI us | zen/MPI time | zen busbw | MPI busbw |"
                  + (" MPI default us |" if "mpi-default" in impls else ""))
            print("|---|---|---|---|---|---|---|" + ("---|" if "mpi-default" in impls else ""))
            for b in sorted({k[2] for k in rows if k[1] == n}):
                z = rows.get(("zen", n, b, inplace))
                m = rows.get(("mpi", n, b, inplace))
                if not z or not m:
                    continue
                zt = [d["time_us_p50"] for d in z]
                mt = [d["time_us_p50"] for d in m]
                zb = statistics.median(d["busbw_gbs"] for d in z)
                mb = statistics.median(d["busbw_gbs"] for d in m)
                line = (f"| {fmt_size(b)} | {z[0]['algo']} | {statistics.median(zt):.3f} "
                        f"({min(zt):.3f}-{max(zt):.3f}) | {statistics.median(mt):.3f} "
                        f"({min(mt):.3f}-{max(mt):.3f}) | "
                        f"{statistics.median(zt) / statistics.median(mt):.2f} | "
                        f"{zb:.3f} | {mb:.3f} |")
                dflt = rows.get(("mpi-default", n, b, inplace))
                if "mpi-default" in impls:
                    line += (f" {statistics.median(d['time_us_p50'] for d in dflt):.3f} |"
                             if dflt else " - |")
                print(line)


if __name__ == "__main__":
    main()
