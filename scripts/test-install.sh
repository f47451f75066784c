#!/usr/bin/env bash
# The installed copy works for a user: install a build into a scratch DESTDIR + prefix (so both
# are honoured and the package files must be relocatable), then build examples/allreduce.c and
# examples/simulate.c against it twice, with pkg-config and with CMake's find_package(zen), and
# run them. Checks that every public header is installed and compiles on its own, runs the
# installed `zen` (which must load the installed libzen.so) and checks the man page parses.
#
#   scripts/test-install.sh BUILD_DIR
set -euo pipefail
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
tmp=$(mktemp -d /tmp/zen-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

DESTDIR="$tmp/dest" cmake --install "$build" --prefix /opt/zen >"$tmp/install.log"
prefix="$tmp/dest/opt/zen"
libdir=$(dirname "$(find "$prefix" -name zen.pc -path '*pkgconfig*' | head -1)")/..
libdir=$(cd "$libdir" && pwd)
for f in "$prefix/bin/zen" "$prefix/include/zen/zen.h" "$libdir/libzen.so" "$libdir/libzen.a" \
         "$prefix/share/man/man1/zen.1" "$libdir/cmake/zen/zenConfig.cmake"; do
    [[ -e "$f" ]] || { echo "test-install: $f was not installed" >&2; exit 1; }
done
# every public header is installed and self-contained (compiles alone, strict C11)
for h in "$src"/include/zen/*.h; do
    name=$(basename "$h")
    [[ -e "$prefix/include/zen/$name" ]] || { echo "test-install: zen/$name was not installed" >&2; exit 1; }
    printf '#include <zen/%s>\n' "$name" |
        ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I"$prefix/include" -x c -c - -o /dev/null ||
        { echo "test-install: the installed zen/$name does not compile on its own" >&2; exit 1; }
done
# the installed zen links the installed libzen.so (its RPATH is $ORIGIN/../lib), not the build's
zen_lib=$(ldd "$prefix/bin/zen" | awk '$1 ~ /^libzen\.so/ { print $3 }')
[[ -n "$zen_lib" && "$(readlink -f "$zen_lib")" == "$(readlink -f "$libdir")"/libzen.so* ]] ||
    { echo "test-install: the installed zen loads '$zen_lib', not $libdir/libzen.so" >&2; exit 1; }
"$prefix/bin/zen" info >/dev/null
"$prefix/bin/zen" train --help >/dev/null
# the installed zen_torch module (when built) loads the installed libzen.so too and imports
torch_ext=$(find "$prefix" -path '*zen_torch/_C*.so' | head -1)
if [[ -n "$torch_ext" ]]; then
    torch_lib=$(ldd "$torch_ext" | awk '$1 ~ /^libzen\.so/ { print $3 }')
    [[ -n "$torch_lib" && "$(readlink -f "$torch_lib")" == "$(readlink -f "$libdir")"/libzen.so* ]] ||
        { echo "test-install: the installed zen_torch loads '$torch_lib', not $libdir/libzen.so" >&2; exit 1; }
    PYTHONPATH="$(dirname "$(dirname "$torch_ext")")" /usr/bin/python3 -c \
        'import torch.distributed as d, zen_torch; assert hasattr(d.Backend, "ZEN") and zen_torch.__version__.count(".") == 2' ||
        { echo "test-install: the installed zen_torch does not import" >&2; exit 1; }
fi
if command -v man >/dev/null; then
    MANWIDTH=80 man -l "$prefix/share/man/man1/zen.1" 2>&1 | grep -c "EXIT STATUS" >/dev/null ||
        { echo "test-install: man -l zen.1 did not render" >&2; exit 1; }
fi

# 1. pkg-config, against the shared library
export PKG_CONFIG_PATH="$libdir/pkgconfig"
flags=$(pkg-config --cflags --libs zen)
${CC:-cc} -std=c11 -Wall -Wextra -Werror "$src/examples/allreduce.c" $flags -o "$tmp/allreduce_pc"
LD_LIBRARY_PATH="$libdir" ldd "$tmp/allreduce_pc" | grep -c "$libdir/libzen.so" >/dev/null ||
    { echo "test-install: the pkg-config build does not use the installed libzen.so" >&2; exit 1; }
LD_LIBRARY_PATH="$libdir" "$tmp/allreduce_pc"
${CC:-cc} -std=c11 -Wall -Wextra -Werror "$src/examples/simulate.c" $flags -o "$tmp/simulate_pc"
LD_LIBRARY_PATH="$libdir" "$tmp/simulate_pc" >/dev/null
# ... and against the static library: Libs.private must name every library libzen.a needs
flags=$(pkg-config --static --cflags --libs zen | sed "s|-lzen\b|$libdir/libzen.a|")
${CC:-cc} -std=c11 -Wall -Wextra -Werror "$src/examples/allreduce.c" $flags -o "$tmp/allreduce_static"
ldd "$tmp/allreduce_static" | grep -c "libzen.so" >/dev/null &&
    { echo "test-install: the static pkg-config build loads libzen.so" >&2; exit 1; }
"$tmp/allreduce_static"

# 2. CMake find_package(zen) -> zen::zen
cmake -S "$src/examples" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log" >&2; exit 1; }
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; exit 1; }
ldd "$tmp/cmake/allreduce" | grep -c "$libdir/libzen.so" >/dev/null ||
    { echo "test-install: zen::zen does not resolve to the installed libzen.so" >&2; exit 1; }
"$tmp/cmake/allreduce"
"$tmp/cmake/simulate" >/dev/null
echo "test-install: pkg-config and find_package builds of examples/allreduce.c and simulate.c pass"
