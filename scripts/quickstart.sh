#!/usr/bin/env bash
# One command for a newcomer: set everything up, then run Mnemo's main job on this repository with the
# embedded local store: index its Markdown docs, remember and recall a few memories, print the result cards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/mnemo quickstart
