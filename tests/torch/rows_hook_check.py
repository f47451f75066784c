"""Checks of zen_torch.rows.rows_hook and zen_torch._C.rows_allreduce_into.

Usage: rows_hook_check.py NPROC

NPROC processes from torch.multiprocessing; gloo is the default group, zen (async) and zen
(ZEN_TORCH_SYNC=1) two more over the same ranks. References are independent of the code under
test: gloo's dense all_reduce and DDP on gloo without a hook.
 - into: rows_allreduce_into of buckets whose rows are zero on some ranks (a bucket that is all
   zero on one rank or on every rank, a last partial row, a bucket shorter than one row, every
   scheme, sum and mean), and the hook's gloo path (all_gather of the rows), equal gloo's dense
   all_reduce of the same buckets; bad arguments raise naming what is wrong.
 - ddp: a model with an nn.Embedding (sparse=False) trained 4 steps with the hook, on zen async,
   zen sync and on gloo (the hook's all_gather path), ends with the parameters of DDP on gloo
   without a hook; the embedding's bucket took the row path and the others the dense one.
Exit 0 pass, 1 fail, 77 when torch does not import.
"""
import os
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
from zen_torch import rows



def sparse_rows(rank, numel, width, density, seed):
    """A bucket whose whole rows are zero except about density of them (this rank's choice)."""
    g = torch.Generator().manual_seed(seed * 100 + rank)
    x = torch.randn(numel, generator=g)
    n = numel // width
    keep = torch.rand(n, generator=g) < density
    x[:n * width].view(n, width)[~keep] = 0
    return x


def check_into(rank, n, zen, gloo):
    cases = [(1000, 16, 0.1, "auto"), (1003, 16, 0.3, "balanced"), (1003, 16, 0.3, "allgather"),
             (4096, 64, 0.05, "dense"), (4096, 64, 0.5, "hierarchical"), (10, 16, 1.0, "auto")]
    for seed, (numel, width, density, scheme) in enumerate(cases):
        for average in (False, True):
            x = sparse_rows(rank, numel, width, density, seed)
            if rank == 1 and seed == 0:
                x.zero_()  # one rank with nothing at all
            ref = x.clone()
            dist.all_reduce(ref, group=gloo)
            if average:
                ref /= n
            y = x.clone()
            out = zen_torch._C.rows_allreduce_into(x, width, zen, scheme, average).wait()
            assert out is x, "the future's value is not the bucket"
            close(x, ref, f"rows numel={numel} width={width} {scheme} average={average}")
            if average:  # the hook's path on another backend (gloo)
                rows._gather_rows(y, width, gloo, n).wait()
                close(y, ref, f"gloo rows numel={numel} width={width}")
    for numel in (1000, 1003):  # zero on every rank
        x, y = torch.zeros(numel), torch.zeros(numel)
        zen_torch._C.rows_allreduce_into(x, 16, zen).wait()
        rows._gather_rows(y, 16, gloo, n).wait()
        assert not x.any() and not y.any(), "a sum of zeros is not zero"
    f = torch.zeros(64)
    expect_error(lambda: zen_torch._C.rows_allreduce_into(f, 0, zen), "width must be in")
    expect_error(lambda: zen_torch._C.rows_allreduce_into(f.double(), 8, zen), "float32")
    expect_error(lambda: zen_torch._C.rows_allreduce_into(f.view(8, 8), 8, zen), "1-D")
    expect_error(lambda: zen_torch._C.rows_allreduce_into(f, 8, zen, "x"), "unknown sparse scheme")
    expect_error(lambda: zen_torch._C.rows_allreduce_into(f, 8, gloo), "not a zen process group")


class Model(torch.nn.Module):
    def __init__(self, vocab=500, d=32):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.mid = torch.nn.Linear(d, d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, ids):
        return self.head(torch.relu(self.mid(self.tok(ids)))).flatten(0, 1)


def train(rank, group, hook):
    torch.manual_seed(0)
    model = Model()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.05)
    state = None
    if hook:
        state = rows.RowsState(model, process_group=group)
        ddp.register_comm_hook(state, rows.rows_hook)
    opt = torch.optim.AdamW(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(4):
        ids = torch.randint(0, 500, (4, 9), generator=g)  # a few dozen of 500 rows per rank
        loss = torch.nn.functional.cross_entropy(ddp(ids[:, :-1]), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()]), state


def check_ddp(rank, n, zen, zen_sync, gloo):
    ref, _ = train(rank, gloo, False)
    for name, group in (("zen", zen), ("zen sync", zen_sync), ("gloo", gloo)):
        got, state = train(rank, group, True)
        close(got, ref, f"DDP with rows_hook on {name} vs gloo without a hook", tol=1e-4)
        # the first step's buckets may put the embedding with other layers (DDP rebuilds them
        # in gradient-ready order after it): the row path from the second step on
        assert state.row_buckets >= 3 and state.dense_buckets >= 4, \
            f"{name}: row buckets {state.row_buckets}, dense {state.dense_buckets}"
    expect_error(lambda: rows.RowsState(torch.nn.Linear(2, 2)), "no nn.Embedding")


def worker(rank, n, init):
    torch.set_num_threads(1)
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096  # the embedding in a bucket of its own
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n)
    zen, gloo = dist.new_group(backend="zen"), dist.group.WORLD
    os.environ["ZEN_TORCH_SYNC"] = "1"
    zen_sync = dist.new_group(backend="zen")
    del os.environ["ZEN_TORCH_SYNC"]
    assert zen_torch.is_sync(zen_sync) and not zen_torch.is_sync(zen)
    check_into(rank, n, zen, gloo)
    if rank == 0:
        print("check_into: pass", flush=True)
    check_ddp(rank, n, zen, zen_sync, gloo)
    if rank == 0:
        print("check_ddp: pass", flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    harness.spawn(worker, "rows hook")
