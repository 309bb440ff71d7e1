#!/usr/bin/env bash
# Build the .vsix and run the end-to-end test in code-server + headless Chromium. Exits non-zero on failure.
# Needs scripts/setup-e2e.sh first (CI: .ci/run calls both). Screenshots: <repo>/test-artifacts/vscode/.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
EXT="$(cd "$HERE/.." && pwd)"
ROOT="$(cd "$EXT/.." && pwd)"
cd "$EXT"

[ -d node_modules/playwright-core ] || npm ci --no-audit --no-fund --loglevel=error
export MNEMO_E2E_PYTHON="${MNEMO_E2E_PYTHON:-$ROOT/.venv/bin/python}"
"$MNEMO_E2E_PYTHON" -c "import mnemo" || { echo "e2e: Mnemo is not installed in $MNEMO_E2E_PYTHON" >&2; exit 1; }

echo "[e2e.sh] building the .vsix"
rm -f dist/mnemo.vsix
npx vsce package --no-dependencies --allow-missing-repository --skip-license --out dist/mnemo.vsix >/dev/null
echo "[e2e.sh] compiling the test"
npx tsc -p tsconfig.test.json
echo "[e2e.sh] running"
node --test --test-concurrency=1 --test-reporter=spec out/e2e/vscode.e2e.js
