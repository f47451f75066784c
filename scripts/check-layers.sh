#!/usr/bin/env bash
# The layer rule of docs/architecture.md, enforced: every #include "..." and every #include <...>
# that names a project header (one found under a folder the build puts on the include path:
# include/, src/, src/train/, tools/; <zen/...> is include/zen/) in src/, tools/, examples/ and
# include/, in git or not yet, must be allowed by the table between the markers
# "layers:begin" and "layers:end" in docs/architecture.md. A rule line reads
#
#   | <folder> | <allowed include> <allowed include> ... |
#
# where an allowed include ending in '/' allows a folder (under src/ or include/), anything else
# one header; a header in the including file's own folder is always allowed, and a bare name
# ("train.h") names an allowed header of another folder that the build puts on the include path.
# Known exceptions, each with its reason, are listed in scripts/layers-allow.txt as
# "file: include".
#
# The folders named in the line "On the public API only ...: `folder` ..." below the table may not
# name an internal function either: any `zen__` identifier outside a comment line there is a
# violation too (the static archive would link it; libzen.so, which they link, hides it).
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
# the folders on the public API only: the line "On the public API only ...: `a` `b` ..." under the table
PUBLIC_ONLY=$(sed -n '/layers:begin/,/layers:end/p' "$doc" | sed -n 's/^On the public API only[^:]*://p' |
              tr -d '`,')
PUBLIC_ONLY=$(echo $PUBLIC_ONLY)
if (( ${#RULE[@]} == 0 )) || [[ -z "$PUBLIC_ONLY" ]]; then
    echo "check-layers: no rule table (layers:begin ... layers:end) or no line" \
         "\"On the public API only ...: \`folder\` ...\" in it in $doc" >&2
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

# an angle-bracket include is the project's when the build's include path finds it in the tree:
# <zen/x.h>, <common/x.h> or <train.h> are checked like quoted ones, <stdio.h> is not
INCLUDE_ROOTS="include src src/train tools"
project_header() {
    local root
    for root in $INCLUDE_ROOTS; do [[ -f "$root/$1" ]] && return 0; done
    return 1
}

allowed() { # allowed FILE INCLUDE RULEWORDS
    local f=$1 inc=$2 word
    [[ "$inc" == *..* ]] && return 1 # "../common/x.h" would pass for a header of its own folder
    [[ -f "${f%/*}/$inc" ]] && return 0 # own folder
    for word in $3; do
        if [[ "$inc" != */* ]]; then
            [[ "$word" != */ && "${word##*/}" == "$inc" ]] && return 0
        elif [[ "$word" == */ ]]; then
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
    if [[ " $PUBLIC_ONLY " == *" $r "* ]]; then
        while IFS=: read -r ln name; do
            echo "$f:$ln: uses the internal \"$name\": $r/ is on the public API only (docs/architecture.md, Layers)"
            bad=$((bad + 1))
        done < <(grep -nE '\bzen__[A-Za-z0-9_]+' "$f" | grep -vE '^[0-9]+:[[:space:]]*(/?\*|//)' |
                 sed -E 's/^([0-9]+):.*\b(zen__[A-Za-z0-9_]+).*/\1:\2/' || true)
    fi
    while IFS=: read -r ln text; do
        [[ "$text" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*([\"\<])([^\">]+) ]] || continue
        inc=${BASH_REMATCH[2]}
        if [[ "${BASH_REMATCH[1]}" == "<" ]] && ! project_header "$inc"; then
            continue # a system header
        fi
        if ! allowed "$f" "$inc" "${RULE[$r]}"; then
            echo "$f:$ln: includes \"$inc\": $r/ may include only:${RULE[$r]} (docs/architecture.md, Layers)"
            bad=$((bad + 1))
        fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]' "$f" || true)
done < <(find src tools examples include -name '*.[ch]' | sort)

if (( bad > 0 )); then
    echo "check-layers: $bad include(s) or internal name(s) across the layer rule" >&2
    exit 1
fi
echo "check-layers: every include follows docs/architecture.md; no internal names on the public side"
