#!/usr/bin/env bash
# The stand-alone check itself is tested: each kind of outside reference is reported, and
# ordinary uses of the words (a random seed, an issue of the journal) are not.
set -euo pipefail
check="$(dirname "$0")/check_standalone.py"
tree="$(mktemp -d)"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/src" "$tree/docs"
printf '// as seed 000 writes it\n// see ../shared/notes\n// fixed in issue 12\n' > "$tree/src/a.cpp"
printf 'The random head takes a seed (seed 7 by default); DESIGN.md is the architecture.\n' > "$tree/docs/b.md"
if out="$(python3 "$check" "$tree")"; then
  echo "FAIL: the check passed a tree with outside references:"; echo "$out"; exit 1
fi
echo "$out"
for expected in 'src/a.cpp:1: "seed 000"' 'src/a.cpp:2: "../shared"' 'src/a.cpp:3: "issue 12"' 'docs/b.md:1: "DESIGN.md"'; do
  grep -qF "$expected" <<<"$out" || { echo "FAIL: not reported: $expected"; exit 1; }
done
[ "$(grep -c 'refers to a document' <<<"$out")" = 4 ] || { echo "FAIL: expected exactly four reports"; exit 1; }
echo "the stand-alone check reports each outside reference and nothing else"
