#!/usr/bin/env bash
# Fails unless PROGRAM is a program on libzen's public face: it loads libzen.so and holds no copy
# of libzen itself (none of the public functions of include/zen/*.h, no internal zen__ function
# defined in it). A static libzen linked in as well would give the process two libzens, with two
# sets of globals (allocator cache, log sink, tunables) that disagree.
#
#   scripts/check-program-link.sh path/to/program [include-dir]
set -euo pipefail
prog="$1"
here="$(cd "$(dirname "$0")" && pwd)"
dir="${2:-$here/../include/zen}"

if ! readelf -d "$prog" | grep -qE 'NEEDED.*\[libzen\.so'; then
    echo "check-program-link: $prog does not load libzen.so (link zen_shared)" >&2
    exit 1
fi
public=$(bash "$here/public-symbols.sh" "$dir")
defined=$(nm --defined-only --format=posix "$prog" | awk '{ print $1 }' | LC_ALL=C sort -u)
copies=$( (LC_ALL=C comm -12 <(printf '%s\n' "$public") <(printf '%s\n' "$defined");
           printf '%s\n' "$defined" | grep -E '^zen__' || true) | head -5)
if [[ -n "$copies" ]]; then
    echo "check-program-link: $prog carries libzen's own code besides libzen.so, e.g.:" >&2
    printf '  %s\n' $copies >&2
    echo "  (link zen_shared only, never zen_static as well)" >&2
    exit 1
fi
echo "check-program-link: $prog loads libzen.so and holds no copy of libzen"
