"""`mnemo` command line: a thin layer over the Service API. Human output by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mnemo import __version__
from mnemo.cli.caller import close_service, make_service
from mnemo.core.errors import MnemoError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    p.add_argument("--home", type=Path, default=None, help="store directory (default: $MNEMO_HOME or ~/.mnemo)")
    p.add_argument("-C", "--project-root", type=Path, default=None, dest="project_root",
                   help="workspace to act for (default: the current directory's git root)")
    p.add_argument("--no-daemon", action="store_true",
                   help="open the store in this process instead of through the owner process")


def build_parser() -> argparse.ArgumentParser:
    # imported here, not at the top: `mnemo lsp` (below) answers the editor's `initialize` without loading them
    from mnemo.cli import (
        anchor_cmd,
        commands,
        config_cmd,
        edit_cmd,
        hooks_cmd,
        import_cmd,
        lifecycle_cmd,
        markdown_cmd,
        mcp_cmd,
        server_cmd,
        skills_cmd,
        team_cmd,
    )

    parser = argparse.ArgumentParser(prog="mnemo", description="Memory and skills for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"mnemo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (commands, import_cmd, anchor_cmd, edit_cmd, skills_cmd, lifecycle_cmd, markdown_cmd, team_cmd,
                   server_cmd, mcp_cmd, config_cmd, hooks_cmd):
        module.register(sub, _common)
    return parser


def _lsp_main(argv: list[str]) -> int:
    """`mnemo lsp ...`: only the language server's own arguments are parsed; the other commands' modules (rich,
    the core's models) are not imported, so the editor's `initialize` is answered sooner."""
    from mnemo.cli import server_cmd

    parser = argparse.ArgumentParser(prog="mnemo", description="Memory and skills for AI coding agents.")
    server_cmd.register(parser.add_subparsers(dest="command", metavar="COMMAND"), _common)
    args = parser.parse_args(argv)
    return int(args.func(args, None) or 0)


def main(argv: list[str] | None = None, service=None) -> int:
    """Run one command. `service`: use this Service instead of opening one (tests; it is not closed here)."""
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["lsp"]:
        return _lsp_main(argv)
    if argv[:1] == ["hook"] and argv[1:2] != ["--help"] and argv[1:2] != ["-h"]:
        from mnemo.hooks.entry import main as hook_main  # an agent's hook: stdlib + the owner socket only

        return hook_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    as_json = getattr(args, "json", False)
    own = service is None
    try:
        if own and getattr(args, "needs_service", True):
            service = make_service(args)
        return int(args.func(args, service) or 0)
    except MnemoError as exc:
        from mnemo.cli.output import print_error

        print_error(exc, as_json)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if own and service is not None:
            close_service(service)
