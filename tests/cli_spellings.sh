#!/usr/bin/env bash
# Every zen command spells each option concept alike (tools/opt_parse.h, tools/cli.h): a value one
# command takes, every command takes, and a value one refuses, every one refuses. A command
# line puts the value under test first and a bad count (0) after it, so that a taken value ends
# in the complaint about the later option and a refused one in a complaint that quotes it.
#
#   tests/cli_spellings.sh PATH/TO/zen
set -uo pipefail
zen=${1:?usage: cli_spellings.sh ZEN}
export OPENBLAS_NUM_THREADS=1 # libzen loads OpenBLAS, whose workers would start at every run
fails=0

# try CONCEPT VALUE WANT CMD...: WANT is "takes" or "refuses"; CMD has @ where VALUE goes
try() {
    local concept=$1 v=$2 want=$3 out rc got args=()
    shift 3
    for a in "$@"; do [[ "$a" == @ ]] && args+=("$v") || args+=("$a"); done
    out=$("$zen" "${args[@]}" 2>&1)
    rc=$?
    if grep -qF -- "'$v'" <<<"$out"; then got=refuses; else got=takes; fi
    if [[ $rc -ne 2 || $got != "$want" ]]; then
        echo "FAIL: $concept '$v': zen ${args[*]}: exit $rc, $got (want 2, $want):"
        sed 's/^/    /' <<<"$out"
        fails=$((fails + 1))
    fi
}

# each concept: the commands that take it (@ = the value), its good and its bad spellings
check() { # check CONCEPT "GOOD..." "BAD..." -- CMDLINE [| CMDLINE ...]
    local concept=$1 good=$2 bad=$3 cmds v
    shift 4
    cmds=("$@")
    local line=()
    for c in "${cmds[@]}" "|"; do
        if [[ $c == "|" ]]; then
            for v in $good; do try "$concept" "$v" takes "${line[@]}"; done
            for v in $bad; do try "$concept" "$v" refuses "${line[@]}"; done
            line=()
        else
            line+=("$c")
        fi
    done
}

check transport "auto inproc shm tcp shm+tcp mpi" "AUTO mixed shm-tcp" -- \
    bench allreduce --transport @ -n 0 "|" \
    bench sparse --transport @ --iters 0 "|" \
    train --transport @ --steps 0 "|" \
    launch --transport @ -n 0 -- true
check size "8 4K 1m 1G" "4KB 1.5K -1" -- \
    bench allreduce -b @ -n 0 "|" \
    bench sparse --rows @ --iters 0 "|" \
    bench topk --size @ --iters 0 "|" \
    train --bucket @ --steps 0
check count "40 4e1" "4.5 4x 0x10" -- \
    bench allreduce -w @ -n 0 "|" \
    bench scatter --root @ -n 0 "|" \
    bench sparse --warmup @ --iters 0 "|" \
    bench topk --warmup @ --iters 0 "|" \
    train --batch @ --steps 0 "|" \
    train --topk-warmup @ --steps 0 "|" \
    launch --port @ -n 0 -- true
check duration "0.5 1e-2" "1s inf nan" -- \
    bench allreduce --timeout @ -n 0 "|" \
    bench sparse --timeout @ --iters 0 "|" \
    launch --grace @ -n 0 -- true
check scheme "auto balanced hierarchical" "bogus" -- \
    bench sparse --schemes @ --iters 0 "|" \
    train --sync-scheme @ --steps 0

if ((fails > 0)); then
    echo "cli_spellings: $fails case(s) failed" >&2
    exit 1
fi
echo "cli_spellings: every command takes and refuses the same spellings"
