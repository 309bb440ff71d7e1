"""`textDocument/codeLens` and `codeLens/resolve`: "2 memories · 1 skill" above functions and classes.

A lens appears above a symbol with memories anchored to it (`AnchorIndex`) or strongly relevant ones (recall
confidence >= `mnemo.codeLens.minConfidence`). Relevance is checked in the background after the per-document
debounce, one recall per symbol, cached by (project, branch, symbol, hash of its code) so an edit only re-checks
the symbols it changed, under the language server's one cache lifetime rule (`editor.py`: an answer past its
lifetime is shown while the next pass re-checks it); a `workspace/codeLens/refresh` follows when results change.
`textDocument/codeLens` itself only reads caches; titles are filled in by `codeLens/resolve`.
"""

from __future__ import annotations

import asyncio
import logging

from lsprotocol import types as t

from mnemo.core.errors import MnemoError
from mnemo.core.files import code_symbols as cc
from mnemo.lsp import convert
from mnemo.lsp.feature import LanguageFeature, Server
from mnemo.lsp.owner import Unavailable

log = logging.getLogger("mnemo.lsp.code_lens")

LENS_KINDS = {"function", "method", "class", "struct", "interface", "enum", "trait", "impl", "module", "type"}


class CodeLensFeature(LanguageFeature):
    def __init__(self, server: Server):
        super().__init__(server)

    @property
    def _relevant(self):
        """(project, branch, qualname, code_hash) -> ids of strongly relevant memories (`EditorContext.relevance`,
        dropped with the editor's other caches)."""
        return self.server.editor.relevance

    def _key(self, ctx: dict, sym: cc.Symbol) -> tuple:
        return ctx.get("project_id"), ctx.get("branch"), sym.qualname, sym.code_hash

    async def analyze(self, uri: str) -> None:
        """Background relevance pass for one document (after its debounce)."""
        settings = self.server.settings.code_lens
        if not (settings.enabled and settings.show_relevant and self.server.ready):
            return
        syms = await self.server.documents.symbols(uri)
        if not syms:
            return
        ctx = await self.server.run_blocking(self.server.ctx_for, uri)
        todo = [s for s in syms if s.kind in LENS_KINDS][: settings.max_symbols]
        changed = False
        gen = self.server.editor.generation
        for sym in todo:
            key = self._key(ctx, sym)
            if self._relevant.get(key) is not None:  # within its lifetime
                continue
            await self._after_hovers()
            try:
                res = await self.server.service("recall", ctx, cc.symbol_query(sym), limit=3, include_docs=False,
                                                min_confidence=settings.min_confidence)
            except Unavailable:
                return
            except MnemoError as exc:
                log.debug("lens relevance for %s: %s", sym.qualname, exc)
                continue
            ids = [c["item_id"] for c in res.get("cards", []) if c.get("source_kind") == "note"]
            old = self._relevant.get_stale(key)
            if gen == self.server.editor.generation:  # not dropped meanwhile (a write): keep it
                self._relevant.put(key, ids)
            changed = changed or (ids != (old[0] if old else []))
        if changed:
            self.server.refresh_code_lenses()

    async def _after_hovers(self, limit_s: float = 1.0) -> None:
        """Let the hovers being asked of the owner right now go first (up to `limit_s`): this pass is background
        work, and a recall of its own beside a hover's call slows both in the owner."""
        editor = self.server.editor
        waited = 0.0
        while editor.hovers_asked and waited < limit_s:
            await asyncio.sleep(0.005)
            waited += 0.005

    async def code_lens(self, params: t.CodeLensParams) -> list[t.CodeLens]:
        settings = self.server.settings.code_lens
        if not settings.enabled or not self.server.ready:
            return []
        uri = params.text_document.uri
        snap = self.server.documents.snapshot(uri)
        syms = await self.server.documents.symbols(uri)
        if not syms or snap is None:
            return []
        ctx = await self.server.run_blocking(self.server.ctx_for, uri)
        rel = self.server.rel_path(uri, ctx)
        try:
            anchored = await self.server.editor.anchors.for_path(ctx, rel)
        except (Unavailable, MnemoError):
            return []
        lenses: list[t.CodeLens] = []
        missing_relevance = False
        checked = 0
        for sym in syms:
            if sym.kind not in LENS_KINDS:
                continue
            checked += 1
            ids_a = list(anchored.get(sym.qualname, []))
            ids_r: list[str] = []
            if settings.show_relevant and checked <= settings.max_symbols:
                hit = self._relevant.get_stale(self._key(ctx, sym))
                if hit is None or not hit[1]:  # none yet, or past its lifetime: the background pass asks again
                    missing_relevance = True
                if hit is not None:
                    ids_r = [i for i in hit[0] if i not in ids_a]
            if not ids_a and not ids_r:
                continue
            line = sym.start_line
            lenses.append(t.CodeLens(
                range=t.Range(start=t.Position(line=line, character=0), end=t.Position(line=line, character=0)),
                data={"uri": uri, "version": snap.version, "symbol": sym.qualname, "kind": sym.kind,
                      "anchored": ids_a, "relevant": ids_r}))
        if missing_relevance and settings.show_relevant:
            self.server.documents.ensure_analyzed(uri)
        return lenses

    async def code_lens_resolve(self, lens: t.CodeLens) -> t.CodeLens:
        data = convert.plain(lens.data) or {}
        if not isinstance(data, dict) or "symbol" not in data:
            return lens
        ids = list(dict.fromkeys([*data.get("anchored", []), *data.get("relevant", [])]))
        skills = 0
        try:
            res = await self.server.editor.active_skills(data.get("uri"))
            skills = len(res.get("activations", []))
        except MnemoError:
            pass
        lens.command = t.Command(title=convert.lens_title(len(ids), skills), command="mnemo.openMemory",
                                 arguments=[{"ids": ids, "uri": data.get("uri"), "symbol": data.get("symbol")}])
        return lens
