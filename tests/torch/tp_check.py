"""Checks of zen_torch.tp (tensor-parallel layers) and zen_torch.all_gather_v/reduce_scatter_v
against single-process torch references.

Usage: tp_check.py NPROC [SUITES]   (SUITES: comma list of layers, migrate, resize, state, optim,
       vcoll; default all). NPROC processes from torch.multiprocessing with zen as the default
       group (file rendezvous, no fixed port).

Every rank seeds torch identically before building a layer, so the layer's full weight equals
an nn.Linear made after the same seed (zen_torch.tp's documented initialisation), and builds the
same inputs: the reference is the plain single-process nn.Linear / MLP on the full weight, run
on every rank. Exit 0 pass, 1 fail, 77 when torch does not import.
"""
import io
import os
import sys
import tempfile
import time
import traceback
import warnings

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch import nn
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: torch does not import: {e}")
    sys.exit(77)
try:
    import zen_torch
    import zen_torch.tp as ztp
except ImportError as e:
    print(f"FAIL: zen_torch was built but does not import: {e}")
    sys.exit(1)

TOL = 1e-5
IN, HID, OUT, B, T = 32, 64, 24, 3, 5


def close(a, b, what, tol=TOL):
    a, b = a.detach().double(), b.detach().double()
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shape {tuple(a.shape)} != {tuple(b.shape)}")
    if not torch.allclose(a, b, rtol=tol, atol=tol):
        raise AssertionError(f"{what}: max diff {(a - b).abs().max().item():.3g}")


def inputs(seed, *shape):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


def rows_of(t, rank, n):
    k = t.shape[0] // n
    return t[rank * k:(rank + 1) * k]


def cols_of(t, rank, n):
    k = t.shape[-1] // n
    return t[..., rank * k:(rank + 1) * k]


def pair(cls, tpg, seed, a, b, **kw):
    """(layer, reference nn.Linear) with the same full weight and bias."""
    torch.manual_seed(seed)
    ref = nn.Linear(a, b)
    torch.manual_seed(seed)
    return cls(a, b, tp_group=tpg, **kw), ref


def check_column(tpg, rank, n, what, gather=False):
    col, ref = pair(ztp.ColumnParallelLinear, tpg, 11, IN, HID, gather_output=gather)
    close(col.canonical_weight(), rows_of(ref.weight, rank, n), f"{what}: column init")
    x = inputs(1, B, T, IN).requires_grad_()
    xr = x.detach().clone().requires_grad_()
    g = inputs(2, B, T, HID)
    y, yr = col(x), ref(xr)
    close(y, yr if gather else cols_of(yr, rank, n), f"{what}: column forward")
    (y * (g if gather else cols_of(g, rank, n))).sum().backward()
    (yr * g).sum().backward()
    close(x.grad, xr.grad, f"{what}: column input grad")
    tpg.canonical_grads(True)
    close(col.weight.grad, rows_of(ref.weight.grad, rank, n), f"{what}: column weight grad")
    tpg.canonical_grads(False)
    close(col.bias.grad, rows_of(ref.bias.grad, rank, n), f"{what}: column bias grad")
    return col


def check_row(tpg, rank, n, what, parallel_input):
    row, ref = pair(ztp.RowParallelLinear, tpg, 12, HID, OUT, input_is_parallel=parallel_input)
    close(row.canonical_weight(), cols_of(ref.weight, rank, n), f"{what}: row init")
    x = inputs(3, B, T, HID)
    xs = (cols_of(x, rank, n) if parallel_input else x).clone().requires_grad_()
    xr = x.clone().requires_grad_()
    g = inputs(4, B, T, OUT)
    y, yr = row(xs), ref(xr)
    close(y, yr, f"{what}: row forward")
    (y * g).sum().backward()
    (yr * g).sum().backward()
    close(xs.grad, cols_of(xr.grad, rank, n) if parallel_input else xr.grad,
          f"{what}: row input grad")
    tpg.canonical_grads(True)
    close(row.weight.grad, cols_of(ref.weight.grad, rank, n), f"{what}: row weight grad")
    tpg.canonical_grads(False)
    close(row.bias.grad, ref.bias.grad, f"{what}: row bias grad")
    return row


