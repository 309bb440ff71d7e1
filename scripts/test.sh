#!/usr/bin/env bash
# One command to set up and run the whole test suite (what CI runs through .ci/run).
#   MNEMO_FULL=1 bash scripts/test.sh   also runs the long fault and soak runs
#   MNEMO_SKIP_VSCODE=1                 skips the VS Code (code-server) end-to-end run
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test

# System packages the tests use: neovim (a second real LSP client), git, nginx (the token-checking proxy that
# `mnemo team serve` runs in front of Chroma; only its binary is used, the system service may stay stopped).
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=()
  command -v nvim >/dev/null 2>&1 || need+=(neovim)
  command -v git >/dev/null 2>&1 || need+=(git)
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
  if [ ${#need[@]} -gt 0 ]; then
    echo "==> apt-get install ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

# Never touch the user's real store from tests; the test store goes when the run ends.
MNEMO_TEST_TMP="$(mktemp -d)"
trap 'rm -rf "$MNEMO_TEST_TMP"' EXIT
export MNEMO_HOME="$MNEMO_TEST_TMP/mnemo-home"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 ANONYMIZED_TELEMETRY=False

status=0
echo "==> lint (ruff)"
.venv/bin/ruff check server tests bench || status=$?

echo "==> types (mypy, every module; settings: pyproject.toml [tool.mypy])"
.venv/bin/python -m mypy || status=$?

echo "==> python tests"
.venv/bin/python -m pytest -q -p no:cacheprovider tests || status=$?

if [ -d vscode-extension ] && [ -f vscode-extension/package.json ] && [ "${MNEMO_SKIP_VSCODE:-0}" != 1 ]; then
  if [ -f vscode-extension/scripts/unit.sh ]; then
    echo "==> VS Code extension: lint, types, unit tests"
    bash vscode-extension/scripts/unit.sh || status=$?
  fi
  if [ -f vscode-extension/scripts/e2e.sh ]; then
    echo "==> VS Code extension: end-to-end in code-server"
    # One run: each step waits for what it acts on and for the effect of its action, and repeats only the action
    # when a click or a key was lost (vscode-extension/e2e/vscode.e2e.ts), so a failure is a failure.
    if bash vscode-extension/scripts/setup-e2e.sh; then
      if ! bash vscode-extension/scripts/e2e.sh; then
        status=1
        echo "==> VS Code e2e failed: screenshots, code-server and extension logs in ${MNEMO_E2E_ARTIFACTS:-test-artifacts/vscode}/"
      fi
    else
      status=1
      echo "==> VS Code e2e not run: its setup (vscode-extension/scripts/setup-e2e.sh) failed, see above"
    fi
  fi
fi
exit $status
