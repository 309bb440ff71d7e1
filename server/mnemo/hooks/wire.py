"""The smallest client of the owner's socket: one request within a deadline, standard library only.

A hook must answer within a second whatever the owner does, so it cannot use `DaemonService` (which starts an owner
and waits for it, and has no deadline on a call). This sends `hello` and the request in one write and reads the
answer until the deadline; the wire format is the owner's (`mnemo.daemon.server`).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from mnemo import PROTOCOL_VERSION, __version__
from mnemo.daemon.paths import socket_path


class OwnerUnavailable(Exception):
    """No owner answers on the socket (none runs, or a stale socket)."""


class OwnerSlow(Exception):
    """The owner did not answer before the deadline."""


class OwnerError(Exception):
    """The owner answered with an error (its message and hint)."""

    def __init__(self, error: dict[str, Any]):
        self.error = error if isinstance(error, dict) else {"message": str(error)}
        msg = str(self.error.get("message") or "error")
        hint = self.error.get("hint")
        super().__init__(f"{msg} ({hint})" if hint else msg)


def call(home: Path, method: str, params: dict[str, Any], deadline: float, client: str = "hook") -> Any:
    """`method(**params)` on the owner of `home`, answered before `deadline` (a `time.monotonic()` value)."""
    path = socket_path(home)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            s.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise OwnerUnavailable(f"no Mnemo owner answers on {path}") from exc
        except TimeoutError as exc:
            raise OwnerSlow("the owner did not accept the connection in time") from exc
        hello = {"id": 0, "method": "hello", "params": {"protocol": PROTOCOL_VERSION, "version": __version__,
                                                        "client": client}}
        req = {"id": 1, "method": method, "params": params}
        s.sendall((json.dumps(hello) + "\n" + json.dumps(req) + "\n").encode())
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OwnerSlow(f"the owner did not answer {method} in time")
            s.settimeout(left)
            try:
                chunk = s.recv(65536)
            except TimeoutError as exc:
                raise OwnerSlow(f"the owner did not answer {method} in time") from exc
            if not chunk:
                raise OwnerUnavailable("the owner closed the connection")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if "error" in msg:
                    raise OwnerError(msg["error"])
                if msg.get("id") == 1 and "result" in msg:
                    return msg["result"]
    except TimeoutError as exc:
        raise OwnerSlow(f"the owner did not answer {method} in time") from exc
    except OSError as exc:
        raise OwnerUnavailable(f"the owner's socket failed: {exc}") from exc
    finally:
        s.close()
