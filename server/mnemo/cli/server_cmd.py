"""`mnemo lsp`: the language server (stdio; `--tcp` for debugging). A thin client of the owner process."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction, common) -> None:  # noqa: ARG001 - no --json/--home here
    p = sub.add_parser("lsp", help="run the Mnemo language server (stdio by default)",
                       description="Run the Mnemo language server. Editors start it over stdio; settings come "
                                   "from initializationOptions / workspace/configuration (see docs/settings.md).")
    p.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead, for debugging")
    p.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    p.set_defaults(func=cmd_lsp, needs_service=False)


def cmd_lsp(args: argparse.Namespace, service) -> int:  # noqa: ARG001 - the server makes its own owner link
    if args.tcp:
        from mnemo.lsp.server import main

        return main(tcp=True, host=args.host, port=args.port)
    from mnemo.lsp.preinit import run  # stdio: answers `initialize` while pygls loads (mnemo/lsp/preinit.py)

    return run()
