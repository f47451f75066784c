"""Checks of the zen torch.distributed backend against gloo and local references.

Usage: zen_backend_check.py SUITES NPROC   (SUITES: a comma list of ops, sparse, errors, ddp)

Spawns NPROC processes; each initialises the default group with gloo (file rendezvous, no fixed
port) and a zen group over the same ranks (dist.new_group(backend="zen")), then runs the suite
on both and compares. Each rank can rebuild every rank's input from its seed, so results that
gloo cannot compute (reduce_scatter, AVG, bfloat16) are checked against a local reference.
Exit 0 pass, 1 fail, 77 when torch or zen_torch is missing (ctest SKIP_RETURN_CODE).
"""
import datetime
import os
import sys
import tempfile
import traceback

import importlib.util

if importlib.util.find_spec("zen_torch") is None:  # before torch's slow import
    print("skipping: zen_torch is not built (needs torch; see docs/pytorch.md)")
    sys.exit(77)
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    import zen_torch
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: {e}")
    sys.exit(77)

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


def suite_ops(rank, n, zen):
    for dtype in DTYPES:
        for name, op in OPS.items():
            inputs = [data(r, 37, dtype, salt=1) for r in range(n)]
            z = inputs[rank].clone()
            dist.all_reduce(z, op=op, group=zen)
            close(z, reference(inputs, name).to(dtype), dtype, f"allreduce {name} {dtype}")
            if dtype != torch.bfloat16:
                g = inputs[rank].clone()
                dist.all_reduce(g, op=op)
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
    dist.all_reduce(g)
    close(z, g, torch.float32, "allreduce 4 MiB vs gloo")
    m = data(rank, 12, torch.float64, salt=4).view(3, 4).t()
    mg = m.clone()
    dist.all_reduce(m, group=zen)
    dist.all_reduce(mg)
    close(m, mg, torch.float64, "allreduce non-contiguous")
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        root = n - 1
        inputs = [data(r, 19, dtype, salt=5) for r in range(n)]
        z = inputs[rank].clone()
        dist.broadcast(z, src=root, group=zen)
        close(z, inputs[root], dtype, f"broadcast {dtype}")
        zs = [torch.zeros_like(z) for _ in range(n)]
        dist.all_gather(zs, inputs[rank], group=zen)
        gs = [torch.zeros_like(z) for _ in range(n)]
        if dtype != torch.bfloat16:
            dist.all_gather(gs, inputs[rank])
        for r in range(n):
            close(zs[r], inputs[r], dtype, f"all_gather {dtype} block {r}")
            if dtype != torch.bfloat16:
                close(zs[r], gs[r], dtype, f"all_gather {dtype} vs gloo")
        z = inputs[rank].clone()
        dist.reduce(z, dst=root, group=zen)
        if rank == root:
            close(z, reference(inputs, "SUM").to(dtype), dtype, f"reduce {dtype}")
        zs = [torch.zeros_like(z) for _ in range(n)] if rank == 0 else None
        dist.gather(inputs[rank], zs, dst=0, group=zen)
        if rank == 0:
            for r in range(n):
                close(zs[r], inputs[r], dtype, f"gather {dtype} block {r}")
        blocks = [[data(r, 7, dtype, salt=10 + b) for b in range(n)] for r in range(n)]
        out = torch.zeros(7, dtype=dtype)
        dist.reduce_scatter(out, blocks[rank], group=zen)
        close(out, reference([blocks[r][rank] for r in range(n)], "SUM").to(dtype), dtype,
              f"reduce_scatter {dtype}")
    # all_to_all_single with uneven splits: rank r sends r+d+1 rows to rank d
    send = [torch.arange(sum(r + d + 1 for d in range(n)) * 3, dtype=torch.float32).view(-1, 3)
            + 100 * r for r in range(n)]
    in_splits = [rank + d + 1 for d in range(n)]
    out_splits = [s + rank + 1 for s in range(n)]
    z = torch.zeros(sum(out_splits), 3)
    g = torch.zeros(sum(out_splits), 3)
    dist.all_to_all_single(z, send[rank], out_splits, in_splits, group=zen)
    dist.all_to_all_single(g, send[rank], out_splits, in_splits)
    close(z, g, torch.float32, "all_to_all_single vs gloo")
    chunks = [torch.full((2 + d,), float(10 * rank + d)) for d in range(n)]
    outs = [torch.zeros(2 + rank) for _ in range(n)]
    dist.all_to_all(outs, chunks, group=zen)
    for s in range(n):
        close(outs[s], torch.full((2 + rank,), float(10 * s + rank)), torch.float32,
              f"all_to_all from {s}")
    dist.barrier(group=zen)
    # send/recv around a ring, nonblocking send so nobody waits on a neighbour's recv
    msg = torch.arange(5, dtype=torch.int64) + rank
    got = torch.zeros(5, dtype=torch.int64)
    req = dist.isend(msg, (rank + 1) % n, group=zen, tag=3)
    work = dist.irecv(got, (rank - 1) % n, group=zen, tag=3)
    work.wait()
    req.wait()
    assert work.is_completed() and req.is_completed()
    close(got, torch.arange(5) + (rank - 1) % n, torch.int64, "send/recv ring")
    # a receive whose sender has not sent yet: not complete, wait(timeout) raises, then it
    # completes once the sender sends (after a gloo barrier) and the second wait returns
    if rank == 0:
        late = torch.zeros(3)
        work = dist.irecv(late, 1, group=zen, tag=9)
        assert not work.is_completed()
        expect_error(lambda: work.wait(timeout=datetime.timedelta(milliseconds=100)),
                     "recv from", "rank 1")
    dist.barrier()
    if rank == 1:
        dist.send(torch.full((3,), 7.0), 0, group=zen, tag=9)
    if rank == 0:
        work.wait()
        assert work.is_completed()
        close(late, torch.full((3,), 7.0), torch.float32, "late recv")
    w = dist.all_reduce(torch.ones(3), group=zen, async_op=True)
    assert w.is_completed() and w.wait()


