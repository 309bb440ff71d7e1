"""`mnemo` command line: a thin layer over the Service API. Human output by default, `--json` everywhere."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mnemo import __version__
from mnemo.core.errors import MnemoError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object (for scripts)")
    p.add_argument("--home", type=Path, default=None, help="store directory (default: $MNEMO_HOME or ~/.mnemo)")
    p.add_argument("-C", "--project-root", type=Path, default=None, dest="project_root",
                   help="workspace to act for (default: the current directory's git root)")
    p.add_argument("--no-daemon", action="store_true",
                   help="open the store in this process instead of through the owner process")


def build_parser() -> argparse.ArgumentParser:
    from mnemo.cli import commands

    parser = argparse.ArgumentParser(prog="mnemo", description="Memory and skills for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"mnemo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.register(sub, _common)
    try:
        from mnemo.cli import skills_cmd
    except ImportError:  # skills engine not installed in this checkout
        skills_cmd = None
    if skills_cmd is not None:
        skills_cmd.register(sub, _common)
    for _name, mod in _optional_command_modules():
        mod.register(sub, _common)
    return parser


def _optional_command_modules():
    import importlib

    for name in ("lifecycle_cmd", "team_cmd", "server_cmd", "mcp_cmd", "config_cmd"):
        try:
            yield name, importlib.import_module(f"mnemo.cli.{name}")
        except ImportError:
            continue


def make_service(args: argparse.Namespace):
    """The daemon client by default; an in-process service with --no-daemon (or MNEMO_NO_DAEMON=1)."""
    from mnemo.daemon.paths import default_home

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    if getattr(args, "no_daemon", False) or os.environ.get("MNEMO_NO_DAEMON") == "1":
        from mnemo.core.engine import Engine
        from mnemo.service import LocalService

        engine = Engine(home)
        problem = engine.store_problem()  # a damaged store: say what to run before anything reads it
        if problem is not None:
            engine.close()
            raise problem
        return LocalService(engine)
    from mnemo.daemon.client import DaemonService

    return DaemonService(home, client_name="cli", on_warning=warn)


def warn(message: str) -> None:
    """A warning on stderr (stdout stays the command's output)."""
    sys.stderr.write(f"warning: {message}\n")


def close_service(service) -> None:
    if hasattr(service, "engine"):
        service.engine.close()
    elif hasattr(service, "close"):
        service.close()


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
