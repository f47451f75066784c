#!/usr/bin/python3
"""DDP overlap: step time, exposed communication and a bucket timeline, zen async vs sync vs gloo.

Every process holds a gloo group and two zen groups over the same ranks (one made with
ZEN_TORCH_SYNC=1) and, for each of the three, a DDP copy of the same GPT-shaped model (same
seed). One round runs, for each candidate in turn (the order rotates round by round, so load on
a shared machine hits them alike):
  - a timed step: forward + backward of the plain DDP model (torch's built-in all_reduce of each
    bucket, issued from its autograd hook; backward returns once every bucket is reduced);
  - a compute-only step: the same model under ddp.no_sync() (no gradient all_reduce at all);
  - a timeline step on a second DDP copy whose comm hook divides the bucket, issues the same
    dist.all_reduce(async_op=True) and records when the hook ran (the bucket's gradients are
    ready) and when the all_reduce completed (a callback chained on its future).
exposed communication = median step - median compute-only step (all candidates' compute-only
steps pooled: they run the same computation). For the zen candidates the plain step is also
traced on zen's side (zen_torch._C._op_trace, every rank): when each bucket was issued, when the
worker entered and left zen_allreduce; and every step records each thread kind's CPU time and
run-queue delay. Times are the slowest rank's (gloo all_reduce MAX
after each step); medians over the rounds after --warmup.

  one host:   PYTHONPATH=build/python bench/torch_overlap.py --nproc 2
  emulated:   ZEN_CLUSTER_NAME=zovl scripts/cluster.sh up 2 --gbps 1
              GLOO_SOCKET_IFNAME=eth0 PYTHONPATH=build/python ZEN_CLUSTER_NAME=zovl \\
                scripts/cluster.sh run 2 -- /usr/bin/python3 bench/torch_overlap.py
  plot:       bench/torch_overlap.py --plot docs/img/x.png --from timeline.json [more.json ...]
  buckets:    bench/torch_overlap.py --show-trace timeline.json   (zen's side, every rank)

Launched without --nproc it takes RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (or zen's ZEN_* names,
which cluster.sh run sets) from the environment. --timeline FILE writes rank 0's timeline
steps (JSON) for --plot.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_async import GPT, groups, slowest  # noqa: E402

CANDIDATES = ["zen_async", "zen_sync", "gloo"]


class Timing:
    """State of the timeline hook: records (bucket, ready, done) relative to backward's start."""

    def __init__(self, group, world):
        self.group, self.world = group, world
        self.t0 = 0.0
        self.events = []

    def hook(self, state, bucket):
        buf = bucket.buffer()
        buf.div_(self.world)
        ready = time.perf_counter() - self.t0
        idx = bucket.index()
        fut = dist.all_reduce(buf, group=self.group, async_op=True).get_future()

        def done(f):
            self.events.append({"bucket": idx, "ready_s": ready,
                                "done_s": time.perf_counter() - self.t0,
                                "bytes": buf.numel() * buf.element_size()})
            return f.value()[0]
        return fut.then(done)


def thread_cpu():
    """CPU seconds of this process's threads so far, by kind: "main" (the training thread),
    zen's threads by name (zen-worker, zen-tcp-rx, ...; zen names them), "other" (gloo's, torch's);
    and under "<kind> waited" the seconds they were runnable but waited for a CPU (the run
    queue delay: a communication thread that waits there holds up the wire).
    From /proc/self/task/*/schedstat (nanoseconds on the CPU, nanoseconds waiting to run)."""
    out, me = {}, os.getpid()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns, wait_ns = (int(x) for x in f.read().split()[:2])
        except OSError:
            continue  # the thread ended
        key = "main" if int(tid) == me else (name if name.startswith("zen-") else "other")
        out[key] = out.get(key, 0.0) + ns * 1e-9
        out[key + " waited"] = out.get(key + " waited", 0.0) + wait_ns * 1e-9
    return out


def renice_helpers(nice):
    """--comm-nice: give every thread of this process but the training thread (zen's worker,
    transport readers and heartbeat; gloo's workers and its socket loop) the nice value `nice`
    (Linux nice is per thread; below the process's own value needs CAP_SYS_NICE). Applies to
    all candidates alike. Returns how many threads it changed."""
    me, n = os.getpid(), 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == me:
            continue
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
            n += 1
        except OSError:
            pass  # ended, or not permitted
    return n


