#!/usr/bin/env bash
# The repository's own checks on a tiny tree of their own: scripts/check-layers.sh sees a layer
# breach written with angle brackets (#include <tp/tp.h>) as well as with quotes, and lets system
# headers pass; scripts/check-function-size.sh counts a file git does not know yet and a static
# inline function in a public header, at the 100-line limit.
#
#   tests/check_scripts.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: check_scripts.sh SOURCE_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect() { # expect WHAT RC PATTERN -- COMMAND...: the command exits RC and prints PATTERN
    local what=$1 rc=$2 pat=$3 out got
    shift 4
    set +e
    out=$("$@" 2>&1)
    got=$?
    set -e
    if [[ $got -ne $rc ]] || ! grep -qE -- "$pat" <<<"$out"; then
        echo "FAIL: $what: exit $got (want $rc), output:"
        echo "$out" | sed 's/^/    /'
        fails=$((fails + 1))
    else
        echo "ok: $what"
    fi
}

mkdir -p "$tmp"/{scripts,docs,include/zen,src/common,src/tp,tools,examples}
cp "$src/scripts/check-layers.sh" "$src/scripts/check-function-size.sh" "$tmp/scripts/"
cp "$src/docs/architecture.md" "$tmp/docs/"
printf '/* stub */\n' >"$tmp/include/zen/zen.h"
printf '/* stub */\n' >"$tmp/src/common/log.h"
printf '/* stub */\n' >"$tmp/src/tp/tp.h"
printf '#include <stdio.h>\n#include <zen/zen.h>\n#include "common/log.h"\n#include <common/log.h>\n' \
    >"$tmp/src/tp/ok.c"
git -C "$tmp" init -q
git -C "$tmp" add -A # the files above are known to git; the ones below are not
cd "$tmp"

expect "layers: system, public and allowed internal headers pass" 0 "every include follows" -- \
    bash scripts/check-layers.sh
printf '#include <tp/tp.h>\n' >src/common/angle.c
expect "layers: a breach through <tp/tp.h> fails" 1 'src/common/angle.c:1: includes "tp/tp.h"' -- \
    bash scripts/check-layers.sh
rm src/common/angle.c
printf '#include "tp/tp.h"\n' >src/common/quoted.c
expect "layers: the same breach through \"tp/tp.h\" fails" 1 'src/common/quoted.c:1: includes "tp/tp.h"' \
    -- bash scripts/check-layers.sh
rm src/common/quoted.c
printf '#include <zen/zen.h>\n#include <common/log.h>\n' >tools/cli.c
expect "layers: tools/ reaching an internal header through <...> fails" 1 \
    'tools/cli.c:2: includes "common/log.h"' -- bash scripts/check-layers.sh
rm tools/cli.c

body() { # a function of N body lines between a brace pair in column 0
    printf '%s\n{\n' "$1"
    for ((i = 0; i < $2; i++)); do printf '    x++;\n'; done
    printf '}\n'
}
body 'void at_limit(int x)' 100 >src/common/new.c
expect "function size: 100 lines in a new file pass" 0 "at most 100 lines" -- \
    bash scripts/check-function-size.sh
body 'void too_long(int x)' 101 >>src/common/new.c
expect "function size: 101 lines in a file git does not know fail" 1 \
    "src/common/new.c:too_long: 101 lines" -- bash scripts/check-function-size.sh
rm src/common/new.c
{ printf '#ifndef INL_H\n#define INL_H\n'; body 'static inline int inl_long(int x)' 101
  printf '#endif\n'; } >include/zen/inl.h
expect "function size: a static inline function in include/zen/ counts" 1 \
    "include/zen/inl.h:inl_long: 101 lines" -- bash scripts/check-function-size.sh

if ((fails > 0)); then
    echo "check_scripts: $fails case(s) failed" >&2
    exit 1
fi
