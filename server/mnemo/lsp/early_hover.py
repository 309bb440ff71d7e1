"""The session's first hover, answered by the pre-handshake while pygls is still loading (`preinit.py`).

An editor opens a file and hovers right after `initialize`; pygls (lsprotocol's ~1,000 attrs classes) takes
~0.4-0.5 s of CPU to import, and until then the hover waited. This module answers it without pygls or lsprotocol:
the document from the `didOpen` the pre-handshake read, the code context with tree-sitter (`code_symbols`), the
workspace's context (`detect_context`), one `hover_context` call to the owner with the daemon's light client, and the
Markdown from `hover_text` / `convert`, the functions the hover feature uses, so the answer is the one pygls' path
gives (tests/e2e/test_lsp_early_hover.py compares them through real clients).

It answers only when every input of the steady path is known here; anything else makes it step aside (`None`), and
the request goes to pygls, in its place in the stream, as if nothing happened:
- the settings are those of `initializationOptions` (the steady path may pull `workspace/configuration` first: a
  client that can be asked and sent no `initializationOptions` is left to pygls; a `didChangeConfiguration` before
  the hover too);
- the document was opened in this session with its full text and not changed since (`didChange` is pygls' to
  apply), its URI is a plain local `file:` URI, and it is the active document (the last one opened);
- the document lies inside a workspace folder (or `rootUri`), the root pygls' server picks the same way;
- the owner answers: running already, or started by the pre-handshake (`OwnerStarter`) and up before pygls is;
- `MNEMO_LSP_TEST_DELAY_MS` is not set (cancellation tests slow pygls' path on purpose).
A failure anywhere (an exception, the owner's error) steps aside too: pygls answers, as it always did.

Standard library only at import time (the modules it needs are imported by its own thread, none imports pygls):
see preinit.py for why.
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mnemo.core import environment
from mnemo.lsp.stdio import frame

OWNER_WAIT_S = 15.0  # as the server's first connection: an owner the pre-handshake started gets this long
_DRIVE = re.compile(r"^/[a-zA-Z]:")


def fs_path(uri: Any) -> str | None:
    """pygls' `to_fs_path` for what the early hover handles (a local `file:` URI with a POSIX path: the path part,
    as pygls takes it, not unquoted); None for anything else (pygls answers)."""
    if not isinstance(uri, str) or "%" in uri:
        return None
    try:
        scheme, netloc, path, _, _, _ = urlparse(uri)
    except ValueError:
        return None
    if scheme != "file" or netloc or not path or _DRIVE.match(path) or os.sep != "/":
        return None
    return path


def import_first() -> None:
    """The modules the early hover needs, imported by the pre-handshake's import thread before pygls (the server
    needs them too: the documents feature, the hover, its settings, the owner link and the workspace's context), so
    that the early hover finds them loaded instead of importing them while pygls' import takes the interpreter in
    turns with it (`_prepare` then only builds the settings and connects)."""
    import mnemo.core.files.code_symbols  # noqa: F401
    import mnemo.core.identity  # noqa: F401
    import mnemo.daemon.client  # noqa: F401
    import mnemo.editor_settings  # noqa: F401
    import mnemo.lsp.hover_text  # noqa: F401
    import mnemo.lsp.owner  # noqa: F401


def process_age_ms() -> float | None:
    """Milliseconds since this process started (Linux; 10 ms resolution), None elsewhere."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            start_ticks = int(fh.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return (uptime - start_ticks / os.sysconf("SC_CLK_TCK")) * 1000
    except (OSError, ValueError, IndexError):
        return None


def _age() -> int | None:
    age = process_age_ms()
    return None if age is None else round(age)