def make_models(gs, args):
    plain, timed, timing = {}, {}, {}
    for name in CANDIDATES:
        g = gs[name]
        for table in (plain, timed):
            torch.manual_seed(0)
            model = GPT(args.vocab, args.dim, args.layers, args.heads, args.seq)
            table[name] = torch.nn.parallel.DistributedDataParallel(
                model, process_group=g, bucket_cap_mb=args.bucket_mb,
                gradient_as_bucket_view=args.grad_view)
        if args.rows:  # the plain step's DDP only: the timeline keeps the dense all_reduces
            import zen_torch.rows
            plain[name].register_comm_hook(
                zen_torch.rows.RowsState(plain[name].module, process_group=g),
                zen_torch.rows.rows_hook)
        timing[name] = Timing(g, dist.get_world_size(g))
        timed[name].register_comm_hook(None, timing[name].hook)
    return plain, timed, timing


def run(rank, world, args):
    gs = groups()
    plain, timed, timing = make_models(gs, args)
    if args.comm_nice is not None:
        # the groups' threads exist by now (gloo's and zen's are made with the group)
        renice_helpers(args.comm_nice)
    gen = torch.Generator().manual_seed(rank)
    steps = {name: [] for name in CANDIDATES + ["compute"]}
    cpus = {name: [] for name in CANDIDATES + ["compute"]}
    ready = {name: [] for name in CANDIDATES}
    paired = {name: [] for name in CANDIDATES}  # step - the compute-only step right after it
    by_thread = {name: [] for name in CANDIDATES + ["compute"]}
    threads = []
    ops = []  # zen's per-bucket trace of each zen plain step, ms since its backward began
    t_bwd_abs = []  # when that backward began (perf_counter: one clock for all ranks of a host)
    traces = []
    wire = {name: [] for name in CANDIDATES}
    lines = []

    def cpu_s():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    def trace(name, on):
        """zen's all_reduce trace (zen_torch._op_trace): (issued, started, ended, bytes) per
        bucket, taken around backward of a zen candidate's plain step."""
        import zen_torch
        return zen_torch._C._op_trace(on)

    def step(ddp, sync, tm=None, name=""):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
        dist.barrier(group=gs["gloo"])
        th0 = thread_cpu()
        c0 = cpu_s()
        t0 = time.perf_counter()
        ctx = torch.enable_grad() if sync else ddp.no_sync()
        with ctx:
            loss = torch.nn.functional.cross_entropy(
                ddp(ids[:, :-1]).reshape(-1, args.vocab), ids[:, 1:].reshape(-1))
            t_bwd = time.perf_counter()
            if tm is not None:
                tm.t0, tm.events = t_bwd, []
            traced = sync and tm is None and name.startswith("zen")
            if traced:
                trace(name, True)
            loss.backward()
        t1 = time.perf_counter()
        if traced:
            t_bwd_abs.append(t_bwd)
            ops.append([{"issued_s": a - t_bwd, "started_s": b - t_bwd, "ended_s": c - t_bwd,
                         "bytes": n} for a, b, c, n in trace(name, False)])
            ops[-1].append({"step_end_s": t1 - t_bwd})
        cpu = cpu_s() - c0
        th1 = thread_cpu()
        if tm is None:
            threads.append({k: v - th0.get(k, 0.0) for k, v in th1.items()})
        # with bucket views the gradients must stay (zeroed) views: set to None, the next
        # backward would accumulate into fresh tensors and DDP copy them into the bucket again
        ddp.zero_grad(set_to_none=not args.grad_view)
        fwd_s, total_s = t_bwd - t0, t1 - t0
        return fwd_s, total_s, slowest([total_s, cpu], gs["gloo"])

    for r in range(args.warmup + args.rounds):
        order = CANDIDATES[r % 3:] + CANDIDATES[:r % 3]
        for name in order:
            s = step(plain[name], True, name=name)[2]
            c = step(plain[name], False)[2]
            fwd, total, _ = step(timed[name], True, timing[name])
            if r < args.warmup:
                continue
            by_thread[name].append(threads[-2])
            by_thread["compute"].append(threads[-1])
            paired[name].append(s[0] - c[0])
            steps[name].append(s[0])
            cpus[name].append(s[1])
            steps["compute"].append(c[0])
            cpus["compute"].append(c[1])
            ready[name].append(max(e["ready_s"] for e in timing[name].events))
            if name.startswith("zen"):
                wire[name].append(summarize_ops(ops[-1]))
                traces.append({"kind": "optrace", "rank": rank, "round": r - args.warmup,
                               "group": name, "t_bwd": t_bwd_abs[-1], "ops": ops[-1]})
            if rank == 0:
                lines.append({"kind": "timeline", "round": r - args.warmup, "group": name,
                              "forward_s": fwd, "step_s": total, "buckets": timing[name].events})
    everyone = [None] * world
    dist.all_gather_object(everyone, traces, group=gs["gloo"])
    if rank != 0:
        return []
    lines += [t for per_rank in everyone for t in per_rank]
    params = sum(p.numel() for p in plain["gloo"].parameters())
    compute = statistics.median(steps["compute"])
    sync_ms = (statistics.median(steps["zen_sync"]) - compute) * 1e3
    out = []
    sync_paired = statistics.median(paired["zen_sync"])
    for name in CANDIDATES + ["compute"]:
        v = steps[name]
        med = statistics.median(v)
        row = {"kind": "step", "group": name, "world": world, "params": params,
               "step_ms": med * 1e3, "step_min_ms": min(v) * 1e3, "step_max_ms": max(v) * 1e3,
               "cpu_ms": statistics.median(cpus[name]) * 1e3, "rounds": len(v),
               "step_ms_by_round": [round(x * 1e3, 1) for x in v],
               "rank0_thread_cpu_ms": {k: round(statistics.median(t.get(k, 0.0)
                                                                  for t in by_thread[name]) * 1e3, 1)
                                       for k in sorted(set().union(*by_thread[name]))}}
        if wire.get(name):
            row["zen_ops_ms"] = {k: round(statistics.median(w[k] for w in wire[name]), 1)
                                 for k in wire[name][0]}
        if name != "compute":
            row["grads_ready_ms"] = statistics.median(ready[name]) * 1e3
            row["exposed_ms"] = (med - compute) * 1e3
            row["exposed_share"] = (med - compute) / med
            row["exposed_vs_zen_sync"] = row["exposed_ms"] / sync_ms if sync_ms > 0 else None
            # the same difference taken step by step (each step minus the compute-only step that
            # ran right after it, same load), then the median: less sensitive to load drift
            row["exposed_paired_ms"] = statistics.median(paired[name]) * 1e3
            row["exposed_paired_ms_by_round"] = [round(x * 1e3, 1) for x in paired[name]]
            row["paired_vs_zen_sync"] = (statistics.median(paired[name]) / sync_paired
                                         if sync_paired > 0 else None)
            # round by round (every candidate runs once per round, so index i is one round):
            # this round's paired exposed time over zen sync's, and its step over gloo's
            row["paired_vs_zen_sync_by_round"] = [
                round(a / b, 3) if b > 0 else None for a, b in zip(paired[name],
                                                                   paired["zen_sync"])]
            row["step_vs_gloo_by_round"] = [round(a / b, 3) for a, b in zip(v, steps["gloo"])]
        out.append(row)
    load = os.getloadavg()
    out.append({"kind": "run", "world": world, "label": args.label, "comm_nice": args.comm_nice,
                "load": [round(x, 2) for x in load],
                "bucket_mb": args.bucket_mb, "grad_view": args.grad_view, "rows": args.rows,
                "model": {"vocab": args.vocab, "dim": args.dim, "layers": args.layers,
                          "seq": args.seq, "batch": args.batch}})
    return out + lines


