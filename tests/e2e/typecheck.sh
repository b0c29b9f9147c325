#!/usr/bin/env bash
# Type-checks the page's ES modules (web/*.js, each `// @ts-check` with JSDoc types) with
# TypeScript's compiler, emitting nothing: web/tsconfig.json (strict, checkJs, ES2022,
# DOM). CTest runs this; it fails loudly when the npm packages are missing (npm ci
# installs typescript from package.json's devDependencies).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
[ -x node_modules/.bin/tsc ] || { echo "typecheck: node_modules/.bin/tsc is missing: run 'npm ci' in $root first (typescript is a devDependency)"; exit 1; }
npx --no-install tsc --version
npx --no-install tsc --noEmit -p web/
echo "typecheck: web/ has no type errors"
