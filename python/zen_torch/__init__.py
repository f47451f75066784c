"""zen_torch: zen as a torch.distributed backend.

``import zen_torch`` registers the backend "zen"; then ``dist.init_process_group("zen")`` (or
``dist.new_group(backend="zen")``) creates a process group whose collectives run in libzen. The
rendezvous goes through the c10d Store torch hands the backend, so torchrun, ``zen launch``,
mpirun and explicit rank/world_size with MASTER_ADDR/MASTER_PORT all work unchanged.

CPU tensors only; every call runs synchronously (the returned Work is already complete).
Sparse COO tensors (e.g. gradients of ``nn.Embedding(sparse=True)``) are summed by
``zen_sparse_allreduce``; the scheme is AUTO unless ZEN_TORCH_SPARSE_SCHEME or
``set_sparse_scheme(group, name)`` chooses one.
"""
import torch.distributed as _dist

from . import _C

__version__ = _C.version()  # the libzen this module runs on, e.g. "0.1.0"

__all__ = ["__version__", "set_sparse_scheme", "last_sparse_scheme", "transport", "all_reduce_sparse"]


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


if "ZEN" not in _dist.Backend._plugins:
    _dist.Backend.register_backend("zen", _C.create_process_group)