def summarize_ops(ops):
    """One zen plain step's trace in ms since backward started: first bucket issued, last one
    issued, first started, the worker's time inside zen_allreduce (sum, and as MB/s), the time
    buckets waited in the queue (sum), the last one's end and the step's end."""
    end = ops[-1]["step_end_s"]
    rows = ops[:-1]
    if not rows:
        return {"step_end": end * 1e3}
    busy = sum(o["ended_s"] - o["started_s"] for o in rows)
    return {"first_issued": rows[0]["issued_s"] * 1e3,
            "last_issued": max(o["issued_s"] for o in rows) * 1e3,
            "first_started": rows[0]["started_s"] * 1e3,
            "in_zen": busy * 1e3,
            "queued": sum(o["started_s"] - o["issued_s"] for o in rows) * 1e3,
            "MB_per_s": sum(o["bytes"] for o in rows) / busy / 1e6 if busy > 0 else 0.0,
            "last_ended": max(o["ended_s"] for o in rows) * 1e3,
            "step_end": end * 1e3}


def env_fallback():
    for torch_name, zen_name in (("RANK", "ZEN_RANK"), ("WORLD_SIZE", "ZEN_WORLD_SIZE"),
                                 ("MASTER_ADDR", "ZEN_MASTER_ADDR"),
                                 ("MASTER_PORT", "ZEN_MASTER_PORT")):
        if torch_name not in os.environ and zen_name in os.environ:
            os.environ[torch_name] = os.environ[zen_name]


