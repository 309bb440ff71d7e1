"""The Mnemo language server, assembled: the features it serves and `create_server()` / `main()`.

This module is the top of `mnemo.lsp`: it imports the server class (`language_server.py`), the registration
(`setup.py`) and every feature module; no feature imports it (they see the server through `feature.Server`).
`python -m mnemo lsp` goes through the pre-handshake (`preinit.py`), which imports this module in a thread.
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from mnemo.lsp import setup
from mnemo.lsp.feature import LanguageFeature
from mnemo.lsp.features.code_actions import CodeActionsFeature
from mnemo.lsp.features.code_lens import CodeLensFeature
from mnemo.lsp.features.commands import CommandsFeature
from mnemo.lsp.features.hover import HoverFeature
from mnemo.lsp.features.sidebar import SidebarFeature
from mnemo.lsp.language_server import MnemoLanguageServer
from mnemo.lsp.logs import setup_logging
from mnemo.lsp.stdio import ResyncingStdin

# After `documents` (which the server holds and registers first), in fan-out order: the first hover answer wins,
# and commands are registered (and listed in `initialize`) in this order.
FEATURES: tuple[type[LanguageFeature], ...] = (HoverFeature, CodeLensFeature, CodeActionsFeature, CommandsFeature,
                                               SidebarFeature)


def create_server() -> MnemoLanguageServer:
    """A server with every feature registered; raises RuntimeError when the registrations differ from what
    capabilities.py declares."""
    server = MnemoLanguageServer()
    server.add_feature(server.documents)
    for cls in FEATURES:
        server.add_feature(cls(server))
    setup.configure(server)
    return server


def main(tcp: bool = False, host: str = "127.0.0.1", port: int = 2087, *, server: MnemoLanguageServer | None = None,
         stdin: Any = None, stdout: Any = None) -> int:
    """Run the server. The pre-handshake (preinit.py) passes the server it built and its own stdin/stdout."""
    server = server or create_server()
    setup_logging(server)
    if tcp:
        server.start_tcp(host, port)
        return 0
    # stdout belongs to the protocol: keep the real stream for pygls, send stray prints to stderr.
    if stdout is None:
        stdout = sys.stdout.buffer
    stdin = stdin or ResyncingStdin(sys.stdin.buffer)
    sys.stdout = sys.stderr
    # What start-up made (lsprotocol's ~1,000 classes, pygls, cattrs' hooks: ~50k objects) lives as long as the
    # process: out of the collector's reach, a full collection no longer walks it (25-90 ms each on the 2-core
    # box, landing on whichever hover allocated last: a tail of the hover's latency, issue 22).
    gc.freeze()
    server.start_io(stdin, stdout)
    return 0


__all__ = ["FEATURES", "MnemoLanguageServer", "create_server", "main"]
