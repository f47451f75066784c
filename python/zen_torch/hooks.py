"""DDP communication hooks that send top-k gradients through zen's sparse allreduce.

    state = zen_torch.hooks.TopKState(ratio=0.01, warmup_steps=100)
    ddp.register_comm_hook(state, zen_torch.hooks.topk_hook)

Per bucket and step (DGC, Lin et al. ICLR'18, with ZEN's sparse allreduce as the transport):

1. accumulate: v += g (error feedback), or with ``momentum=m`` (DGC momentum correction)
   u = m*u + g, v += u;
2. select the ~k = ratio * numel largest |v| (libzen's sampled-threshold selection) plus every
   element of each parameter smaller than ``min_param`` elements (biases, norms: they go whole);
3. clear the sent entries of v (and, DGC's momentum factor masking, of u for the top-k entries);
4. sum the selection over the ranks, averaged, with zen's sparse allreduce (any scheme or AUTO)
   on the group's worker thread, which also writes the sum into the bucket.

Steps 1-3 are one C++ call without the GIL (``zen_torch._C.topk_compress_bucket``: libzen's
``zen_topk_compress_buffers`` on this bucket's tensors, the update fused into the selection's
first pass), step 4 another (``zen_torch._C.sparse_allreduce_into``, whose future's value is the
bucket): no Python callback runs on the worker, and no Python loop touches elements in the
steady state (the bucket's state is looked up by the ids of its parameters).

``mode="global"``: every rank receives at most k entries, the largest of the reduced sum, and puts
its own contribution to every dropped entry back into v, so error feedback stays exact: for every
element, (sum of applied updates) + mean over ranks of v equals the mean of all gradients so far.

Dense rule: a bucket of fewer than ``min_bucket`` elements, or any bucket while the current ratio
is >= ``dense_ratio`` (a sparse entry costs an index and a value, twice a dense one), goes through
one plain all_reduce of its mean; any residual it holds is flushed into that all_reduce.

State is kept per parameter, not per bucket index: DDP rebuilds its buckets after the first
iteration (in gradient-ready order), and a bucket's parameter set can change. Each distinct
parameter set gets one flat residual (and momentum) buffer; a parameter moving into a new bucket
carries its slice over, a parameter never seen starts at zero.

On a group of another backend (gloo), the same hook gathers every rank's (indices, values) with
all_gather (padded to the largest count) and sums locally: the traffic of the allgather approach,
for comparison.
"""
import math

import torch
import torch.distributed as dist

__all__ = ["TopKState", "topk_hook", "select_topk"]


def select_topk(x, k, exact=False, threads=1):
    """Indices (int64) of about k largest |x|: zen_torch.topk_select when this build has it,
    else torch.topk (exact, slow on CPUs)."""
    from . import _C  # noqa: F401  (the package is imported)
    import zen_torch

    fn = getattr(zen_torch, "topk_select", None)
    if fn is not None:
        return fn(x, k, exact=exact, threads=threads)[0]
    return torch.topk(x.abs(), k, sorted=False).indices


class _Flat:
    """The residual (v) and momentum (u) of one bucket layout, flat like the bucket buffer."""

    def __init__(self, params, numel, momentum, min_param):
        self.params = params  # keeps them alive: state is keyed by id()
        self.v = torch.zeros(numel)
        self.u = torch.zeros(numel) if momentum else None
        self.offsets = []
        whole, off = [], 0  # [start, end) of the parameters sent whole, adjacent ones merged
        for p in params:
            self.offsets.append(off)
            if p.numel() < min_param:
                if whole and whole[-1] == off:
                    whole[-1] = off + p.numel()
                else:
                    whole += [off, off + p.numel()]
            off += p.numel()
        assert off == numel, "bucket buffer and its parameters disagree"
        self.small = torch.tensor(whole, dtype=torch.int64)
        self.n_small = sum(whole[1::2]) - sum(whole[0::2])
        self.n_large = numel - self.n_small