class MLP(nn.Module):
    def __init__(self, tpg=None):
        super().__init__()
        torch.manual_seed(5)
        if tpg is None:
            self.fc1, self.fc2 = nn.Linear(IN, HID), nn.Linear(HID, IN)
        else:
            self.fc1 = ztp.ColumnParallelLinear(IN, HID, tp_group=tpg)
            self.fc2 = ztp.RowParallelLinear(HID, IN, tp_group=tpg)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def check_mlp_state(model, ref, rank, n, what):
    close(model.fc1.canonical_weight(), rows_of(ref.fc1.weight, rank, n), f"{what}: fc1 weight")
    close(model.fc1.bias, rows_of(ref.fc1.bias, rank, n), f"{what}: fc1 bias")
    close(model.fc2.canonical_weight(), cols_of(ref.fc2.weight, rank, n), f"{what}: fc2 weight")
    close(model.fc2.bias, ref.fc2.bias, f"{what}: fc2 bias")


def suite_layers(rank, n):
    tpg = ztp.TPGroup()
    check_column(tpg, rank, n, "none")
    check_column(tpg, rank, n, "none gather_output", gather=True)
    check_row(tpg, rank, n, "none", parallel_input=True)
    check_row(tpg, rank, n, "none full input", parallel_input=False)
    # default tp_group (balance none over the default group), eval under no_grad
    col = ztp.ColumnParallelLinear(IN, HID, bias=False)
    assert col.bias is None and col.tp_group.balance == "none"
    with torch.no_grad():
        y = col(inputs(1, 4, IN))
    close(y, inputs(1, 4, IN) @ col.canonical_weight().t(), "none: no bias, no_grad")


def warm_until_plan(tpg, model, want, steps=80):
    """Train-mode passes with rank 1 4x slow (spin) until the plan (the same on every rank)
    flags rank 1 and shows `want` ("migrated" or "pruned"); weights are not updated (grads
    zeroed), so the reference stays valid. On a loaded host scheduling noise may flag other
    ranks too, or rank 1 only after a few rounds: the checks hold for any plan."""
    tpg.set_straggler(1, 4.0, "spin")
    x = inputs(7, 256, IN)
    for _ in range(steps):
        model(x).sum().backward()
        model.zero_grad()
        tpg.step()
        s = tpg.stats()
        if 1 in s["straggler_ranks"] and (
                (want == "migrated" and s["rank_migrated"][1] > 0) or
                (want == "pruned" and s["rank_pruned"][1] > 0)):
            return s
    raise AssertionError(f"no {want} plan after {steps} steps: {tpg.stats()}")


def suite_migrate(rank, n):
    tpg = ztp.TPGroup(balance="migrate", period=2)
    model = MLP(tpg)
    warm_until_plan(tpg, model, "migrated")
    check_column(tpg, rank, n, "migrate")
    check_row(tpg, rank, n, "migrate", parallel_input=True)
    ref = MLP()
    check_mlp_state(model, ref, rank, n, "migrate: weights unchanged by the plan")
    x = inputs(8, B, T, IN).requires_grad_()
    xr = x.detach().clone().requires_grad_()
    y, yr = model(x), ref(xr)
    close(y, yr, "migrate: mlp forward")
    y.square().sum().backward()
    yr.square().sum().backward()
    close(x.grad, xr.grad, "migrate: mlp input grad")
    tpg.canonical_grads(True)
    close(model.fc1.weight.grad, rows_of(ref.fc1.weight.grad, rank, n), "migrate: fc1 grad")
    close(model.fc2.weight.grad, cols_of(ref.fc2.weight.grad, rank, n), "migrate: fc2 grad")
    tpg.canonical_grads(False)
    tpg.set_straggler(1, 1.0)


