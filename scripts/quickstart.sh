#!/usr/bin/env bash
# One command for a newcomer: set everything up, then run Mnemo's main job as a demo: an embedded store and a demo
# project in a temporary directory (never ~/.mnemo, never this repository): index its Markdown docs, remember and
# recall a few notes, print the result cards, then remove the temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/mnemo quickstart