def sparse_grad(rank, rows, width, nnz, salt):
    g = torch.Generator().manual_seed(7000 + 31 * salt + rank)
    idx = torch.randint(0, rows, (1, nnz), generator=g)  # duplicates on purpose (uncoalesced)
    val = torch.randn(nnz, width, generator=g)
    return torch.sparse_coo_tensor(idx, val, (rows, width))


def suite_sparse(rank, n, zen):
    for salt, (rows, width, nnz) in enumerate([(50, 4, 30), (5000, 16, 400), (10, 3, 0),
                                               (300, 1, 300)]):
        inputs = [sparse_grad(r, rows, width, nnz, salt) for r in range(n)]
        expect = sum(t.to_dense() for t in inputs)
        z = inputs[rank].clone()
        dist.all_reduce(z, group=zen)
        assert z.is_sparse and z.shape == (rows, width)
        close(z.to_dense(), expect, torch.float32, f"sparse allreduce {rows}x{width}")
        g = inputs[rank].clone()
        dist.all_reduce(g)
        close(z.to_dense(), g.to_dense(), torch.float32, "sparse allreduce vs gloo")
    for scheme in ("balanced", "allgather", "dense"):
        zen_torch.set_sparse_scheme(zen, scheme)
        inputs = [sparse_grad(r, 777, 8, 120, 9) for r in range(n)]
        z = inputs[rank].clone()
        zen_torch.all_reduce_sparse(z, group=zen)
        close(z.to_dense(), sum(t.to_dense() for t in inputs), torch.float32, scheme)
        assert zen_torch.last_sparse_scheme(zen) == scheme, zen_torch.last_sparse_scheme(zen)


def expect_error(fn, *words):
    try:
        fn()
    except RuntimeError as e:
        for w in words:
            if w not in str(e):
                raise AssertionError(f"error {e!r} does not name {w!r}")
        return
    raise AssertionError(f"no RuntimeError for {words}")


def suite_errors(rank, n, zen):
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.float16), group=zen),
                 "allreduce", "Half")
    expect_error(lambda: dist.broadcast(torch.ones(4, dtype=torch.uint8), 0, group=zen),
                 "broadcast", "Byte")
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                         op=dist.ReduceOp.BAND, group=zen), "allreduce", "BAND")
    sp = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.ones(1, 2), (4, 2))
    expect_error(lambda: dist.all_reduce(sp, op=dist.ReduceOp.MAX, group=zen), "sparse", "MAX")
    expect_error(lambda: dist.all_reduce(sp.double(), group=zen), "sparse", "Double")
    expect_error(lambda: dist.scatter(torch.ones(2), [torch.ones(2)] * n if rank == 0 else None,
                                      src=0, group=zen), "scatter")
    expect_error(lambda: zen_torch.set_sparse_scheme(zen, "nonsense"), "nonsense")
    # the group still works after refused calls (nothing was sent)
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=zen)
    close(t, torch.full((3,), float(n * (n - 1) / 2)), torch.float32, "allreduce after errors")


def train_losses(group, sparse, rank, n, steps=6):
    torch.manual_seed(0)
    if sparse:
        model = torch.nn.Sequential(torch.nn.Embedding(300, 16, sparse=True),
                                    torch.nn.Flatten(), torch.nn.Linear(16 * 4, 300))
    else:
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                                    torch.nn.Linear(64, 300))
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                    bucket_cap_mb=0.01)
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
        dist.all_reduce(t)  # mean loss over ranks, through gloo for both runs
        losses.append(t.item() / n)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return losses, params


def suite_ddp(rank, n, zen):
    for sparse in (False, True):
        lg, pg = train_losses(None, sparse, rank, n)
        lz, pz = train_losses(zen, sparse, rank, n)
        for s, (a, b) in enumerate(zip(lg, lz)):
            if abs(a - b) > 1e-5:
                raise AssertionError(f"ddp sparse={sparse} step {s}: gloo {a} zen {b}")
        close(pz, pg, torch.float32, f"ddp sparse={sparse} parameters")
        if sparse:  # the embedding's gradient went through zen's sparse all_reduce
            assert zen_torch.last_sparse_scheme(zen) != "auto"
        if rank == 0:
            print(f"ddp sparse={sparse}: losses {['%.5f' % v for v in lz]} match gloo")


def worker(rank, suite, n, init, failed):
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
        zen = dist.new_group(backend="zen")
        # All ranks run on this host: the default transport joins them over shared memory, and
        # ZEN_TRANSPORT forces one (the group must report what it really uses).
        want = {"": "shm", "auto": "shm"}.get(os.environ.get("ZEN_TRANSPORT", ""),
                                               os.environ.get("ZEN_TRANSPORT"))
        assert zen_torch.transport(zen) == want, (zen_torch.transport(zen), want)
        for name in suite.split(","):
            globals()["suite_" + name](rank, n, zen)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        traceback.print_exc()
        failed[rank] = 1
        os._exit(1)


def main():
    suite, n = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("ZEN_TIMEOUT_S", "60")
    with tempfile.TemporaryDirectory() as d:
        failed = mp.get_context("spawn").Array("i", n)
        mp.spawn(worker, args=(suite, n, "file://" + os.path.join(d, "rdv"), failed),
                 nprocs=n, join=True)
        if any(failed):
            sys.exit(1)
    print(f"{suite} at {n} processes: pass")


if __name__ == "__main__":
    main()
