"""The owner process: takes the store's exclusive lock, serves the Service API on a user-only Unix socket.

Wire format: one JSON object per line. A connection starts with `hello` (version handshake); then requests
`{"id", "method", "params"}` get `{"id", "result"}` or `{"id", "error"}`; long calls stream `{"id", "progress"}`.
The process exits after `idle_timeout` seconds with no connection and no request.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
import socketserver
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mnemo import PROTOCOL_VERSION, __version__, trace
from mnemo.api import SERVICE_METHODS, accepted, call_arguments, parameters
from mnemo.core.errors import InvalidInput, MnemoError, StoreLocked
from mnemo.daemon.paths import failure_path, info_path, log_path, quiet_blas_env, socket_path
from mnemo.service import LocalService

log = logging.getLogger("mnemo.daemon")
MAX_LINE = 32 * 1024 * 1024
UNGUARDED = frozenset({"doctor", "health"})  # answered even when the store is damaged


def unicode_problem(params: dict[str, Any]) -> None:
    """Refuse a request holding text that is not Unicode (a lone surrogate: from bytes that were not UTF-8, or a
    `\\udcff` escape) naming the argument, before anything runs; it used to reach the store and end in "remember
    failed: 'utf-8' codec can't encode ..." with a traceback in the log, whatever the client."""
    from mnemo.core.text import lone_surrogate

    try:
        found = lone_surrogate(params)
    except RecursionError:
        return  # too deep to walk: the call's own checks refuse it
    if found is not None:
        where, ch = found
        raise InvalidInput(f"`{where}` is not valid Unicode (it holds a lone surrogate, \\u{ord(ch):04x}: bytes "
                           "that were not UTF-8); nothing was done", hint="send the text as UTF-8")


def may_hold_surrogate(line: bytes) -> bool:
    """Whether the decoded request can hold a lone surrogate: JSON decodes one only from a `\\u` escape, or from
    UTF-8-encoded surrogate bytes (0xED 0xA0..0xBF; `json.loads` decodes bytes with `surrogatepass`), or from a
    request in UTF-16/32 (NUL bytes). Every other line skips the walk of `unicode_problem` (~0.1 ms a recall)."""
    return b"\\u" in line or b"\xed" in line or b"\x00" in line


