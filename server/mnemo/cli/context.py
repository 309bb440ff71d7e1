"""The workspace a command acts for, as a service context (`-C/--project-root`, else the current directory)."""

from __future__ import annotations

import argparse
from typing import Any


def make_context(args: argparse.Namespace) -> dict[str, Any]:
    from mnemo.core.identity import detect_context  # lazy: `mnemo lsp` never parses a command that needs it

    root = getattr(args, "project_root", None)
    return detect_context(root).to_dict()
