#!/usr/bin/env bash
# The layer check itself is tested: a core file that includes a kernels header, and a
# kernels file that reaches into another folder's private header, must both be reported.
set -euo pipefail
check="$(dirname "$0")/check_layers.py"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/src/core" "$tree/src/kernels" "$tree/include/attnlab/core" "$tree/include/attnlab/kernels"
touch "$tree/include/attnlab/core/matrix.hpp" "$tree/include/attnlab/kernels/flash_attention.hpp"
printf '#include "attnlab/kernels/flash_attention.hpp"\n' > "$tree/src/core/attention.cpp"
printf '#include "../analysis/bench.hpp"\n#include "attnlab/core/matrix.hpp"\n' > "$tree/src/kernels/tiles.cpp"
if out="$(python3 "$check" "$tree")"; then
  echo "FAIL: the check passed a tree with upward includes:"; echo "$out"; exit 1
fi
echo "$out"
grep -q "src/core/attention.cpp (layer core) includes \"attnlab/kernels/flash_attention.hpp\": 'kernels' is above 'core'" <<<"$out"
grep -q "src/kernels/tiles.cpp (layer kernels) includes \"../analysis/bench.hpp\": a private header of another folder" <<<"$out"
[ "$(grep -c includes <<<"$out")" = 2 ] || { echo "FAIL: expected exactly two reports"; exit 1; }
echo "the layer check reports both upward includes and nothing else"
