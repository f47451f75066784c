"""Checks of zen_torch.hooks.topk_hook and zen_torch._C.sparse_allreduce_coo.

Usage: topk_hook_check.py NPROC

NPROC processes from torch.multiprocessing; gloo is the default group, zen a second group over
the same ranks. References are independent of the code under test: gloo's dense all_reduce, DDP
without a hook, and each rank's plain local gradients summed through gloo.
 - coo: sparse_allreduce_coo (duplicates, empty selections, sum and mean) equals a dense
   all_reduce of the scattered tensors; global top-k returns the k largest of that sum; bad
   arguments raise naming what is wrong, an index out of range fails through the future.
 - ratio 1.0 (forced through the sparse path): DDP with the hook gives the same losses and
   parameters as DDP without one.
 - error feedback: at ratio 0.01 with lr 0, the sum of the hook's updates over the steps plus the
   mean over ranks of the final residuals equals the mean of all ranks' gradients, on zen and on
   gloo (the all_gather stand-in), union and global top-k; DDP's bucket rebuild after the first
   step happens inside this run.
 - rebuild: the hook called with buckets whose parameter sets change midway (parameters move
   between buckets) keeps that identity exact: the state follows the parameters.
Exit 0 pass, 1 fail, 77 when torch does not import.
"""
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: torch does not import: {e}")
    sys.exit(77)
import harness
import zen_torch
from harness import close, expect_error
from zen_torch import hooks



def check_coo(rank, n, zen, gloo):
    numel = 1000
    g = torch.Generator().manual_seed(rank)
    for nnz, average in ((0, False), (50, False), (300, True)):
        nnz = nnz if rank != 1 else 0 if nnz == 50 else nnz  # one rank with nothing
        idx = torch.randint(0, numel, (nnz,), generator=g)  # duplicates included
        val = torch.randint(-4, 5, (nnz,), generator=g).float()
        dense = torch.zeros(numel).index_add_(0, idx, val)
        dist.all_reduce(dense, group=gloo)
        if average:
            dense /= n
        ri, rv = zen_torch._C.sparse_allreduce_coo(idx, val, numel, zen, "auto", average).wait()
        assert ri.dtype == torch.int64 and rv.dtype == torch.float32
        assert bool((ri[1:] > ri[:-1]).all()), "result indices not sorted"
        close(torch.zeros(numel).index_copy_(0, ri, rv), dense, f"coo nnz={nnz}")
    for scheme in ("balanced", "allgather"):
        idx = torch.arange(rank, numel, 7)
        val = torch.ones(idx.numel())
        ri, rv = zen_torch._C.sparse_allreduce_coo(idx, val, numel, zen, scheme, False).wait()
        dense = torch.zeros(numel).index_add_(0, idx, val)
        dist.all_reduce(dense, group=gloo)
        close(torch.zeros(numel).index_copy_(0, ri, rv), dense, f"coo {scheme}")
    one = torch.zeros(1, dtype=torch.int64)
    expect_error(lambda: zen_torch._C.sparse_allreduce_coo(one, torch.zeros(1), 10, zen, "x"),
                 "unknown sparse scheme 'x'")
    expect_error(lambda: zen_torch._C.sparse_allreduce_coo(one.int(), torch.zeros(1), 10, zen),
                 "int64 indices")
    expect_error(lambda: zen_torch._C.sparse_allreduce_coo(one, torch.zeros(1), 10, gloo),
                 "not a zen process group")
    # global top-k: at most k entries, the largest |sum| (distinct magnitudes: no ties)
    k = 40
    idx = torch.randperm(numel, generator=g)[:200]
    val = torch.randn(200, generator=g)
    dense = torch.zeros(numel).index_add_(0, idx, val)
    dist.all_reduce(dense, group=gloo)
    ri, rv = zen_torch._C.sparse_allreduce_coo(idx, val, numel, zen, "auto", False, k).wait()
    assert ri.numel() == k, ri.numel()
    close(rv, dense[ri], "global top-k values")
    assert set(ri.tolist()) == set(torch.topk(dense.abs(), k).indices.tolist()), "global top-k"
    # an index out of range fails on every rank, through the future, naming the rank
    bad = torch.tensor([10 if rank == 0 else 1])
    fut = zen_torch._C.sparse_allreduce_coo(bad, torch.ones(1), 10, zen)
    expect_error(fut.wait, f"rank {rank}", "sparse allreduce")


