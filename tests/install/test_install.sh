#!/usr/bin/env bash
# attnlab installs, and a user's own CMake program finds it: `cmake --install` into a
# temporary prefix, then tests/install/consumer (find_package(attnlab), attnlab::core) is
# configured, built and run; it must print the worked example's weights and output for t3,
# and its second program (attnlab::analysis with attnlab::heap_counter) must count its heap.
set -euo pipefail
build="$1"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix/usr" >/dev/null
cmake -S "$here/consumer" -B "$prefix/consumer-build" -DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$prefix/consumer-build" >/dev/null
out="$("$prefix/consumer-build/consumer")"
echo "consumer printed: $out"
[ "$out" = "0.31 0.07 0.62 -> 0.69 0.93" ] || { echo "FAIL: expected 0.31 0.07 0.62 -> 0.69 0.93"; exit 1; }
[ -f "$prefix/usr/bin/attnlab" ] || { echo "FAIL: the attnlab command was not installed"; exit 1; }
counted="$("$prefix/consumer-build/counted")"
echo "counted printed: $counted"
[ "$counted" = "counted 1, grew by at least 1 MiB" ] || { echo "FAIL: attnlab::heap_counter did not count"; exit 1; }
echo "installed attnlab found by find_package and linked as attnlab::core"
