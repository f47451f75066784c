"""Checks of the zen torch.distributed backend against gloo and local references.

Usage: zen_backend_check.py SUITES NPROC [spawn|torchrun-static|torchrun-c10d]
       (SUITES: a comma list of ops, sparse, errors, agree, ddp, dtypes, async, monitored; or
       secret; agree, async and secret: spawn only). ZEN_TORCH_SYNC=1 in the environment runs
       the same checks against the synchronous mode.

spawn (default): NPROC processes from torch.multiprocessing; each initialises the default group
with gloo (file rendezvous, no fixed port) and a zen group over the same ranks
(dist.new_group(backend="zen")). torchrun-*: NPROC workers started by torchrun, each calling
dist.init_process_group("zen") from torchrun's environment, with gloo as the second group. Then
each runs the suites on both groups and compares. Each rank can rebuild every rank's input from
its seed, so results that gloo cannot compute (reduce_scatter, AVG, bfloat16) are checked
against a local reference.
Exit 0 pass, 1 fail, 77 when torch itself cannot be imported (ctest SKIP_RETURN_CODE). The
build made zen_torch (tests/torch.cmake runs this only then), so a zen_torch that does not import
(no _C, an ABI break) is a failure, not a skip.
"""
import datetime
import gc
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: torch does not import: {e}")
    sys.exit(77)
try:
    import zen_torch
except ImportError as e:
    print(f"FAIL: zen_torch was built but does not import: {e}")
    sys.exit(1)

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX}


def data(rank, n, dtype, salt=0):
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return (torch.rand(n, generator=g) * 2 + 0.5).to(dtype)
    return torch.randint(1, 4, (n,), generator=g).to(dtype)


def reference(inputs, op):
    x = torch.stack([t.double() if t.dtype.is_floating_point else t for t in inputs])
    if op == "SUM":
        return x.sum(0)
    if op == "PRODUCT":
        return x.prod(0)
    if op == "MIN":
        return x.min(0).values
    return x.max(0).values


def close(a, b, dtype, what):
    a, b = a.double(), b.double()
    tol = {torch.bfloat16: 2e-2, torch.float32: 1e-5}.get(dtype, 1e-12)
    if not torch.allclose(a, b, rtol=tol, atol=tol):
        raise AssertionError(f"{what}: max diff {(a - b).abs().max().item()}")


def on_both(zen, gloo, dtype, fn):
    """fn(group) on the zen group, and on gloo where gloo has the dtype (not bfloat16)."""
    return fn(zen), (fn(gloo) if dtype != torch.bfloat16 else None)


def check_rooted_and_gathers(rank, n, zen, gloo, dtype):
    """broadcast, reduce (SUM, MAX), all_gather (list and flat), gather, reduce_scatter (list
    and flat) of one dtype: against gloo where gloo has the op and dtype, and against the
    reference every rank computes from the others' inputs."""
    root = n - 1
    inputs = [data(r, 19, dtype, salt=5) for r in range(n)]

    def broadcast(group):
        t = inputs[rank].clone()
        dist.broadcast(t, src=root, group=group)
        return t
    z, g = on_both(zen, gloo, dtype, broadcast)
    close(z, inputs[root], dtype, f"broadcast {dtype}")
    if g is not None:
        close(z, g, dtype, f"broadcast {dtype} vs gloo")
    for name, op in (("SUM", dist.ReduceOp.SUM), ("MAX", dist.ReduceOp.MAX)):
        def reduce(group):
            t = inputs[rank].clone()
            dist.reduce(t, dst=root, op=op, group=group)
            return t
        z, g = on_both(zen, gloo, dtype, reduce)
        if rank == root:
            close(z, reference(inputs, name).to(dtype), dtype, f"reduce {name} {dtype}")
            if g is not None:
                close(z, g, dtype, f"reduce {name} {dtype} vs gloo")

    def all_gather(group):
        ts = [torch.zeros_like(inputs[rank]) for _ in range(n)]
        dist.all_gather(ts, inputs[rank], group=group)
        return torch.cat(ts)
    z, g = on_both(zen, gloo, dtype, all_gather)
    close(z, torch.cat(inputs), dtype, f"all_gather {dtype}")
    if g is not None:
        close(z, g, dtype, f"all_gather {dtype} vs gloo")
    flat = torch.zeros(n * 19, dtype=dtype)
    dist.all_gather_into_tensor(flat, inputs[rank], group=zen)
    close(flat, torch.cat(inputs), dtype, f"all_gather_into_tensor {dtype}")

    def gather(group):
        ts = [torch.zeros_like(inputs[rank]) for _ in range(n)] if rank == 0 else None
        dist.gather(inputs[rank], ts, dst=0, group=group)
        return torch.cat(ts) if rank == 0 else None
    z, g = on_both(zen, gloo, dtype, gather)
    if rank == 0:
        close(z, torch.cat(inputs), dtype, f"gather {dtype}")
        if g is not None:
            close(z, g, dtype, f"gather {dtype} vs gloo")
    # reduce_scatter: gloo has none in this torch; the reference is the sum of everyone's block
    blocks = [[data(r, 7, dtype, salt=10 + b) for b in range(n)] for r in range(n)]
    mine = [blocks[r][rank] for r in range(n)]
    out = torch.zeros(7, dtype=dtype)
    dist.reduce_scatter(out, blocks[rank], group=zen)
    close(out, reference(mine, "SUM").to(dtype), dtype, f"reduce_scatter {dtype}")
    out = torch.zeros(7, dtype=dtype)
    dist.reduce_scatter_tensor(out, torch.cat(blocks[rank]), op=dist.ReduceOp.MIN, group=zen)
    close(out, reference(mine, "MIN").to(dtype), dtype, f"reduce_scatter_tensor MIN {dtype}")


