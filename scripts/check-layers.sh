#!/usr/bin/env bash
# The layer rule of docs/architecture.md, enforced: every #include "..." (and #include <zen/...>)
# in src/, tools/, examples/ and include/ must be allowed by the table between the markers
# "layers:begin" and "layers:end" in docs/architecture.md. A rule line reads
#
#   | <folder> | <allowed include> <allowed include> ... |
#
# where an allowed include ending in '/' allows a folder (under src/ or include/), anything else
# one header; a header in the including file's own folder is always allowed. Known exceptions,
# each with its reason, are listed in scripts/layers-allow.txt as "file: include".
# Prints file:line and the broken rule for each violation; exit 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
doc=docs/architecture.md
allow=scripts/layers-allow.txt

declare -A RULE=()
while IFS= read -r line; do
    [[ "$line" =~ ^\|[[:space:]]*\`?([a-z/_]+)\`?[[:space:]]*\|(.*)\|[[:space:]]*$ ]] || continue
    folder=${BASH_REMATCH[1]%/}
    [[ "$folder" == layer || "$folder" == --- ]] && continue
    RULE[$folder]=$(echo "${BASH_REMATCH[2]}" | tr -d '`,')
done < <(sed -n '/layers:begin/,/layers:end/p' "$doc")
if (( ${#RULE[@]} == 0 )); then
    echo "check-layers: no rule table (layers:begin ... layers:end) in $doc" >&2
    exit 2
fi

# the rule of a file: the longest folder of the table that contains it
rule_of() {
    local f=$1 best=""
    for folder in "${!RULE[@]}"; do
        if [[ "$f" == "$folder"/* && ${#folder} -gt ${#best} ]]; then best=$folder; fi
    done
    echo "$best"
}

allowed() { # allowed FILE INCLUDE RULEWORDS
    local f=$1 inc=$2 word
    [[ "$inc" != */* ]] && return 0 # same folder
    [[ -f "$(dirname "$f")/$inc" ]] && return 0
    for word in $3; do
        if [[ "$word" == */ ]]; then
            [[ "$inc" == "$word"* ]] && return 0
        else
            [[ "$inc" == "$word" ]] && return 0
        fi
    done
    [[ -f "$allow" ]] && grep -qxF "$f: $inc" <(sed 's/[[:space:]]*#.*//' "$allow") && return 0
    return 1
}

bad=0
while IFS= read -r f; do
    r=$(rule_of "$f")
    [[ -n "$r" ]] || continue
    while IFS=: read -r ln text; do
        inc=$(echo "$text" | sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]([^">]+)[">].*/\1/')
        if ! allowed "$f" "$inc" "${RULE[$r]}"; then
            echo "$f:$ln: includes \"$inc\": $r/ may include only:${RULE[$r]} (docs/architecture.md, Layers)"
            bad=$((bad + 1))
        fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("|<zen/)' "$f" || true)
done < <(git ls-files -- src tools examples include 2>/dev/null | grep -E '\.(c|h)$' ||
         find src tools examples include -name '*.[ch]')

if (( bad > 0 )); then
    echo "check-layers: $bad include(s) across the layer rule" >&2
    exit 1
fi
echo "check-layers: every include follows docs/architecture.md"
