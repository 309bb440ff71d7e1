"""Open documents: `textDocument/didOpen|didChange|didSave|didClose`, the active document, per-document debounce,
parse caches, the code context at a position; stale anchors checked on save.

A full parse (tree-sitter, in a worker thread) is cached per document version; it runs after `mnemo.debounceMs`
of quiet, or on demand by a request that needs it. Documents above `mnemo.maxParseBytes` are never fully parsed:
hovers and code actions parse a window around the cursor, and they get no code lenses.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types as t
from pygls.uris import to_fs_path

from mnemo.core.files import code_symbols as cc
from mnemo.lsp import convert, feature
from mnemo.lsp.feature import LanguageFeature, Server

log = logging.getLogger("mnemo.lsp.documents")

DISK_READ_LIMIT = 2_000_000  # a hover on a file the client did not open reads it from disk up to this size


@dataclass
class DocState:
    uri: str
    version: int | None = None
    language: str | None = None
    parsed: cc.ParsedDocument | None = None
    parsed_version: int | None = None
    parsing: asyncio.Future | None = None
    parsing_version: int | None = None
    debounce: asyncio.Task | None = None
    opened_at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class Snapshot:
    uri: str
    text: str
    version: int | None
    language: str | None


class DocumentsFeature(LanguageFeature):
    """textDocument/didOpen, didChange, didSave, didClose; the active document."""

    def __init__(self, server: Server):
        super().__init__(server)
        self.states: dict[str, DocState] = {}
        # per file: the stale anchors the last check on save found (memory id, symbol), to tell the client when
        # they changed even if this check filed nothing itself (see `check_anchors`)
        self._stale_seen: dict[str | None, frozenset[tuple[str, str]]] = {}

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def owner_ready(self) -> None:
        """After the first connection to the owner: analyze again the documents opened before it. Their analysis
        ran without an owner (an editor opens its files right after `initialize`, before the link is made), so
        their code lenses had no relevance and the owner none of their symbols' queries embedded: the first hover
        on each of those symbols paid the embedding (~4 ms of the owner's CPU), and the lenses waited for an
        edit. After the usual debounce: a hover asked at the same moment (an editor's first) goes first."""
        for uri in list(self.states):
            self.schedule(uri, self.server.settings.debounce_ms / 1000.0)

    # -- notifications ---------------------------------------------------------------------------------------
    async def did_open(self, params: t.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        st = self.states.setdefault(unquote(doc.uri), DocState(unquote(doc.uri)))
        st.version = doc.version
        st.language = cc.language_for(doc.uri, doc.language_id)
        self.set_active(doc.uri)
        self.schedule(doc.uri, 0.0)

    async def did_change(self, params: t.DidChangeTextDocumentParams) -> None:
        uri = unquote(params.text_document.uri)
        st = self.states.setdefault(uri, DocState(uri, language=cc.language_for(uri)))
        st.version = params.text_document.version
        self.set_active(uri)
        self.forget_hovers(uri)
        self.schedule(uri, self.server.settings.debounce_ms / 1000.0)

    async def did_save(self, params: t.DidSaveTextDocumentParams) -> None:
        uri = unquote(params.text_document.uri)
        self.forget_hovers(uri)
        self.schedule(uri, 0.0)
        if self.server.ready:
            self.server.spawn(self.check_anchors(uri), f"check-anchors:{uri}")

    def forget_hovers(self, uri: str) -> None:
        """An edit or a save: the hover answers kept for this file are dropped (editor.py's lifetime rule)."""
        editor = self.server.editor
        if len(editor.hovers) or editor.hovers_asked:  # (the file's path: a few stat calls, only when needed)
            editor.forget_path(self.server.rel_path(uri, self.server.ctx_for(uri)))

    async def check_anchors(self, uri: str, force: bool = False) -> dict:
        """Flag memories anchored into this file whose symbol changed or vanished (on save; SPEC §4 stale
        anchors). Skipped for files without anchored memories unless `force`."""
        server = self.server
        ctx = await server.run_blocking(server.ctx_for, uri)
        rel = server.rel_path(uri, ctx)
        anchored = await server.editor.anchors.for_path(ctx, rel)
        if not anchored and not force:
            return {"path": rel, "checked": 0, "ok": 0, "flagged": [], "cleared": []}
        syms = await self.symbols(uri)
        if syms is None:
            return {"path": rel, "checked": 0, "ok": 0, "flagged": [], "cleared": [],
                    "skipped": "not parsed (unknown language or larger than mnemo.maxParseBytes)"}
        res = await server.service("check_anchors", ctx, rel, [s.current() for s in syms])
        # A hover or a lens pass that read the saved file a moment before this check (the editor writes the file,
        # then says so) may have filed the review item itself (`freshen`, on read): this check then files nothing
        # new, and the client must still hear that its Review changed. So the client is told whenever the stale
        # anchors of the file differ from what the last save's check found, as well as on anything filed or closed.
        stale = frozenset((f.get("memory_id") or "", str((f.get("anchor") or {}).get("symbol") or ""))
                          for f in res.get("stale", []))
        if res.get("flagged") or res.get("cleared") or stale != self._stale_seen.get(rel, frozenset()):
            ids = [f.get("memory_id") for f in [*res.get("flagged", []), *res.get("cleared", []),
                                                 *res.get("stale", [])]]
            server.memories_changed("review", list(dict.fromkeys(i for i in ids if i)))
        self._stale_seen[rel] = stale
        return res

    async def did_close(self, params: t.DidCloseTextDocumentParams) -> None:
        st = self.states.pop(unquote(params.text_document.uri), None)
        if st is not None:
            for task in (st.debounce, st.parsing):
                if task is not None and not task.done():
                    task.cancel()

    def set_active(self, uri: str | None) -> None:
        uri = unquote(uri) if uri else None
        if uri != self.server.active_uri:
            self.server.active_uri = uri
            if self.server.ready:
                self.server.spawn(self.server.publish_state(), "stateChanged")

    # -- debounce --------------------------------------------------------------------------------------------
    def schedule(self, uri: str, delay: float) -> None:
        """Per-document debounce: the latest edit wins; the analysis (parse, then lens relevance) runs after
        `delay` seconds of quiet."""
        st = self.states.get(unquote(uri))
        if st is None:
            return
        if st.debounce is not None and not st.debounce.done():
            st.debounce.cancel()
        st.debounce = self.server.spawn(self._analyze_later(st, delay), f"analyze:{uri}")

    def ensure_analyzed(self, uri: str) -> None:
        """Schedule an analysis unless one is pending (a lens request must not restart a running pass)."""
        st = self.states.get(unquote(uri))
        if st is not None and (st.debounce is None or st.debounce.done()):
            self.schedule(uri, 0.0)

    async def _analyze_later(self, st: DocState, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        parsed = await self.full_parse(st.uri)
        if parsed is None:
            return
        await self.server.fan_out("analyze", st.uri)

    def invalidate(self) -> None:
        """After a write: re-analyze the active document now, the others when the client asks for their lenses
        again (so one write does not cost a recall per symbol of every open file)."""
        active = self.server.active_uri
        if active and self.server.ready and unquote(active) in self.states:
            self.schedule(active, 0.05)

    # -- content ---------------------------------------------------------------------------------------------
    def snapshot(self, uri: str) -> Snapshot | None:
        """The text the client has (opened documents only)."""
        key = unquote(uri)
        doc = self.server.workspace.text_documents.get(key)
        if doc is None:
            return None
        st = self.states.get(key)
        language = st.language if st else cc.language_for(key, doc.language_id)
        return Snapshot(key, doc.source, doc.version, language)

    async def snapshot_or_disk(self, uri: str) -> Snapshot | None:
        snap = self.snapshot(uri)
        if snap is not None:
            return snap
        path = to_fs_path(uri)
        if not path:
            return None

        def read() -> str | None:
            p = Path(path)
            try:
                if not p.is_file() or p.stat().st_size > DISK_READ_LIMIT:
                    return None
                return p.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None

        text = await self.server.run_blocking(read)
        return None if text is None else Snapshot(unquote(uri), text, None, cc.language_for(uri))

    async def full_parse(self, uri: str) -> cc.ParsedDocument | None:
        """The whole document parsed (cached per version); None for unknown languages and documents larger
        than `mnemo.maxParseBytes`."""
        snap = self.snapshot(uri)
        if snap is None or snap.language is None:
            return None
        if len(snap.text) > self.server.settings.max_parse_bytes:
            return None
        st = self.states.setdefault(snap.uri, DocState(snap.uri, snap.version, snap.language))
        if st.parsed is not None and st.parsed_version == snap.version and snap.version is not None:
            return st.parsed
        if st.parsing is not None and st.parsing_version == snap.version and not st.parsing.done():
            return await asyncio.shield(st.parsing)
        fut = asyncio.ensure_future(self.server.run_cancellable(cc.parse_document, snap.text, snap.language))
        st.parsing, st.parsing_version = fut, snap.version
        try:
            parsed = await asyncio.shield(fut)
        except cc.ParseCancelled:
            return None
        # symbols are computed in the thread too (walks every node)
        await self.server.run_blocking(cc.symbols, parsed)
        if st.parsing is fut:
            st.parsed, st.parsed_version = parsed, snap.version
        return parsed

    async def symbols(self, uri: str) -> list[cc.Symbol] | None:
        parsed = await self.full_parse(uri)
        if parsed is None:
            return None
        return parsed.symbols if parsed.symbols is not None else await self.server.run_blocking(cc.symbols, parsed)

    async def context_at(self, uri: str, pos: t.Position) -> tuple[cc.CodeContext, Snapshot] | None:
        """The code context at an LSP position (client units) and the snapshot it was computed on."""
        snap = await self.snapshot_or_disk(uri)
        if snap is None:
            return None
        st = self.states.get(snap.uri)
        cached = st.parsed if st and st.parsed_version == snap.version and snap.version is not None else None
        small = len(snap.text) <= min(self.server.settings.max_parse_bytes, cc.WINDOW_THRESHOLD)
        if cached is None and small and snap.language is not None and st is not None:
            cached = await self.full_parse(uri)
        encoding = self.server.workspace.position_encoding or t.PositionEncodingKind.Utf16

        def compute(cancelled=None):
            line_text = cc.line_at(snap.text, pos.line)
            col = convert.col_from_client(line_text, pos.character, encoding)
            ctx, _ = cc.context_at(snap.text, pos.line, col, snap.language, parsed=cached,
                                   window_threshold=cc.WINDOW_THRESHOLD if cached is None else 1 << 62,
                                   cancelled=cancelled)
            return ctx

        if cached is not None and len(snap.text) <= cc.WINDOW_THRESHOLD:
            return compute(), snap  # a lookup in the kept parse (~0.2 ms): on the loop, not worth a thread's hop
        try:
            ctx = await self.server.run_cancellable(compute)
        except cc.ParseCancelled:
            raise asyncio.CancelledError() from None
        return ctx, snap

    def word_range(self, snap: feature.Snapshot, pos: t.Position, word: str | None) -> t.Range | None:
        if not word:
            return None
        line_text = cc.line_at(snap.text, pos.line) if len(snap.text) < 200_000 else None
        if line_text is None:
            return None
        encoding = self.server.workspace.position_encoding or t.PositionEncodingKind.Utf16
        span = convert.word_span(line_text, pos.character, word, encoding)
        if span is None:
            return None
        return t.Range(start=convert.position(pos.line, span[0]), end=convert.position(pos.line, span[1]))
