"""zen_torch: zen as a torch.distributed backend.

``import zen_torch`` registers the backend "zen"; then ``dist.init_process_group("zen")`` (or
``dist.new_group(backend="zen")``) creates a process group whose collectives run in libzen. The
rendezvous goes through the c10d Store torch hands the backend, so torchrun, ``zen launch``,
mpirun and explicit rank/world_size with MASTER_ADDR/MASTER_PORT all work unchanged. Under
``srun`` (a Slurm step), importing this module fills in the env:// variables torch's default
rendezvous needs (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) from
Slurm's, leaving any already set alone; ``launch_env()`` shows what libzen read.

CPU tensors only. Each zen group runs its operations on a worker thread of its own, in the order
they were issued: ``async_op=True`` returns at once, ``work.wait()`` and ``work.get_future()``
complete when the worker is done (DDP overlaps its bucket all_reduces with the backward pass).
ZEN_TORCH_SYNC=1 makes every collective complete inside its call instead (for comparison).
Every dtype moves through broadcast/all_gather/gather/scatter/all_to_all/send/recv (as bytes);
float16, bool, uint8, int8 and int16 are reduced too (in float32/int32).
Sparse COO tensors (e.g. gradients of ``nn.Embedding(sparse=True)``) are summed by
``zen_sparse_allreduce``; the scheme is AUTO unless ZEN_TORCH_SPARSE_SCHEME or
``set_sparse_scheme(group, name)`` chooses one.
"""
import os as _os
import warnings as _warnings

import torch.distributed as _dist

from . import _C
from . import hooks  # noqa: F401  (zen_torch.hooks: top-k DDP comm hook)
from . import rows  # noqa: F401  (zen_torch.rows: dense embedding gradients as their rows)

__version__ = _C.version()  # the libzen this module runs on, e.g. "0.1.0"

__all__ = ["__version__", "set_sparse_scheme", "last_sparse_scheme", "transport", "all_reduce_sparse",
           "launch_env", "is_sync", "monitored_barrier", "topk_select", "hooks", "rows", "all_gather_v",
           "reduce_scatter_v"]

topk_select = _C.topk_select  # libzen's top-k selection (zen/compress.h); see its docstring


def _group(group):
    return group if group is not None else _dist.distributed_c10d._get_default_group()


def set_sparse_scheme(group, name):
    """Choose the sparse all_reduce scheme of a zen group: auto, balanced, hierarchical,
    allgather, block, ps or dense."""
    _C.set_sparse_scheme(_group(group), name)


def last_sparse_scheme(group=None):
    """The scheme the last sparse all_reduce of a zen group ran (AUTO resolved)."""
    return _C.last_sparse_scheme(_group(group))


def transport(group=None):
    """How the ranks of a zen group reach each other: "shm", "tcp", "shm+tcp", ... (ZEN_TRANSPORT
    forces one; the default is shm among the processes of one host)."""
    return _C.transport(_group(group))


def all_reduce_sparse(tensor, group=None):
    """Sum a sparse COO tensor over the group, in place; returns the coalesced sum."""
    _dist.all_reduce(tensor, group=group)
    return tensor


def is_sync(group=None):
    """True when the group completes each collective inside its call (ZEN_TORCH_SYNC=1 when the
    group was made), False when it runs them on its worker thread (the default)."""
    return _C.is_sync(_group(group))


def monitored_barrier(group=None, timeout=None):
    """A barrier that raises RuntimeError on every rank, naming every rank (not only the first)
    that did not reach it within ``timeout`` (a datetime.timedelta or seconds; default: the
    group's timeout). Rank 0 collects the others; a rank that arrives late still
    reads rank 0's verdict and raises too. torch's ``dist.monitored_barrier`` is gloo-only."""
    g = _group(group)
    if timeout is None:
        seconds = -1.0  # the group's
    elif hasattr(timeout, "total_seconds"):
        seconds = timeout.total_seconds()
    else:
        seconds = float(timeout)
    _C.monitored_barrier(g, seconds)


def all_gather_v(tensor, sizes, group=None):
    """Concatenation along dim 0 of every rank's tensor, rank r contributing sizes[r] rows (0
    allowed; tensor has sizes[rank] rows, the other dims agree): one zen_allgatherv. Blocks."""
    return _C.all_gather_v(_group(group), tensor, [int(s) for s in sizes])


def reduce_scatter_v(tensor, sizes, group=None):
    """tensor has sum(sizes) rows; rank r gets the sum over ranks of rows
    [sum(sizes[:r]), sum(sizes[:r+1])): one zen_reduce_scatterv (SUM). Blocks."""
    return _C.reduce_scatter_v(_group(group), tensor, [int(s) for s in sizes])


if "ZEN" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("zen", _C.create_process_group)


def launch_env():
    """What libzen reads from the launcher's environment, as a dict: rank, world_size,
    local_rank, local_size (-1 when not given), master_addr, master_port, slurm_step (True under
    srun) and rank_var (the variable the rank came from, e.g. "SLURM_PROCID"). Explicit variables
    (ZEN_*, then torchrun's RANK/WORLD_SIZE/MASTER_*) win over Open MPI's, PMI's, PMIx's and
    Slurm's, fact by fact."""
    return _C.launch_env()


def _fill_env_from_slurm():
    """Under srun, give torch's env:// rendezvous what it needs, from Slurm's variables: the first
    host of the step is rank 0's, the port 20000 + 10 * (SLURM_JOB_ID % 1000) + SLURM_STEP_ID % 10
    (docs/multi-host.md). A variable already set is kept. An sbatch script run without srun is not
    a step (no SLURM_STEP_NUM_TASKS) and is left alone."""
    try:
        env = _C.launch_env()
    except RuntimeError as e:
        _warnings.warn(f"zen_torch: Slurm environment not used: {e}")
        return
    if not env["slurm_step"] or env["rank"] < 0 or env["world_size"] < 1:
        return
    facts = {"RANK": env["rank"], "WORLD_SIZE": env["world_size"],
             "LOCAL_RANK": env["local_rank"], "LOCAL_WORLD_SIZE": env["local_size"],
             "MASTER_ADDR": env["master_addr"], "MASTER_PORT": env["master_port"]}
    for name, value in facts.items():
        if value != -1 and not _os.environ.get(name):
            _os.environ[name] = str(value)


_fill_env_from_slurm()
