"""`DaemonService`: the Service API over the owner's Unix socket, starting the owner when none runs.

Every client (CLI, language server, MCP server) uses this. If the owner dies mid-call (SIGKILL, crash), the call
is retried once against a fresh owner; a remember that did land is then recognised by its content hash and
counted as a confirmation, never stored twice.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Self

from mnemo import PROTOCOL_VERSION, __version__, trace
from mnemo.api import SERVICE_METHODS, call_arguments
from mnemo.core import environment
from mnemo.core.errors import DaemonError, MnemoError, StoreLocked, error_from_dict
from mnemo.daemon.paths import failure_path, log_path, quiet_blas_env, socket_path

log = logging.getLogger("mnemo.client")
REQUEST_SHAPED_ENV = environment.names("request")
START_TIMEOUT = environment.number("MNEMO_START_TIMEOUT")


def spawn_owner(home: Path, warm: str | None = None) -> subprocess.Popen:
    """Start an owner in the background (`warm`: the project root whose first context it prepares as it starts)."""
    lp = log_path(home)
    lp.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # The owner serves every project and every client: who and where, and the request-shaped settings (write
    # policy, conflict resolution, secrets mode), come with each call; one client's must not become everyone's.
    for name in REQUEST_SHAPED_ENV:
        env.pop(name, None)
    quiet_blas_env(env)
    with open(lp, "ab") as logf:
        return subprocess.Popen(
            [sys.executable, "-m", "mnemo", "daemon", "run", "--home", str(home), *(["--warm", warm] if warm else [])],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=logf, start_new_session=True,
            close_fds=True, env=env, cwd=str(home))


def owner_lock_free(home: Path) -> bool:
    """True when no process holds the store's owner lock (probed with a non-blocking flock, released at once)."""
    import fcntl

    try:
        fd = os.open(Path(home) / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return True  # let the owner report why it cannot start
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


def start_failure(home: Path, proc: subprocess.Popen) -> MnemoError:
    """Why the owner we spawned exited: the typed error it wrote (e.g. StoreCorrupt with the repair command)."""
    try:
        data = json.loads(failure_path(home).read_text())
        if data.get("pid") == proc.pid and isinstance(data.get("error"), dict):
            return error_from_dict(data["error"])
    except (OSError, ValueError):
        pass
    return DaemonError(f"the Mnemo owner process exited with code {proc.returncode}",
                       hint=f"see {log_path(home)}; `mnemo doctor` checks the store")


if TYPE_CHECKING:  # the type checker sees every method of the declaration (go-to-definition lands on it)
    from mnemo import api

    _Declared = api.Service
else:  # at run time each one is forwarded by `__getattr__`
    _Declared = object


class DaemonService(_Declared):
    """A thin client: one connection, calls serialized by a lock (open several clients for parallelism). Every
    operation of `mnemo.api.Service`, with its declared parameters and result type; made by `DaemonService.open`
    (for the type checker the forwarded operations are the protocol's, so it is built through a class method)."""

    @classmethod
    def open(cls, home: Path, *, autostart: bool = True, client_name: str = "cli",
             on_warning: Callable[[str], None] | None = None) -> Self:
        return cls(home, autostart=autostart, client_name=client_name, on_warning=on_warning)

    def __init__(self, home: Path, *, autostart: bool = True, client_name: str = "cli",
                 on_warning: Callable[[str], None] | None = None):
        self.home = Path(home)
        self.autostart = autostart
        self.client_name = client_name
        self.on_warning = on_warning
        self.warnings: list[str] = []
        self._sock: socket.socket | None = None
        self._rfile: BinaryIO | None = None
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self.owner: dict[str, Any] = {}

    # -- connection ------------------------------------------------------------------------------------------
    def _connect_once(self) -> bool:
        path = socket_path(self.home)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
        except OSError:
            s.close()
            return False
        self._sock = s
        self._rfile = s.makefile("rb")
        try:
            self.owner = self._request("hello", {"protocol": PROTOCOL_VERSION, "version": __version__,
                                                 "client": self.client_name})
        except (ConnectionError, OSError, ValueError):  # an owner that is dying right now
            self.close()
            return False
        except MnemoError:
            self.close()
            raise
        self._check_settings()
        return True

    def _check_settings(self) -> None:
        """Say (once per connection) which store-wide settings of this process's environment the running owner does
        not apply: a client's environment cannot reach an owner it did not start."""
        from mnemo.core.store_settings import mismatches

        self.warnings = mismatches(self.owner)
        for msg in self.warnings:
            if self.on_warning is not None:
                self.on_warning(msg)
            else:
                log.warning("%s", msg)

    def connect(self) -> None:
        """Connect to the owner, starting one if none answers. Survives races: an owner dying while we connect,
        or several clients starting owners at once (the losers exit with code 3 and we use the winner)."""
        with self._lock:
            if self._sock is not None:
                return
            if self._connect_once():
                return
            if not self.autostart:
                raise DaemonError(f"no Mnemo owner is running for {self.home}",
                                  hint="start one with `mnemo daemon start`")
            deadline = time.monotonic() + START_TIMEOUT
            proc: subprocess.Popen | None = None
            while time.monotonic() < deadline:
                if proc is not None and proc.poll() not in (None, 0, 3):
                    raise start_failure(self.home, proc)
                # Start an owner only when none holds the lock: an owner that is starting (or dying) holds it,
                # and then we wait for its socket instead of spawning processes that would exit at once.
                if (proc is None or proc.poll() is not None) and owner_lock_free(self.home):
                    proc = spawn_owner(self.home)
                if self._connect_once():
                    return
                time.sleep(0.05)
            if not owner_lock_free(self.home):
                raise DaemonError(f"a process holds the store at {self.home} but does not answer on its socket",
                                  hint="another program may have it open in-process (`--no-daemon`): close it; "
                                       f"see {log_path(self.home)}")
            raise DaemonError(f"the Mnemo owner did not answer within {START_TIMEOUT:.0f} s",
                              hint=f"see {log_path(self.home)}; raise MNEMO_START_TIMEOUT on a slow machine")

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                try:
                    self._sock.close()
                finally:
                    self._sock = None
                    self._rfile = None

    # -- calls -----------------------------------------------------------------------------------------------
    def _request(self, method: str, params: dict[str, Any], progress=None) -> Any:
        st = trace.stages("client.request")  # bench runs only (MNEMO_TRACE_FILE)
        rid = next(self._ids)
        payload = dict(params)
        if progress is not None:
            payload["_progress"] = True
        data = (json.dumps({"id": rid, "method": method, "params": payload}) + "\n").encode()
        if self._sock is None or self._rfile is None:
            raise ConnectionError("not connected to the owner")
        st.mark("encode")
        self._sock.sendall(data)
        while True:
            line = self._rfile.readline()
            if not line:
                raise ConnectionError("the owner closed the connection")
            st.mark("wait")
            msg = json.loads(line)
            st.mark("decode")
            st.done(method=method, bytes_out=len(data), bytes_in=len(line))
            if msg.get("id") != rid:
                continue
            if "progress" in msg:
                if progress is not None:
                    progress(msg["progress"])
                continue
            if "error" in msg:
                raise error_from_dict(msg["error"])  # its class by name (VersionMismatch included)
            return msg.get("result")

    def call(self, method: str, *args: Any, **kw: Any) -> Any:
        """Call `method` of `mnemo.api.Service` with its arguments, checked against its declaration before anything
        is sent (an argument it does not take is an `InvalidInput` naming the ones it does)."""
        params = call_arguments(method, args, kw)
        progress = params.pop("progress", None)
        with self._lock:
            for attempt in (1, 2):
                try:
                    self.connect()
                    return self._request(method, params, progress)
                except MnemoError:
                    raise
                except (ConnectionError, OSError, ValueError) as exc:
                    self.close()
                    if attempt == 2:
                        raise DaemonError(f"lost the connection to the Mnemo owner: {exc}",
                                          hint=f"see {log_path(self.home)}; `mnemo doctor`") from exc
                    log.info("owner connection lost (%s); reconnecting", exc)
        raise AssertionError("unreachable")

    def shutdown(self) -> dict[str, Any] | None:
        with self._lock:
            if self._sock is None and not self._connect_once():
                return None
            try:
                return self._request("shutdown", {})
            finally:
                self.close()

    def __getattr__(self, name: str) -> Any:
        if name in SERVICE_METHODS:
            def method(*args: Any, **kw: Any) -> Any:
                return self.call(name, *args, **kw)
            method.__name__ = name
            return method
        raise AttributeError(name)


def owner_status(home: Path) -> dict[str, Any]:
    from mnemo.daemon.paths import info_path
    from mnemo.daemon.server import probe

    info = {}
    try:
        info = json.loads(info_path(home).read_text())
    except (OSError, ValueError):
        pass
    running = probe(socket_path(home))
    return {"running": running, "socket": str(socket_path(home)), **({k: info[k] for k in info} if running else {})}


__all__ = ["DaemonService", "owner_status", "spawn_owner", "StoreLocked"]
