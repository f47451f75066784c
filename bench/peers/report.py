#!/usr/bin/python3
"""Turn bench/peers/run_peers.sh's results.jsonl into the markdown tables of docs/benchmarks.md.

  report.py RESULTS.jsonl

Every time is the p50 over iterations of the slowest rank (zen bench's convention, which
torch_gloo.py and mpi_allreduce follow). Ratios are peer time / zen time: above 1 zen is faster.
Trace times are per training step (the replay's iteration time / its number of tensors).
"""
import json
import statistics
import sys

SCHEMES = ["balanced", "hierarchical", "allgather", "ps", "block", "dense"]


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    print(f"report.py: skipping a malformed line: {line[:80]}", file=sys.stderr)
    return rows


def case_of(r):
    """The case tag of a torch sparse line (it ran every case in one process)."""
    if r.get("overlap") == "trace":
        return "trace"
    return "%g:%s" % (r["density"], r["overlap"])


def ms(us):
    return None if us is None else us / 1000.0


def fmt(x, digits=1):
    if x is None:
        return "-"
    if abs(x) >= 100:
        return "%.0f" % x
    return ("%." + str(digits) + "f") % x if abs(x) >= 1 else "%.3g" % x


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def mb(b):
    return "-" if b is None else "%.2f" % (b / 1e6)


def configs(rows):
    return sorted({(r["gbps"], r["hosts"]) for r in rows})


def dense_table(rows):
    out = ["### Dense allreduce (in place, f32 sum): time in ms, ratio = peer / zen", "",
           "| Gbit/s | hosts | size | zen algo | zen | MPI_Allreduce (default) | MPI (ring) |"
           " torch gloo | MPI/zen | MPI ring/zen | torch/zen | ring MB sent per rank |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    found = {}
    for r in rows:
        if r.get("op") != "allreduce" or r.get("inplace") != 1:
            continue
        peer = {"zen-dense": "zen", "mpi-dense": "mpi", "mpi-ring": "mpiring",
                "torch": "torch"}.get(r["run"])
        if peer:
            found[(r["gbps"], r["hosts"], r["bytes"], peer)] = r
    for g, h in configs(rows):
        sizes = sorted({k[2] for k in found if k[:2] == (g, h)})
        for s in sizes:
            z, m, mr, t = (found.get((g, h, s, p)) for p in ("zen", "mpi", "mpiring", "torch"))
            zt, mt, mrt, tt = (ms(x["time_us_p50"]) if x else None for x in (z, m, mr, t))
            out.append("| %g | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                g, h, human(s), z["algo"] if z else "-", fmt(zt), fmt(mt), fmt(mrt), fmt(tt),
                fmt(ratio(mt, zt), 2), fmt(ratio(mrt, zt), 2), fmt(ratio(tt, zt), 2),
                mb(2 * (h - 1) / h * s)))
    return out, found


