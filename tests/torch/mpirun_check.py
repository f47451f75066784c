"""The zen backend under mpirun: the launcher gives only OMPI_COMM_WORLD_RANK/SIZE, the script
passes rank and world_size explicitly and torch's env:// store meets at MASTER_ADDR/MASTER_PORT.

Usage: mpirun -n N -x MASTER_ADDR -x MASTER_PORT python3 mpirun_check.py
Checks a dense all_reduce and a sparse COO all_reduce against sums computed locally from every
rank's input. Exit 0 pass, 1 fail, 77 when torch or zen_torch is missing.
"""
import importlib.util
import os
import sys

if importlib.util.find_spec("zen_torch") is None:
    print("skipping: zen_torch is not built (needs torch; see docs/pytorch.md)")
    sys.exit(77)
import torch
import torch.distributed as dist
import zen_torch

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
