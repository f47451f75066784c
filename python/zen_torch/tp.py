"""zen_torch.tp: Megatron-style tensor-parallel linear layers that tolerate a slow rank.

The arithmetic, the tp collectives and the balancing run in libzen's tp layer (include/zen/tp.h)
over a communicator of the TPGroup's own (same ranks as ``group``), so a layer call is one C call
per direction and never waits behind the zen group's asynchronous work (python/zen_torch/tp.cpp
says why). The Parameters alias the C layer's buffers: no weight or gradient is copied per step.

    tpg = zen_torch.tp.TPGroup(group=None, balance="semi")
    fc1 = zen_torch.tp.ColumnParallelLinear(d, 4 * d, tp_group=tpg)
    fc2 = zen_torch.tp.RowParallelLinear(4 * d, d, tp_group=tpg)
    opt = torch.optim.AdamW(model.parameters()); tpg.attach_optimizer(opt)
    for ...: loss.backward(); opt.step(); opt.zero_grad(); tpg.step()

Physical column order: while a balance plan is active the C layer permutes each weight shard
along its inner dimension K (in for a column layer, in/tp for a row layer) so that the columns a
rank computes are contiguous. ``weight`` and ``weight.grad`` then hold the columns in that
physical order (fine for element-wise optimizers; the optimizer's per-element state follows the
permutation once ``tpg.attach_optimizer(opt)`` registered it); ``state_dict()`` and
``load_state_dict()`` always use the canonical order. docs/pytorch.md, "Tensor parallelism".
"""
import hashlib
import math
import warnings
import weakref

import torch
import torch.distributed as dist
from torch import nn

from . import _C

__all__ = ["TPGroup", "ColumnParallelLinear", "RowParallelLinear"]

_created = {}  # ranks of a group -> TPGroups made over them so far (the store key's counter)
_defaults = {}  # process group -> its default balance-none TPGroup


def _pg(group):
    return group if group is not None else dist.distributed_c10d._get_default_group()


def _store_prefix(group):
    """A store prefix no other TPGroup over these ranks uses: every rank creates its TPGroups over
    a group in the same order (as the layers, tp.h's rule), so the counters agree."""
    ranks = tuple(sorted(dist.get_process_group_ranks(_pg(group))))
    n = _created.get(ranks, 0)
    _created[ranks] = n + 1
    digest = hashlib.sha1(",".join(map(str, ranks)).encode()).hexdigest()[:16]
    return f"zen_torch_tp/{digest}/{n}/"


