#!/usr/bin/env python3
"""bench/tune_replay (the tuner replayed on recorded call times) on a synthetic recorded cell.

The model ranks PS first, yet HIERARCHICAL's recorded calls are the fastest (0.6 of the others,
with a deterministic +-5% wobble and a 3x cold first call): replayed, the tuner must run
HIERARCHICAL in most timed iterations, its p50 must be HIERARCHICAL's, and the scorer must name
HIERARCHICAL the fastest. A replay that ignored the recorded times (the model's choice) fails.
The hindsight reference (--hindsight A:B) is checked on a second cell whose first 8 iterations
mislead: HIERARCHICAL takes 2x its time there, so told iterations 0-7 the chooser runs PS (1.63x
in the timed window) and told iterations 8-23 it runs HIERARCHICAL (1.00x).
Usage: tune_replay_check.py TUNE_REPLAY_BINARY REPO_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

SCHEMES = ["balanced", "hierarchical", "allgather", "block", "ps", "dense"]
TRUE_US = {"balanced": 1000, "hierarchical": 600, "allgather": 1050, "block": 3000, "ps": 980,
           "dense": 4000}
MODEL_US = {"balanced": 900, "hierarchical": 1000, "allgather": 950, "block": 2500, "ps": 500,
            "dense": 3000}


def write_cell(d, slow_start):
    """A recorded cell; HIERARCHICAL's calls before iteration slow_start take 2x."""
    with open(os.path.join(d, "cell.jsonl"), "w") as f:
        for s in SCHEMES:
            f.write(json.dumps({"scheme": s, "model_us": MODEL_US[s]}) + "\n")
    with open(os.path.join(d, "cell.txt"), "w") as f:
        for it in range(64):
            for k, s in enumerate(SCHEMES):
                wobble = 0.95 + 0.1 * ((it * 7 + k * 3) % 11) / 10
                us = TRUE_US[s] * wobble * (3 if it == 0 else 1)
                if s == "hierarchical" and it < slow_start:
                    us *= 2
                f.write("# call %s %d %.1f %s\n" % (s, it, us, s))


def run(binary, root, d, *extra):
    return subprocess.run([sys.executable, os.path.join(root, "bench", "tune_replay.py"),
                           binary, d] + list(extra), capture_output=True, text=True,
                          check=True).stdout


def hindsight_line(out, span, key):
    for line in out.splitlines():
        p = line.split()
        if p[:3] == ["hindsight", span, key]:
            return float(p[5].rstrip("%")), float(p[10])
    raise AssertionError("no hindsight %s %s line in:\n%s" % (span, key, out))


def check_hindsight(binary, root):
    with tempfile.TemporaryDirectory() as d:
        write_cell(d, 8)
        early = run(binary, root, d, "--hindsight", "0:8")
        later = run(binary, root, d, "--hindsight", "8:24")
    print(early + later)
    # PS's p50 over HIERARCHICAL's in the timed window: 980 / 600, within the wobble
    share, worst = hindsight_line(early, "0:8", "p50")
    assert share == 0 and 1.55 <= worst <= 1.72, (share, worst)
    share, worst = hindsight_line(later, "8:24", "p50")
    assert share == 100 and worst == 1.0, (share, worst)


def main():
    binary, root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        write_cell(d, 0)
        out = run(binary, root, d, "--by-cell")
    print(out)
    cell = out.splitlines()[0].split()
    fields = dict(zip(cell[1::2], cell[2::2]))
    assert fields["best"] == "hierarchical", fields
    assert fields["ran"] == "hierarchical", fields
    assert float(fields["p50"]) <= 1.02, fields
    assert float(fields["calls"].rstrip("%")) >= 80, fields
    assert "decision (the most-run scheme) within 10% by p50: 100%" in out, out
    check_hindsight(binary, root)


if __name__ == "__main__":
    main()
