"""`textDocument/hover`: the memories most relevant to the symbol under the cursor, and the file's active skills.

A quiet hover: inside a function, class or method it answers only on the symbol's definition (its name, the lines
from its decorators to its name), once per symbol, not on every identifier of its body (`requests.post` inside
`charge()` gets no Mnemo card; `charge` on its `def` line does). The skills that nearly activated are not listed
(the Skills view and `mnemo skills activate` show them).

Memories anchored to the enclosing symbol come first (outside any symbol: file + lines anchors covering the line),
then recall hits above `mnemo.hover.minConfidence` for the symbol's query (`code_symbols.symbol_query`: its
qualified name, signature and docstring, the text the code lens pass recalls with when the document opens, so the
owner has its embedding already, `Engine.embed_cached`; outside any symbol: the identifier and its line): all of
it from one `hover_context` call to the owner (none when cached, `editor.py`), every memory as the core's card. Nothing relevant enough: no hover. Store unavailable: one short "Mnemo
unavailable" hover per document and outage, then nothing.
"""

from __future__ import annotations

import logging

from lsprotocol import types as t

from mnemo.core.errors import MnemoError
from mnemo.lsp import convert, hover_text
from mnemo.lsp.feature import LanguageFeature, Server
from mnemo.lsp.hover_text import on_definition
from mnemo.lsp.owner import FIRST_CONNECT_WAIT_S, UNAVAILABLE, Unavailable

log = logging.getLogger("mnemo.lsp.hover")


class HoverFeature(LanguageFeature):
    def __init__(self, server: Server):
        super().__init__(server)
        self._told_unavailable: set[tuple[str, float]] = set()

    async def hover(self, params: t.HoverParams) -> t.Hover | None:
        settings = self.server.settings.hover
        if not settings.enabled or settings.max_memories <= 0:
            return None
        st = self.server.protocol.trace_of(self.server.protocol.msg_id)  # bench runs only (MNEMO_TRACE_FILE)
        st.mark("dispatch")
        uri = params.text_document.uri
        self.server.documents.set_active(uri)
        await self.server.test_delay()
        if not self.server.ready and not await self.server.until_connected(FIRST_CONNECT_WAIT_S):
            return self._unavailable_hover(uri)
        found = await self.server.documents.context_at(uri, params.position)
        if found is None or not found[0].word or not on_definition(found[0], params.position.line):
            return None
        code, snap = found
        st.mark("code_at")
        ctx = self.server.ctx_for(uri)  # on the loop: kept while .git is unchanged (`WorkspaceContexts`)
        st.mark("workspace")
        rel = self.server.rel_path(uri, ctx)
        symbol, query = hover_text.query(code)
        try:
            answer = await self.server.editor.hover(
                ctx, rel, symbol=symbol, line=params.position.line, query=query,
                limit=hover_text.recall_limit(settings.max_memories), include_docs=settings.include_docs,
                min_confidence=settings.min_confidence, skills=settings.show_skills)
        except Unavailable:
            return self._unavailable_hover(uri)
        except MnemoError as exc:
            log.info("hover: %s", exc)
            return None
        st.mark("owner")
        md = hover_text.markdown(answer, code, settings.max_memories, self._edit_links())
        if md is None:
            return None
        hover = t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=md),
                        range=self.server.documents.word_range(snap, params.position, code.word))
        st.mark("markdown")
        return hover

    def _edit_links(self) -> bool:
        """Whether the client runs `mnemo.editMemory` links in a hover: it says so in
        `capabilities.experimental.mnemoCommandLinks` (the VS Code extension does); others get no link."""
        return hover_text.edit_links(self.server.client_capabilities.experimental)

    def _unavailable_hover(self, uri: str) -> t.Hover | None:
        owner = self.server.owner
        if owner is None or owner.state != UNAVAILABLE:
            return None
        key = (uri, owner.since)
        if key in self._told_unavailable:
            return None
        self._told_unavailable.add(key)
        text = f"**Mnemo unavailable**: {convert.md_escape(owner.reason or 'unknown reason')}"
        if owner.hint:
            text += f"  \n{convert.md_escape(owner.hint)}"
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text))
