"""The smallest client of the owner's socket: requests within a deadline, standard library only.

A hook must answer within a second whatever the owner does, so it cannot use `DaemonService` (which starts an owner
and waits for it, and has no deadline on a call). `Owner` connects, says `hello` with its first request in the same
write, and reads each answer until the deadline; the wire format is the owner's (`mnemo.daemon.server`).
"""

from __future__ import annotations

import json
import socket
import time

from mnemo import PROTOCOL_VERSION, __version__
from mnemo.hooks.workspace import socket_path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: `typing` costs a hook's start-up more than it is worth
    from typing import Any


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


class Owner:
    """One connection to the owner of `home`; every call must be answered before `deadline` (monotonic)."""

    def __init__(self, home: str, deadline: float, client: str = "hook", warming_deadline: float | None = None):
        """`warming_deadline`: a later deadline that applies once the owner's hello says it is still warming up
        (an owner just started; one that never answers keeps `deadline`)."""
        self.path, self.deadline, self.client = socket_path(str(home)), deadline, client
        self.warming_deadline = warming_deadline
        self._sock: socket.socket | None = None
        self._buf = b""
        self._id = 0

    def __enter__(self) -> Owner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _left(self, what: str) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise OwnerSlow(f"the owner did not answer {what} in time")
        return left

    def _connect(self) -> bytes:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = s
        s.settimeout(self._left("the connection"))
        try:
            s.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise OwnerUnavailable(f"no Mnemo owner answers on {self.path}") from exc
        hello = {"id": 0, "method": "hello", "params": {"protocol": PROTOCOL_VERSION, "version": __version__,
                                                        "client": self.client}}
        return (json.dumps(hello) + "\n").encode()

    def call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            head = self._connect() if self._sock is None else b""
            sock = self._sock
            assert sock is not None  # `_connect` made it
            self._id += 1
            rid = self._id
            sock.settimeout(self._left(method))
            sock.sendall(head + (json.dumps({"id": rid, "method": method, "params": params}) + "\n").encode())
            while True:
                while b"\n" in self._buf:
                    line, self._buf = self._buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if "error" in msg:
                        raise OwnerError(msg["error"])
                    if msg.get("id") == 0 and isinstance(msg.get("result"), dict) and msg["result"].get("warming") \
                            and self.warming_deadline is not None:
                        self.deadline = max(self.deadline, self.warming_deadline)
                    if msg.get("id") == rid and "result" in msg:
                        return msg["result"]
                sock.settimeout(self._left(method))
                chunk = sock.recv(65536)
                if not chunk:
                    raise OwnerUnavailable("the owner closed the connection")
                self._buf += chunk
        except TimeoutError as exc:
            raise OwnerSlow(f"the owner did not answer {method} in time") from exc
        except OSError as exc:
            raise OwnerUnavailable(f"the owner's socket failed: {exc}") from exc


def call(home: str, method: str, params: dict[str, Any], deadline: float, client: str = "hook") -> Any:
    """One request on a fresh connection."""
    with Owner(home, deadline, client) as owner:
        return owner.call(method, params)