class Net(torch.nn.Module):
    """Registered a, c, b but run a -> b -> c: DDP's first buckets (reverse registration order)
    and its rebuilt ones (gradient-ready order) group the parameters differently."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.c = torch.nn.Linear(32, 40)
        self.b = torch.nn.Linear(32, 32)

    def forward(self, x):
        return self.c(torch.tanh(self.b(torch.tanh(self.a(x)))))


def batches(rank, steps):
    g = torch.Generator().manual_seed(100 + rank)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 40, (8,), generator=g))
            for _ in range(steps)]


def ddp_run(group, gloo, n, data, lr, state=None):
    """Losses (mean over ranks), final parameters and the sum of the applied gradients."""
    torch.manual_seed(0)
    model = Net()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group,
                                                    bucket_cap_mb=0.005)
    if state is not None:
        ddp.register_comm_hook(state, hooks.topk_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    applied = [torch.zeros_like(p) for p in model.parameters()]
    losses = []
    for x, y in data:
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        for s, p in zip(applied, model.parameters()):
            s += p.grad
        opt.step()
        t = loss.detach().clone()
        dist.all_reduce(t, group=gloo)
        losses.append(t.item() / n)
    return losses, [p.detach().clone() for p in model.parameters()], applied, model


def dense_mean_grads(gloo, n, data):
    """Each rank's own gradients (no DDP) summed over the steps, then averaged through gloo."""
    torch.manual_seed(0)
    model = Net()
    total = [torch.zeros_like(p) for p in model.parameters()]
    for x, y in data:
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        for s, p in zip(total, model.parameters()):
            s += p.grad
    for s in total:
        dist.all_reduce(s, group=gloo)
        s /= n
    return total


def check_feedback(state, applied, model, reference, gloo, n, what):
    for i, (a, p, r) in enumerate(zip(applied, model.parameters(), reference)):
        res = state.residual(p).clone()
        dist.all_reduce(res, group=gloo)
        close(a + res / n, r, f"{what}: parameter {i}: updates + residuals vs dense sum", 1e-4)


def check_ratio_one(rank, n, zen, gloo):
    data = batches(rank, 5)
    lz, pz, _, _ = ddp_run(zen, gloo, n, data, 0.5)
    state = hooks.TopKState(zen, ratio=1.0, min_bucket=0, min_param=0, dense_ratio=2.0)
    lh, ph, _, _ = ddp_run(zen, gloo, n, data, 0.5, state)
    assert state.dense == 0 and state.sent > 0, "ratio 1.0 did not take the sparse path"
    for s, (a, b) in enumerate(zip(lz, lh)):
        assert abs(a - b) <= 1e-6, f"ratio 1.0 step {s}: no hook {a}, hook {b}"
    for i, (a, b) in enumerate(zip(pz, ph)):
        close(a, b, f"ratio 1.0 parameter {i}", 1e-6)


def check_error_feedback(rank, n, zen, gloo):
    data = batches(rank, 8)
    reference = dense_mean_grads(gloo, n, data)
    for group, mode in ((zen, "union"), (zen, "global"), (gloo, "union"), (gloo, "global")):
        state = hooks.TopKState(group, ratio=0.01, min_bucket=0, min_param=40,
                                warmup_steps=2, mode=mode)
        _, _, applied, model = ddp_run(group, gloo, n, data, 0.0, state)
        assert state.step == len(data), (state.step, len(data))
        check_feedback(state, applied, model, reference, gloo, n,
                       f"{dist.get_backend(group)} {mode}")
        if rank == 0:
            print(f"error feedback {dist.get_backend(group)} {mode}: exact; "
                  f"{state.rebuilds} layout changes, {state.sent} entries sent", flush=True)


class FakeBucket:
    """What topk_hook reads of a GradBucket: a flat buffer over some parameters' gradients."""

    def __init__(self, params, last):
        self.params, self.last = params, last
        self.flat = torch.cat([p.grad.reshape(-1) for p in params])

    def buffer(self):
        return self.flat

    def parameters(self):
        return self.params

    def is_last(self):
        return self.last


def check_rebuild(rank, n, zen, gloo):
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(s)) for s in (300, 500, 200, 30)]
    layouts = [[[0, 1], [2, 3]], [[0], [1, 2, 3]], [[3, 2, 1, 0]]]
    state = hooks.TopKState(zen, ratio=0.02, min_bucket=0, min_param=50)
    g = torch.Generator().manual_seed(7 + rank)
    applied = [torch.zeros_like(p) for p in params]
    total = [torch.zeros_like(p) for p in params]
    for step in range(9):
        for p, t in zip(params, total):
            p.grad = torch.randn(p.shape, generator=g)
            t += p.grad
        layout = layouts[step // 3]
        for b, members in enumerate(layout):
            ps = [params[i] for i in members]
            bucket = FakeBucket(ps, b == len(layout) - 1)
            out = hooks.topk_hook(state, bucket).wait()
            off = 0
            for i in members:
                applied[i] += out[off:off + params[i].numel()]
                off += params[i].numel()
    assert state.rebuilds == 3, state.rebuilds  # [0] and [1, 2, 3], then [3, 2, 1, 0]
    for i, (a, t, p) in enumerate(zip(applied, total, params)):
        dist.all_reduce(t, group=gloo)
        res = state.residual(p).clone()
        dist.all_reduce(res, group=gloo)
        close(a + res / n, t / n, f"rebuild: parameter {i}", 1e-4)


def worker(rank, n, init):
    torch.set_num_threads(1)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096  # small first bucket: layouts change on rebuild
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    zen, gloo = dist.new_group(backend="zen"), dist.group.WORLD
    for check in (check_coo, check_ratio_one, check_error_feedback, check_rebuild):
        check(rank, n, zen, gloo)
        if rank == 0:
            print(f"{check.__name__}: pass", flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.spawn(worker, "topk hook")
