#!/usr/bin/env bash
# Sets everything up (packages, build, browser-test dependencies) and runs every test
# through CTest: unit, reference fixtures, CLI, API and browser tests in build/ (g++);
# then, in build-fuzz/ (clang-14 with AddressSanitizer and UndefinedBehaviorSanitizer),
# the unit, CLI and API tests again and each fuzz target over its corpus plus a few
# seconds of fuzzing (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNLAB_WITH_BROWSER=1 ATTNLAB_SETUP_PACKAGES_ONLY=1 scripts/setup.sh
# The npm packages download while the build compiles (a minute and more of waiting on the
# network otherwise): the browser test's, and llama.cpp as a reference and a peer, npm's
# node-llama-cpp with its prebuilt CPU libraries (no compiling: --ignore-scripts; only the CPU
# build: --omit=optional and its x86-64 Linux package) in build/peers
# (tests/model/llama_cpp_agrees.test.js, bench/).
npm_packages() {
  if [ -f package.json ]; then
    if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
  fi
  if [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ]; then
    npm install --prefix build/peers --ignore-scripts --omit=optional --no-audit --no-fund --loglevel=error \
      node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1
  fi
}
mkdir -p build
npm_packages >build/npm-packages.log 2>&1 &
npm_pid=$!
trap 'kill "$npm_pid" 2>/dev/null || true' EXIT  # a failed build stops the download too
ATTNLAB_WITH_BROWSER=1 scripts/setup.sh           # the packages are there: the build
if ! wait "$npm_pid"; then
  cat build/npm-packages.log
  echo "test: installing the npm packages failed (above)" >&2
  exit 1
fi
cat build/npm-packages.log
(cd build && ctest --output-on-failure --timeout 600 -j"$(nproc)")

if [ "${ATTNLAB_SKIP_SANITIZERS:-0}" = 1 ]; then
  echo "test: ATTNLAB_SKIP_SANITIZERS=1: the sanitizer build and the fuzz targets are skipped"
  exit 0
fi
cmake --preset fuzz >/dev/null
cmake --build build-fuzz -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Labels: unit, cli, api (the gtest suites) and fuzz. The long sweeps are left to the g++
# run above, which runs them: under the sanitizers the flash kernel's sweep of shapes, masks,
# tiles, threads and instruction sets takes about 200 s, each seeded training run (GPT-2's
# recipe, the Llama-style one) about 130 s, the text task's 58 s and bench --train's 15 s;
# the rest of the run, fuzz targets included, about 250 s on 2 cores (docs/performance/test-run-times.md).
slow='^(FlashAttention\.SweepOfShapesMasksTilesThreadsAndInstructionSets|TrainCli\.(TheRecipeFormsAPreviousTokenHeadThenAnInductionHeadThatTheRepeatNeeds|ALlamaStyleModelLearnsTheRecipeAndIsAFolderTheModelCommandsRead|TheTextTaskTrainsOnAFilesBytesAndWritesATokenizerTheModelCommandsRead|BenchTrainTimesWholeStepsAndCountsTheirFlops))$'
(cd build-fuzz && ctest --output-on-failure --timeout 600 -j"$(nproc)" -L '^(unit|cli|api|fuzz)$' -E "$slow")
