#!/usr/bin/env python3
"""bench/tune_replay (the tuner replayed on recorded call times) on a synthetic recorded cell.

The model ranks PS first, yet HIERARCHICAL's recorded calls are the fastest (0.6 of the others,
with a deterministic +-5% wobble and a 3x cold first call): replayed, the tuner must run
HIERARCHICAL in most timed iterations, its p50 must be HIERARCHICAL's, and the scorer must name
HIERARCHICAL the fastest. A replay that ignored the recorded times (the model's choice) fails.
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


def main():
    binary, root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "cell.jsonl"), "w") as f:
            for s in SCHEMES:
                f.write(json.dumps({"scheme": s, "model_us": MODEL_US[s]}) + "\n")
        with open(os.path.join(d, "cell.txt"), "w") as f:
            for it in range(64):
                for k, s in enumerate(SCHEMES):
                    wobble = 0.95 + 0.1 * ((it * 7 + k * 3) % 11) / 10
                    us = TRUE_US[s] * wobble * (3 if it == 0 else 1)
                    f.write("# call %s %d %.1f %s\n" % (s, it, us, s))
        out = subprocess.run([sys.executable, os.path.join(root, "bench", "tune_replay.py"),
                              binary, d, "--by-cell"], capture_output=True, text=True,
                             check=True).stdout
    print(out)
    cell = out.splitlines()[0].split()
    fields = dict(zip(cell[1::2], cell[2::2]))
    assert fields["best"] == "hierarchical", fields
    assert fields["ran"] == "hierarchical", fields
    assert float(fields["p50"]) <= 1.02, fields
    assert float(fields["calls"].rstrip("%")) >= 80, fields


if __name__ == "__main__":
    main()
