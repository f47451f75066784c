"""examples/torch_tp_gpt.py must keep training the same model whichever way it is split.

Usage: tp_gpt_check.py [launch ZEN_BIN]  (tests/torch_tp_gpt.cmake; PYTHONPATH has zen_torch)

Default: runs a few steps of a small configuration of the example at tp 2 (two processes from
torch.multiprocessing, env:// as under torchrun or `zen launch`) and compares the per-step
training losses, to 1e-4:
  megatron (gloo)          == one process with plain nn.Linear layers (tp 1, run here)
  megatron, rank 1 3x slow == the same (the spin emulation's hand-written backward)
  zen, balance none        == megatron
  zen, migrate, rank 1 4x  == zen none, and the group did migrate (exact migration)
launch: the example as a user starts it, `ZEN_BIN launch -n 4 -- python3 torch_tp_gpt.py --tp 2
--json`, dp 2 x tp 2 on zen_torch.tp, against dp 2 x tp 1 with plain nn.Linear layers on gloo
(`launch -n 2`): the same per-step losses (the dp replicas average their gradients either way).
Exit 0 pass, 1 fail, 77 when torch itself cannot be imported.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import traceback

try:
    import torch  # noqa: F401  (the skip test)
    import torch.multiprocessing as mp
except ImportError as e:  # pragma: no cover - depends on the machine
    print(f"skipping: torch does not import: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import torch_tp_gpt as ex  # noqa: E402

TOL = 1e-4
SMALL = ["--steps", "6", "--warm", "0", "--d-model", "64", "--heads", "4", "--d-ff", "128",
         "--layers", "1", "--seq", "16", "--batch", "4", "--vocab", "256", "--eval-batches", "0",
         "--json", "--seed", "3"]
RUNS = {  # name: extra arguments at tp 2
    "megatron": ["--impl", "megatron", "--backend", "gloo"],
    "megatron_slow": ["--impl", "megatron", "--backend", "gloo", "--straggler", "1:3",
                      "--straggler-mode", "spin"],
    "zen_none": ["--impl", "zen"],
    "zen_migrate": ["--impl", "zen", "--balance", "migrate", "--period", "2", "--straggler",
                    "1:4", "--straggler-mode", "sleep"],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cached_words():
    words = ex.load_words(None)
    ex.load_words = lambda path: words  # every run in this process reads the book once


def worker(rank, ports, out, failed):
    try:
        cached_words()
        for name, extra in RUNS.items():
            os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                              MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[name]))
            summary = ex.run(ex.parse_args(SMALL + ["--tp", "2"] + extra))
            if rank == 0:
                with open(os.path.join(out, name + ".json"), "w") as f:
                    json.dump(summary, f)
    except Exception:
        traceback.print_exc()
        failed[rank] = 1
        os._exit(1)


def compare(name, got, want):
    diff = max(abs(a - b) for a, b in zip(got, want))
    ok = len(got) == len(want) and diff <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name}: largest loss difference {diff:.2e} over "
          f"{len(got)} steps")
    return ok


def migrated(stats):
    """Whether the tp stats say work moved to helpers (any migrated fraction above zero)."""
    found = [v for k, v in stats.items() if "migrat" in k]
    flat = []
    for v in found:
        flat += v if isinstance(v, list) else [v]
    return any(isinstance(v, (int, float)) and v > 0 for v in flat)


def launched_losses(zen, n, extra):
    """Run the example under `zen launch -n N`; rank 0's per-step losses from its JSON lines."""
    cmd = [zen, "launch", "-n", str(n), "--", sys.executable, ex.__file__] + SMALL + extra
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    if p.returncode != 0:
        print(f"FAIL: {' '.join(cmd)} exited {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-3000:]}")
        sys.exit(1)
    steps = [json.loads(line) for line in p.stdout.splitlines() if line.startswith('{"step"')]
    return [s["loss"] for s in steps]


def check_launch(zen):
    got = launched_losses(zen, 4, ["--tp", "2", "--impl", "zen"])
    want = launched_losses(zen, 2, ["--tp", "1", "--impl", "megatron", "--backend", "gloo"])
    ok = len(got) == 6 and compare("zen launch dp 2 x tp 2 (zen) vs dp 2 x tp 1 (nn.Linear)",
                                   got, want)
    print("pass" if ok else "FAIL")
    sys.exit(0 if ok else 1)


def main():
    os.environ.setdefault("ZEN_TIMEOUT_S", "60")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if sys.argv[1:2] == ["launch"]:
        check_launch(sys.argv[2])
    ports = {name: free_port() for name in RUNS}
    with tempfile.TemporaryDirectory() as d:
        failed = mp.get_context("spawn").Array("i", 2)
        mp.spawn(worker, args=(ports, d, failed), nprocs=2, join=True)
        if any(failed):
            sys.exit(1)
        got = {}
        for name in RUNS:
            with open(os.path.join(d, name + ".json")) as f:
                got[name] = json.load(f)
    cached_words()
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(free_port()))
    ref = ex.run(ex.parse_args(SMALL + ["--tp", "1", "--impl", "megatron", "--backend", "gloo"]))
    ok = compare("megatron tp 2 vs one process", got["megatron"]["losses"], ref["losses"])
    ok &= compare("megatron tp 2, rank 1 3x slow (spin) vs one process",
                  got["megatron_slow"]["losses"], ref["losses"])
    ok &= compare("zen tp 2 vs megatron tp 2", got["zen_none"]["losses"],
                  got["megatron"]["losses"])
    ok &= compare("zen migrate (rank 1 4x slow) vs zen none", got["zen_migrate"]["losses"],
                  got["zen_none"]["losses"])
    stats = got["zen_migrate"].get("tp_stats", {})
    if not migrated(stats):
        print(f"FAIL zen migrate: the group never migrated (stats {stats}), so the comparison "
              "above proves nothing")
        ok = False
    print("pass" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
