"""The zen backend under mpirun: the launcher gives only OMPI_COMM_WORLD_RANK/SIZE, the script
passes rank and world_size explicitly and torch's env:// store meets at MASTER_ADDR/MASTER_PORT.

Usage: mpirun -n N -x MASTER_ADDR -x MASTER_PORT python3 mpirun_check.py
Checks a dense all_reduce and a sparse COO all_reduce against sums computed locally from every
rank's input. Exit 0 pass, 1 fail, 77 when torch itself cannot be imported; a zen_torch that
the build made but that does not import (no _C, an ABI break) is a failure.
"""
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: torch does not import: {e}")
    sys.exit(77)
try:
    import zen_torch
except ImportError as e:
    print(f"FAIL: zen_torch was built but does not import: {e}")
    sys.exit(1)

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
size = int(os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("zen", rank=rank, world_size=size)

ROWS, WIDTH = 50, 4


def sparse_input(r):
    g = torch.Generator().manual_seed(r)
    idx = torch.randint(0, ROWS, (1, 12), generator=g)  # duplicates on purpose
    return torch.sparse_coo_tensor(idx, torch.rand(12, WIDTH, generator=g), (ROWS, WIDTH))


dense = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(dense)
want_dense = torch.arange(1000, dtype=torch.float32) * (size * (size + 1) / 2)

sparse = sparse_input(rank)
dist.all_reduce(sparse)
want_sparse = sum(sparse_input(r).to_dense() for r in range(size))

ok = torch.allclose(dense, want_dense) and torch.allclose(sparse.to_dense(), want_sparse,
                                                          atol=1e-5)
print(f"rank {rank}/{size}: dense and sparse all_reduce {'match' if ok else 'DIFFER'}"
      f" (sparse scheme {zen_torch.last_sparse_scheme()})")
dist.destroy_process_group()
sys.exit(0 if ok else 1)
