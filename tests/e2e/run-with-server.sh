#!/usr/bin/env bash
# Starts `attnlab serve` on a free loopback port, runs the browser tests against it in
# Debian's Chromium, and stops the server. CTest runs this; it fails loudly when Chromium
# or the npm packages are missing (scripts/test.sh installs both).
set -euo pipefail
attnlab="$1"
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ -x /usr/bin/chromium ] || { echo "browser tests: /usr/bin/chromium is missing (apt-get install chromium)"; exit 1; }
[ -d "$root/node_modules/playwright-core" ] || { echo "browser tests: run 'npm ci' in $root first"; exit 1; }

log="$(mktemp)"
"$attnlab" serve --port 0 >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  url="$(head -n 1 "$log" 2>/dev/null || true)"
  case "$url" in http://*) break ;; esac
  sleep 0.1
done
case "$url" in http://*) ;; *) echo "browser tests: attnlab serve did not start:"; cat "$log"; exit 1 ;; esac
echo "browser tests against $url"
case "$attnlab" in /*) ;; *) attnlab="$PWD/$attnlab" ;; esac  # for the tests that compare with the CLI
cd "$root"
ATTNLAB_URL="$url" ATTNLAB_BIN="$attnlab" node --test tests/e2e/