def suite_ops(rank, n, zen, gloo):
    for dtype in DTYPES:
        for name, op in OPS.items():
            inputs = [data(r, 37, dtype, salt=1) for r in range(n)]
            z = inputs[rank].clone()
            dist.all_reduce(z, op=op, group=zen)
            close(z, reference(inputs, name).to(dtype), dtype, f"allreduce {name} {dtype}")
            if dtype != torch.bfloat16:
                g = inputs[rank].clone()
                dist.all_reduce(g, op=op, group=gloo)
                close(z, g, dtype, f"allreduce {name} {dtype} vs gloo")
    for dtype in (torch.float32, torch.float64):  # AVG: gloo has none; reference = mean
        inputs = [data(r, 1000, dtype, salt=2) for r in range(n)]
        z = inputs[rank].clone()
        dist.all_reduce(z, op=dist.ReduceOp.AVG, group=zen)
        close(z, reference(inputs, "SUM") / n, dtype, f"allreduce AVG {dtype}")
    # a large tensor (several MiB, other algorithm) and a non-contiguous one
    big = [data(r, 1 << 20, torch.float32, salt=3) for r in range(n)]
    z, g = big[rank].clone(), big[rank].clone()
    dist.all_reduce(z, group=zen)
    dist.all_reduce(g, group=gloo)
    close(z, g, torch.float32, "allreduce 4 MiB vs gloo")
    m = data(rank, 12, torch.float64, salt=4).view(3, 4).t()
    mg = m.clone()
    dist.all_reduce(m, group=zen)
    dist.all_reduce(mg, group=gloo)
    close(m, mg, torch.float64, "allreduce non-contiguous")
    for dtype in DTYPES:
        check_rooted_and_gathers(rank, n, zen, gloo, dtype)
    check_alltoall(rank, n, zen, gloo)
    check_barrier(rank, n, zen, gloo)
    check_p2p(rank, n, zen, gloo)
    check_work(rank, n, zen)


def check_alltoall(rank, n, zen, gloo):
    # all_to_all_single with uneven splits: rank r sends r+d+1 rows to rank d
    send = [torch.arange(sum(r + d + 1 for d in range(n)) * 3, dtype=torch.float32).view(-1, 3)
            + 100 * r for r in range(n)]
    in_splits = [rank + d + 1 for d in range(n)]
    out_splits = [s + rank + 1 for s in range(n)]
    z = torch.zeros(sum(out_splits), 3)
    g = torch.zeros(sum(out_splits), 3)
    dist.all_to_all_single(z, send[rank], out_splits, in_splits, group=zen)
    dist.all_to_all_single(g, send[rank], out_splits, in_splits, group=gloo)
    close(z, g, torch.float32, "all_to_all_single vs gloo")
    for dtype in DTYPES:  # equal splits (no split sizes), every dtype
        inputs = [data(r, 4 * n, dtype, salt=20) for r in range(n)]
        z, g = on_both(zen, gloo, dtype, lambda group: all_to_all_equal(inputs[rank], group))
        close(z, torch.cat([t[4 * rank:4 * rank + 4] for t in inputs]), dtype,
              f"all_to_all_single {dtype}")
        if g is not None:
            close(z, g, dtype, f"all_to_all_single {dtype} vs gloo")
    chunks = [torch.full((2 + d,), float(10 * rank + d)) for d in range(n)]
    outs = [torch.zeros(2 + rank) for _ in range(n)]
    dist.all_to_all(outs, chunks, group=zen)
    for s in range(n):
        close(outs[s], torch.full((2 + rank,), float(10 * s + rank)), torch.float32,
              f"all_to_all from {s}")


def all_to_all_equal(t, group):
    out = torch.zeros_like(t)
    dist.all_to_all_single(out, t, group=group)
    return out