class GroupState:
    """What every zen hook state holds: the group it reduces over (None: the default group) and
    whether that group is zen's (asked once)."""

    def __init__(self, process_group):
        self.group = process_group
        self._zen = None

    def _group(self):
        return self.group if self.group is not None else dist.distributed_c10d._get_default_group()

    def _is_zen(self):
        if self._zen is None:
            self._zen = dist.get_backend(self._group()) == "zen"
        return self._zen


class TopKState(GroupState):
    """Options and per-parameter state of topk_hook (one per DDP model).

    ratio: target share of each bucket's elements sent per rank and step.
    warmup, warmup_steps: DGC's warm-up; for the first len(warmup) * warmup_steps steps the ratio
      is warmup[step // warmup_steps] (while that is above ratio). warmup_steps=0: no warm-up.
    mode: "union" (every rank gets the sum over the union of the selections) or "global" (at most
      k entries, the largest of the sum: zen_sparse_options.global_topk, schemes auto, balanced
      or ps).
    scheme: zen sparse allreduce scheme (auto, balanced, allgather, ...).
    momentum: DGC momentum correction factor in [0, 1) (0: off). When on, give the optimizer no
      momentum.
    min_bucket, min_param, dense_ratio: the dense rule (module docstring).
    exact, threads: passed to the selection.
    """

    def __init__(self, process_group=None, ratio=0.01, warmup=(0.25, 0.0625, 0.015625, 0.004),
                 warmup_steps=0, mode="union", scheme="auto", momentum=0.0, min_bucket=4096,
                 min_param=1024, dense_ratio=0.5, exact=False, threads=1):
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio must be in (0, 1], got {ratio}")
        if not 0 <= momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        if mode not in ("union", "global"):
            raise ValueError(f"mode must be 'union' or 'global', got {mode!r}")
        super().__init__(process_group)
        self.ratio, self.warmup, self.warmup_steps = ratio, tuple(warmup), warmup_steps
        self.mode, self.scheme, self.momentum = mode, scheme, momentum
        self.min_bucket, self.min_param, self.dense_ratio = min_bucket, min_param, dense_ratio
        self.exact, self.threads = exact, threads
        self.step = 0
        self.rebuilds = 0  # layouts that took over a parameter from another layout
        self.sent = 0  # entries this rank sent (sparse buckets), for reports
        self.dense = 0  # elements sent through the dense path
        self._layouts = {}  # tuple of id(param) -> _Flat
        self._where = {}  # id(param) -> (_Flat, index in its params)

    def current_ratio(self):
        if self.warmup_steps > 0:
            stage = self.step // self.warmup_steps
            if stage < len(self.warmup) and self.warmup[stage] > self.ratio:
                return self.warmup[stage]
        return self.ratio

    def residual(self, param):
        """The residual (v) slice of a parameter, shaped like it (zeros if it has none)."""
        where = self._where.get(id(param))
        if where is None:
            return torch.zeros_like(param)
        flat, i = where
        off = flat.offsets[i]
        return flat.v[off:off + param.numel()].view_as(param)

    def _flat(self, bucket):
        params = bucket.parameters()
        key = tuple(id(p) for p in params)
        flat = self._layouts.get(key)
        if flat is not None:
            return flat
        flat = _Flat(params, bucket.buffer().numel(), self.momentum, self.min_param)
        moved = False
        for i, p in enumerate(params):
            old = self._where.get(id(p))
            if old is not None:  # carry the parameter's state over from its previous layout
                of, j = old
                a, b = of.offsets[j], flat.offsets[i]
                flat.v[b:b + p.numel()] = of.v[a:a + p.numel()]
                if flat.u is not None and of.u is not None:
                    flat.u[b:b + p.numel()] = of.u[a:a + p.numel()]
                moved = True
            self._where[id(p)] = (flat, i)
        self.rebuilds += moved
        self._layouts[key] = flat
        live = {id(f) for f, _ in self._where.values()}  # drop layouts nobody points to
        self._layouts = {k: f for k, f in self._layouts.items() if id(f) in live}
        return flat


