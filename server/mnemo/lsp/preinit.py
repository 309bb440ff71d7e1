"""`mnemo lsp` over stdio: answer `initialize` before pygls is loaded, then hand the session to pygls.

Importing pygls costs ~0.5-0.7 s on a 2-core box (lsprotocol creates ~1,000 attrs classes), longer than an editor
should wait for `initialize`. So, with the standard library only:
1. a thread imports pygls + lsprotocol + the server and builds it (`create_server()`), starting at once;
2. meanwhile this thread reads the first message (`ResyncingStdin`, the framing pygls would see). If it is an
   `initialize` request that `capabilities.initialize_result()` can answer, the answer is written at once: the
   capabilities pygls would build, from the same declarations `create_server()` registers;
3. once the import is done, pygls starts on a stdin that first replays that `initialize` under a private id
   (`mnemo-preinit-<hex>`), then carries on with the real stdin; pygls handles it as usual (settings from
   `initializationOptions`, client capabilities, workspace folders) and every message the client sent meanwhile
   (`initialized`, `didOpen`, a hover ...) in order. Its answer to the private id is dropped by `ReplayFilter`, and
   compared with what was sent: a difference is logged as a warning and reported in `mnemo/status`
   (`lsp.preinit`).
4. and, once `initialize` is answered, a third thread starts the owner process when the language server would start
   it anyway (`owner.autostart` and `home` of `initializationOptions`; no owner holds the store), asking it to
   prepare the workspace's project (`--warm`: its skills, the model): that start-up then runs on the other core
   while pygls loads here, instead of after it (`OwnerStarter`; the server's first connection waits for that
   process rather than spawning another);
5. and, until pygls is loaded, this thread keeps reading the client (a stdin thread puts every frame in a queue,
   `serve_until_loaded`): a hover is answered at once by `early_hover.EarlyHover` when it can give pygls' own
   answer (the document it saw opened, the owner up, the settings of `initializationOptions`), exactly once; every
   other message, and a hover it steps aside from, reaches pygls in the client's order (`stdio.QueuedStdin`).
Anything else as the first message (not `initialize`, malformed, a shape pygls might refuse) is left to pygls, as
before. `MNEMO_LSP_PREINIT=0` turns the pre-handshake off. stdout carries nothing but protocol frames: `print`
goes to stderr from the first line on.

This module must not import what the import thread imports (pygls, lsprotocol, logging, asyncio, mnemo.editor_settings
...): the main thread would wait for that thread's import lock.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from mnemo.core import environment
from mnemo.lsp import capabilities
from mnemo.lsp.early_hover import EarlyHover, HoverJob, import_first, process_age_ms
from mnemo.lsp.stdio import FdReader, QueuedStdin, ResyncingStdin, frame

if TYPE_CHECKING:  # for the annotations only: pygls is imported by the import thread (see above)
    import subprocess
    from pathlib import Path

    from mnemo.lsp.language_server import MnemoLanguageServer

REPLAY_PREFIX = "mnemo-preinit-"
HOVER_GRACE_S = 2.0  # pygls is loaded and an early hover is still out: how long it may take before pygls gets it


def enabled() -> bool:
    return environment.text("MNEMO_LSP_PREINIT").strip().lower() not in ("0", "false", "no", "off")


class _Loader(threading.Thread):
    """Imports the language server and builds it; `error` holds what went wrong. When it is done, `done` is set and
    ("loaded", None) goes to `events` (the pre-handshake's loop waits on that queue)."""

    def __init__(self, events: queue.Queue) -> None:
        super().__init__(name="mnemo-lsp-import", daemon=True)
        self.server: MnemoLanguageServer | None = None
        self.error: BaseException | None = None
        self.trace = ""
        self.events = events
        self.done = threading.Event()

    def run(self) -> None:
        try:
            import_first()  # what the early hover needs (the server too), before pygls: see early_hover.py
            from mnemo.lsp.server import create_server  # imports pygls, lsprotocol and every feature

            self.server = create_server()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            import traceback

            self.error = exc
            self.trace = traceback.format_exc()
        finally:
            self.done.set()
            self.events.put(("loaded", None))


class OwnerStarter(threading.Thread):
    """Starts the owner for the home an `initialize` request's options name (the server's own rule: `mnemo.home`,
    else $MNEMO_HOME, else ~/.mnemo) unless `owner.autostart` is off or an owner holds the store already. Never
    raises: whatever goes wrong here, the server's own connection finds and reports. `outcome` says what it did,
    `home` and `proc` what it started."""

    def __init__(self, params: object) -> None:
        super().__init__(name="mnemo-owner-start", daemon=True)
        self.params = params if isinstance(params, dict) else {}
        self.outcome = "pending"
        self.home: Path | None = None
        self.proc: subprocess.Popen | None = None

    def run(self) -> None:
        try:
            from mnemo.daemon.client import owner_lock_free, spawn_owner
            from mnemo.editor_settings import parse_settings
            from mnemo.lsp.owner import resolve_home

            opts = self.params.get("initializationOptions")
            settings, _problems = parse_settings(opts if isinstance(opts, dict) else {})
            if not settings.owner.autostart:
                self.outcome = "autostart off"
                return
            self.home = resolve_home(settings.home)
            if not owner_lock_free(self.home):
                self.outcome = "owner running"
                return
            self.home.mkdir(parents=True, exist_ok=True)
            self.proc = spawn_owner(self.home, warm=workspace_root(self.params))
            self.outcome = "started"
        except Exception as exc:  # noqa: BLE001 - the server's connection reports it
            self.outcome = f"not started: {exc}"


def workspace_root(params: dict) -> str | None:
    """The first workspace folder's (else `rootUri`'s) local path, for the owner to prepare that project's first
    answers as it starts (its skills, the model: `daemon run --warm`); None when there is no local root."""
    from urllib.parse import unquote, urlparse

    folders = params.get("workspaceFolders")
    uris = [f.get("uri") for f in folders if isinstance(f, dict)] if isinstance(folders, list) else []
    for uri in [*uris, params.get("rootUri")]:
        if isinstance(uri, str) and uri.startswith("file:"):
            path = unquote(urlparse(uri).path)
            if path and os.path.isdir(path):
                return path
    root = params.get("rootPath")
    return root if isinstance(root, str) and os.path.isdir(root) else None


def _body(data: bytes) -> bytes:
    cut = data.find(b"\r\n\r\n")
    return data[cut + 4:] if cut >= 0 else b""


def parse_initialize(data: bytes) -> dict | None:
    """The message in frame `data` when it is an `initialize` request this module may answer, else None."""
    try:
        msg = json.loads(_body(data))
    except (ValueError, RecursionError):
        return None
    if not (isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and msg.get("method") == "initialize"):
        return None
    msg_id = msg.get("id")
    if isinstance(msg_id, bool) or not isinstance(msg_id, (int, str)):
        return None
    return msg


def answer(msg: dict) -> tuple[bytes, dict] | None:
    """(the response frame, its result) for initialize request `msg`, None when pygls must answer it."""
    result = capabilities.initialize_result(msg.get("params"))
    if result is None:
        return None
    body = json.dumps({"id": msg["id"], "jsonrpc": "2.0", "result": result}).encode()  # pygls' key order
    return frame(body), result


def replay(msg: dict, replay_id: str) -> bytes:
    """The same request under `replay_id`, framed, for pygls."""
    return frame(json.dumps({**msg, "id": replay_id}).encode())


class ReplayFilter:
    """pygls' stdout: passes every write through untouched except the answer to the replayed `initialize`, which
    is compared with the early answer and dropped. pygls writes one whole frame per `write`."""

    def __init__(self, raw, replay_id: str, sent: dict, report: dict):
        self.raw = raw
        self.replay_id = replay_id
        self.sent = sent
        self.report = report
        self._needle = json.dumps(replay_id).encode()
        self.pending = True

    def write(self, data: bytes) -> int:
        if self.pending and self._needle in data:
            try:
                msg = json.loads(_body(data))
            except ValueError:
                msg = None
            if isinstance(msg, dict) and msg.get("id") == self.replay_id and "method" not in msg:
                self.pending = False
                self._compare(msg)
                return len(data)
        return self.raw.write(data)

    def _compare(self, msg: dict) -> None:
        if "error" in msg:
            diffs = ["error"]
            detail = f"pygls answered the replayed initialize with an error: {msg['error']}"
        else:
            diffs = capabilities.differences(self.sent, msg.get("result"))
            detail = f"differs from pygls' own answer at: {', '.join(diffs)}"
        self.report.update(agreed=not diffs, differences=diffs)
        if diffs:
            import logging

            logging.getLogger("mnemo.lsp.preinit").warning(
                "the early initialize answer %s (fix mnemo/lsp/capabilities.py, or set MNEMO_LSP_PREINIT=0)", detail)

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


def _read_frames(reader: ResyncingStdin, events: queue.Queue) -> None:
    """The stdin thread once `initialize` is answered: every frame, in order, to `events` (b"" at the end)."""
    while True:
        try:
            data = reader.next_frame()
        except (OSError, ValueError):
            data = b""
        events.put(("frame", data))
        if not data:
            return


def _message(data: bytes) -> Any:
    try:
        return json.loads(_body(data))
    except (ValueError, RecursionError):
        return None


def _cancelled_id(msg: Any) -> Any:
    """The id a `$/cancelRequest` notification cancels (None for any other message)."""
    if isinstance(msg, dict) and msg.get("method") == "$/cancelRequest" and isinstance(msg.get("params"), dict):
        return msg["params"].get("id")
    return None


def serve_until_loaded(events: queue.Queue, loader: _Loader, hover: EarlyHover, out) -> tuple[list[bytes], set]:
    """Between the early `initialize` answer and pygls: read what the client sends (in order), answer a hover early
    when `hover` can (`early_hover.py`), keep every other message for pygls. Returns (the frames pygls must read
    first, in the client's order, without the hovers answered here; the ids of those hovers).

    Exactly once: a hover handed to `hover` is either answered there (and left out of what pygls reads, with any
    `$/cancelRequest` for it) or given back to pygls in its place (stepped aside, or still out `HOVER_GRACE_S`
    after pygls is loaded: `HoverJob.abandon`). Shutdown, exit and end of input are pygls' to handle, in order."""
    pending: list[Any] = []  # bytes, a HoverJob (its frame unless answered), (job, cancel frame)
    jobs: dict[Any, HoverJob] = {}
    job: HoverJob | None = None
    loaded = loader.done.is_set()
    grace_end: float | None = None
    while not (loaded and job is None):
        timeout = None
        if loaded and job is not None:
            grace_end = grace_end or time.monotonic() + HOVER_GRACE_S
            timeout = max(0.0, grace_end - time.monotonic())
        try:
            kind, item = events.get(timeout=timeout)
        except queue.Empty:
            assert job is not None
            job.abandon()
            job = None
            continue
        if kind == "loaded":
            loaded = True
        elif kind == "hover-done":
            if item is job:
                job = None
        elif kind == "frame":
            msg = _message(item) if item else None
            cancels = _cancelled_id(msg)
            if job is None and isinstance(msg, dict) and hover.wants(msg):
                job = HoverJob(msg, item, out, events, hover.report)
                jobs[msg["id"]] = job
                pending.append(job)
                hover.submit(job)
            elif cancels is not None and not isinstance(cancels, bool) and cancels in jobs:
                pending.append((jobs[cancels], item))
            else:
                hover.observe(msg)
                pending.append(item)
    hover.stop()
    frames: list[bytes] = []
    for p in pending:
        if isinstance(p, HoverJob):
            if not p.answered:
                frames.append(p.frame)
        elif isinstance(p, tuple):
            if not p[0].answered:
                frames.append(p[1])
        else:
            frames.append(p)
    return frames, {i for i, j in jobs.items() if j.answered}


def run() -> int:
    """`mnemo lsp` (stdio). Returns the exit code."""
    if not enabled():
        from mnemo.lsp.server import main

        return main()
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout belongs to the protocol
    events: queue.Queue = queue.Queue()
    loader = _Loader(events)
    loader.start()
    reader = ResyncingStdin(FdReader(sys.stdin.fileno()))  # read by a daemon thread later: see FdReader
    first = reader.next_frame()
    msg = parse_initialize(first) if first and loader.error is None else None
    early = answer(msg) if msg is not None else None
    if early is not None:
        try:
            out.write(early[0])
            out.flush()
        except OSError:  # the client is gone: pygls finds out too
            pass
        answered_at = time.monotonic()
    starter = OwnerStarter(msg.get("params")) if msg is not None else None
    if starter is not None:
        starter.start()
    hover: EarlyHover | None = None
    held: list[bytes] = []
    answered_early: set = set()
    if early is not None and msg is not None:
        # keep serving while pygls loads: the first hover is answered here when it can be (early_hover.py)
        hover = EarlyHover(msg.get("params"), early[1], starter, loader.done)
        hover.start()
        threading.Thread(target=_read_frames, args=(reader, events), name="mnemo-lsp-stdin", daemon=True).start()
        held, answered_early = serve_until_loaded(events, loader, hover, out)
    loader.join()
    if loader.error is not None:
        sys.stderr.write(loader.trace)
        sys.stderr.write(f"mnemo lsp: the language server could not start: {loader.error!r}. Its dependencies (pygls, "
                         f"lsprotocol) must be installed in {sys.executable}: `pip install -e .` in the Mnemo "
                         "checkout installs them.\n")
        sys.stderr.flush()
        return 1
    from mnemo.lsp.jsonrpc import readable_initialize
    from mnemo.lsp.server import main

    server = loader.server
    assert server is not None  # `run()` sets the server or the error, and there is no error
    server.owner_starter = starter
    stdout = out
    stdin: ResyncingStdin = reader
    if early is None or msg is None:  # (msg is None only when early is)
        reader.push_front(first)  # pygls reads it as if nothing happened (b"" at EOF)
    else:
        replay_id = REPLAY_PREFIX + os.urandom(12).hex()
        readable, dropped = readable_initialize(server, msg)
        if dropped:
            import logging

            logging.getLogger("mnemo.lsp.preinit").warning(
                "client capabilities %s could not be read and are ignored", ", ".join(dropped))

        def drop(data: bytes) -> bool:  # a cancel of a hover answered early: pygls never saw that request
            return b"$/cancelRequest" in data and _cancelled_id(_message(data)) in answered_early

        stdin = QueuedStdin(reader, events, held, drop if answered_early else None)
        stdin.push_front(replay(readable, replay_id))
        age = process_age_ms()
        server.preinit = {"answered": True, "agreed": None, "differences": [], "droppedCapabilities": dropped,
                          # when the answer was written, counted from the process' start (the kernel's clock)
                          "answeredAfterMs": None if age is None else round(age - (time.monotonic() - answered_at)
                                                                            * 1000),
                          "earlyHover": hover.report if hover is not None else None}
        stdout = ReplayFilter(out, replay_id, early[1], server.preinit)
    return main(server=server, stdin=stdin, stdout=stdout)


__all__ = ["REPLAY_PREFIX", "OwnerStarter", "ReplayFilter", "answer", "enabled", "parse_initialize", "replay", "run"]
