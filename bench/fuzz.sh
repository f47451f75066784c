#!/usr/bin/env bash
# Run every libFuzzer target for a fixed budget and report executions and findings
# (docs/security.md, "Fuzzing"). Builds the targets with clang into BUILD (default build-fuzz)
# first. Exits 1 when a target finds something (a crash, a leak, a trapped invariant) or fails.
# usage: bench/fuzz.sh [RUNS (default 1000000)] [BUILD] [MAX_SECONDS per target (default: none)]
# `make test` runs it with 20000 runs and 15 s per target.
set -euo pipefail
runs=${1:-1000000}
build=${2:-build-fuzz}
secs_max=${3:-0}
root=$(cd "$(dirname "$0")/.." && pwd)
targets="decode rdv frame trace ckpt shmboot nodelist"
if [ ! -f "$build/CMakeCache.txt" ]; then
    CC=clang cmake -S "$root" -B "$build" -G Ninja -DZEN_BUILD_FUZZ=ON \
        -DZEN_BUILD_PYTHON=OFF >/dev/null
fi
cmake --build "$build" --target fuzz_targets >/dev/null
echo "machine: $(uname -m), $(nproc) cores; runs per target: $runs, at most ${secs_max}s (0: no limit)"
failed=0
for t in $targets; do
    work=$(mktemp -d)
    cp "$root/tests/fuzz/corpus_$t"/* "$work/"
    start=$(date +%s.%N)
    set +e
    "$build/tests/fuzz_$t" -runs="$runs" -max_total_time="$secs_max" \
        -artifact_prefix="$work/crash-" "$work" >"$work.log" 2>&1
    rc=$?
    set -e
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    execs=$(grep -o 'Done [0-9]* runs' "$work.log" | grep -o '[0-9]*' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$work.log" | tail -1 | grep -o '[0-9]*' || echo "?")
    findings=$(ls "$work" | grep -c '^crash-' || true)
    printf '%-8s execs %-9s in %6.1f s  coverage %-5s findings %s (exit %d)\n' \
        "$t" "$execs" "$secs" "$cov" "$findings" "$rc"
    if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
        failed=1
        tail -n 40 "$work.log"
        echo "fuzz_$t: inputs kept in $work"
        rm -f "$work.log"
        continue
    fi
    rm -rf "$work" "$work.log"
done
exit $failed