def _dense(state, bucket, g, world):
    """Plain all_reduce of the bucket's mean, flushing any residual / momentum it holds."""
    key = tuple(id(p) for p in bucket.parameters())
    if state.momentum or key in state._layouts:
        flat = state._flat(bucket)
        if flat.u is not None:
            flat.u.mul_(state.momentum).add_(g)
            g.copy_(flat.u)
        g.add_(flat.v)
        flat.v.zero_()
    state.dense += g.numel()
    fut = dist.all_reduce(g.div_(world), group=state._group(), async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


def _gather_sum(idx, val, numel, group, world):
    """Another backend's stand-in for the sparse allreduce: all_gather of the padded selections,
    summed (averaged) locally. Returns a future of [indices, values] like sparse_allreduce_coo."""
    count = torch.tensor([idx.numel()])
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(counts, count, group=group)
    width = int(max(c.item() for c in counts))
    pi = torch.zeros(width, dtype=torch.int64)
    pv = torch.zeros(width)
    pi[:idx.numel()] = idx
    pv[:val.numel()] = val
    gi = [torch.empty(width, dtype=torch.int64) for _ in range(world)]
    gv = [torch.empty(width) for _ in range(world)]
    dist.all_gather(gi, pi, group=group)
    fut = dist.all_gather(gv, pv, group=group, async_op=True).get_future()

    def total(_):
        dense = torch.zeros(numel)
        for c, i, v in zip(counts, gi, gv):
            n = int(c.item())
            dense.index_add_(0, i[:n], v[:n])
        dense.div_(world)
        nz = dense.nonzero().view(-1)
        return [nz, dense[nz]]

    return fut.then(total)


def _keep_global(fut, k):
    """[indices, values] of a union sum -> its k largest |values| (the gather path's global)."""
    def top(f):
        ri, rv = f.value()
        if ri.numel() <= k:
            return [ri, rv]
        keep = torch.topk(rv.abs(), k, sorted=False).indices.sort().values
        return [ri[keep], rv[keep]]
    return fut.then(top)


def topk_hook(state, bucket):
    """The DDP comm hook (module docstring): returns a future of the bucket's averaged,
    top-k-compressed gradient."""
    g = bucket.buffer()
    group = state._group()
    world = group.size()
    ratio = state.current_ratio()
    if bucket.is_last():
        state.step += 1
    numel = g.numel()
    if numel < state.min_bucket or ratio >= state.dense_ratio or g.dtype != torch.float32:
        return _dense(state, bucket, g, world)
    flat = state._flat(bucket)
    v = flat.v
    k = max(1, min(flat.n_large, math.ceil(ratio * flat.n_large)))
    # one call without the GIL: momentum and residual, selection, the whole-sent ranges, clearing
    from . import _C
    idx, val = _C.topk_compress_bucket(g, v, flat.u, state.momentum, k, flat.small, state.exact,
                                       state.threads)
    state.sent += idx.numel()
    global_k = k + flat.n_small
    if state._is_zen():
        # the worker writes the mean into the bucket (and, global, the dropped part into v):
        # the future's value is the bucket itself, nothing is chained in Python
        return _C.sparse_allreduce_into(idx, val, g, group, state.scheme, True,
                                        global_k if state.mode == "global" else 0,
                                        v if state.mode == "global" else None)
    fut = _gather_sum(idx, val, numel, group, world)
    if state.mode == "global":
        fut = _keep_global(fut, global_k)

    def scatter(f):
        ri, rv = f.value()
        if state.mode == "global":  # own contribution to every dropped entry back into v
            dropped = ~torch.isin(idx, ri)
            v.index_add_(0, idx[dropped], val[dropped])
        g.zero_()
        g.index_copy_(0, ri, rv)
        return g

    return fut.then(scatter)