def check_barrier(rank, n, zen, gloo):
    """Nobody leaves zen's barrier before the last rank (rank 0, late by 0.3 s) entered it:
    everyone's exit time against rank 0's entry time, one host, one clock."""
    dist.barrier(group=gloo)
    if rank == 0:
        time.sleep(0.3)
    entered = time.time()
    dist.barrier(group=zen)
    times = torch.tensor([entered, time.time()], dtype=torch.float64)
    every = [torch.zeros(2, dtype=torch.float64) for _ in range(n)]
    dist.all_gather(every, times, group=gloo)
    late_entry = every[0][0].item()
    for r in range(n):
        assert every[r][1].item() >= late_entry, f"rank {r} left the barrier before rank 0 came"


def check_p2p(rank, n, zen, gloo):
    # send/recv around a ring, nonblocking send so nobody waits on a neighbour's recv; every
    # dtype, the same ring through gloo where gloo has the dtype
    for dtype in DTYPES:
        msg = data(rank, 5, dtype, salt=30)

        def ring(group):
            got = torch.zeros(5, dtype=dtype)
            req = dist.isend(msg, (rank + 1) % n, group=group, tag=3)
            work = dist.irecv(got, (rank - 1) % n, group=group, tag=3)
            work.wait()
            req.wait()
            assert work.is_completed() and req.is_completed()
            return got
        z, g = on_both(zen, gloo, dtype, ring)
        close(z, data((rank - 1) % n, 5, dtype, salt=30), dtype, f"send/recv ring {dtype}")
        if g is not None:
            close(z, g, dtype, f"send/recv ring {dtype} vs gloo")
    # a receive whose sender has not sent yet: not complete, wait(timeout) raises, then it
    # completes once the sender sends (after a gloo barrier) and the second wait returns
    if rank == 0:
        late = torch.zeros(3)
        work = dist.irecv(late, 1, group=zen, tag=9)
        assert not work.is_completed()
        expect_error(lambda: work.wait(timeout=datetime.timedelta(milliseconds=100)),
                     "recv from", "rank 1")
    dist.barrier(group=gloo)
    if rank == 1:
        dist.send(torch.full((3,), 7.0), 0, group=zen, tag=9)
    if rank == 0:
        work.wait()
        assert work.is_completed()
        close(late, torch.full((3,), 7.0), torch.float32, "late recv")


def check_work(rank, n, zen):
    """Work objects: a successful one completes and its future holds the output; a failed one
    (a root that is no rank: every rank refuses it before sending anything) completes, is not a
    success, and raises zen's message, naming the rank, from wait() and from its future.
    (Work.exception() of this torch's Python binding cannot return an exception_ptr at all, for
    any backend.) In sync mode (ZEN_TORCH_SYNC=1) each Work is complete when returned."""
    sync = zen_torch.is_sync(zen)
    assert sync == (os.environ.get("ZEN_TORCH_SYNC") == "1"), sync
    t = torch.full((3,), float(rank))
    w = dist.all_reduce(t, group=zen, async_op=True)
    assert not sync or w.is_completed()
    assert w.wait() and w.is_completed() and w.is_success()
    close(w.get_future().value()[0], torch.full((3,), n * (n - 1) / 2), torch.float32,
          "future value")
    opts = dist.BroadcastOptions()
    opts.rootRank = n + 2
    w = zen.broadcast([torch.ones(3)], opts)
    assert not sync or w.is_completed()
    expect_error(w.wait, "broadcast", f"root {n + 2}", f"rank {rank}")
    assert w.is_completed() and not w.is_success()
    expect_error(lambda: w.get_future().wait(), "broadcast", f"root {n + 2}")
    t = torch.full((3,), float(rank))  # the group still works: nothing was sent
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), n * (n - 1) / 2), torch.float32, "allreduce after a failed Work")


def sparse_grad(rank, rows, width, nnz, salt):
    g = torch.Generator().manual_seed(7000 + 31 * salt + rank)
    idx = torch.randint(0, rows, (1, nnz), generator=g)  # duplicates on purpose (uncoalesced)
    val = torch.randn(nnz, width, generator=g)
    return torch.sparse_coo_tensor(idx, val, (rows, width))


