#!/usr/bin/env bash
# The recipes the docs give, run as written (issue #37).
#
#   scripts/test-docs.sh BUILD_DIR [readme]     README.md: the "Use" lines from a directory whose
#       ./build is BUILD_DIR, and the "Install" lines from a scratch HOME, so that
#       `make install PREFIX=$HOME/.local`, PKG_CONFIG_PATH, the rpath and CMAKE_PREFIX_PATH are
#       exercised exactly as a new user types them. One stand-in: `make install` (which first
#       runs scripts/deps.sh and rebuilds ./build) becomes `cmake --install BUILD_DIR`, what it
#       ends with.
#   scripts/test-docs.sh BUILD_DIR pytorch      docs/pytorch.md's "Run" block from a scratch tree,
#       with BUILD_DIR installed into a scratch prefix whose bin/ is on PATH (`zen launch`). The
#       example's runs get `--steps 2` appended (the option the doc names), nothing else changes.
#       Exit 77 (skip) when torch does not import or the build made no zen_torch.
#   scripts/test-docs.sh BUILD_DIR repro        docs/reproduction.md's first row (section 1's
#       workload commands, section 2's sparsity report) in a fresh copy of the tree (git
#       archive of HEAD), stopping at the first command that fails. Slow (many minutes).
#
# DOCS_FULL=1 runs every line (README: sweeps, training, mpirun, torch; pytorch.md: mpirun,
# srun), else only the quick ones (the default ctests stay well under a minute each).
# A line that fails stops the script with exit 1, naming the line.
set -euo pipefail
build="$(cd "$1" && pwd)"
mode=${2:-readme}
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

# docs/pytorch.md's "## Run" block. Lines run in order; each `export` line is carried into the
# lines after it, as in the user's shell.
pytorch_quick() {
    [[ "$1" =~ ^(zen\ launch|/usr/bin/python3\ -m\ torch.distributed.run) ]]
}
pytorch_mode() {
    if [[ ! -d "$build/python/zen_torch" ]]; then
        echo "test-docs: skipped: the build made no zen_torch (torch or its headers missing)"
        exit 77
    fi
    if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
        echo "test-docs: skipped: torch does not import in /usr/bin/python3"
        exit 77
    fi
    local prefix="$tmp/prefix" env_lines="" line cmd
    cmake --install "$build" --prefix "$prefix" >/dev/null
    ln -s "$src/tests" "$tmp/work/tests"
    local -a lines
    mapfile -t lines < <(awk '$0 == "## Run" { inh = 1; next }
                               inh && /^```sh$/ { inb = 1; next }
                               inb && /^```$/ { exit }
                               inb { print }' "$src/docs/pytorch.md")
    [[ ${#lines[@]} -gt 0 ]] || { echo "test-docs: docs/pytorch.md has no sh block under '## Run'" >&2; exit 1; }
    for line in "${lines[@]}"; do
        [[ -n "${line// /}" ]] || continue
        if [[ "$line" == export\ * ]]; then
            env_lines+="$line; "
            continue
        fi
        if [[ -z "${DOCS_FULL:-}" ]] && ! pytorch_quick "$line"; then
            echo "test-docs: skipped (DOCS_FULL=1 runs it): $line"
            skipped=$((skipped + 1))
            continue
        fi
        if [[ "$line" == srun\ * ]] && ! sinfo >/dev/null 2>&1; then
            echo "test-docs: skipped (no Slurm cluster answers sinfo): $line"
            skipped=$((skipped + 1))
            continue
        fi
        cmd=$line
        [[ "$line" != *examples/torch_ddp_kjv.py* ]] || cmd="$line --steps 2"
        echo "test-docs: \$ $cmd"
        if ! (cd "$tmp/work" && PATH="$prefix/bin:$PATH" HOME="$tmp/home" \
              timeout 300 bash -c "set -e; $env_lines$cmd" >"$tmp/out" 2>&1); then
            tail -20 "$tmp/out" >&2
            echo "test-docs: FAILED as written in docs/pytorch.md (## Run): $cmd" >&2
            exit 1
        fi
        ran=$((ran + 1))
    done
    echo "test-docs: docs/pytorch.md: $ran ran as written, $skipped skipped"
}

# docs/reproduction.md's first row: the commands of section 1's table (the last backticked
# span of each row; "(and `--frac 0.001`)" is the topk01 twin of the topk1 line) and section
# 2's block, in a fresh tree whose build/ holds only what the commands write.
repro_mode() {
    if [[ -z "${DOCS_FULL:-}" ]]; then
        echo "test-docs: skipped: docs/reproduction.md's first row takes many minutes (DOCS_FULL=1 runs it)"
        exit 77
    fi
    local fresh="$tmp/fresh" c i=0
    mkdir -p "$fresh/build"
    git -C "$src" archive HEAD | tar -x -C "$fresh"
    local -a cmds
    mapfile -t cmds < <(awk '/^## 1\./ { s = 1; next } /^## 2\./ { exit }
                              s && /^\| \*\*/ { n = split($0, c, "|"); print c[n - 1] }' \
                            "$src/docs/reproduction.md" | sed 's/ (and .*//; s/^ *`//; s/`.*$//')
    [[ ${#cmds[@]} -eq 3 ]] || { echo "test-docs: reproduction.md section 1: expected 3 commands, got ${#cmds[@]}" >&2; exit 1; }
    cmds+=("$(echo "${cmds[1]}" | sed 's/topk1/topk01/; s/--frac 0.01$/--frac 0.001/')")
    cmds+=("$(awk '/^## 2\./ { s = 1; next } s && /^```$/ { if (inb) exit; inb = 1; next }
                    inb { sub(/\\$/, ""); printf "%s", $0 }' "$src/docs/reproduction.md")")
    for c in "${cmds[@]}"; do
        i=$((i + 1))
        echo "test-docs: reproduction step $i/${#cmds[@]}: \$ $c"
        if ! (cd "$fresh" && PATH="$build:$PATH" bash -c "set -e; $c" >"$tmp/out" 2>&1); then
            tail -20 "$tmp/out" >&2
            echo "test-docs: FAILED: docs/reproduction.md's first row stops at step $i: $c" >&2
            exit 1
        fi
    done
    # The report's rows against the table section 2 prints (the traces are seeded: the doc
    # says regenerated traces gave the same digits); a differing row is named, not fatal.
    local row differ=0
    while IFS= read -r row; do
        grep -qxF -- "$row" "$tmp/out" ||
            { echo "test-docs: note: this run's report lacks the doc's row: $row"; differ=1; }
    done < <(awk '/^## 2\./ { s = 1; next } /^## 3\./ { exit }
                  s && /^\| / && !/^\| (workload|---)/ { print }' "$src/docs/reproduction.md")
    [[ $differ -eq 1 ]] || echo "test-docs: the sparsity table matches docs/reproduction.md's"
    echo "test-docs: docs/reproduction.md's first row: ${#cmds[@]} commands ran as written"
}

case "$mode" in
readme)
    run_block "## Use"
    install_block
    echo "test-docs: README.md: $ran ran as written, $skipped skipped"
    ;;
pytorch) pytorch_mode ;;
repro) repro_mode ;;
*) echo "usage: test-docs.sh BUILD_DIR [readme|pytorch|repro]" >&2; exit 2 ;;
esac