def _nonneg_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class EarlyHover(threading.Thread):
    """Prepares as soon as `initialize` is answered (imports, settings, the owner connection), then answers the
    hover requests `submit` hands it, one at a time; `stop()` ends it. `report` is `mnemo/status`'s
    `lsp.preinit.earlyHover`."""

    def __init__(self, init_params: Any, init_result: dict, starter: Any,
                 loaded: threading.Event):
        super().__init__(name="mnemo-early-hover", daemon=True)
        self.params = init_params if isinstance(init_params, dict) else {}
        caps = (init_result.get("capabilities") or {}) if isinstance(init_result, dict) else {}
        self.encoding = caps.get("positionEncoding") or "utf-16"
        client_caps = self.params.get("capabilities")
        client_caps = client_caps if isinstance(client_caps, dict) else {}
        self.experimental = client_caps.get("experimental")
        workspace = client_caps.get("workspace")
        self.pulls_configuration = isinstance(workspace, dict) and bool(workspace.get("configuration"))
        self.starter = starter  # preinit.OwnerStarter, if `initialize` started one
        self.loaded = loaded  # set when pygls is loaded: stop waiting for an owner that is still starting
        self.docs: dict[str, tuple[str, Any, Any]] = {}  # uri -> (text, version, languageId), as opened
        self.active: str | None = None
        self.report: dict[str, Any] = {"answered": 0, "steppedAside": 0, "last": None}
        self.off: str | None = None  # why no hover can be answered early in this session (also report["off"])
        self._jobs: queue.Queue = queue.Queue()
        self._stopping = threading.Event()
        self._svc: Any = None
        self.settings: Any = None
        self.home: Path | None = None

    # -- what the main thread tells it (in the order the client sent it) ------------------------------------
    def observe(self, msg: Any) -> None:
        """A message the early hover does not answer, as it goes by: what a later hover would see."""
        if not isinstance(msg, dict):
            return
        method = msg.get("method")
        params = msg.get("params")
        doc = params.get("textDocument") if isinstance(params, dict) else None
        if not isinstance(doc, dict):
            doc = {}
        uri = doc.get("uri")
        if method == "textDocument/didOpen" and isinstance(uri, str):
            text = doc.get("text")
            if isinstance(text, str):
                self.docs[uri] = (text, doc.get("version"), doc.get("languageId"))
            else:
                self.docs.pop(uri, None)
            self.active = uri
        elif method == "textDocument/didChange" and isinstance(uri, str):
            self.docs.pop(uri, None)  # pygls applies the edits
            self.active = uri
        elif method == "textDocument/didClose" and isinstance(uri, str):
            self.docs.pop(uri, None)
        elif method == "workspace/didChangeConfiguration":
            self.turn_off("the settings changed before the first hover")

    def turn_off(self, why: str) -> None:
        if self.off is None:
            self.off = why
            self.report["off"] = why

    def wants(self, msg: Any) -> bool:
        """Whether `msg` is a hover request this thread may try (the rest of the checks run in `answer`)."""
        return (isinstance(msg, dict) and msg.get("method") == "textDocument/hover" and self.off is None
                and isinstance(msg.get("id"), int | str) and not isinstance(msg.get("id"), bool))

    def submit(self, job: HoverJob) -> None:
        """Answer `job` (in this thread), with what the client had sent before it: the active document and the
        hovered one's text."""
        params = job.msg.get("params")
        doc = params.get("textDocument") if isinstance(params, dict) else None
        uri = doc.get("uri") if isinstance(doc, dict) else None
        job.seen = (self.active, self.docs.get(uri) if isinstance(uri, str) else None)
        self._jobs.put(job)

    def stop(self) -> None:
        self._stopping.set()
        self._jobs.put(None)

    # -- the thread ------------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._prepare()
        except Exception as exc:  # noqa: BLE001 - pygls answers instead
            self.turn_off(f"not prepared: {exc!r}")
        self.report["preparedAfterMs"] = _age()  # from the process' start: imports, settings, owner connection
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                frame, why = None, self.off
                if why is None:
                    try:
                        frame, why = self.answer(job.msg, *job.seen)
                    except Exception as exc:  # noqa: BLE001 - pygls answers instead
                        frame, why = None, f"error: {exc!r}"
                job.finish(frame, why)
        finally:
            svc, self._svc = self._svc, None
            if svc is not None:
                try:
                    svc.close()
                except OSError:
                    pass

    def _prepare(self) -> None:
        if environment.number("MNEMO_LSP_TEST_DELAY_MS") > 0:
            self.turn_off("MNEMO_LSP_TEST_DELAY_MS is set")
            return
        opts = self.params.get("initializationOptions")
        if self.pulls_configuration and not (isinstance(opts, dict) and opts):
            self.turn_off("the client's settings come from workspace/configuration")
            return
        # what the hover needs, imported here (a thread of its own: the main thread keeps reading the client)
        from mnemo.core.files import code_symbols  # noqa: F401 - tree-sitter's module, imported before the hover
        from mnemo.core.identity import detect_context  # noqa: F401
        from mnemo.editor_settings import parse_settings
        from mnemo.lsp import hover_text  # noqa: F401 - convert and code_symbols, without pygls
        from mnemo.lsp.owner import resolve_home

        self.settings, _problems = parse_settings(opts if isinstance(opts, dict) else {})
        self.home = resolve_home(self.settings.home)
        self._svc = self._connect()
        if self._svc is None:
            self.turn_off("no owner to ask before pygls was loaded")

    def _connect(self) -> Any:
        """A connected client of the owner, or None: the owner running now, or the one the pre-handshake started
        once its socket answers (given up when pygls is loaded: its own connection then does the rest)."""
        from mnemo.daemon.client import DaemonService, owner_lock_free

        assert self.home is not None
        starter = self.starter
        if starter is not None:
            starter.join(OWNER_WAIT_S)
        proc = starter.proc if starter is not None and starter.home == self.home else None
        if proc is None and owner_lock_free(self.home):
            return None  # nobody runs an owner for this home, and none is starting: pygls' link decides
        deadline = time.monotonic() + OWNER_WAIT_S
        while True:
            svc = DaemonService.open(self.home, autostart=False, client_name="lsp")
            try:
                svc.connect()
                return svc
            except Exception:  # noqa: BLE001 - not listening yet
                svc.close()
            if proc is None or proc.poll() is not None or self.loaded.is_set() or self._stopping.is_set() \
                    or time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    # -- one hover -------------------------------------------------------------------------------------------
    def answer(self, msg: dict, active: str | None, opened: tuple[str, Any, Any] | None
               ) -> tuple[bytes | None, str | None]:
        """(the response frame, None), or (None, why pygls must answer it). `active`: the active document when the
        request came, `opened`: the hovered document as opened (text, version, languageId), if it was."""
        from mnemo.core.errors import MnemoError
        from mnemo.core.files import code_symbols as cc
        from mnemo.core.identity import detect_context
        from mnemo.lsp import convert, hover_text

        params = msg.get("params")
        if not isinstance(params, dict):
            return None, "params"
        doc, pos = params.get("textDocument"), params.get("position")
        if not (isinstance(doc, dict) and isinstance(pos, dict)):
            return None, "params"
        uri, line, character = doc.get("uri"), pos.get("line"), pos.get("character")
        if not (isinstance(uri, str) and _nonneg_int(line) and _nonneg_int(character)):
            return None, "params"
        assert isinstance(line, int) and isinstance(character, int)
        if uri != active or opened is None:
            return None, "not the active opened document"
        path = fs_path(uri)
        if path is None:
            return None, "not a plain local file URI"
        settings = self.settings
        hover = settings.hover

        def respond(result: Any) -> tuple[bytes, None]:
            body = json.dumps({"id": msg["id"], "jsonrpc": "2.0", "result": result}).encode()
            return frame(body), None

        if not hover.enabled or hover.max_memories <= 0:
            return respond(None)
        root = self._root_for(path)
        if root is None:
            return None, "outside the workspace folders"
        text, _version, language_id = opened
        language = cc.language_for(uri, language_id)
        line_text = cc.line_at(text, line)
        col = convert.col_from_client(line_text, character, self.encoding)
        code, _ = cc.context_at(text, line, col, language)
        if not code.word or not hover_text.on_definition(code, line):
            return respond(None)
        ctx = {**detect_context(root).to_dict(), "write_policy": settings.write_policy}
        rel = convert.rel_path(path, ctx)
        symbol, query = hover_text.query(code)
        skills = settings.skills
        try:
            answer = self._svc.hover_context(
                ctx, rel, line, symbol, query, limit=hover_text.recall_limit(hover.max_memories),
                include_docs=hover.include_docs, min_confidence=hover.min_confidence,
                skills=hover.show_skills and skills.enabled, max_skills=skills.max_active,
                token_budget=skills.token_budget)
        except MnemoError as exc:  # pygls' path reports it its way (degraded mode, or a log line)
            return None, f"owner: {exc.message}"
        if hover.show_skills and not skills.enabled:
            answer = {**answer, "skills": {"activations": []}}
        md = hover_text.markdown(answer, code, hover.max_memories, hover_text.edit_links(self.experimental))
        if md is None:
            return respond(None)
        result: dict[str, Any] = {"contents": {"kind": "markdown", "value": md}}
        span = convert.word_span(line_text, character, code.word, self.encoding) if len(text) < 200_000 else None
        if span is not None:
            result["range"] = {"start": {"line": line, "character": span[0]},
                               "end": {"line": line, "character": span[1]}}
        return respond(result)

    def _roots(self) -> list[Path]:
        """The workspace roots as pygls' server lists them (`workspace_roots`): the workspace folders, else the
        root URI."""
        folders = self.params.get("workspaceFolders")
        roots: list[Path] = []
        seen: set[str] = set()
        for folder in folders if isinstance(folders, list) else []:
            uri = folder.get("uri") if isinstance(folder, dict) else None
            if isinstance(uri, str) and uri not in seen:
                seen.add(uri)
                p = fs_path(uri)
                if p:
                    roots.append(Path(p))
        if not roots:
            p = fs_path(self.params.get("rootUri"))
            if p:
                roots.append(Path(p))
        return roots

    def _root_for(self, path: str) -> Path | None:
        """The deepest workspace root holding `path` (pygls' server picks the same); None when none does (pygls
        answers: its rule for that case looks at the disk and the process)."""
        best = None
        for r in self._roots():
            try:
                Path(path).relative_to(r)
            except ValueError:
                continue
            if best is None or len(str(r)) > len(str(best)):
                best = r
        return best