class TPGroup:
    """A zen_tp_group (include/zen/tp.h) over the ranks of a process group (None: the default
    group; any backend, the tp traffic goes over a zen communicator of its own).

    balance: "none" (plain Megatron), "resize" (a straggler drops up to rho_max of each layer's
    inner columns: lossy), "migrate" (the fast ranks compute a straggler's columns: exact) or
    "semi" (resize when that alone balances, else resize to the cap and migrate the rest when
    migration pays). priority: which columns resizing keeps ("score", "random", "prefix").
    period: steps between decisions; delta: straggler threshold (slower than (1 + delta) x the
    median); rho_max: cap on the pruned fraction. None takes ZEN_TP_PRIORITY / ZEN_TP_PERIOD /
    ZEN_TP_DELTA / ZEN_TP_RHO_MAX when set, else score, 10, 0.1, 0.5. timeout: seconds of every
    blocking tp wait (None: ZEN_TIMEOUT_S or libzen's default).

    Collective: every rank of the group creates it, then the same layers in the same order.
    """

    def __init__(self, group=None, balance="none", priority=None, period=None, delta=None,
                 rho_max=None, timeout=None):
        pg = _pg(group)
        rank, size = dist.get_rank(pg), dist.get_world_size(pg)
        if rank < 0:
            raise ValueError("zen_torch.tp.TPGroup: this process is not in the group")
        store = dist.PrefixStore(_store_prefix(group), dist.distributed_c10d._get_default_store())
        seconds = 0.0 if timeout is None else (
            timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout))
        self.group = group
        self.balance = balance
        self._h = _C.TPGroup(store, rank, size, seconds, balance, priority or "",
                             0 if period is None else int(period),
                             -1.0 if delta is None else float(delta),
                             -1.0 if rho_max is None else float(rho_max))
        self._layers = []  # weakrefs, creation order
        self._optimizers = []
        self._slow = {}
        self._warned = False

    @property
    def rank(self):
        return self._h.rank()

    @property
    def size(self):
        return self._h.size()

    def _register(self, layer):
        self._layers.append(weakref.ref(layer))

    def layers(self):
        """The live layers of this group, in creation order."""
        return [m for m in (r() for r in self._layers) if m is not None]

    def set_straggler(self, rank, factor, mode="spin"):
        """TEST AND BENCHMARK EMULATION: make tp rank `rank`'s GEMMs take `factor` (>= 1) times
        as long in wall time ("spin": hold the core, repeating the work and busy-waiting;
        "sleep": sleep the difference, the core is free). 1.0 clears it. Every
        rank must make the same calls (zen_tp_group_set_emulation); call between steps."""
        if factor == 1.0:
            self._slow.pop(int(rank), None)
        else:
            self._slow[int(rank)] = float(factor)
        self._h.set_emulation(sorted(self._slow.items()), mode, 0)

    def attach_optimizer(self, optimizer):
        """Let the optimizer's per-element state of this group's weights (momentum, Adam's
        moments: tensors shaped like the weight) follow the column permutations of a balance
        plan. Checked at every step(): state created or replaced later is picked up then."""
        self._optimizers.append(optimizer)
        self._sync_state()

    def _sync_state(self):
        if not self._optimizers:
            return
        for layer in self.layers():
            layer._attach_from([opt.state.get(layer.weight, {}) for opt in self._optimizers])

    def _weights_of(self, optimizer):
        """{index in optimizer.state_dict()['state']: layer} for this group's weights."""
        layers = {id(m.weight): m for m in self.layers()}
        out, i = {}, 0
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) in layers:
                    out[i] = layers[id(p)]
                i += 1
        return out

    def optimizer_state_dict(self, optimizer):
        """optimizer.state_dict() with the state of this group's weights (weight-shaped tensors:
        momentum, Adam's moments) in canonical column order, like the layers' state_dict: a
        checkpoint that load_optimizer_state_dict restores under any plan."""
        sd = optimizer.state_dict()
        state = dict(sd["state"])
        for i, layer in self._weights_of(optimizer).items():
            if i not in state:
                continue
            perm, _ = layer.column_layout()
            entry = dict(state[i])
            for k, t in entry.items():
                if torch.is_tensor(t) and t.shape == layer.weight.shape:
                    canon = torch.empty_like(t)
                    canon[:, perm] = t
                    entry[k] = canon
            state[i] = entry
        return {**sd, "state": state}

    def load_optimizer_state_dict(self, optimizer, state_dict):
        """optimizer.load_state_dict of a dict from optimizer_state_dict, the weights' state
        put into each layer's current physical order (and attached, if the optimizer is)."""
        optimizer.load_state_dict(state_dict)
        for layer in self._weights_of(optimizer).values():
            perm, _ = layer.column_layout()
            for t in optimizer.state.get(layer.weight, {}).values():
                if torch.is_tensor(t) and t.shape == layer.weight.shape:
                    t.copy_(t[:, perm])
        self._sync_state()

    def step(self):
        """Once per training step, after optimizer.step(): straggler detection and the balance
        controller (zen_tp_group_step; collective every `period` steps)."""
        self._sync_state()
        if self.balance != "none" and not self._optimizers and not self._warned:
            self._warned = True
            for layer in self.layers():
                if layer.weight.grad is not None:
                    warnings.warn("zen_torch.tp: balance '%s' permutes weight columns; call "
                                  "tpg.attach_optimizer(opt) so stateful optimizers follow"
                                  % self.balance)
                    break
        self._h.step()

    def canonical_grads(self, canonical):
        """Data parallelism over tp groups: put the weight gradients into canonical column
        order (True) before syncing them across replicas, and back (False) before the
        optimizer step (zen_tp_group_canonical_grads)."""
        self._h.canonical_grads(bool(canonical))

    def stats(self):
        """This rank's view: balance, steps, decisions, stragglers (count and straggler_ranks),
        keep_fraction (of its own columns it computes), min_keep_fraction (over ranks; < 1 means
        some rank dropped columns), migrated_cols (over layers and ranks), ms_wait / ms_compute
        (last step: time in tp collectives and migration waits / in the tp GEMMs),
        slow_factor, t_norm_ms (this rank's full-K GEMM time per step), last_arrival_rank and
        arrival_spread_ms."""
        return self._h.stats()


def _default_tp_group(group):
    pg = _pg(group)
    tpg = _defaults.get(pg)
    if tpg is None:
        tpg = _defaults[pg] = TPGroup(group)
    return tpg


