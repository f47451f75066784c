"""What the torch checks share: comparison with a reference, expected errors, and the run of a
check function in NPROC processes from torch.multiprocessing (spawn) with a file rendezvous.

Import it after torch imported (the checks exit 77 first when torch does not)."""
import os
import sys
import tempfile
import traceback

import torch
import torch.multiprocessing as mp


def close(a, b, what, tol=1e-5):
    if not torch.allclose(a.double(), b.double(), rtol=tol, atol=tol):
        raise AssertionError(f"{what}: max diff {(a.double() - b.double()).abs().max().item()}")


def expect_error(fn, *words):
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        for w in words:
            assert w in str(e), f"error {e!r} does not say {w!r}"
        return
    raise AssertionError(f"no error (expected one saying {words})")


def _run(rank, n, init, failed, body):
    try:
        body(rank, n, init)
    except Exception:
        traceback.print_exc()
        failed[rank] = 1
        os._exit(1)


def spawn(body, what, default_n=3):
    """Run body(rank, n, init_method) in n processes (argv[1], else default_n); exit 1 when any
    failed, else print "<what> at n processes: pass"."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else default_n
    os.environ.setdefault("ZEN_TIMEOUT_S", "60")
    with tempfile.TemporaryDirectory() as d:
        failed = mp.get_context("spawn").Array("i", n)
        mp.spawn(_run, args=(n, "file://" + os.path.join(d, "rdv"), failed, body), nprocs=n,
                 join=True)
        if any(failed):
            sys.exit(1)
    print(f"{what} at {n} processes: pass")
