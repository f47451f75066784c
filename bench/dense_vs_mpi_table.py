#!/usr/bin/env python3
"""Tables for bench/dense_vs_mpi.sh: per process count, size and in-place flag, the median
(over rounds) p50 time of zen and of Open MPI, their ratio (zen / MPI time: below 1 zen is
faster) and busbw; the range over rounds in brackets. Then the targets of issue #33, each PASS
or FAIL from the same medians (a size or process count the raw data lacks is reported as not
measured):
  2 processes: 8 B allreduce <= Open MPI's time; every size 8 B - 64 KiB <= 1.0x its time;
               64 MiB busbw >= 1.0x;
  4 and 8:     64 MiB busbw >= 1.3x; no size slower than 1.2x Open MPI's time;
  every count: out of place and in place within 10% of each other, 8 B - 64 KiB.

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


# Labelled extra columns (bench/dense_vs_mpi.sh): implementation -> column title.
EXTRA = {"mpi-default": "MPI default", "mpi-bound": "MPI bound round robin",
         "zen-unbound": "zen unbound"}


def main():
    rows = load(sys.argv[1] + "/raw.txt")
    impls = {k[0] for k in rows}
    extra = [i for i in EXTRA if i in impls]
    for n in sorted({k[1] for k in rows}):
        for inplace in (0, 1):
            print(f"\n### {n} processes, {'in place' if inplace else 'out of place'}\n")
            print("| size | zen algo | zen us | MPI us | zen/MPI time | zen busbw | MPI busbw |"
                  + "".join(f" {EXTRA[i]} us |" for i in extra))
            print("|---|---|---|---|---|---|---|" + "---|" * len(extra))
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
                for i in extra:
                    e = [d["time_us_p50"] for d in rows.get((i, n, b, inplace), [])]
                    line += (f" {statistics.median(e):.3f} ({min(e):.3f}-{max(e):.3f}) |"
                             if e else " - |")
                print(line)


def med(rows, key, field):
    got = rows.get(key)
    return statistics.median(d[field] for d in got) if got else None


def ratios(rows, n, lo, hi, field="time_us_p50"):
    """(size, inplace, zen / MPI median) for every size in [lo, hi] both sides have at n."""
    out = []
    for b in sorted({k[2] for k in rows if k[1] == n and lo <= k[2] <= hi}):
        for ip in (0, 1):
            z, m = med(rows, ("zen", n, b, ip), field), med(rows, ("mpi", n, b, ip), field)
            if z is not None and m:
                out.append((b, ip, z / m))
    return out


def verdict(name, items, ok):
    """One target line: PASS when every (size, inplace, ratio) item passes ok, else FAIL naming
    the failures."""
    if not items:
        print(f"- {name}: not measured")
        return
    bad = [i for i in items if not ok(i[2])]
    if not bad:
        print(f"- {name}: PASS ({len(items)} of {len(items)})")
        return
    place = {0: " out", 1: " in", None: ""}
    which = ", ".join(f"{fmt_size(b)}{place[ip]} {r:.2f}" for b, ip, r in bad)
    print(f"- {name}: FAIL ({len(bad)} of {len(items)}: {which})")


def targets(rows):
    print("\n### Targets (issue #33), zen / Open MPI from the medians above\n")
    small = (8, 64 << 10)
    big = 64 << 20
    verdict("2 proc., 8 B time <= 1.0x", ratios(rows, 2, 8, 8), lambda r: r <= 1.0)
    verdict("2 proc., 8 B - 64 KiB time <= 1.0x", ratios(rows, 2, *small), lambda r: r <= 1.0)
    verdict("2 proc., 64 MiB busbw >= 1.0x", ratios(rows, 2, big, big, "busbw_gbs"),
            lambda r: r >= 1.0)
    for n in (4, 8):
        verdict(f"{n} proc., 64 MiB busbw >= 1.3x", ratios(rows, n, big, big, "busbw_gbs"),
                lambda r: r >= 1.3)
        verdict(f"{n} proc., every size time <= 1.2x", ratios(rows, n, 0, 1 << 62),
                lambda r: r <= 1.2)
    for n in sorted({k[1] for k in rows}):
        pairs = []
        for b in sorted({k[2] for k in rows if k[1] == n and small[0] <= k[2] <= small[1]}):
            o, i = med(rows, ("zen", n, b, 0), "time_us_p50"), med(rows, ("zen", n, b, 1),
                                                                   "time_us_p50")
            if o and i:
                pairs.append((b, None, max(o, i) / min(o, i)))
        verdict(f"{n} proc., zen out of place vs in place within 10%", pairs, lambda r: r <= 1.1)


if __name__ == "__main__":
    main()
    targets(load(sys.argv[1] + "/raw.txt"))
