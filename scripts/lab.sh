#!/usr/bin/env bash
# Sets everything up and runs the lab on the bundled default scenario: builds attnlab,
# starts `attnlab serve` on 127.0.0.1 and opens the page in a browser when one is there.
# Extra arguments go to `attnlab serve` (e.g. --port 9000). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/attnlab serve --open "$@"
