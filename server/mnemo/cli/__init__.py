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
        publish_cmd,
        server_cmd,
        skills_cmd,
        team_cmd,
    )

    parser = argparse.ArgumentParser(prog="mnemo", description="Memory and skills for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"mnemo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (commands, import_cmd, anchor_cmd, edit_cmd, skills_cmd, lifecycle_cmd, markdown_cmd, publish_cmd, team_cmd,
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


# Arguments that name files: a path may hold any bytes the file system allows. Every other text argument reaches the
# store, where it must be Unicode.
PATH_ARGS = frozenset({"dir", "dirs", "file", "root", "path", "home", "project_root", "settings", "vsix", "ca_cert",
                       "tls_cert", "tls_key", "token_file"})


def undecodable_argument(args: argparse.Namespace, argv: list[str]) -> MnemoError | None:
    """The error for a text argument that is not valid UTF-8 (Python keeps its bytes as lone surrogates, which
    no store, socket or JSON encoder takes), naming the option and the byte; None when every text is valid."""
    from mnemo.core.errors import InvalidInput

    for name, value in vars(args).items():
        if name in PATH_ARGS or name == "func":
            continue
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str):
                continue
            bad = next((i for i, ch in enumerate(text) if 0xDC80 <= ord(ch) <= 0xDCFF), None)
            if bad is not None:
                shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                opt = "--" + name.replace("_", "-")
                label = opt if any(a.split("=", 1)[0] in (opt, opt.rstrip("s")) for a in argv) else f"the {name} argument"
                return InvalidInput(f"{label} is not valid UTF-8 (byte 0x{ord(text[bad]) - 0xDC00:02x} in "
                                    f"'{shown[:60]}'); nothing was done",
                                    hint="pass the text in UTF-8 (check the terminal's or the file's encoding)")
    return None


def main(argv: list[str] | None = None, service=None) -> int:
    """Run one command. `service`: use this Service instead of opening one (tests; it is not closed here). Output
    cut short by the reader (`mnemo list --json | head -1`) ends the command quietly, like any Unix tool."""
    try:
        return _main(argv, service)
    except BrokenPipeError:
        import os

        try:  # the interpreter flushes stdout once more at exit: point it at nothing, so that flush is quiet too
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE: what a shell reports for a command whose reader went away


def _main(argv: list[str] | None, service) -> int:
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
    bad = undecodable_argument(args, argv)
    if bad is not None:
        from mnemo.cli.output import print_error

        print_error(bad, as_json)
        return 2
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
