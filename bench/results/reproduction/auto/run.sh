#!/bin/sh
# AUTO against the fixed schemes over 64 calls of one key (docs/reproduction.md, "AUTO as
# measured"): 8 inproc ranks, every scheme and auto taking turns, no untimed warm-up, every
# call's time (--call-times). Run from the repository root; writes build/auto/, whose files were
# copied here. Summary: /usr/bin/python3 bench/results/reproduction/auto_calls.py build/auto/*.calls
set -eu
mkdir -p build/auto
for c in "lstmlike --rows 109036 --width 64 --density 0.005 --overlap zipf" \
    "dgclike --rows 1048576 --width 1 --density 0.001 --overlap random"; do
    name=${c%% *}
    args=${c#* }
    echo "$name start $(date -u +%FT%TZ) $(uptime)" >>build/auto/load.txt
    # shellcheck disable=SC2086
    flock /tmp/zen-bench.lock build/zen bench sparse --ranks 8 $args --warmup 0 --iters 64 \
        --call-times --json >"build/auto/$name.jsonl" 2>"build/auto/$name.calls"
    echo "$name end $(date -u +%FT%TZ) $(uptime)" >>build/auto/load.txt
done