def suite_sparse(rank, n, zen, gloo):
    for salt, (rows, width, nnz) in enumerate([(50, 4, 30), (5000, 16, 400), (10, 3, 0),
                                               (300, 1, 300)]):
        inputs = [sparse_grad(r, rows, width, nnz, salt) for r in range(n)]
        expect = sum(t.to_dense() for t in inputs)
        z = inputs[rank].clone()
        dist.all_reduce(z, group=zen)
        assert z.is_sparse and z.shape == (rows, width)
        close(z.to_dense(), expect, torch.float32, f"sparse allreduce {rows}x{width}")
        g = inputs[rank].clone()
        dist.all_reduce(g, group=gloo)
        close(z.to_dense(), g.to_dense(), torch.float32, "sparse allreduce vs gloo")
    # bfloat16 values (reduced in float32) and rows that are matrices (two dense dims)
    inputs = [sparse_grad(r, 400, 6, 50, 11) for r in range(n)]
    z = inputs[rank].to(torch.bfloat16)
    dist.all_reduce(z, group=zen)
    assert z.dtype == torch.bfloat16
    close(z.to_dense(), sum(t.to(torch.bfloat16).to_dense().float() for t in inputs),
          torch.bfloat16, "sparse allreduce bfloat16")
    inputs = [torch.sparse_coo_tensor(t._indices(), t._values().view(-1, 3, 2), (400, 3, 2))
              for t in inputs]
    z = inputs[rank].clone()
    dist.all_reduce(z, group=zen)
    g = inputs[rank].clone()
    dist.all_reduce(g, group=gloo)
    close(z.to_dense(), g.to_dense(), torch.float32, "sparse allreduce 400x3x2 vs gloo")
    close(z.to_dense(), sum(t.to_dense() for t in inputs), torch.float32, "sparse 400x3x2")
    for scheme in ("balanced", "hierarchical", "allgather", "block", "ps", "dense"):
        zen_torch.set_sparse_scheme(zen, scheme)
        inputs = [sparse_grad(r, 777, 8, 120, 9) for r in range(n)]
        z = inputs[rank].clone()
        zen_torch.all_reduce_sparse(z, group=zen)
        close(z.to_dense(), sum(t.to_dense() for t in inputs), torch.float32, scheme)
        assert zen_torch.last_sparse_scheme(zen) == scheme, zen_torch.last_sparse_scheme(zen)
    zen_torch.set_sparse_scheme(zen, "auto")
    check_wide_rows(rank, n, zen, gloo)


def check_wide_rows(rank, n, zen, gloo):
    """A table of 2^31 + 1000 rows (as a sparse COO tensor: nothing dense is made): zen returns
    u32 row indices, which must come back as torch's int64 unchanged (read as int32, every row
    >= 2^31 turned negative). Reference: the coalesced sum of every rank's input, and gloo."""
    rows = 2 ** 31 + 1000
    zen_torch.set_sparse_scheme(zen, "allgather")  # its memory is in nnz, not rows
    inputs = [torch.sparse_coo_tensor(
        torch.tensor([[2 ** 31 + r, 2 ** 31 - 1, 5, rows - 1, 2 ** 31 + 999 - r]]),
        torch.arange(10, dtype=torch.float32).view(5, 2) + r, (rows, 2)) for r in range(n)]
    expect = inputs[0]
    for t in inputs[1:]:
        expect = expect + t
    expect = expect.coalesce()
    z = inputs[rank].clone()
    dist.all_reduce(z, group=zen)
    zen_torch.set_sparse_scheme(zen, "auto")
    z = z.coalesce()
    assert z.shape == (rows, 2)
    assert z.indices().dtype == torch.int64 and int(z.indices().min()) >= 0, z.indices()
    assert torch.equal(z.indices(), expect.indices()), (z.indices(), expect.indices())
    close(z.values(), expect.values(), torch.float32, "sparse allreduce of 2^31+ rows")
    g = inputs[rank].clone()
    dist.all_reduce(g, group=gloo)
    g = g.coalesce()
    assert torch.equal(z.indices(), g.indices()), (z.indices(), g.indices())
    close(z.values(), g.values(), torch.float32, "sparse allreduce of 2^31+ rows vs gloo")


def expect_error(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        for w in words:
            if w not in str(e):
                raise AssertionError(f"error {e!r} does not name {w!r}")
        return
    raise AssertionError(f"no RuntimeError for {words}")


def suite_errors(rank, n, zen, gloo):
    # (dist.all_reduce itself sums complex tensors as real pairs; the group refuses them)
    expect_error(lambda: zen.allreduce([torch.ones(4, dtype=torch.complex64)]),
                 "allreduce", "ComplexFloat")
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                         op=dist.ReduceOp.BAND, group=zen), "allreduce", "BAND")
    sp = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 2), (4, 2))
    expect_error(lambda: dist.all_reduce(sp, op=dist.ReduceOp.MAX, group=zen), "sparse", "MAX")
    expect_error(lambda: dist.all_reduce(sp.double(), group=zen), "sparse", "Double")
    so = dist.ScatterOptions()
    so.rootRank = n + 1
    expect_error(lambda: zen.scatter([torch.ones(2)], [], so), "scatter", f"root {n + 1}")
    expect_error(lambda: zen_torch.set_sparse_scheme(zen, "nonsense"), "nonsense")
    for name in ("BOR", "BXOR"):
        expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int64),
                                             op=getattr(dist.ReduceOp, name), group=zen),
                     "allreduce", name)
    expect_error(lambda: zen.allreduce_coalesced([torch.ones(2), torch.ones(2).double()],
                                                 dist.AllreduceCoalescedOptions()),
                 "allreduce_coalesced", "one dtype")  # (dist.* checks that itself)
    expect_error(lambda: dist.recv(torch.zeros(2), group=zen), "recvAnysource")  # no src
    expect_error(lambda: dist.all_reduce(sp.to(torch.int64), group=zen), "sparse", "Long")
    # the group still works after refused calls (nothing was sent)
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), float(n * (n - 1) / 2)), torch.float32, "allreduce after errors")