class _LinearFn(torch.autograd.Function):
    """One zen_tp_linear_forward / zen_tp_linear_backward. The weight and bias gradients are
    accumulated by libzen straight into the Parameters' .grad (which alias the layer's gradient
    buffers), so backward returns None for them."""

    @staticmethod
    def forward(ctx, x2d, weight, bias, layer, training):
        ctx.layer = layer
        ctx.save_for_backward(x2d)
        return layer._h.forward(x2d, training)

    @staticmethod
    def backward(ctx, dy):
        (x2d,) = ctx.saved_tensors
        dx = ctx.layer._h.backward(x2d, dy.contiguous(), ctx.needs_input_grad[0])
        return dx, None, None, None, None


class _GatherLastDim(torch.autograd.Function):
    """Forward: concatenate every tp rank's [rows][c] along the last dimension; backward: this
    rank's slice."""

    @staticmethod
    def forward(ctx, y, tpg):
        ctx.rank, ctx.c = tpg.rank, y.shape[-1]
        return tpg._h.allgather_lastdim(y)

    @staticmethod
    def backward(ctx, dy):
        return dy[:, ctx.rank * ctx.c:(ctx.rank + 1) * ctx.c].contiguous(), None


class _SplitLastDim(torch.autograd.Function):
    """Forward: this rank's slice of the last dimension; backward: all-gather of the slices."""

    @staticmethod
    def forward(ctx, x, tpg):
        ctx.tpg = tpg
        c = x.shape[-1] // tpg.size
        return x[:, tpg.rank * c:(tpg.rank + 1) * c].contiguous()

    @staticmethod
    def backward(ctx, dx):
        return ctx.tpg._h.allgather_lastdim(dx.contiguous()), None


class _ParallelLinear(nn.Module):
    def __init__(self, column, in_features, out_features, bias, group, tp_group):
        super().__init__()
        if tp_group is None:
            tp_group = _default_tp_group(group)
        self.in_features, self.out_features = in_features, out_features
        self.tp_group = tp_group
        self._column = column
        self._h = _C.TPLinear(tp_group._h, column, in_features, out_features, bool(bias))
        self.weight = nn.Parameter(self._h.weight())
        self._w_ptr = self.weight.data_ptr()
        self._gw = self._h.weight_grad()
        if bias:
            self.bias = nn.Parameter(self._h.bias())
            self._gb = self._h.bias_grad()
        else:
            self.register_parameter("bias", None)
            self._gb = None
        self._states = {}  # data_ptr -> optimizer state tensor attached to the layer
        self.reset_parameters()
        tp_group._register(self)

    def reset_parameters(self):
        """nn.Linear's initialisation of the full (out, in) weight and bias, drawn from torch's
        default generator on every rank, then this rank's shard: with the same seed on every tp
        rank the layer equals nn.Linear(in, out) made after the same torch.manual_seed. The
        replicated bias of a row layer is broadcast from tp rank 0 so replicas agree whatever
        the seeds."""
        tpg = self.tp_group
        with torch.no_grad():
            full = torch.empty(self.out_features, self.in_features)
            nn.init.kaiming_uniform_(full, a=math.sqrt(5))
            self._h.import_weight(self._shard(full))
            if self.bias is not None:
                bound = 1 / math.sqrt(self.in_features)
                fb = torch.empty(self.out_features).uniform_(-bound, bound)
                if self._column:
                    n = self.out_features // tpg.size
                    fb = fb[tpg.rank * n:(tpg.rank + 1) * n]
                else:
                    tpg._h.broadcast_(fb, 0)
                self.bias.copy_(fb)

    def _shard(self, full):
        """This rank's shard of a full (out, in) weight, canonical order."""
        r, n = self.tp_group.rank, self.tp_group.size
        if self._column:
            k = self.out_features // n
            return full[r * k:(r + 1) * k, :]
        k = self.in_features // n
        return full[:, r * k:(r + 1) * k]

    def load_full_weight(self, weight, bias=None):
        """Set the layer from the full (out, in) weight (and bias) of an nn.Linear: this rank's
        shard, canonical order (any active permutation is respected). Call on every rank."""
        with torch.no_grad():
            self._h.import_weight(self._shard(weight.detach().float()))
            if bias is not None and self.bias is not None:
                if self._column:
                    k = self.out_features // self.tp_group.size
                    bias = bias[self.tp_group.rank * k:(self.tp_group.rank + 1) * k]
                self.bias.copy_(bias.detach())

    def canonical_weight(self):
        """A copy of this rank's weight shard in canonical column order."""
        return self._h.export_weight()

    def column_layout(self):
        """(perm, computed): perm[p] (int64, K entries) is the canonical column of the weight
        shard held at physical column p (identity without a balance plan); computed is how many
        leading physical columns this rank computes itself in a training pass (K without a
        plan; fewer while resized or migrating). K = in (column) or in/tp (row)."""
        return self._h.layout()

    def _attach_from(self, states):
        """Make the weight-shaped tensors of the optimizers' states (and only those) the layer's
        companions: new ones are attached, replaced ones detached."""
        want = {}
        for state in states:
            for t in state.values():
                if (torch.is_tensor(t) and t.shape == self.weight.shape
                        and t.dtype == torch.float32 and t.is_contiguous()):
                    want[t.data_ptr()] = t
        for ptr in [p for p in self._states if p not in want]:
            self._h.detach_state(self._states.pop(ptr))
        for ptr, t in want.items():
            if ptr not in self._states:
                self._h.attach_state(t)
                self._states[ptr] = t

    def _prepare_grads(self):
        # libzen accumulates into its own gradient buffers, which .grad must alias: after
        # zero_grad(set_to_none=True) (or any replacement) point .grad at them again.
        for p, buf in ((self.weight, self._gw), (self.bias, self._gb)):
            if p is None:
                continue
            g = p.grad
            if g is None or g.data_ptr() != buf.data_ptr():
                if g is None:
                    buf.zero_()
                else:
                    buf.copy_(g)
                p.grad = buf

    def _run(self, x2d):
        if x2d.dtype != torch.float32:
            raise TypeError(f"zen_torch.tp: float32 input expected, got {x2d.dtype}")
        if self.weight.data_ptr() != self._w_ptr:
            raise RuntimeError("zen_torch.tp: the layer's weight no longer aliases libzen's "
                               "buffer (was .data replaced, or the module moved?); set weights "
                               "with load_state_dict or load_full_weight")
        training = self.training and torch.is_grad_enabled()
        if training:
            self._prepare_grads()
        return _LinearFn.apply(x2d.contiguous(), self.weight, self.bias, self, training)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # canonical column order whatever the current balance plan
        destination[prefix + "weight"] = self._h.export_weight()
        if self.bias is not None:
            destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        for name, p in (("weight", self.weight), ("bias", self.bias)):
            key = prefix + name
            if p is None:
                continue
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            t = state_dict[key]
            if tuple(t.shape) != tuple(p.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(t.shape)}, the shard here has {tuple(p.shape)}")
                continue
            with torch.no_grad():
                if name == "weight":
                    self._h.import_weight(t)
                else:
                    p.copy_(t)
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    rest = key[len(prefix):]
                    if "." not in rest and rest not in ("weight", "bias"):
                        unexpected_keys.append(key)


