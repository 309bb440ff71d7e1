"""What every CLI command needs: the Service to call (the owner's client, or in process) and the caller's context."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from mnemo import api

from mnemo.core import environment


def make_service(args: argparse.Namespace) -> api.Service:
    """The daemon client by default; an in-process service with --no-daemon (or MNEMO_NO_DAEMON=1). Either is the
    one `api.Service` (the type checker checks LocalService against it; DaemonService is declared one and forwards
    every method of it to the owner: go-to-definition lands on the declaration in `mnemo.api`)."""
    from mnemo.daemon.paths import default_home  # lazy (as below): `mnemo lsp` never opens a service

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    if getattr(args, "no_daemon", False) or environment.raw("MNEMO_NO_DAEMON") == "1":
        from mnemo.core.engine import Engine
        from mnemo.service import LocalService

        engine = Engine(home)
        problem = engine.store_problem()  # a damaged store: say what to run before anything reads it
        if problem is not None:
            engine.close()
            raise problem
        return LocalService(engine)
    from mnemo.daemon.client import DaemonService

    return DaemonService.open(home, client_name="cli", on_warning=warn)


def warn(message: str) -> None:
    """A warning on stderr (stdout stays the command's output)."""
    sys.stderr.write(f"warning: {message}\n")


def make_context(args: argparse.Namespace) -> api.Ctx:
    from mnemo.core.identity import detect_context  # lazy: `mnemo lsp` never parses a command that needs it

    root = getattr(args, "project_root", None)
    return detect_context(root).to_dict()


def close_service(service) -> None:
    if hasattr(service, "_flush_publishes"):
        service._flush_publishes()  # a publish a change scheduled (`publish_on_change`) runs before the store closes
    if hasattr(service, "engine"):
        service.engine.close()
    elif hasattr(service, "close"):
        service.close()
