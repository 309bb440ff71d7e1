"""`textDocument/codeAction`: remember the selection (anchored to its symbol), anchor a relevant memory here,
edit, promote, deprecate, and "show what would be injected for this file". Honours `context.only`.

At most `MAX_ACTIONS` (4) at a position, the most useful first: remember the selection; per relevant memory (the
ones anchored here first, then by relevance) anchor it to this symbol or, when it is anchored here, edit it; show
what would be injected for this file (always kept when asked for: it is the file's one action); then edit,
deprecate and promote of the others. What is left out is one request away (the sidebar, `mnemo` commands).

Every action carries a command (executed by `mnemo.lsp.features.commands`), so the editor applies nothing itself.
"""

from __future__ import annotations

import logging

from lsprotocol import types as t

from mnemo.core.errors import MnemoError
from mnemo.core.files import code_symbols as cc
from mnemo.lsp import convert
from mnemo.lsp.capabilities import CODE_ACTION_KINDS
from mnemo.lsp.feature import LanguageFeature

log = logging.getLogger("mnemo.lsp.code_actions")
MAX_ACTIONS = 4

# declared in capabilities.py (the `initialize` answer lists them)
KIND_REMEMBER, KIND_ANCHOR, KIND_PROMOTE, KIND_DEPRECATE, KIND_INJECTION, KIND_EDIT = CODE_ACTION_KINDS


def _wanted(kind: str, only: list[str] | None) -> bool:
    if not only:
        return True
    return any(kind == o or kind.startswith(o + ".") for o in only)


def _short(text: str, limit: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


class CodeActionsFeature(LanguageFeature):
    async def code_action(self, params: t.CodeActionParams) -> list[t.CodeAction]:
        only = [str(k) for k in params.context.only] if params.context.only else None
        uri = params.text_document.uri
        rng = params.range
        ranked: list[tuple[float, int, t.CodeAction]] = []
        found = await self.server.documents.context_at(uri, rng.start)
        code = found[0] if found else None
        sym = code.symbol if code else None
        where = f" (anchored to `{sym.qualname}`)" if sym else ""

        def add(rank: float, kind: str, title: str, command: str, args: dict) -> None:
            if _wanted(kind, only):
                ranked.append((rank, len(ranked), t.CodeAction(title=title, kind=kind, command=t.Command(
                    title=title, command=command, arguments=[args]))))

        selection = rng.start != rng.end
        if selection:
            add(0, KIND_REMEMBER, f"Mnemo: Remember selection{where}", "mnemo.rememberSelection",
                {"uri": uri, "range": convert.plain(rng)})
        wants_memories = any(_wanted(k, only) for k in (KIND_ANCHOR, KIND_PROMOTE, KIND_DEPRECATE, KIND_EDIT))
        if wants_memories and self.server.ready and code is not None and (sym or code.word):
            for i, (card, anchored_here) in enumerate(await self._relevant(uri, code, rng.start.line)):
                mid = card["item_id"]
                label = _short(card.get("compressed_summary") or card.get("title") or mid)
                local = mid.startswith("mem-")  # a local memory (a team record is edited on the team server)
                if sym and not anchored_here:
                    add(10 + i, KIND_ANCHOR, f"Mnemo: Anchor \"{label}\" to {sym.qualname}", "mnemo.anchorMemory",
                        {"id": mid, "uri": uri, "position": convert.plain(rng.start)})
                if local:  # the note on this code: editing it is what is useful here
                    add((10 if anchored_here else 30) + i, KIND_EDIT, f"Mnemo: Edit \"{label}\"", "mnemo.editMemory",
                        {"id": mid})
                add(40 + i, KIND_DEPRECATE, f"Mnemo: Deprecate \"{label}\"", "mnemo.deprecate", {"id": mid})
                if card.get("scope") == "project":
                    add(50 + i, KIND_PROMOTE, f"Mnemo: Promote \"{label}\" to global", "mnemo.promote",
                        {"id": mid, "to": "global"})
        injection = _wanted(KIND_INJECTION, only)
        ranked.sort(key=lambda r: (r[0], r[1]))
        actions = [a for _r, _i, a in ranked][: MAX_ACTIONS - (1 if injection else 0)]
        if injection:  # the file's one action, kept last
            title = "Mnemo: Show what would be injected for this file"
            actions.append(t.CodeAction(title=title, kind=KIND_INJECTION, command=t.Command(
                title=title, command="mnemo.showInjection", arguments=[{"uri": uri}])))
        return actions

    async def _relevant(self, uri: str, code: cc.CodeContext, line: int) -> list[tuple[dict, bool]]:
        """Memories relevant at the cursor: anchored to the symbol first, then recall hits (one `hover_context`)."""
        settings = self.server.settings.hover
        ctx = await self.server.run_blocking(self.server.ctx_for, uri)
        rel = self.server.rel_path(uri, ctx)
        sym = code.symbol
        try:
            res = await self.server.editor.hover(
                ctx, rel, symbol=sym.qualname if sym else None, line=line, query=code.query(),
                limit=max(1, settings.max_memories), include_docs=False, min_confidence=settings.min_confidence,
                skills=False)
        except MnemoError as exc:
            log.info("code actions: %s", exc)
            return []
        out: list[tuple[dict, bool]] = []
        seen: set[str] = set()
        for c in res.get("anchored") or []:
            out.append((c, True))
            seen.add(c["item_id"])
        for c in res.get("cards", []):
            if c.get("source_kind") == "note" and c["item_id"] not in seen:
                out.append((c, False))
                seen.add(c["item_id"])
        return out[: max(1, settings.max_memories)]