def report(out, args):
    for r in out:
        if r["kind"] not in ("step", "run"):
            continue
        if args.json:
            print(json.dumps(r), flush=True)
        elif r["kind"] == "run":
            print(f"world {r['world']}, load {r['load']}"
                  + (", rows hook on every candidate" if r.get("rows") else ""))
        elif r["group"] == "compute":
            print(f"  compute-only: step {r['step_ms']:7.1f} ms  cpu {r['cpu_ms']:.0f} ms"
                  f"  ({r['params']} parameters)  rank 0 by thread: {r['rank0_thread_cpu_ms']}")
        else:
            vs = r["exposed_vs_zen_sync"]
            vs = f"{100 * vs:5.1f} %" if vs is not None else "  n/a"
            print(f"{r['group']:>10}: step {r['step_ms']:7.1f} ms ({r['step_min_ms']:.0f}-"
                  f"{r['step_max_ms']:.0f})  exposed comm {r['exposed_ms']:7.1f} ms "
                  f"({100 * r['exposed_share']:4.1f} % of the step, {vs} of zen sync's)"
                  f"  cpu {r['cpu_ms']:.0f} ms"
                  f"  grads ready {r['grads_ready_ms']:.0f} ms", flush=True)
            pv = r["paired_vs_zen_sync"]
            pv = f"{100 * pv:5.1f} %" if pv is not None else "  n/a"
            print(f"{'':>12}exposed, paired step by step: {r['exposed_paired_ms']:7.1f} ms "
                  f"({pv} of zen sync's)")
            print(f"{'':>12}by round: paired exposed / zen sync's "
                  + " ".join("n/a" if x is None else f"{100 * x:.0f}%"
                             for x in r["paired_vs_zen_sync_by_round"])
                  + "; step / gloo's " + " ".join(f"{x:.3f}" for x in r["step_vs_gloo_by_round"]))
            print(f"{'':>12}rank 0 CPU by thread (ms): {r['rank0_thread_cpu_ms']}")
            if "zen_ops_ms" in r:
                print(f"{'':>12}zen buckets (ms since backward began): {r['zen_ops_ms']}")
    if args.timeline:
        with open(args.timeline, "w") as f:
            json.dump(out, f)


def worker(rank, n, args, init, results):
    torch.set_num_threads(args.threads)
    if init:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    else:
        dist.init_process_group("gloo")
    out = run(dist.get_rank(), dist.get_world_size(), args)
    if dist.get_rank() == 0:
        if results is None:
            report(out, args)
        else:
            results.extend(out)
    dist.barrier()
    dist.destroy_process_group()


def show_trace(src):
    """Print each zen plain step of a --timeline file bucket by bucket, every rank side by side,
    in ms since the earliest rank began backward: when DDP issued the bucket, when zen's worker
    entered zen_allreduce and when it left it."""
    with open(src) as f:
        rows = [r for r in json.load(f) if r["kind"] == "optrace"]
    for key in sorted({(r["group"], r["round"]) for r in rows}):
        rs = sorted((r for r in rows if (r["group"], r["round"]) == key), key=lambda r: r["rank"])
        base = min(r["t_bwd"] for r in rs)
        ends = [(r["t_bwd"] - base + r["ops"][-1]["step_end_s"]) * 1e3 for r in rs]
        print(f"{key[0]} round {key[1]}: step end per rank " + ", ".join(f"{e:.1f}" for e in ends))
        for k in range(len(rs[0]["ops"]) - 1):
            cells = []
            for r in rs:
                o, off = r["ops"][k], (r["t_bwd"] - base) * 1e3
                cells.append(" ".join(f"{o[f] * 1e3 + off:7.1f}"
                                      for f in ("issued_s", "started_s", "ended_s")))
            print(f"  bucket {k:2d} {rs[0]['ops'][k]['bytes'] / 1e6:5.2f} MB  issued started ended: "
                  + " | ".join(cells))