ALL_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
              torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]


def anydata(rank, n, dtype, salt=0):
    if dtype == torch.bool:
        return data(rank, n, torch.int64, salt) % 2 == 0
    if dtype.is_complex:
        return torch.complex(data(rank, n, torch.float32, salt), data(rank, n, torch.float32,
                                                                      salt + 77))
    return data(rank, n, dtype, salt)


def same(a, b, what):
    if not torch.equal(a, b):
        raise AssertionError(f"{what}: {a} != {b}")


def check_moves(rank, n, zen, dtype, length):
    """broadcast, all_gather (list, flat), gather, scatter, all_to_all_single, send/recv of one
    dtype, exact against every rank's input (these ops only move bytes)."""
    what = f"{dtype} x{length}"
    inputs = [anydata(r, length, dtype, salt=40) for r in range(n)]
    root = n - 1
    t = inputs[rank].clone()
    dist.broadcast(t, src=root, group=zen)
    same(t, inputs[root], f"broadcast {what}")
    m = torch.stack([inputs[rank]] * 2).t()  # non-contiguous
    dist.broadcast(m, src=root, group=zen)
    same(m, torch.stack([inputs[root]] * 2).t(), f"broadcast non-contiguous {what}")
    ts = [torch.zeros_like(inputs[rank]) for _ in range(n)]
    dist.all_gather(ts, inputs[rank], group=zen)
    same(torch.cat(ts), torch.cat(inputs), f"all_gather {what}")
    flat = torch.zeros(n * length, dtype=dtype)
    dist.all_gather_into_tensor(flat, inputs[rank], group=zen)
    same(flat, torch.cat(inputs), f"all_gather_into_tensor {what}")
    ts = [torch.zeros_like(inputs[rank]) for _ in range(n)] if rank == 0 else None
    dist.gather(inputs[rank], ts, dst=0, group=zen)
    if rank == 0:
        same(torch.cat(ts), torch.cat(inputs), f"gather {what}")
    src = 1 % n
    pieces = [anydata(src, length, dtype, salt=50 + r) for r in range(n)]
    out = torch.zeros(length, dtype=dtype)
    dist.scatter(out, pieces if rank == src else None, src=src, group=zen)
    same(out, pieces[rank], f"scatter {what}")
    rows = [anydata(r, 2 * n * length, dtype, salt=60).view(2 * n, length) for r in range(n)]
    out = torch.zeros(2 * n, length, dtype=dtype)
    dist.all_to_all_single(out, rows[rank], group=zen)
    same(out, torch.cat([x[2 * rank:2 * rank + 2] for x in rows]), f"all_to_all_single {what}")
    got = torch.zeros(length, dtype=dtype)
    req = dist.isend(inputs[rank], (rank + 1) % n, group=zen, tag=4)
    dist.recv(got, (rank - 1) % n, group=zen, tag=4)
    req.wait()
    same(got, inputs[(rank - 1) % n], f"send/recv {what}")


def reduce_reference(inputs, op, dtype):
    if dtype == torch.bool:
        x = torch.stack(inputs)
        return x.any(0) if op in ("SUM", "MAX") else x.all(0)
    if dtype.is_floating_point:
        return reference(inputs, op).to(dtype)
    return reference([t.long() for t in inputs], op).to(dtype)  # wraps like the dtype


def check_reductions(rank, n, zen, gloo, dtype):
    """all_reduce of dtypes zen reduces in a wider type: against the reference and gloo (where
    this torch's gloo has the dtype and op); reduce and reduce_scatter too."""
    tol = 1e-2 if dtype == torch.float16 else 0
    inputs = [anydata(r, 37, dtype, salt=70) for r in range(n)]
    for name, op in OPS.items():
        z = inputs[rank].clone()
        dist.all_reduce(z, op=op, group=zen)
        want = reduce_reference(inputs, name, dtype)
        assert z.dtype == dtype and torch.allclose(z.double(), want.double(), rtol=tol,
                                                   atol=tol), f"allreduce {name} {dtype}: {z}"
        g = inputs[rank].clone()
        try:
            dist.all_reduce(g, op=op, group=gloo)
        except RuntimeError:
            assert dtype in (torch.bool, torch.int16), f"gloo refused {dtype}"
            continue
        assert torch.allclose(z.double(), g.double(), rtol=tol, atol=tol), \
            f"allreduce {name} {dtype} vs gloo: {z} {g}"
    z = inputs[rank].clone()
    dist.reduce(z, dst=0, group=zen)
    if rank == 0:
        assert torch.allclose(z.double(), reduce_reference(inputs, "SUM", dtype).double(),
                              rtol=tol, atol=tol), f"reduce {dtype}"
    blocks = [[anydata(r, 5, dtype, salt=80 + b) for b in range(n)] for r in range(n)]
    out = torch.zeros(5, dtype=dtype)
    dist.reduce_scatter(out, blocks[rank], group=zen)
    want = reduce_reference([blocks[r][rank] for r in range(n)], "SUM", dtype)
    assert torch.allclose(out.double(), want.double(), rtol=tol, atol=tol), f"reduce_scatter {dtype}"