def suite_resize(rank, n):
    """Resize is lossy in the documented way only: in a training pass the straggler computes
    its shard with the pruned columns of K left out (zero), the other ranks exactly; evaluation
    passes are never resized."""
    tpg = ztp.TPGroup(balance="resize", period=2)
    model = MLP(tpg)
    warm_until_plan(tpg, model, "pruned")
    ref = MLP()
    x = inputs(9, 6, IN)
    col = model.fc1
    perm, computed = col.column_layout()
    keep = torch.zeros(IN)
    keep[perm[:computed]] = 1.0
    if rank == 1:
        assert computed < IN, (computed, IN)
    y = col(x)  # training pass
    w = rows_of(ref.fc1.weight, rank, n)
    close(y, (x * keep) @ w.t() + rows_of(ref.fc1.bias, rank, n), "resize: column forward")
    col.eval()
    with torch.no_grad():
        close(col(x), cols_of(ref.fc1(x), rank, n), "resize: eval forward is exact")
    col.train()
    model.zero_grad()
    tpg.set_straggler(1, 1.0)
    # semi: rank 1 gets a plan (resized to the cap, maybe migrating the rest), evaluation exact
    semi = ztp.TPGroup(balance="semi", period=2)
    model = MLP(semi)
    s = warm_until_plan(semi, model, "pruned")
    assert s["balance"] == "semi" and s["rank_local"][1] < 1.0, s
    model.eval()
    with torch.no_grad():
        close(model(x), ref(x), "semi: eval forward is exact")
    semi.set_straggler(1, 1.0)


def suite_state(rank, n):
    """state_dict in canonical order while a migration plan permutes the straggler's columns
    (random priority: the columns it keeps are not a prefix, whatever the weights do)."""
    tpg = ztp.TPGroup(balance="migrate", period=2, priority="random")
    model = MLP(tpg)
    warm_until_plan(tpg, model, "migrated")
    ref = MLP()
    perm, _ = model.fc1.column_layout()
    permuted = perm.tolist() != list(range(IN))
    if rank == 1:
        assert permuted, "the straggler's fc1 columns should be permuted by the plan"
    sd = model.state_dict()
    close(sd["fc1.weight"], rows_of(ref.fc1.weight, rank, n), "state: fc1 canonical")
    close(sd["fc2.weight"], cols_of(ref.fc2.weight, rank, n), "state: fc2 canonical")
    if permuted:
        close(model.fc1.weight[:, torch.argsort(perm)], sd["fc1.weight"],
              "state: physical weight is the canonical one permuted")
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    loaded = torch.load(buf)
    new = {k: v + 1.0 for k, v in loaded.items()}
    model.load_state_dict(new)
    close(model.fc1.canonical_weight(), new["fc1.weight"], "state: load into a permuted layer")
    close(model.state_dict()["fc2.weight"], new["fc2.weight"], "state: round trip fc2")
    # and into a fresh (unpermuted) model of another group
    other = MLP(ztp.TPGroup())
    other.load_state_dict(model.state_dict())
    x = inputs(10, 4, IN)
    with torch.no_grad():
        close(other(x), model(x), "state: a fresh model from the state_dict")
    bad = dict(new)
    bad["fc1.extra"] = torch.zeros(1)
    try:
        model.load_state_dict(bad)
        raise AssertionError("an unexpected key was accepted")
    except RuntimeError as e:
        assert "fc1.extra" in str(e)
    tpg.set_straggler(1, 1.0)


def train(model, ref, opt, opt_ref, tpg, rank, n, steps, what):
    for s in range(steps):
        x = inputs(20 + s, B, T, IN)
        for m, o in ((model, opt), (ref, opt_ref)):
            o.zero_grad(set_to_none=(s % 2 == 1))
            m(x).square().mean().backward()
            o.step()
        tpg.step()
        check_mlp_state(model, ref, rank, n, f"{what} step {s}")


def check_optimizer_checkpoint(tpg, model, opt, rank, n):
    """optimizer_state_dict is canonical: a fresh (unpermuted) model restored from the weights'
    and the optimizer's checkpoints takes the same next step as the permuted one."""
    other_tpg = ztp.TPGroup()
    other = MLP(other_tpg)
    other.load_state_dict(model.state_dict())
    opt2 = torch.optim.Adam(other.parameters(), lr=0.01)
    buf = io.BytesIO()
    torch.save(tpg.optimizer_state_dict(opt), buf)
    buf.seek(0)
    other_tpg.load_optimizer_state_dict(opt2, torch.load(buf))
    x = inputs(40, B, T, IN)
    for m, o in ((model, opt), (other, opt2)):
        o.zero_grad()
        m(x).square().mean().backward()
        o.step()
    close(model.fc1.canonical_weight(), other.fc1.canonical_weight(), "optimizer checkpoint fc1")
    close(model.fc2.canonical_weight(), other.fc2.canonical_weight(), "optimizer checkpoint fc2")


