#!/usr/bin/env bash
# Sets everything up and runs the lab on the bundled default scenario.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/attnlab explain "$@"
