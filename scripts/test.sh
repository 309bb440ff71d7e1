#!/usr/bin/env bash
# One command to set up and run the whole test suite (what CI runs through .ci/run).
#   MNEMO_FULL=1 bash scripts/test.sh   also runs the long fault and soak runs
#   MNEMO_SKIP_VSCODE=1                 skips the VS Code (code-server) end-to-end run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test

# System packages the tests use: neovim (a second real LSP client), git.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=()
  command -v nvim >/dev/null 2>&1 || need+=(neovim)
  command -v git >/dev/null 2>&1 || need+=(git)
  if [ ${#need[@]} -gt 0 ]; then
    echo "==> apt-get install ${need[*]}"
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

# Never touch the user's real store from tests.
export MNEMO_HOME="$(mktemp -d)/mnemo-home"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False

status=0
echo "==> lint (ruff)"
.venv/bin/ruff check server tests bench || status=$?

echo "==> python tests"
.venv/bin/python -m pytest -q -p no:cacheprovider tests || status=$?

if [ -d vscode-extension ] && [ -f vscode-extension/package.json ] && [ "${MNEMO_SKIP_VSCODE:-0}" != 1 ]; then
  if [ -f vscode-extension/scripts/unit.sh ]; then
    echo "==> VS Code extension: lint, types, unit tests"
    bash vscode-extension/scripts/unit.sh || status=$?
  fi
  if [ -f vscode-extension/scripts/e2e.sh ]; then
    echo "==> VS Code extension: end-to-end in code-server"
    # The UI driver is timing-sensitive on a loaded 2-core box (a context-menu click or a toast missed); a run
    # counts when one of three attempts passes every step, and each failed attempt is reported.
    if bash vscode-extension/scripts/setup-e2e.sh; then
      e2e_ok=1
      for attempt in 1 2 3; do
        if bash vscode-extension/scripts/e2e.sh; then e2e_ok=0; echo "==> VS Code e2e passed (attempt $attempt)"; break; fi
        echo "==> VS Code e2e attempt $attempt failed (screenshots in test-artifacts/vscode/)"
      done
      [ $e2e_ok = 0 ] || status=1
    else
      status=1
    fi
  fi
fi
exit $status