def suite_optim(rank, n):
    for balance in ("none", "migrate"):
        for name in ("sgd", "adam"):
            tpg = ztp.TPGroup(balance=balance, period=2)
            model, ref = MLP(tpg), MLP()
            if balance == "migrate":
                warm_until_plan(tpg, model, "migrated")
            if name == "sgd":
                opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
                opt_ref = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
            else:
                opt = torch.optim.Adam(model.parameters(), lr=0.01)
                opt_ref = torch.optim.Adam(ref.parameters(), lr=0.01)
            tpg.attach_optimizer(opt)
            train(model, ref, opt, opt_ref, tpg, rank, n, 6, f"{balance} {name}")
            if balance == "migrate" and name == "adam":
                check_optimizer_checkpoint(tpg, model, opt, rank, n)
            tpg.set_straggler(1, 1.0)


def suite_vcoll(rank, n):
    cases = [[3, 0, 5, 1][:n], [0] * n, [2] + [0] * (n - 1), list(range(n, 0, -1))]
    for sizes in cases:
        for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8):
            mine = (inputs(100 + rank, sizes[rank], 3) * 10).to(dtype)
            got = zen_torch.all_gather_v(mine, sizes)
            m = max(sizes)
            padded = torch.zeros(m, 3, dtype=dtype)
            padded[:sizes[rank]] = mine
            parts = [torch.zeros(m, 3, dtype=dtype) for _ in range(n)]
            dist.all_gather(parts, padded)
            want = torch.cat([p[:s] for p, s in zip(parts, sizes)])
            assert torch.equal(got, want), f"all_gather_v {sizes} {dtype}"
        total = sum(sizes)
        for dtype in (torch.float32, torch.float64, torch.int32):
            full = [(inputs(200 + r, total, 2, 2) * 10).to(dtype) for r in range(n)]
            got = zen_torch.reduce_scatter_v(full[rank], sizes)
            off = sum(sizes[:rank])
            want = sum(f[off:off + sizes[rank]] for f in full)
            close(got, want, f"reduce_scatter_v {sizes} {dtype}")
            # the same block by a list-based reduce (one per rank)
            lst = full[rank].clone()
            dist.all_reduce(lst)
            close(got, lst[off:off + sizes[rank]], f"reduce_scatter_v {sizes} vs all_reduce")


SUITES = {"layers": suite_layers, "migrate": suite_migrate, "resize": suite_resize,
          "state": suite_state, "optim": suite_optim, "vcoll": suite_vcoll}


def worker(rank, n, suites, init, failed):
    try:
        torch.set_num_threads(1)
        # the warm-up passes run without an optimizer on purpose
        warnings.filterwarnings("ignore", "zen_torch.tp: balance")
        dist.init_process_group("zen", init_method=init, rank=rank, world_size=n)
        for name in suites:
            t0 = time.perf_counter()
            SUITES[name](rank, n)
            dist.barrier()
            if rank == 0:
                print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
        dist.destroy_process_group()
    except Exception:
        traceback.print_exc()
        failed[rank] = 1
        os._exit(1)


def main():
    n = int(sys.argv[1])
    suites = sys.argv[2].split(",") if len(sys.argv) > 2 else list(SUITES)
    os.environ.setdefault("ZEN_TIMEOUT_S", "60")
    with tempfile.TemporaryDirectory() as d:
        failed = mp.get_context("spawn").Array("i", n)
        mp.spawn(worker, args=(n, suites, "file://" + os.path.join(d, "rdv"), failed), nprocs=n,
                 join=True)
        if any(failed):
            sys.exit(1)
    print(f"zen_torch.tp {','.join(suites)} at {n} processes: pass")


if __name__ == "__main__":
    main()