class HoverJob:
    """One hover request handed to the early hover: answered there exactly once, or given back to pygls. `finish`
    (the early hover's thread) and `abandon` (the main thread, when pygls is loaded and the answer is late) decide
    under one lock, so the answer is written at most once and, when it is not, pygls gets the request."""

    def __init__(self, msg: dict, frame: bytes, out: Any, events: queue.Queue, report: dict[str, Any]):
        self.msg = msg
        self.frame = frame
        self.out = out
        self.events = events
        self.report = report
        self.seen: tuple[str | None, tuple[str, Any, Any] | None] = (None, None)
        self.answered = False
        self.done = False
        self._lock = threading.Lock()

    def finish(self, response: bytes | None, why: str | None) -> None:
        with self._lock:
            if not self.done and response is not None:
                try:
                    self.out.write(response)
                    self.out.flush()
                    self.answered = True
                except OSError:  # the client is gone: pygls finds out too
                    self.answered = True
            if not self.done:
                self.report["answered" if self.answered else "steppedAside"] += 1
                self.report["last"] = "answered" if self.answered else f"stepped aside: {why}"
                if self.answered:
                    self.report["answeredAfterMs"] = _age()
            self.done = True
        self.events.put(("hover-done", self))

    def abandon(self) -> bool:
        """Give the request back to pygls unless it was answered; True when pygls must answer it."""
        with self._lock:
            if self.done:
                return not self.answered
            self.done = True
            self.report["steppedAside"] += 1
            self.report["last"] = "stepped aside: no answer before pygls was loaded"
            return True


__all__ = ["EarlyHover", "HoverJob", "fs_path", "import_first", "process_age_ms"]