def check_coalesced(rank, n, zen, gloo):
    for dtype in (torch.float32, torch.float16):
        shapes = [(3,), (2, 5), (7,), (1,)]
        z = [data(rank, 1, dtype, salt=90 + i).expand(*s).clone() for i, s in enumerate(shapes)]
        z[1] = torch.rand(5, 2).to(dtype).t()  # non-contiguous
        g = [t.clone() for t in z]
        ref = [t.clone() for t in z]
        dist.all_reduce_coalesced(z, group=zen)
        dist.all_reduce_coalesced(g, group=gloo)
        for i, r in enumerate(ref):
            dist.all_reduce(r, group=gloo)
            close(z[i].float(), g[i].float(), torch.bfloat16, f"allreduce_coalesced {dtype} vs gloo")
            close(z[i].float(), r.float(), torch.bfloat16, f"allreduce_coalesced {dtype}")


def check_objects(rank, n, zen, gloo):
    """all_gather_object and broadcast_object_list (uint8 and int64 tensors underneath, odd
    lengths) through zen, against gloo and the objects every rank knows."""
    objs = [{"rank": r, "text": "x" * (7 * r + 3), "list": list(range(r))} for r in range(n)]
    z, g = [None] * n, [None] * n
    dist.all_gather_object(z, objs[rank], group=zen)
    dist.all_gather_object(g, objs[rank], group=gloo)
    assert z == objs and g == objs, (z, g)
    src = n - 1
    z = [objs[src], "tail", 3.5] if rank == src else [None, None, None]
    g = list(z)
    dist.broadcast_object_list(z, src=src, group=zen)
    dist.broadcast_object_list(g, src=src, group=gloo)
    assert z == g == [objs[src], "tail", 3.5], (z, g)


def suite_dtypes(rank, n, zen, gloo):
    for dtype in ALL_DTYPES:
        for length in (7, 8):
            check_moves(rank, n, zen, dtype, length)
    for dtype in (torch.float16, torch.uint8, torch.int8, torch.int16, torch.bool):
        check_reductions(rank, n, zen, gloo, dtype)
    check_coalesced(rank, n, zen, gloo)
    check_objects(rank, n, zen, gloo)


