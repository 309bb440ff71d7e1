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
# If the test dies before its own teardown, stop what it started: code-server's process group (with the extension
# host and the language server) and the store's owner process, each checked to still be ours before the kill.
export MNEMO_E2E_PIDFILE="$(mktemp)"
# The test's scratch folders and Chromium's profile (playwright puts it in TMPDIR) live here, so a browser left by
# a killed test is found by its own profile path.
E2E_TMP="$(mktemp -d -t mnemo-e2e-run-XXXXXX)"
cleanup() {
  for pid in $(pgrep -f -- "$E2E_TMP/playwright" || true); do kill -TERM "$pid" 2>/dev/null || true; done
  while read -r kind value; do
    case "$kind" in
      group)
        if ps -o cmd= -g "$value" 2>/dev/null | grep -q code-server; then kill -TERM -- "-$value" 2>/dev/null || true; fi ;;
      home)
        pid="$(grep -o '"pid": *[0-9]*' "$value/daemon.json" 2>/dev/null | grep -o '[0-9]*$' || true)"
        if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q "mnemo"; then
          kill -TERM "$pid" 2>/dev/null || true
        fi
        case "$value" in
          */mnemo-e2e-*/mnemo-home) [ "${MNEMO_E2E_KEEP:-0}" = 1 ] || rm -rf "${value%/mnemo-home}" ;;
        esac ;;
    esac
  done < "$MNEMO_E2E_PIDFILE"
  rm -f "$MNEMO_E2E_PIDFILE"
  [ "${MNEMO_E2E_KEEP:-0}" = 1 ] || rm -rf "$E2E_TMP"
}
trap cleanup EXIT
echo "[e2e.sh] running"
TMPDIR="$E2E_TMP" node --test --test-concurrency=1 --test-reporter=spec out/e2e/vscode.e2e.js
