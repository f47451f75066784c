#!/usr/bin/env bash
# Run every libFuzzer target for a fixed budget and report executions and findings
# (docs/security.md). Builds with clang into BUILD (default build-fuzz) first.
# usage: bench/fuzz.sh [RUNS (default 1000000)] [BUILD]
set -euo pipefail
runs=${1:-1000000}
build=${2:-build-fuzz}
root=$(cd "$(dirname "$0")/.." && pwd)
CC=clang cmake -S "$root" -B "$build" -G Ninja -DZEN_BUILD_FUZZ=ON >/dev/null
ninja -C "$build" fuzz_decode fuzz_rdv fuzz_frame >/dev/null
declare -A corpus=([decode]=corpus [rdv]=corpus_rdv [frame]=corpus_frame)
echo "machine: $(uname -m), $(nproc) cores; runs per target: $runs"
for t in decode rdv frame; do
    work=$(mktemp -d)
    cp "$root/tests/fuzz/${corpus[$t]}"/* "$work/"
    start=$(date +%s.%N)
    set +e
    "$build/tests/fuzz_$t" -runs="$runs" -artifact_prefix="$work/crash-" "$work" >"$work.log" 2>&1
    rc=$?
    set -e
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    execs=$(grep -o 'Done [0-9]* runs' "$work.log" | grep -o '[0-9]*' || echo "?")
    cov=$(grep -o 'cov: [0-9]*' "$work.log" | tail -1 | grep -o '[0-9]*' || echo "?")
    findings=$(ls "$work" | grep -c '^crash-' || true)
    printf '%-8s execs %-9s in %6.1f s  coverage %-5s findings %s (exit %d)\n' \
        "$t" "$execs" "$secs" "$cov" "$findings" "$rc"
    rm -rf "$work" "$work.log"
done
