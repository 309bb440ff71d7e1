"""`mnemo mcp`: the stdio MCP server for agents (Claude Code, Copilot in VS Code, any MCP client)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction, common) -> None:  # noqa: ARG001 - no --json: stdout is the protocol
    p = sub.add_parser("mcp", help="serve Mnemo's tools to an agent over MCP (stdio)",
                       description="Run the MCP server on stdin/stdout. The project is the client's workspace "
                                   "root (or --project-root, or the working directory); the store is shared "
                                   "with the editor and the CLI through the owner process.")
    p.add_argument("--home", type=Path, default=None, help="store directory (default: $MNEMO_HOME or ~/.mnemo)")
    p.add_argument("-C", "--project-root", type=Path, default=None, dest="project_root",
                   help="act for this workspace instead of the client's roots / the working directory")
    p.set_defaults(func=cmd_mcp, needs_service=False)


def cmd_mcp(args, _service) -> int:
    from mnemo.mcp.server import main

    return main(home=args.home, project_root=args.project_root)
