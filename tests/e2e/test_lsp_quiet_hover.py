"""Issue 20 point 8 over stdio (pytest-lsp, real `mnemo lsp` and owner; hash embedder: plumbing): a memory's card
once per symbol (on its definition, not on every identifier of its body), no near misses in the hover, at most
four code actions at a position with the most useful first; and the hover checks the anchored code on disk (no
save needed) as every surface does."""

from __future__ import annotations

import lsp_helpers
import pytest
from lsp_helpers import (
    KEY_LINE,
    POST_COL,
    POST_LINE,
    command,
    hover,
    open_doc,
    rng,
)
from lsprotocol import types as t

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)
NOTE = "post must send an idempotency key on every retry"


@pytest.mark.asyncio
async def test_the_card_shows_on_the_definition_not_on_every_identifier_inside(lsp):
    uri = open_doc(lsp, lsp.py)
    mem = (await command(lsp, "mnemo.rememberSelection", {"uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33),
                                                          "text": NOTE, "kind": "decision"}))["memory"]
    on_name = await hover(lsp, uri, POST_LINE, POST_COL)
    assert on_name and mem["id"] in on_name and "anchored here" in on_name
    assert "Not active" not in on_name           # near misses are for the Skills view and the dry run
    for col in (8, 14, 17):                      # `key`, `os`, `urandom` inside post(): no card again
        assert await hover(lsp, uri, KEY_LINE, col) is None, col
    assert await hover(lsp, uri, KEY_LINE + 1, 22) is None    # `_send` in the body (a call)
    assert "PaymentsClient" in (await hover(lsp, uri, 3, 8) or "")  # the class, on its own name


@pytest.mark.asyncio
async def test_at_most_four_code_actions_the_most_useful_first(lsp):
    uri = open_doc(lsp, lsp.py)
    for text in ("post retries reuse the idempotency key", "post bodies are JSON with sorted keys",
                 "post errors are retried three times", "post uses the payments API base URL"):
        await command(lsp, "mnemo.remember", {"text": text})
    params = t.CodeActionParams(text_document=t.TextDocumentIdentifier(uri=uri), range=t.Range(
        start=t.Position(line=KEY_LINE, character=8), end=t.Position(line=KEY_LINE, character=33)),
        context=t.CodeActionContext(diagnostics=[]))
    actions = await lsp.text_document_code_action_async(params)
    assert 1 < len(actions) <= 4, [a.title for a in actions]
    assert actions[0].kind == "refactor.mnemo.remember"
    assert actions[-1].kind == "source.mnemo.showInjection"
    assert all(a.kind in ("refactor.mnemo.remember", "refactor.mnemo.anchor", "source.mnemo.showInjection")
               for a in actions), [a.title for a in actions]


@pytest.mark.asyncio
async def test_the_hover_sees_a_change_on_disk_without_a_save(lsp):
    """The code changed outside the editor (an agent, a pull): the hover reads the anchored code as it is now."""
    uri = open_doc(lsp, lsp.py)
    mem = (await command(lsp, "mnemo.rememberSelection", {"uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33),
                                                          "text": NOTE, "kind": "decision"}))["memory"]
    assert "code changed" not in (await hover(lsp, uri, POST_LINE, POST_COL) or "")
    lsp.py.write_text(lsp.py.read_text().replace("os.urandom(8).hex()", "os.urandom(16).hex()"))
    await command(lsp, "mnemo.remember", {"text": "an unrelated write clears the hover cache"})
    text = await hover(lsp, uri, POST_LINE, POST_COL)
    assert text and mem["id"] in text and "code changed since this was written" in text
