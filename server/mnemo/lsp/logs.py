"""Logging of the language server: stderr gets warnings (editors show it in the output channel), the client gets
the `mnemo.*` records as `window/logMessage`; and the process's resident memory for `mnemo/status`."""

from __future__ import annotations

import logging
import sys
import threading
from typing import TYPE_CHECKING

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInternalError

if TYPE_CHECKING:
    from mnemo.lsp.feature import Server


def rss_mb() -> float:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    try:
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    except Exception:  # noqa: BLE001
        return 0.0


class LspLogHandler(logging.Handler):
    """Forward Python logging to `window/logMessage`, skipping pygls' own records (which would loop: pygls logs
    every message it sends)."""

    LEVELS = {logging.ERROR: t.MessageType.Error, logging.WARNING: t.MessageType.Warning,
              logging.INFO: t.MessageType.Info, logging.DEBUG: t.MessageType.Log}

    def __init__(self, server: Server):
        super().__init__()
        self.server = server
        self._local = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("pygls", "asyncio")) or getattr(self._local, "busy", False):
            return
        self._local.busy = True
        try:
            level = max((lv for lv in self.LEVELS if lv <= record.levelno), default=logging.DEBUG)
            self.server.send_threadsafe(t.WINDOW_LOG_MESSAGE, t.LogMessageParams(
                type=self.LEVELS[level], message=self.format(record)))
        except Exception:  # noqa: BLE001 - logging must never raise
            pass
        finally:
            self._local.busy = False


def expected_errors_filter(record: logging.LogRecord) -> bool:
    """pygls logs every request that ends in an error with a full traceback at ERROR. The errors Mnemo answers on
    purpose (store unavailable or starting, not found, invalid params: a JsonRpcException other than an internal
    error) are normal states already carried by the response; they are not logged. Real failures still are."""
    exc = record.exc_info[1] if record.exc_info else None
    return not (isinstance(exc, JsonRpcException) and not isinstance(exc, JsonRpcInternalError))


def setup_logging(server: Server | None) -> None:
    """stderr gets warnings (editors show it in the output channel); the client gets `mnemo.*` records."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    err = logging.StreamHandler(sys.stderr)
    err.setLevel(logging.WARNING)
    err.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    root.addHandler(err)
    logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message body at INFO
    logging.getLogger("pygls.protocol.json_rpc").addFilter(expected_errors_filter)
    if server is not None:
        handler = LspLogHandler(server)
        handler.setLevel(logging.DEBUG)
        logging.getLogger("mnemo").addHandler(handler)


__all__ = ["LspLogHandler", "expected_errors_filter", "rss_mb", "setup_logging"]