def suite_async(rank, n, zen, gloo):
    """Several operations in flight at once complete in issue order with the right data; futures
    chain; a Work keeps its tensors alive after the caller dropped them; DDP comm hooks built on
    get_future() train as gloo does; a failing operation raises on every rank, through wait()
    and through the future, naming the rank, and so does the one queued behind it."""
    sums = []
    works = []
    for i in range(8):
        size = (1 << 18) if i % 3 == 0 else 5 + i
        t = torch.full((size,), float(rank + i))
        works.append((dist.all_reduce(t, group=zen, async_op=True), t, i))
        b = torch.full((3,), float(rank * 10 + i))
        works.append((dist.broadcast(b, src=i % n, group=zen, async_op=True), b, -1 - i))
    for w, t, i in reversed(works):
        w.wait()
        want = float(n * (n - 1) / 2 + n * i) if i >= 0 else float((-1 - i) % n * 10 - 1 - i)
        close(t, torch.full(t.shape, want), torch.float32, f"async op {i}")
    fut = dist.all_reduce(torch.ones(4), group=zen, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    close(doubled.wait(), torch.full((4,), 2.0 * n), torch.float32, "chained future")
    w = dist.all_reduce(torch.ones(1 << 20), group=zen, async_op=True)  # no reference kept
    gc.collect()
    w.wait()
    close(w.result()[0], torch.full((1 << 20,), float(n)), torch.float32, "dropped tensor")
    check_op_trace(zen)
    check_hooks(rank, n, zen, gloo)
    g = dist.new_group(backend="zen")  # a failure poisons the group: one of its own
    op = dist.ReduceOp.MAX if rank == n - 1 else dist.ReduceOp.SUM
    w1 = dist.all_reduce(torch.ones(4), op=op, group=g, async_op=True)
    w2 = dist.all_reduce(torch.ones(4), group=g, async_op=True)
    expect_error(w1.wait, "allreduce", f"rank {rank}")
    expect_error(lambda: w1.get_future().wait(), "allreduce", f"rank {rank}")
    expect_error(w2.wait, "allreduce", f"rank {rank}")


def check_op_trace(zen):
    """zen_torch._C._op_trace (bench/torch_overlap.py's bucket timeline): one row per dense
    all_reduce while on, issued <= started <= ended on time.perf_counter's clock, its bytes;
    nothing once off."""
    import zen_torch
    zen_torch._C._op_trace(True)
    t0 = time.perf_counter()
    works = [dist.all_reduce(torch.ones(k), group=zen, async_op=True) for k in (1000, 7)]
    for w in works:
        w.wait()
    t1 = time.perf_counter()
    rows = zen_torch._C._op_trace(False)
    assert [r[3] for r in rows] == [4000, 28], f"op trace bytes {rows}"
    for issued, started, ended, _ in rows:
        assert t0 <= issued <= started <= ended <= t1, f"op trace times {rows} ({t0}, {t1})"
    dist.all_reduce(torch.ones(3), group=zen)
    assert zen_torch._C._op_trace(False) == [], "op trace recorded while off"


def check_hooks(rank, n, zen, gloo):
    """DDP with torch's own comm hooks, which chain on Work.get_future(): allreduce_hook
    (matches gloo without a hook) and fp16_compress_hook (fp16 all_reduce; matches gloo with the
    same hook)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    plain, _ = train_losses(gloo, gloo, False, rank, n)
    hooked, _ = train_losses(zen, gloo, False, rank, n, hook=default_hooks.allreduce_hook)
    assert max(abs(a - b) for a, b in zip(plain, hooked)) < 1e-5, (plain, hooked)
    gz, _ = train_losses(zen, gloo, False, rank, n, hook=default_hooks.fp16_compress_hook)
    gg, _ = train_losses(gloo, gloo, False, rank, n, hook=default_hooks.fp16_compress_hook)
    assert max(abs(a - b) for a, b in zip(gz, gg)) < 1e-3, (gz, gg)


def suite_monitored(rank, n, zen, gloo):
    """zen_torch.monitored_barrier: on time it passes; when ranks 1..n-1 are all late, every
    rank raises naming all of them (not only the first); the group is usable afterwards (the
    late ranks' stale tokens are skipped by the next barrier)."""
    zen_torch.monitored_barrier(zen, timeout=datetime.timedelta(seconds=30))
    dist.barrier(group=gloo)
    if rank > 0:
        time.sleep(1.0)
    late = ", ".join(str(r) for r in range(1, n))
    expect_error(lambda: zen_torch.monitored_barrier(zen, timeout=0.3), "monitored_barrier",
                 f"rank{'s' if n > 2 else ''} {late} did not reach")
    dist.barrier(group=gloo)
    zen_torch.monitored_barrier(zen, timeout=30)
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), float(n * (n - 1) / 2)), torch.float32, "allreduce after barriers")


def suite_agree(rank, n, zen, gloo):
    """Ranks that disagree on a collective's arguments: every rank raises a RuntimeError naming
    the disagreement (never success with wrong data, never a timeout). A mismatch aborts the
    group, so each case gets a zen group of its own (spawn launcher: gloo is the default)."""
    odd = n - 1
    t0 = time.monotonic()
    g = dist.new_group(backend="zen")
    op = dist.ReduceOp.MAX if rank == odd else dist.ReduceOp.SUM
    expect_error(lambda: dist.all_reduce(torch.ones(4), op=op, group=g),
                 "disagree", "op max", "op sum")
    g = dist.new_group(backend="zen")
    t = torch.full((5,), float(rank))
    expect_error(lambda: dist.broadcast(t, 0, group=g) if rank == 0 else
                 dist.all_reduce(t, group=g), "disagree", "broadcast", "allreduce")
    g = dist.new_group(backend="zen")
    expect_error(lambda: dist.broadcast(torch.ones(3), 1 if rank == odd else 0, group=g),
                 "disagree", "root 1", "root 0")
    assert time.monotonic() - t0 < 30, "a mismatch ran into the timeout"
    # an agreeing group is unaffected
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), float(n * (n - 1) / 2)), torch.float32, "allreduce after mismatches")


def train_losses(group, gloo, sparse, rank, n, steps=6, hook=None):
    torch.manual_seed(0)
    if sparse:
        model = torch.nn.Sequential(torch.nn.Embedding(300, 16, sparse=True),
                                    torch.nn.Flatten(), torch.nn.Linear(16 * 4, 300))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 300))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                    bucket_cap_mb=0.01)
    if hook is not None:
        ddp.register_comm_hook(group, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.5)
    g = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randint(0, 300, (8, 4), generator=g) if sparse else torch.randn(8, 32,
                                                                                  generator=g)
        y = torch.randint(0, 300, (8,), generator=g)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, group=gloo)  # mean loss over ranks, through gloo for both runs
        losses.append(t.item() / n)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return losses, params


def suite_ddp(rank, n, zen, gloo):
    for sparse in (False, True):
        lg, pg = train_losses(gloo, gloo, sparse, rank, n)
        lz, pz = train_losses(zen, gloo, sparse, rank, n)
        for s, (a, b) in enumerate(zip(lg, lz)):
            if abs(a - b) > 1e-5:
                raise AssertionError(f"ddp sparse={sparse} step {s}: gloo {a} zen {b}")
        close(pz, pg, torch.float32, f"ddp sparse={sparse} parameters")
        if sparse:  # the embedding's gradient went through zen's sparse all_reduce
            assert zen_torch.last_sparse_scheme(zen) != "auto"
        if rank == 0:
            print(f"ddp sparse={sparse}: losses {['%.5f' % v for v in lz]} match gloo")


