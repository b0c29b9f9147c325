#!/usr/bin/env bash
# Sets everything up (packages, build, browser-test dependencies) and runs every test
# through CTest: unit, reference fixtures, CLI, API and browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ATTNLAB_WITH_BROWSER=1 scripts/setup.sh
if [ -f package.json ]; then
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund --loglevel=error; else npm install --no-audit --no-fund --loglevel=error; fi
fi
cd build
ctest --output-on-failure --timeout 600 -j"$(nproc)"
