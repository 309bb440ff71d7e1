"""A hover is one round trip to the owner (`hover_context`: recall + the memories anchored to the symbol + the
file's skills), counted by the language server's own owner link (`mnemo/status` -> `lsp.ownerCalls`); a repeated
hover is answered from the cache, and no anchor lookup pages through `list_memories`. Real `mnemo lsp` and owner
processes (hash embedder: plumbing)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import lsp_helpers
import pytest
from lsp_helpers import (
    BANNER_COL,
    BANNER_LINE,
    KEY_LINE,
    POST_COL,
    POST_LINE,
    command,
    hover,
    open_doc,
    request,
    rng,
)

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)


async def settled_calls(lsp, timeout: float = 30.0) -> Counter:
    """The owner calls made so far, once two readings 0.5 s apart agree (background analysis, state, skills)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        calls = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
        if calls == last:
            return calls
        last = calls
        await asyncio.sleep(0.5)
    raise AssertionError(f"owner calls never settled: {last}")


@pytest.mark.asyncio
async def test_a_hover_is_one_owner_call(lsp):
    uri = open_doc(lsp, lsp.py)
    mem = (await command(lsp, "mnemo.rememberSelection", {
        "uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33), "kind": "decision",
        "text": "post must send an idempotency key on every retry"}))["memory"]
    before = await settled_calls(lsp)
    text = await hover(lsp, uri, POST_LINE, POST_COL)
    after = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
    assert after - before == Counter({"hover_context": 1}), after - before
    assert text is not None and "anchored here" in text and mem["id"] in text
    assert "payments-python" in text  # the file's skill, in the same answer (or from the skills cache)

    again = await hover(lsp, uri, POST_LINE, POST_COL)  # the same hover within the cache's lifetime: no call
    status = await request(lsp, "mnemo/status")
    assert again == text and Counter(status["lsp"]["ownerCalls"]) == after
    assert status["lsp"]["recallCache"]["hits"] >= 1

    before = await settled_calls(lsp)
    await hover(lsp, uri, BANNER_LINE, BANNER_COL)  # another symbol: one call again
    after = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
    assert after - before == Counter({"hover_context": 1}), after - before
    assert "list_memories" not in after  # anchors come from the store's query, not from paging every memory


@pytest.mark.asyncio
async def test_a_file_and_lines_anchor_shows_on_its_lines(lsp):
    """Outside any function or class, "remember selection" anchors to the file and lines; a hover there shows it."""
    uri = open_doc(lsp, lsp.py)
    mem = (await command(lsp, "mnemo.rememberSelection", {
        "uri": uri, "range": rng(0, 0, 0, 9), "text": "os is imported for urandom in the payments client"}))["memory"]
    assert mem["anchors"][0] == {"path": "src/client.py", "start_line": 0, "end_line": 0}
    text = await hover(lsp, uri, 0, 8)
    assert text is not None and "anchored here" in text and mem["id"] in text
    # inside a symbol it is not "anchored here" (recall may still find it)
    inside = await hover(lsp, uri, POST_LINE, POST_COL) or ""
    assert "anchored here" not in inside