def run_suites(suite, rank, n, zen, gloo):
    # All ranks run on this host: the default transport joins them over shared memory, and
    # ZEN_TRANSPORT forces one (the group must report what it really uses).
    want = {"": "shm", "auto": "shm"}.get(os.environ.get("ZEN_TRANSPORT", ""),
                                           os.environ.get("ZEN_TRANSPORT"))
    assert zen_torch.transport(zen) == want, (zen_torch.transport(zen), want)
    for name in suite.split(","):
        globals()["suite_" + name](rank, n, zen, gloo)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def check_require_secret(rank, n):
    """ZEN_REQUIRE_SECRET=1 holds on the Store path the backend takes: without a job secret no
    zen group is built, on every rank, at once; with one the same group forms and works. A
    ZEN_TORCH_SPARSE_SCHEME the tunables table rejects is ignored (auto), not fatal."""
    os.environ.pop("ZEN_JOB_SECRET", None)
    os.environ.pop("ZEN_JOB_SECRET_FILE", None)
    os.environ["ZEN_REQUIRE_SECRET"] = "1"
    t0 = time.monotonic()
    expect_error(lambda: dist.new_group(backend="zen"), "creating the communicator")
    assert time.monotonic() - t0 < 10, "the refusal waited for a timeout"
    dist.barrier()  # every rank has refused before anyone sets the secret
    os.environ["ZEN_JOB_SECRET"] = "zen-backend-check-secret"
    os.environ["ZEN_TORCH_SPARSE_SCHEME"] = "garbage"
    zen = dist.new_group(backend="zen")
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), float(n * (n - 1) / 2)), torch.float32, "allreduce with a secret")
    dist.barrier()
    dist.destroy_process_group()


def worker(rank, suite, n, init, failed):
    """mp.spawn: gloo is the default group, zen a second group over the same ranks."""
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
        if suite == "secret":
            check_require_secret(rank, n)
            return
        run_suites(suite, rank, n, dist.new_group(backend="zen"), dist.group.WORLD)
    except Exception:
        traceback.print_exc()
        failed[rank] = 1
        os._exit(1)


def torchrun_worker(suite, n):
    """Under torchrun: zen is the default group, made from torchrun's environment alone
    (env:// at its MASTER_ADDR/MASTER_PORT store, RANK, WORLD_SIZE), gloo a second group."""
    try:
        torch.set_num_threads(1)
        rank = int(os.environ["RANK"])
        assert int(os.environ["WORLD_SIZE"]) == n and int(os.environ["LOCAL_RANK"]) == rank
        dist.init_process_group("zen")
        assert dist.get_backend() == "zen" and dist.get_rank() == rank
        run_suites(suite, rank, n, dist.group.WORLD, dist.new_group(backend="gloo"))
    except Exception:
        traceback.print_exc()
        sys.exit(1)


def torchrun(suite, n, rendezvous, logs):
    """Debian torch 1.13.1's torchrun on Python 3.11 dies before starting workers unless
    --redirects and --tee are given a value other than 0 or 3 (docs/pytorch-notes.md); 1 sends each
    worker's stdout to a log file and echoes it here with a [defaultN]: prefix. static: the
    agent hosts the store at --master_port (a free port); c10d: --rdzv_endpoint localhost:0 lets
    the kernel pick the rendezvous port and rank 0 hosts the workers' store."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n),
           "--redirects", "1", "--tee", "1", "--log_dir", logs]
    if rendezvous == "static":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            cmd += ["--master_port", str(s.getsockname()[1])]
    else:
        cmd += ["--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:0"]
    return subprocess.run(cmd + [os.path.abspath(__file__), suite, str(n), "worker"]).returncode


def main():
    suite, n = sys.argv[1], int(sys.argv[2])
    launcher = sys.argv[3] if len(sys.argv) > 3 else "spawn"
    os.environ.setdefault("ZEN_TIMEOUT_S", "60")
    if launcher == "worker":
        torchrun_worker(suite, n)
        return
    with tempfile.TemporaryDirectory() as d:
        if launcher.startswith("torchrun-"):
            if torchrun(suite, n, launcher[len("torchrun-"):], d) != 0:
                sys.exit(1)
        else:
            failed = mp.get_context("spawn").Array("i", n)
            mp.spawn(worker, args=(suite, n, "file://" + os.path.join(d, "rdv"), failed),
                     nprocs=n, join=True)
            if any(failed):
                sys.exit(1)
    print(f"{suite} at {n} processes ({launcher}): pass")


if __name__ == "__main__":
    main()
