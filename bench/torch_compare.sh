#!/bin/sh
# Throughput of zen train vs PyTorch on one CPU rank (see bench/torch_compare.py).
# usage: bench/torch_compare.sh [BUILD_DIR] [extra torch_compare.py options]
# Installs nothing: run `apt-get install python3-torch` first (large; not in scripts/deps.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
[ $# -gt 0 ] && shift
# Debian's interpreter has python3-torch; a pyenv or venv python3 first on PATH may not
py=${PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=python3
if ! "$py" -c 'import torch' 2>/dev/null; then
    echo "torch_compare: PyTorch is missing: apt-get install python3-torch" >&2
    exit 1
fi
threads=$(nproc)
for t in 1 "$threads"; do
    echo "== $t thread(s)"
    "$py" "$here/torch_compare.py" --zen "$build/zen" --threads "$t" "$@"
done