def human(s):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s >= size and s % size == 0:
            return "%d %s" % (s // size, unit)
    return "%d B" % s


def sparse_cells(rows):
    """(gbps, hosts, case) -> {"p": {scheme: line}, "b": {scheme: line}, "torch": line}.
    p: zen_sparse_peer (zen_sparse_allreduce, sparse result, like torch's); b: zen bench sparse
    (zen_sparse_allreduce_dense: the dense rows x width output written every call)."""
    cells = {}
    for r in rows:
        if r["run"] in ("zen-peer", "zen-sparse"):
            k = "p" if r["run"] == "zen-peer" else "b"
            c = cells.setdefault((r["gbps"], r["hosts"], r["case"]), {"p": {}, "b": {}})
            c[k][r["scheme"]] = r
        elif r["run"] == "torch" and r.get("scheme") == "torch-gloo-sparse":
            cells.setdefault((r["gbps"], r["hosts"], case_of(r)), {"p": {}, "b": {}})["torch"] = r
    return cells


def per_step_ms(r):
    return None if r is None else r["time_us_p50"] / 1000.0 / max(1, r.get("tensors", 1))


def zen_dense_scheme(cells, key):
    """zen's dense scheme (zen bench sparse) for this cell's tensor: from the cell, or (synthetic
    cases time it once) from another cell of the same cluster with the same rows x width."""
    c = cells[key]
    if "dense" in c["b"]:
        return c["b"]["dense"]
    any_zen = next(iter(list(c["b"].values()) + list(c["p"].values())), None)
    if any_zen is None or any_zen.get("tensors", 1) != 1:
        return None
    for (g, h, _), other in cells.items():
        d = other["b"].get("dense")
        if (g, h) == key[:2] and d and d.get("tensors", 1) == 1 and \
                (d["rows"], d["width"]) == (any_zen["rows"], any_zen["width"]):
            return d
    return None


def best_dense(cells, key, dense):
    """Fastest dense allreduce of the same tensor: zen's dense scheme in the sparse run, or any
    peer's dense sweep point of exactly rows x width x 4 bytes (one-tensor cases)."""
    g, h, _ = key
    d = zen_dense_scheme(cells, key)
    cands = []
    if d:
        cands.append((per_step_ms(d), "zen"))
        if d.get("tensors", 1) == 1:
            for peer, name in (("zen", "zen"), ("mpi", "MPI"), ("mpiring", "MPI ring"),
                               ("torch", "gloo")):
                x = dense.get((g, h, d["rows"] * d["width"] * 4, peer))
                if x:
                    cands.append((ms(x["time_us_p50"]), name))
    return (min(cands) if cands else (None, None)), d


def sparse_table(rows, dense):
    out = ["### Sparse allreduce: time in ms (trace: per training step), ratio = peer / zen AUTO",
           "",
           "zen columns: `zen_sparse_allreduce` (sparse result, as torch returns) by "
           "`bench/zen_sparse_peer`; *dense-out AUTO*: the same data through `zen bench sparse` "
           "(`zen_sparse_allreduce_dense`, which also writes the whole dense tensor). MB: the "
           "largest payload one rank received in one call (for a trace: in its largest step).",
           "",
           "| Gbit/s | hosts | case | AUTO (chose) | " + " | ".join(SCHEMES[:-1]) +
           " | dense-out AUTO | torch gloo sparse | best dense (who) | torch/AUTO | dense/AUTO |"
           " MB recv AUTO | MB recv torch | MB recv dense |",
           "|" + "---|" * (12 + len(SCHEMES) - 1)]
    cells = sparse_cells(rows)
    summary = {}
    for key in sorted(cells):
        g, h, case = key
        c = cells[key]
        auto = c["p"].get("auto")
        at = per_step_ms(auto)
        tt = per_step_ms(c.get("torch"))
        (bd, who), dsch = best_dense(cells, key, dense)
        ab = None if auto is None else auto["max_bytes_recv"]
        tb = c.get("torch", {}).get("max_bytes_recv")
        db = None if dsch is None else dsch["max_bytes_recv"]
        bad = [s for s, r in c["p"].items() if not r.get("verified", True)]
        # zen bench sparse compares bit for bit; float trace sums in another order differ
        bad += ["dense-out " + s for s, r in c["b"].items()
                if not r.get("verified", True) and case != "trace"]
        if bad:
            case += " **(wrong: %s)**" % ",".join(bad)
        bauto = c["b"].get("auto")
        out.append("| %g | %d | %s | %s%s | %s | %s%s | %s | %s%s | %s | %s | %s | %s | %s |" % (
            g, h, case, fmt(at, 2), " (%s)" % auto["chosen"] if auto else "",
            " | ".join(fmt(per_step_ms(c["p"].get(s)), 2) for s in SCHEMES[:-1]),
            fmt(per_step_ms(bauto), 2), " (%s)" % bauto["chosen"] if bauto else "", fmt(tt, 2),
            fmt(bd, 1), " (%s)" % who if who else "", fmt(ratio(tt, at), 2),
            fmt(ratio(bd, at), 1), mb(ab), mb(tb), mb(db)))
        summary[key] = (ratio(tt, at), ratio(bd, at))
    return out, summary


def targets(rows, dense, summary):
    out = ["### Targets (8 hosts, 1 Gbit/s)", ""]
    for (g, h, case), (vs_torch, vs_dense) in sorted(summary.items()):
        if h != 8 or g != 1:
            continue
        if case != "trace" and float(case.split(":")[0]) > 0.01:
            continue
        out.append("- %s: zen AUTO vs torch gloo sparse %sx (target >= 2: %s); vs best dense "
                   "%sx (target >= 5: %s)" % (
                       case, fmt(vs_torch, 2), verdict(vs_torch, 2), fmt(vs_dense, 1),
                       verdict(vs_dense, 5)))
    sizes = sorted({k[2] for k in dense if k[:2] == (1, 8)})
    if sizes:
        s = sizes[-1]
        z = dense.get((1, 8, s, "zen"))
        for peer, name in (("mpi", "MPI_Allreduce (default)"), ("mpiring", "MPI (ring)")):
            m = dense.get((1, 8, s, peer))
            if z and m:
                slower = z["time_us_p50"] / m["time_us_p50"] - 1
                out.append("- dense %s: zen (%s) %s ms vs %s %s ms: zen %+.1f%% "
                           "(target: at most 10%% slower: %s)" % (
                               human(s), z["algo"], fmt(ms(z["time_us_p50"])), name,
                               fmt(ms(m["time_us_p50"])), 100 * slower,
                               "met" if slower <= 0.10 else "NOT met"))
    return out


def verdict(x, target):
    return "-" if x is None else ("met" if x >= target else "NOT met")


def wire_table(rows):
    w = [r for r in rows if r["run"] == "wire"]
    if not w:
        return []
    out = ["### Bytes on the wire, measured at the hosts' interfaces (tx bytes per call, "
           "payload + TCP/IP headers; max and mean over hosts)", "",
           "| Gbit/s | hosts | what | case | MB per call (max host) | MB per call (mean) |",
           "|---|---|---|---|---|---|"]
    for r in w:
        out.append("| %g | %d | %s | %s | %s | %s |" % (
            r["gbps"], r["hosts"], r["of"], r["case"], mb(r["tx_bytes_per_call_max"]),
            mb(r["tx_bytes_per_call_mean"])))
    return out


def simulate_table(rows):
    out = ["### zen simulate vs measured (ms; error = predicted / measured - 1)", "",
           "| Gbit/s | hosts | case | lat us | " +
           " | ".join("%s pred / meas (err)" % s for s in SCHEMES) +
           " | best pred / meas / AUTO chose |",
           "|" + "---|" * (5 + len(SCHEMES))]
    meas = sparse_cells(rows)  # zen_sparse_peer's schemes; dense from zen bench sparse
    errs = {s: [] for s in SCHEMES}
    by_gbps = {}
    for r in sorted((r for r in rows if r["run"] == "zen-sim"),
                    key=lambda r: (r["gbps"], r["hosts"], r["case"])):
        key = (r["gbps"], r["hosts"], r["case"])
        c = meas.get(key, {"p": {}, "b": {}})
        cells = []
        measured = {}
        for s in SCHEMES:
            got = c["p"].get(s) if s != "dense" or key not in meas else \
                zen_dense_scheme(meas, key)
            p, m = r.get(s + "_ms"), per_step_ms(got)
            if m is not None:
                measured[s] = m
            e = None if p is None or m is None else p / m - 1
            if e is not None:
                errs[s].append(e)
                by_gbps.setdefault(r["gbps"], []).append(e)
            cells.append("%s / %s (%s)" % (fmt(p, 2), fmt(m, 2),
                                            "-" if e is None else "%+.0f%%" % (100 * e)))
        best_m = min(measured, key=measured.get) if measured else "-"
        chose = c["p"].get("auto", {}).get("chosen", "-")
        out.append("| %g | %d | %s | %s | %s | %s / %s / %s |" % (
            r["gbps"], r["hosts"], r["case"], fmt(r["lat_us"]), " | ".join(cells), r["best"],
            best_m, chose))
    out += ["", "Median |error| per scheme over these points: " + ", ".join(
        "%s %.0f%% (%d)" % (s, 100 * statistics.median(abs(e) for e in v), len(v))
        for s, v in errs.items() if v) + "; signed medians: " + ", ".join(
        "%s %+.0f%%" % (s, 100 * statistics.median(v)) for s, v in errs.items() if v) + "."]
    out += ["", "Median |error| over every scheme and point, per link speed: " + ", ".join(
        "%g Gbit/s %.0f%% (%d points, %d within 25%%)" % (
            g, 100 * statistics.median(abs(e) for e in v), len(v), sum(abs(e) <= 0.25 for e in v))
        for g, v in sorted(by_gbps.items())) + "."]
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    if not rows:
        sys.exit("report.py: no results in " + sys.argv[1])
    lines, dense = dense_table(rows)
    sp, summary = sparse_table(rows, dense)
    lines += [""] + sp + [""] + targets(rows, dense, summary) + [""] + wire_table(rows)
    lines += [""] + simulate_table(rows)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
