"""The steady hover's caches and its loop-side owner call (issue 22, fourth pass), over stdio with pytest-lsp: the
real `mnemo lsp` and its real owner (hash embedder: plumbing).

- an edit of a document drops the hover answers kept for its file: the code changed on disk and the editor sent
  the new text (`didChange`, as an editor does when it reloads a file), and the next hover checks the anchored
  code again (before, the answer kept for 15 s still said the code was unchanged);
- documents opened before the owner link was up are analyzed once it is (their code lens relevance: one recall
  per symbol, which also leaves each symbol's query embedded in the owner for its first hover);
- a hover whose loop-side connection to the owner died (the owner was killed) fails fast and says "Mnemo
  unavailable" (an interactive call never starts an owner: the link's retry loop does), and the next hovers show
  content again once that loop has started a new owner.
"""

from __future__ import annotations

import asyncio
import os
import signal
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
    make_workspace,
    open_doc,
    request,
    rng,
    start,
    stop,
    wait_for,
)
from lsprotocol import types as t

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)
NOTE = "post must send an idempotency key on every retry"


def change_document(client, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))


async def settled_calls(client) -> Counter:
    """The owner calls made so far, once they have not changed for half a second."""
    last = None
    for _ in range(100):
        calls = Counter((await request(client, "mnemo/status"))["lsp"]["ownerCalls"])
        if calls == last:
            return calls
        last = calls
        await asyncio.sleep(0.5)
    raise AssertionError(f"owner calls never settled: {last}")


async def kept_answer(client, uri: str) -> int:
    """Hover `post` until the answer comes from the language server's cache (the background work after a write,
    the lens pass, settles first); the cache hits so far."""
    for _ in range(50):
        hits = (await request(client, "mnemo/status"))["lsp"]["recallCache"]["hits"]
        await hover(client, uri, POST_LINE, POST_COL)
        now = (await request(client, "mnemo/status"))["lsp"]["recallCache"]["hits"]
        if now > hits:
            return now
        await asyncio.sleep(0.1)
    raise AssertionError("the hover answer was never kept")


@pytest.mark.asyncio
async def test_an_edit_drops_the_hover_answers_of_its_file(lsp):
    uri = open_doc(lsp, lsp.py)
    mem = (await command(lsp, "mnemo.rememberSelection", {"uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33),
                                                          "text": NOTE, "kind": "decision"}))["memory"]
    first = await hover(lsp, uri, POST_LINE, POST_COL)
    assert first and mem["id"] in first and "code changed" not in first
    hits = await kept_answer(lsp, uri)
    # the anchored code changes on disk (an agent, a pull) and the editor reloads the file: no save, no write
    changed = lsp.py.read_text().replace("os.urandom(8).hex()", "os.urandom(16).hex()")
    lsp.py.write_text(changed)
    change_document(lsp, uri, 2, changed)
    text = await hover(lsp, uri, POST_LINE, POST_COL)
    assert text and mem["id"] in text and "code changed since this was written" in text
    status = await request(lsp, "mnemo/status")
    assert status["lsp"]["recallCache"]["hits"] == hits  # asked again, not answered from the cache


@pytest.mark.asyncio
async def test_an_edit_of_another_file_keeps_the_answer(lsp):
    uri = open_doc(lsp, lsp.py)
    other = open_doc(lsp, lsp.root / "src" / "retry.ts", language_id="typescript")
    await command(lsp, "mnemo.remember", {"text": NOTE})
    first = await hover(lsp, uri, POST_LINE, POST_COL)
    assert first and "idempotency" in first
    before = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
    change_document(lsp, other, 2, (lsp.root / "src" / "retry.ts").read_text() + "\n// more\n")
    assert await hover(lsp, uri, POST_LINE, POST_COL) == first
    after = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
    assert after["hover_context"] == before["hover_context"]


@pytest.mark.asyncio
async def test_documents_opened_before_the_owner_link_are_analyzed_when_it_comes_up(home, tmp_path):
    root = make_workspace(tmp_path)
    client = await start(root, home, wait_ready=False)  # the server starts the owner itself: it takes a while
    try:
        open_doc(client, root / "src" / "client.py")  # at once, as an editor does: before the link is up
        await wait_for(lambda: any(s.get("state") == "ready" for s in client.states), 60, "state ready")

        async def recalls() -> int:
            return (await request(client, "mnemo/status"))["lsp"]["ownerCalls"].get("recall", 0)

        # the lens relevance pass (one recall per function or class: PaymentsClient, post, _send, render_banner)
        # runs without a code lens request or an edit asking for it
        for _ in range(100):
            if await recalls() >= 4:
                break
            await asyncio.sleep(0.1)
        assert await recalls() >= 4
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_a_hover_after_the_owner_died_says_unavailable_then_recovers(lsp):
    uri = open_doc(lsp, lsp.py)
    await command(lsp, "mnemo.remember", {"text": NOTE})
    assert "idempotency" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")  # the loop's connection is made
    await settled_calls(lsp)  # the background work after the write (the lens pass) is done: only the hover asks
    pid = (await request(lsp, "mnemo/status"))["owner"]["pid"]
    os.kill(pid, signal.SIGKILL)
    # not kept: asked on the dead connection, then on a new one, which fails at once (an interactive call never
    # starts an owner: the retry loop does)
    text = await hover(lsp, uri, BANNER_LINE, BANNER_COL)
    assert text is not None and text.startswith("**Mnemo unavailable**"), text
    await wait_for(lambda: lsp.states[-1].get("state") == "ready" and
                   any(s.get("state") == "unavailable" for s in lsp.states), 60, "a restarted owner")
    status = await request(lsp, "mnemo/status")
    assert status["state"] == "ready" and status["owner"]["pid"] != pid
    assert "idempotency" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")
