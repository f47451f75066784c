#!/usr/bin/env bash
# Function length check: no function body in src/ or tools/ (.c), src/**/*.h or include/zen/*.h
# (static inline functions) longer than MAX lines (default 100), so each reads as its story; split
# the long ones into named steps. Files not yet in git count too (the tree is walked, not the
# index). Functions still waiting for their split are listed, each with a reason, in
# scripts/function-size-allow.txt as "file:function". Counts the lines from the opening brace
# (alone in column 0, the Linux brace style .clang-format enforces) to the closing one.
#
#   scripts/check-function-size.sh [MAX]
set -euo pipefail
cd "$(dirname "$0")/.."
max="${1:-100}"
allow=scripts/function-size-allow.txt

files=$( (find src tools -name '*.c'; find src -name '*.h'; find include/zen -name '*.h') | sort)
long=$(awk -v max="$max" '
    FNR == 1 { prev = ""; inside = 0 }
    /^\{/ && !inside {
        inside = 1; start = FNR; name = prev
        sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n]
        next
    }
    /^\}/ && inside {
        inside = 0
        if (FNR - start - 1 > max) printf "%s:%s %d\n", FILENAME, name, FNR - start - 1
        next
    }
    !inside && /^[A-Za-z_].*\(/ { prev = $0 }
' $files)

bad=0
while read -r where lines; do
    [[ -n "$where" ]] || continue
    if [[ -f "$allow" ]] && sed 's/[[:space:]]*#.*//' "$allow" | grep -qxF "$where"; then
        continue
    fi
    echo "$where: $lines lines (limit $max): split it into named steps"
    bad=$((bad + 1))
done <<<"$long"
if (( bad > 0 )); then
    echo "check-function-size: $bad function(s) over $max lines" >&2
    exit 1
fi
echo "check-function-size: every function in src/, tools/ and the headers is at most $max lines (or allowed)"