class ColumnParallelLinear(_ParallelLinear):
    """Y = X W^T + b with W's output rows split over the tp ranks (Megatron's column-parallel
    linear): this rank holds weight (out/tp, in), rows rank*out/tp onward, and bias (out/tp,).
    Input (..., in), the same on every tp rank; output (..., out/tp), or (..., out) with
    gather_output. Backward all-reduces the input gradient over the tp group."""

    def __init__(self, in_features, out_features, bias=True, gather_output=False, group=None,
                 tp_group=None):
        self.gather_output = gather_output
        super().__init__(True, in_features, out_features, bias, group, tp_group)

    def forward(self, x):
        lead = x.shape[:-1]
        y = self._run(x.reshape(-1, self.in_features))
        if self.gather_output:
            y = _GatherLastDim.apply(y, self.tp_group)
        return y.reshape(*lead, y.shape[-1])

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"(shard {self.weight.shape[0]}), bias={self.bias is not None}, "
                f"gather_output={self.gather_output}, balance={self.tp_group.balance}")


class RowParallelLinear(_ParallelLinear):
    """Y = X W^T + b with W's input columns split over the tp ranks (Megatron's row-parallel
    linear): this rank holds weight (out, in/tp), columns rank*in/tp onward, and the full bias
    (out,), replicated. Input (..., in/tp) (input_is_parallel, e.g. a column layer's output) or
    (..., in) (this rank takes its slice); output (..., out), the same on every tp rank, after
    one all-reduce over the tp group."""

    def __init__(self, in_features, out_features, bias=True, input_is_parallel=True, group=None,
                 tp_group=None):
        self.input_is_parallel = input_is_parallel
        super().__init__(False, in_features, out_features, bias, group, tp_group)

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        if not self.input_is_parallel:
            x2 = _SplitLastDim.apply(x2, self.tp_group)
        y = self._run(x2)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self):
        return (f"in_features={self.in_features} (shard {self.weight.shape[1]}), "
                f"out_features={self.out_features}, bias={self.bias is not None}, "
                f"input_is_parallel={self.input_is_parallel}, balance={self.tp_group.balance}")
