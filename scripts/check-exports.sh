#!/usr/bin/env bash
# Fails unless the dynamic symbols libzen.so defines are exactly the functions declared in
# include/zen/*.h: no internal function leaks, and no public function is hidden (a declaration
# without ZEN_API, or one that nothing defines).
#
#   scripts/check-exports.sh path/to/libzen.so [include-dir]
set -euo pipefail
lib="$1"
here="$(cd "$(dirname "$0")" && pwd)"
dir="${2:-$here/../include/zen}"

want=$(bash "$here/public-symbols.sh" "$dir")
# posix format: "name type value size"; drop the version node itself (type A) and @@ZEN_0.1
have=$(nm -D --defined-only --format=posix "$lib" | awk '$2 != "A" { print $1 }' |
       sed 's/@.*//' | LC_ALL=C sort -u)

extra=$(LC_ALL=C comm -13 <(printf '%s\n' "$want") <(printf '%s\n' "$have"))
missing=$(LC_ALL=C comm -23 <(printf '%s\n' "$want") <(printf '%s\n' "$have"))
status=0
if [[ -n "$extra" ]]; then
    echo "check-exports: $lib exports symbols no public header declares:" >&2
    printf '  %s\n' $extra >&2
    echo "  (make them static, or declare them in include/zen/ with ZEN_API)" >&2
    status=1
fi
if [[ -n "$missing" ]]; then
    echo "check-exports: functions declared in $dir are not exported by $lib:" >&2
    printf '  %s\n' $missing >&2
    echo "  (mark the declaration ZEN_API, and define the function in src/)" >&2
    status=1
fi
if (( status == 0 )); then
    echo "check-exports: $(printf '%s\n' "$want" | wc -l) public functions, exactly the exports"
fi
exit $status