def plot(path, sources):
    """One panel per source (a run's --timeline file), one row per candidate: each bucket's
    all_reduce from its gradients being ready to its completion, against backward."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = []
    for src in sources:
        with open(src) as f:
            rows = json.load(f)
        run_row = next(r for r in rows if r["kind"] == "run")
        tl = {}
        for r in rows:  # the median-step round of each candidate
            if r["kind"] == "timeline":
                tl.setdefault(r["group"], []).append(r)
        pick = {g: sorted(v, key=lambda r: r["step_s"])[len(v) // 2] for g, v in tl.items()}
        compute = next(r for r in rows if r["kind"] == "step" and r["group"] == "compute")
        runs.append((run_row, pick, compute))
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 2.2 + 1.6 * len(runs)), squeeze=False)
    colors = {"zen_async": "tab:blue", "zen_sync": "tab:orange", "gloo": "tab:green"}
    for ax, (run_row, pick, compute) in zip(axes[:, 0], runs):
        for y, name in enumerate(CANDIDATES):
            r = pick[name]
            fwd = r["forward_s"] * 1e3
            ax.barh(y + 0.32, fwd, left=-fwd, height=0.12, color="lightgray")
            bs = sorted(r["buckets"], key=lambda b: b["bucket"])
            for k, b in enumerate(bs):  # one thin row per bucket, bucket 0 at the top
                a, d = b["ready_s"] * 1e3, b["done_s"] * 1e3
                row = y + 0.22 - 0.6 * k / max(1, len(bs) - 1)
                ax.barh(row, d - a, left=a, height=0.6 / max(1, len(bs)), color=colors[name],
                        edgecolor="black", linewidth=0.3)
                ax.plot([a], [row], marker="|", color="black", markersize=5)
            ax.plot([r["step_s"] * 1e3 - fwd] * 2, [y - 0.42, y + 0.42], color="red", linewidth=1.5)
        bwd = compute["step_ms"] - statistics.median(
            pick[n]["forward_s"] * 1e3 for n in CANDIDATES)
        ax.axvline(bwd, color="gray", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(CANDIDATES)), CANDIDATES)
        ax.set_title(f"{run_row.get('label') or str(run_row['world']) + ' ranks'} (load "
                     f"{run_row['load'][0]:.1f}): rank 0's median timeline step",
                     fontsize=8)
        ax.set_xlabel("ms since backward started")
    fig.suptitle("gray: forward; one row per DDP bucket: its all_reduce from gradients ready (|) "
                 "to done; red: step end; dashed: compute-only step", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=0,
                    help="spawn N local processes (default: take the rank from the environment)")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16,
                    help="sequences per step (16: backward about as long as the 27 MB take at "
                         "1 Gbit/s, so overlap can hide them; at 2 it cannot; 24: backward covers "
                         "the wire also at 4 emulated hosts on 2 cores: docs/pytorch.md)")
    ap.add_argument("--bucket-mb", type=float, default=2.0,
                    help="DDP bucket_cap_mb (torch default 25: see docs/pytorch.md)")
    ap.add_argument("--grad-view", action="store_true",
                    help="DDP gradient_as_bucket_view=True for every candidate: gradients are "
                         "views into the buckets, so DDP copies no gradient into a bucket before "
                         "its all_reduce nor back after it (docs/pytorch.md)")
    ap.add_argument("--rows", action="store_true",
                    help="every candidate's DDP (not the timeline's) with zen_torch.rows.rows_hook:"
                         " the token embedding's bucket as its non-zero rows (zen: sparse "
                         "allreduce; gloo: all_gather of the rows)")
    ap.add_argument("--comm-nice", type=int, default=None,
                    help="nice value for every thread but the training thread (communication "
                         "threads of all candidates), e.g. -5 (needs CAP_SYS_NICE below 0)")
    ap.add_argument("--timeline", help="write rank 0's results and timeline steps here (JSON)")
    ap.add_argument("--label", default="", help="text for the plot's panel title")
    ap.add_argument("--plot", help="draw the timelines of --from files into this PNG and exit")
    ap.add_argument("--from", dest="sources", nargs="+", default=[])
    ap.add_argument("--show-trace", metavar="FILE",
                    help="print the zen buckets of a --timeline file, every rank, and exit")
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args()
    if args.plot:
        plot(args.plot, args.sources)
        return
    if args.show_trace:
        show_trace(args.show_trace)
        return
    try:
        import zen_torch  # noqa: F401  (registers "zen"; fails early when PYTHONPATH is wrong)
    except ImportError as e:
        print(f"zen_torch does not import ({e}): run with PYTHONPATH=build/python",
              file=sys.stderr)
        sys.exit(1)
    if args.nproc == 0:
        env_fallback()
        worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, None, None)
        return
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d, mp.Manager() as m:
        results = m.list()
        mp.spawn(worker, args=(args.nproc, args, "file://" + os.path.join(d, "rdv"), results),
                 nprocs=args.nproc, join=True)
        report(list(results), args)


if __name__ == "__main__":
    main()
