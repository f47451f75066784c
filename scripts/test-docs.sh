#!/usr/bin/env bash
# The README's recipes, run as written (issue #37): the "Use" lines from a directory whose
# ./build is BUILD_DIR, and the "Install" lines from a scratch HOME, so that
# `make install PREFIX=$HOME/.local`, PKG_CONFIG_PATH, the rpath and CMAKE_PREFIX_PATH are
# exercised exactly as a new user types them. One stand-in: `make install` (which first runs
# scripts/deps.sh and rebuilds ./build) becomes `cmake --install BUILD_DIR`, what it ends with.
#
#   scripts/test-docs.sh BUILD_DIR          the quick lines (well under a minute)
#   DOCS_FULL=1 scripts/test-docs.sh BUILD_DIR   every line (sweeps, training, mpirun, torch:
#                                           many minutes)
# A line that fails stops the script with exit 1, naming the line.
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d /tmp/zen-docs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/work" "$tmp/home"
ln -s "$build" "$tmp/work/build"
ln -s "$src/examples" "$tmp/work/examples"

# The lines of the first ```sh block after the heading $1 in README.md.
block() {
    awk -v h="$1" '$0 == h { inh = 1; next }
                   inh && /^```sh$/ { inb = 1; next }
                   inb && /^```$/ { exit }
                   inb { print }' "$src/README.md"
}

# The quick Use lines: the rest (sweeps, training, mpirun, torch) run with DOCS_FULL=1.
quick() {
    [[ "$1" =~ --help|zen\ info|zen\ simulate|zen\ bench\ sparse ]]
}

ran=0 skipped=0
run_block() {
    local heading=$1 line
    local -a lines
    mapfile -t lines < <(block "$heading")
    [[ ${#lines[@]} -gt 0 ]] || { echo "test-docs: README.md has no sh block under '$heading'" >&2; exit 1; }
    for line in "${lines[@]}"; do
        [[ -n "${line// /}" ]] || continue
        if [[ -z "${DOCS_FULL:-}" ]] && ! quick "$line"; then
            echo "test-docs: skipped (DOCS_FULL=1 runs it): $line"
            skipped=$((skipped + 1))
            continue
        fi
        echo "test-docs: \$ $line"
        if ! (cd "$tmp/work" && HOME="$tmp/home" bash -c "set -e; $line" >"$tmp/out" 2>&1); then
            tail -20 "$tmp/out" >&2
            echo "test-docs: FAILED as written in README.md ($heading): $line" >&2
            exit 1
        fi
        ran=$((ran + 1))
    done
}

# the Install lines share one shell: the export of PKG_CONFIG_PATH is for the lines after it
install_block() {
    local script="$tmp/install.sh"
    {
        echo "set -e"
        block "## Install" | sed "s|^make install PREFIX=\(.*\)$|cmake --install '$build' --prefix \1 >/dev/null|"
    } >"$script"
    echo "test-docs: the Install block, in one shell:"
    block "## Install" | sed 's/^/test-docs: $ /'
    if ! (cd "$tmp/work" && env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH HOME="$tmp/home" \
          bash "$script" >"$tmp/out" 2>&1); then
        tail -20 "$tmp/out" >&2
        echo "test-docs: FAILED: README.md's Install block as written" >&2
        exit 1
    fi
    grep -c "over 4 ranks: ok" "$tmp/out" | grep -qx 2 ||
        { cat "$tmp/out" >&2; echo "test-docs: the two example builds did not both run" >&2; exit 1; }
    ran=$((ran + 1))
}

run_block "## Use"
install_block
echo "test-docs: README.md: $ran ran as written, $skipped skipped"
