#!/usr/bin/env bash
# No call circles between files: for every pair of .c files of src/ and tools/, fail when each
# calls (or reads) a global the other defines. A circle means neither file can be read, tested
# or replaced without the other; one of them belongs a layer lower, or a callback is missing.
#
# It reads the object files of a finished build (the compiler resolved every macro and inline
# already): `nm --defined-only` lists what a file defines, `nm --undefined-only` what it needs
# from elsewhere. Static functions never cross files, so globals are all there is to compare.
#
#   bash scripts/check-call-circles.sh [build-dir]     (default: build, or $BUILD)
#
# Known circles waiting for a split are listed in scripts/call-circles-allow.txt as
# "a.c b.c" (either order), each with a comment saying why; the list should only shrink, and an
# entry that no longer matches a circle is reported so that it is removed.
# Prints "a.c <-> b.c: a calls f, b calls g" for each circle; exit 1 if any, 2 without objects.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${BUILD:-build}}
allow=scripts/call-circles-allow.txt

mapfile -t objs < <(find "$build/CMakeFiles/zen_objects.dir/src" "$build/CMakeFiles/zen.dir/tools" \
                         -name '*.c.o' 2>/dev/null | sort)
if (( ${#objs[@]} == 0 )); then
    echo "check-call-circles: no object files under $build/CMakeFiles (build first:" \
         "cmake --build $build)" >&2
    exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# one line per symbol: "D <source> <symbol>" for a definition, "U <source> <symbol>" for a use
# (nm -A prefixes each line with its object; two runs of nm for all files)
src_of='{ o = $1; sub(/:.*$/, "", o); sub(/^.*\.dir\//, "", o); sub(/\.o$/, "", o) }'
{
    nm -A --defined-only -g "${objs[@]}" | awk "$src_of"' NF == 3 && $2 ~ /[TDBRC]/ { print "D", o, $3 }'
    nm -A --undefined-only "${objs[@]}" | awk "$src_of"' { print "U", o, $NF }'
} > "$tmp/syms"

allowed=$(grep -v '^[[:space:]]*\(#\|$\)' "$allow" 2>/dev/null | awk '{ print $1, $2 }' || true)

# edges "user definer symbol" (first symbol per pair), then pairs with edges both ways
awk '$1 == "D" { def[$3] = $2 }
     $1 == "U" { u[NR] = $2 " " $3 }
     END { for (i in u) { split(u[i], f, " "); d = def[f[2]]
                          if (d != "" && d != f[1] && !((f[1] " " d) in seen)) {
                              seen[f[1] " " d] = 1; print f[1], d, f[2] } } }' "$tmp/syms" |
    sort > "$tmp/edges"
awk '{ key = $1 " " $2; sym[key] = $3 }
     END { for (k in sym) { split(k, p, " "); back = p[2] " " p[1]
                            if (p[1] < p[2] && (back in sym))
                                print p[1], p[2], sym[k], sym[back] } }' "$tmp/edges" |
    sort > "$tmp/circles"

fail=0
while read -r a b fa fb; do
    if grep -qxF -e "$a $b" -e "$b $a" <<< "$allowed"; then
        echo "allowed: $a <-> $b ($a calls $fa, $b calls $fb)"
        continue
    fi
    echo "$a <-> $b: $a calls $fa, $b calls $fb" >&2
    fail=1
done < "$tmp/circles"
while read -r a b; do
    [[ -z "$a" ]] && continue
    if ! grep -q -e "^$a $b " -e "^$b $a " "$tmp/circles"; then
        echo "check-call-circles: $allow lists $a $b, which no longer call each other:" \
             "remove the line" >&2
        fail=1
    fi
done <<< "$allowed"
if (( fail )); then
    echo "check-call-circles: files that call each other (see the header of $0)" >&2
    exit 1
fi
echo "check-call-circles: no call circles among ${#objs[@]} files"