class _Handler(socketserver.StreamRequestHandler):
    server: OwnerServer

    def handle(self) -> None:
        srv = self.server
        srv.connection_opened()
        try:
            self._loop()
        except (ConnectionError, OSError):
            pass
        finally:
            srv.connection_closed()

    def _send(self, obj: dict[str, Any]) -> None:
        data = (json.dumps(obj, default=str) + "\n").encode()
        trace.current().mark("encode")
        with self._wlock:
            self.wfile.write(data)
            self.wfile.flush()

    def _loop(self) -> None:
        self._wlock = threading.Lock()
        greeted = False
        while True:
            line = self.rfile.readline(MAX_LINE)
            if not line:
                return
            st = trace.begin("owner.request")  # bench runs only (MNEMO_TRACE_FILE): the stages of this request
            self.server.touch()
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("a request must be a JSON object")
            except (ValueError, RecursionError) as exc:  # RecursionError: a JSON nesting bomb
                self._send({"id": None, "error": InvalidInput(f"malformed request: {exc}").to_dict()})
                continue
            rid, method, params = req.get("id"), req.get("method"), req.get("params") or {}
            if method == "hello":
                theirs = params.get("protocol")
                if theirs != PROTOCOL_VERSION:
                    self._send({"id": rid, "error": {
                        "type": "VersionMismatch", "code": "version_mismatch",
                        "message": f"the running owner (pid {os.getpid()}, mnemo {__version__}) speaks protocol "
                                   f"{PROTOCOL_VERSION}, this client speaks {theirs}",
                        "hint": "stop the old owner with `mnemo daemon stop` (or `kill "
                                f"{os.getpid()}`) and retry; nothing was changed",
                        "details": {"pid": os.getpid(), "version": __version__}}})
                    return
                greeted = True
                # `warming`: this owner is still preparing its first context (a hook may wait a little longer)
                self._send({"id": rid, "result": {**self.server.service.health(), "warming": self.server.warming}})
                continue
            if not greeted:
                self._send({"id": rid, "error": InvalidInput("say hello first (version handshake)").to_dict()})
                return
            if method == "shutdown":
                self._send({"id": rid, "result": {"stopping": True, "pid": os.getpid()}})
                threading.Thread(target=self.server.stop, daemon=True).start()
                return
            if method not in SERVICE_METHODS or not isinstance(params, dict):
                self._send({"id": rid, "error": InvalidInput(f"unknown method {method!r}").to_dict()})
                continue
            st.mark("decode")
            self._call(rid, method, params, may_hold_surrogate(line))
            st.mark("send")
            trace.end(st, method=method, bytes_in=len(line))

    def _call(self, rid: Any, method: str, params: dict[str, Any], check_unicode: bool = True) -> None:
        self.server.begin_request()
        try:
            damaged = self.server.store_problem() if method not in UNGUARDED else None
            if damaged is not None:  # a damaged store answers every request with what to run, at once
                raise damaged
            if check_unicode:
                unicode_problem(params)
            wants_progress = params.pop("_progress", False)
            params = call_arguments(method, (), params, wire=True)  # InvalidInput naming what it takes
            if wants_progress:
                if "progress" not in parameters(method):
                    raise InvalidInput(f"{method} does not report progress; nothing was done",
                                       hint=f"drop `_progress`; {method} takes: {accepted(method, wire=True)}")
                params["progress"] = lambda p, _rid=rid: self._send({"id": _rid, "progress": p})
            trace.current().mark("arguments")
            if isinstance(params.get("ctx"), dict):  # a merge git made since the last look: offered in Review
                self.server.service._notice(params["ctx"], method)
            trace.current().mark("notice")
            result = getattr(self.server.service, method)(**params)
            self._send({"id": rid, "result": result})
        except MnemoError as exc:
            self._send({"id": rid, "error": exc.to_dict()})
        except sqlite3.DatabaseError as exc:  # a read that hit a damaged page, a full disk, a busy file ...
            if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
                self._internal(rid, method, exc)
            else:
                log.warning("%s failed: %s", method, exc)
                self._send({"id": rid, "error": self.server.service.engine.store.store_error(exc, method).to_dict()})
        except TypeError as exc:
            self._send({"id": rid, "error": InvalidInput(f"bad arguments for {method}: {exc}").to_dict()})
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            self._internal(rid, method, exc)
        finally:
            self.server.end_request()

    def _internal(self, rid: Any, method: str, exc: Exception) -> None:
        log.error("%s failed", method, exc_info=exc)
        self._send({"id": rid, "error": {"type": "MnemoError", "code": "internal", "message": f"{method} failed: {exc}",
                                         "hint": f"see {log_path(self.server.home)}", "details": {}}})


class OwnerServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, home: Path, service: LocalService, idle_timeout: float | None):
        self.home = home
        self.service = service
        self.fixed_idle_timeout = idle_timeout  # None: the store's `idle_timeout`, re-read every second
        self._lock = threading.Lock()
        self.warming = False
        self._connections = 0
        self._active = 0
        self._last = time.monotonic()
        self._stopping = threading.Event()
        path = socket_path(home)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # we hold the owner lock: any socket file here is stale
        old = os.umask(0o177)
        try:
            super().__init__(str(path), _Handler)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.path = path

    def store_problem(self) -> MnemoError | None:
        engine = getattr(self.service, "engine", None)
        return engine.store_problem() if engine is not None else None

    def touch(self) -> None:
        self._last = time.monotonic()

    def connection_opened(self) -> None:
        with self._lock:
            self._connections += 1
        self.touch()

    def connection_closed(self) -> None:
        with self._lock:
            self._connections -= 1
        self.touch()

    def begin_request(self) -> None:
        with self._lock:
            self._active += 1

    def end_request(self) -> None:
        with self._lock:
            self._active -= 1
        self.touch()

    @property
    def idle_timeout(self) -> float:
        if self.fixed_idle_timeout is not None:
            return self.fixed_idle_timeout
        from mnemo.core import store_settings as config

        return float(config.value("idle_timeout", self.home))  # `mnemo config set idle_timeout` applies live

    def idle_watch(self) -> None:
        while not self._stopping.wait(1.0):
            timeout = self.idle_timeout
            if timeout <= 0:
                continue
            with self._lock:
                busy = self._connections > 0 or self._active > 0
            if not busy and time.monotonic() - self._last > timeout:
                log.info("idle for %.0f s: exiting", timeout)
                self.stop()
                return

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.shutdown()


