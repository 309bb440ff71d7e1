#!/usr/bin/env bash
# Set up Mnemo in ./.venv: torch (CPU wheel) first, then the package, then the ONNX export of the model.
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh [--test]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=""
[ "${1:-}" = "--test" ] && extras="[test]"

if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "==> installing torch 2.13.0 (CPU) first, so nothing pulls a CUDA build"
  .venv/bin/pip install -q torch==2.13.0
fi
echo "==> installing mnemo${extras}"
.venv/bin/pip install -q torch==2.13.0 -e ".${extras}"
# The relation check every write runs, compiled to C with mypyc (mnemo/native.py): ~40% less CPU for the check
# (~0.4 ms a write), the same decisions. Skipped, with the sources running as before, where mypyc or a C compiler is missing.
.venv/bin/python -c "import mypyc" 2>/dev/null || .venv/bin/pip install -q "mypy>=1.10" || true
.venv/bin/python scripts/build_native.py
echo "==> preparing the embedding model (ONNX export, once)"
HF_HUB_OFFLINE=1 .venv/bin/python -m mnemo.core.embedding.embedder --prepare
echo "==> ready: $(.venv/bin/mnemo --version)"
