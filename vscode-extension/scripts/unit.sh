#!/usr/bin/env bash
# The extension's static checks and unit tests, no VS Code needed: npm ci, eslint (no warnings), strict tsc,
# node:test on the pure modules (interpreter lookup, settings, tree building, wording).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXT="$(cd "$HERE/.." && pwd)"
cd "$EXT"

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "[unit.sh] eslint"
npx eslint src e2e --max-warnings=0
echo "[unit.sh] tsc --noEmit (strict)"
npx tsc -p . --noEmit
echo "[unit.sh] esbuild"
node esbuild.mjs >/dev/null 2>&1
echo "[unit.sh] unit tests"
rm -rf out
npx tsc -p tsconfig.test.json
node --test --test-reporter=spec out/src/test/unit/*.test.js