def _setup_logging(home: Path) -> None:
    lp = log_path(home)
    lp.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(lp)
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("chromadb", "httpx", "onnxruntime", "urllib3", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _warm(server: OwnerServer, root: str | None) -> None:
    t0 = time.perf_counter()
    server.warming = True
    try:
        server.service._warm(root)
        gc.freeze()  # the model and the project's skills live as long as the owner: see run_owner
        log.info("warmed for %s in %.0f ms", root or "(no project)", (time.perf_counter() - t0) * 1000)
    except Exception as exc:  # noqa: BLE001 - warming is an optimisation; the first request pays instead
        log.warning("warming for %s failed: %s", root, exc)
    finally:
        server.warming = False


def _quiet_blas() -> None:
    """An owner run by hand (`mnemo daemon run`) gets the BLAS setting a spawned one is given (`quiet_blas_env`):
    set before numpy loads (OpenBLAS reads it once); a value the user set is kept."""
    if "numpy" not in sys.modules:
        quiet_blas_env(os.environ)


def run_owner(home: Path, idle_timeout: float | None = None, embedder=None, warm: str | None = None) -> int:
    """Run the owner in this process until stopped or idle. Returns 0, or 3 when another owner holds the store.
    `warm`: a project root whose first context is prepared in the background as the owner starts (the model, the
    project's skill engine, the corrections detector): a hook that started the owner waits for that block."""
    _quiet_blas()
    from mnemo.core.engine import Engine

    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(home, 0o700)
    _setup_logging(home)
    failure = failure_path(home)
    try:
        engine = Engine(home, embedder=embedder)
    except StoreLocked:
        log.info("another process owns %s; not starting", home)
        return 3
    except MnemoError as exc:  # e.g. a store too damaged to open: the client that spawned us reads why
        log.error("cannot start: %s", exc)
        tmp = failure.with_suffix(".tmp")
        tmp.write_text(json.dumps({"pid": os.getpid(), "at": time.time(), "error": exc.to_dict()}))
        os.replace(tmp, failure)
        return 4
    failure.unlink(missing_ok=True)
    service = LocalService(engine)
    server = OwnerServer(home, service, idle_timeout)
    info = {"pid": os.getpid(), "version": __version__, "protocol": PROTOCOL_VERSION, "socket": str(server.path),
            "started_at": time.time()}
    tmp = info_path(home).with_suffix(".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, info_path(home))
    log.info("owner started: %s", info)
    # What start-up made (the store, the indexes, ~70k objects) lives as long as the owner: out of the collector's
    # reach, a full collection no longer walks it (~120 ms each under load, landing on whichever request allocated
    # last: a tail of the hover's and recall's latency, issue 22).
    gc.freeze()

    def _term(signum, frame):  # noqa: ARG001
        threading.Thread(target=server.stop, daemon=True).start()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _term)
        signal.signal(signal.SIGINT, _term)
    threading.Thread(target=server.idle_watch, name="mnemo-idle", daemon=True).start()
    if warm is not None:  # (an owner a hook started; the others load what they need on first use)
        server.warming = True  # from the first hello: the hook that started this owner waits for its block
        threading.Thread(target=_warm, args=(server, warm), name="mnemo-warm", daemon=True).start()
    from mnemo.core.recovery.backup import backup_loop  # rolling daily backups of mnemo.db (SPEC §7 Recovery)

    threading.Thread(target=backup_loop, args=(home, server._stopping), name="mnemo-backup", daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            server.path.unlink()
        with contextlib.suppress(FileNotFoundError):
            info_path(home).unlink()
        try:
            service._flush_publishes()  # a publish a change scheduled (`publish_on_change`) runs before the store closes
        except Exception as exc:  # noqa: BLE001 - stopping must finish
            log.warning("publish on stop failed: %s", exc)
        engine.close()
        log.info("owner stopped")
    return 0


def main(argv: list[str]) -> int | None:
    """`python -m mnemo daemon run [--home H] [--idle-timeout S] [--warm ROOT]` without the CLI (what
    `client.spawn_owner` runs). None for any other argument: the CLI handles it (and its errors) as before."""
    opts: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        name, eq, val = arg.partition("=")
        if name not in ("--home", "--idle-timeout", "--warm") or name in opts:
            return None
        if not eq:
            nxt = next(it, None)
            if nxt is None or nxt.startswith("-"):
                return None
            val = nxt
        opts[name] = val
    try:
        idle = float(opts["--idle-timeout"]) if "--idle-timeout" in opts else None
    except ValueError:
        return None
    from mnemo.daemon.paths import default_home

    home = Path(opts["--home"]) if opts.get("--home") else default_home()
    return run_owner(home, idle_timeout=idle, warm=opts.get("--warm"))


def probe(path: Path, timeout: float = 0.5) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        s.close()
