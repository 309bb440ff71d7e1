"""The language server's link to the Mnemo owner process: connection state, a small client pool, degraded mode.

Every call here blocks (socket I/O): the server runs them in its executor, never on the event loop. The link is
`starting` until the first connection attempt ends, then `ready` or `unavailable` (with the reason and what to do).
Interactive calls never start an owner themselves (they fail fast); only `connect()` — run at start-up and by the
periodic retry — may start one, so a dead owner costs a hover milliseconds, not the owner's start-up time.
While the link is `starting`, the language server holds every request (up to FIRST_CONNECT_WAIT_S) until the first
attempt ends, so a command sent right after `initialized` is answered, not refused as "connecting".
An owner process the pre-handshake started while pygls loaded (`preinit.OwnerStarter`, `starting=`) is waited for
by the first attempt (its socket, or its exit), never started a second time.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo.core.errors import DaemonError, MnemoError, StoreError
from mnemo.daemon.paths import default_home

log = logging.getLogger("mnemo.lsp.owner")

STARTING, READY, UNAVAILABLE = "starting", "ready", "unavailable"
FIRST_CONNECT_WAIT_S = 15.0  # a request asked while the link is first made (maybe starting the owner) waits for it
POOL_SIZE = 3  # parallel calls: a hover is never queued behind a long indexing or merge call


class Unavailable(MnemoError):
    """The owner cannot be reached (degraded mode)."""

    code = "unavailable"


def _service_methods() -> frozenset[str]:
    from mnemo.service import SERVICE_METHODS  # lazy for start-up speed: not needed before the first call

    return SERVICE_METHODS


class OwnerLink:
    def __init__(self, home: Path, *, autostart: bool = True,
                 on_state: Callable[[str, str | None, str | None], None] | None = None,
                 pool_size: int = POOL_SIZE, starting: Any = None):
        self.home = Path(home)
        self.starting = starting  # the owner process started for this home before pygls loaded (a Popen), if any
        self.autostart = autostart
        self.on_state = on_state
        self.pool_size = pool_size
        self.state = STARTING
        self.reason: str | None = None
        self.hint: str | None = None
        self.owner_info: dict[str, Any] = {}
        self.since = time.time()
        self._idle: list[Any] = []
        self._created = 0
        self._lock = threading.Lock()
        self._available = threading.Condition(self._lock)
        self._connect_lock = threading.Lock()
        self._calls: Counter[str] = Counter()  # calls sent to the owner, by method (`mnemo/status` lsp.ownerCalls)
        self.channel = LoopChannel(self)  # the event loop's own connection (a hover's call, no thread hop)

    # -- state -----------------------------------------------------------------------------------------------
    def _set_state(self, state: str, reason: str | None = None, hint: str | None = None) -> None:
        with self._lock:
            changed = (state, reason) != (self.state, self.reason)
            self.state, self.reason, self.hint = state, reason, hint
            if changed:
                self.since = time.time()
        if changed:
            log.log(logging.WARNING if state == UNAVAILABLE else logging.INFO, "owner link %s%s", state,
                    f": {reason}" if reason else "")
            if self.on_state is not None:
                self.on_state(state, reason, hint)

    def mark_unavailable(self, exc: BaseException) -> None:
        reason, hint = describe(exc, self.home)
        self._drop_pool()
        self._set_state(UNAVAILABLE, reason, hint)

    def status(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason, "hint": self.hint, "home": str(self.home),
                "owner": dict(self.owner_info) if self.state == READY else {}}

    # -- connection ------------------------------------------------------------------------------------------
    def _new_client(self, autostart: bool):
        from mnemo.daemon.client import DaemonService  # lazy for start-up speed: not needed before connecting

        return DaemonService.open(self.home, autostart=autostart, client_name="lsp")

    def connect(self) -> bool:
        """One connection attempt (may start the owner when `autostart`). Blocking."""
        with self._connect_lock:
            try:  # a store directory we cannot create is the user's to fix: say so plainly
                self.home.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                self.mark_unavailable(exc)
                return False
            svc = self._started_client() or self._new_client(self.autostart)
            try:
                info = svc.call("health")
            except (MnemoError, OSError, ValueError) as exc:
                svc.close()
                self.mark_unavailable(exc)
                return False
            self.owner_info = dict(info or {})
            self._drop_pool()
            svc.autostart = False  # in the pool now: an interactive call never starts an owner (the retry does)
            with self._lock:
                self._idle.append(svc)
                self._created = 1
            self._set_state(READY)
            return True

    def _started_client(self):
        """A client of the owner `starting` (once), connected when its socket answers; None when there is none or
        it exited (then the usual attempt runs: it starts one, or says why it cannot)."""
        proc, self.starting = self.starting, None
        if proc is None:
            return None
        deadline = time.monotonic() + FIRST_CONNECT_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline:
            svc = self._new_client(False)
            try:
                svc.connect()
                return svc
            except (MnemoError, OSError):
                svc.close()
            time.sleep(0.03)
        return None

    def _drop_pool(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._created = 0
        for svc in idle:
            try:
                svc.close()
            except OSError:
                pass

    def _acquire(self):
        with self._available:
            while not self._idle and self._created >= self.pool_size:
                self._available.wait(timeout=30)
            if self._idle:
                return self._idle.pop()
            self._created += 1
        return self._new_client(False)

    def _release(self, svc, healthy: bool) -> None:
        with self._available:
            if healthy and self.state == READY:
                self._idle.append(svc)
            else:
                self._created = max(0, self._created - 1)
                try:
                    svc.close()
                except OSError:
                    pass
            self._available.notify()

    def close(self) -> None:
        self._drop_pool()

    # -- calls -----------------------------------------------------------------------------------------------
    def supports(self, method: str) -> bool:
        return method in _service_methods()

    def call_counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._calls)

    def call(self, method: str, *args: Any, **kw: Any) -> Any:
        """Call a service method on the owner. Raises Unavailable (degraded), or the MnemoError the owner raised
        (the user's input was wrong: not a connection problem)."""
        if self.state != READY:
            raise Unavailable(f"Mnemo unavailable: {self.reason or 'connecting to the store'}",
                              hint=self.hint or "wait a moment; the language server is connecting")
        svc = self._acquire()
        with self._lock:
            self._calls[method] += 1
        healthy = True
        try:
            return getattr(svc, method)(*args, **kw)
        except DaemonError as exc:  # includes VersionMismatch: the connection, not the request, failed
            healthy = False
            self.mark_unavailable(exc)
            raise Unavailable(f"Mnemo unavailable: {self.reason}", hint=self.hint) from exc
        except MnemoError:
            raise
        except (OSError, ValueError) as exc:
            healthy = False
            self.mark_unavailable(exc)
            raise Unavailable(f"Mnemo unavailable: {self.reason}", hint=self.hint) from exc
        finally:
            self._release(svc, healthy)


class LoopChannel:
    """One connection to the owner read and written by the event loop, for the editor's interactive reads
    (`LOOP_METHODS`: a hover's `hover_context`), so a hover makes no thread hop: through the pool a call wakes a
    worker thread, which wakes the loop again with the answer (~0.3-0.8 ms on the 2-core box, more under load).

    The owner's wire format as `DaemonService` speaks it (hello with the protocol version, then one JSON line per
    request and answer), the link's rules for failures: an owner error is raised as it came (a `DaemonError`, e.g.
    a version mismatch, makes the link unavailable), a lost connection is retried once on a new one, then the link
    is marked unavailable (`Unavailable` raised). One call at a time: `free` says whether a caller should use it
    or the pool (a second hover meanwhile goes through the pool rather than wait). A call cancelled while its
    answer is on its way leaves that answer on the connection; the next call skips it by its id."""

    def __init__(self, link: OwnerLink):
        self.link = link
        self._reader: Any = None
        self._writer: Any = None
        self._since: float | None = None  # the link state's `since` when this connection was made
        self._busy = False
        self._ids = itertools.count(1)

    @property
    def free(self) -> bool:
        return not self._busy

    def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()

    async def open(self) -> None:
        """Connect now (after the link's first connection), so the first hover does not wait for the handshake;
        a failure is left for the first call to meet. A call meanwhile goes through the pool."""
        if self._busy or self._writer is not None or self.link.state != READY:
            return
        self._busy = True
        try:
            await self._open()
        except (MnemoError, OSError, ValueError) as exc:
            log.debug("the loop's owner connection: %s", exc)
            self.close()
        finally:
            self._busy = False

    async def _open(self) -> None:
        import asyncio

        from mnemo import PROTOCOL_VERSION, __version__
        from mnemo.daemon.paths import socket_path

        self._reader, self._writer = await asyncio.open_unix_connection(str(socket_path(self.link.home)),
                                                                        limit=MAX_ANSWER_BYTES)
        self._since = self.link.since
        await self._exchange("hello", {"protocol": PROTOCOL_VERSION, "version": __version__, "client": "lsp"})

    async def _exchange(self, method: str, params: dict[str, Any]) -> Any:
        from mnemo.core.errors import error_from_dict

        rid = next(self._ids)
        self._writer.write((json.dumps({"id": rid, "method": method, "params": params}) + "\n").encode())
        while True:
            line = await self._reader.readline()
            if not line.endswith(b"\n"):
                raise ConnectionError("the owner closed the connection")
            msg = json.loads(line)
            if msg.get("id") != rid or "progress" in msg:  # the answer to a call cancelled before it came
                continue
            if "error" in msg:
                raise error_from_dict(msg["error"])  # its class by name (VersionMismatch included)
            return msg.get("result")

    async def call(self, method: str, *args: Any, **kw: Any) -> Any:
        """`OwnerLink.call`, on the event loop."""
        from mnemo.api import call_arguments

        link = self.link
        if link.state != READY:
            raise Unavailable(f"Mnemo unavailable: {link.reason or 'connecting to the store'}",
                              hint=link.hint or "wait a moment; the language server is connecting")
        params = call_arguments(method, args, kw)
        with link._lock:  # noqa: SLF001 - the link's own counter (`mnemo/status` lsp.ownerCalls)
            link._calls[method] += 1  # noqa: SLF001
        self._busy = True
        try:
            for attempt in (1, 2):
                try:
                    if self._writer is not None and self._since != link.since:  # the link went down since
                        self.close()
                    if self._writer is None:
                        await self._open()
                    return await self._exchange(method, params)
                except DaemonError as exc:
                    self.close()
                    link.mark_unavailable(exc)
                    raise Unavailable(f"Mnemo unavailable: {link.reason}", hint=link.hint) from exc
                except MnemoError:
                    raise
                except (OSError, ValueError) as exc:  # ConnectionError, a bad line, a line over the limit
                    self.close()
                    if attempt == 2:
                        link.mark_unavailable(DaemonError(f"lost the connection to the Mnemo owner: {exc}"))
                        raise Unavailable(f"Mnemo unavailable: {link.reason}", hint=link.hint) from exc
                    log.info("owner connection lost (%s); reconnecting", exc)
            raise AssertionError("unreachable")
        finally:
            self._busy = False


LOOP_METHODS = frozenset({"hover_context"})  # asked through `LoopChannel` (when it is free)
MAX_ANSWER_BYTES = 32 * 1024 * 1024  # the longest answer line read (the owner's own limit for a request)


def describe(exc: BaseException, home: Path) -> tuple[str, str]:
    """(what happened, what to do) for a connection failure."""
    cause = exc.__cause__
    if isinstance(exc, MnemoError) and isinstance(cause, OSError) and not isinstance(cause, ConnectionError) \
            and cause.errno in (errno.ENOTDIR, errno.EACCES, errno.EROFS, errno.ENOSPC, errno.EEXIST):
        exc = cause
    if isinstance(exc, MnemoError):
        hint = exc.hint or f"run `mnemo doctor --home {home}`"
        return exc.message, hint
    if isinstance(exc, OSError):
        what = exc.strerror or str(exc)
        return (f"cannot use the store at {home}: {what}",
                "set `mnemo.home` (or MNEMO_HOME) to a writable directory, then run `Mnemo: Reconnect`")
    return str(exc), f"run `mnemo doctor --home {home}`"


def resolve_home(setting: str) -> Path:
    """`mnemo.home` when set, else $MNEMO_HOME, else ~/.mnemo."""
    if setting:
        return Path(os.path.expanduser(setting))
    return default_home()


__all__ = ["FIRST_CONNECT_WAIT_S", "LOOP_METHODS", "LoopChannel", "OwnerLink", "Unavailable", "StoreError", "resolve_home", "READY", "STARTING",
           "UNAVAILABLE"]
