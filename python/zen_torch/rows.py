"""A DDP communication hook that sends dense embedding gradients as their non-zero rows.

    state = zen_torch.rows.RowsState(model)
    ddp.register_comm_hook(state, zen_torch.rows.rows_hook)

An ``nn.Embedding`` with the default ``sparse=False`` (what AdamW and most optimizers need) has a
dense gradient in which only the rows of the step's tokens are non-zero; DDP all-reduces all of
it. This hook is exact (no compression, no state carried between steps): a bucket made mostly of
embedding tables (at least ``min_share`` of its elements) is viewed as rows of the largest table's
width, and only the rows that hold a non-zero are summed, through zen's sparse allreduce (ZEN,
OSDI'25: Balanced Parallelism, or whatever ``scheme`` names; AUTO falls back to a dense allreduce
when the rows are dense), on the group's worker thread, which also scans the bucket and writes
the mean back into it. Every other bucket goes through a plain all_reduce of its mean, as DDP's
default. Which buckets take which path depends only on the model's parameters, so every rank
takes the same one.

A table whose offset in the bucket is not a multiple of the width has its rows split over two
bucket rows: still exact, fewer rows left out.

On a group of another backend (gloo) the row path all_gathers every rank's non-zero rows (padded
to the largest count) and sums them locally: the allgather approach, that backend's best for
rows this sparse.
"""
import torch
import torch.distributed as dist

from .hooks import GroupState

__all__ = ["RowsState", "rows_hook"]


class RowsState(GroupState):
    """State of rows_hook: the widths of the model's embedding tables with dense gradients.

    model: the module DDP wraps (or the DDP model); its nn.Embedding / nn.EmbeddingBag modules
      with sparse=False are the tables.
    process_group: the group DDP reduces over (None: the default group).
    scheme: zen sparse allreduce scheme (auto, balanced, allgather, ...).
    min_share: a bucket goes the row path when its tables hold at least this share of it.
    """

    def __init__(self, model, process_group=None, scheme="auto", min_share=0.5):
        if not 0 < min_share <= 1:
            raise ValueError(f"min_share must be in (0, 1], got {min_share}")
        super().__init__(process_group)
        self.scheme = scheme
        self.min_share = min_share
        self.width = {}  # id(weight) -> embedding_dim
        for m in model.modules():
            if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and not m.sparse:
                self.width[id(m.weight)] = m.embedding_dim
        if not self.width:
            raise ValueError("RowsState: the model has no nn.Embedding with sparse=False")
        self.row_buckets = 0  # buckets sent through the row path, for reports
        self.dense_buckets = 0


def _gather_rows(g, width, group, world):
    """Another backend's row path: all_gather of every rank's non-zero rows, summed locally."""
    n = g.numel() // width
    rows = g[:n * width].view(n, width)
    nz = rows.ne(0).any(1).nonzero().view(-1)
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([nz.numel()]), group=group)
    most = int(max(c.item() for c in counts))
    pi = torch.zeros(most, dtype=torch.int64)
    pv = torch.zeros(most, width)
    pi[:nz.numel()] = nz
    pv[:nz.numel()] = rows[nz]
    tail = g[n * width:]
    if tail.numel():
        dist.all_reduce(tail, group=group)
    if most == 0:  # no rank has a non-zero row: nothing to gather
        rows.zero_()
        done = torch.futures.Future()
        done.set_result(g.div_(world))
        return done
    gi = [torch.empty(most, dtype=torch.int64) for _ in range(world)]
    gv = [torch.empty(most, width) for _ in range(world)]
    dist.all_gather(gi, pi, group=group)
    fut = dist.all_gather(gv, pv, group=group, async_op=True).get_future()

    def total(_):
        rows.zero_()
        for c, i, v in zip(counts, gi, gv):
            k = int(c.item())
            rows.index_add_(0, i[:k], v[:k])
        return g.div_(world)

    return fut.then(total)


def rows_hook(state, bucket):
    """The DDP comm hook (module docstring): returns a future of the bucket's averaged gradient."""
    g = bucket.buffer()
    group = state._group()
    world = group.size()
    tables = [p for p in bucket.parameters() if id(p) in state.width]
    if (g.dtype != torch.float32 or not tables
            or sum(p.numel() for p in tables) < state.min_share * g.numel()):
        state.dense_buckets += 1
        fut = dist.all_reduce(g.div_(world), group=group, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    state.row_buckets += 1
    width = state.width[id(max(tables, key=lambda p: p.numel()))]
    if state._is_zen():
        from . import _C
        return _C.rows_allreduce_into(g, width, group, state.scheme, True)
    return _gather_rows(g, width, group, world)
