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
    make_workspace,
    open_doc,
    request,
    rng,
    start,
    stop,
    stop_owner,
    wait_for,
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


@pytest.mark.asyncio
async def test_a_new_memory_shows_at_the_next_hover(lsp):
    """The caches (the language server's hover answers, the owner's query embeddings) never hide a write made
    through the server: the next hover of the same symbol asks the owner again and shows the new memory."""
    uri = open_doc(lsp, lsp.py)
    before_text = await hover(lsp, uri, BANNER_LINE, BANNER_COL) or ""
    assert await hover(lsp, uri, BANNER_LINE, BANNER_COL) == (before_text or None)  # cached: same answer
    mem = (await command(lsp, "mnemo.rememberSelection", {
        "uri": uri, "range": rng(BANNER_LINE + 1, 4, BANNER_LINE + 1, 24), "kind": "decision",
        "text": "render_banner titles are upper case by the style guide"}))["memory"]
    assert mem["id"] not in before_text
    before = await settled_calls(lsp)
    text = await hover(lsp, uri, BANNER_LINE, BANNER_COL)
    after = Counter((await request(lsp, "mnemo/status"))["lsp"]["ownerCalls"])
    assert after - before == Counter({"hover_context": 1}), after - before
    assert text is not None and mem["id"] in text and "anchored here" in text


@pytest.mark.asyncio
async def test_the_language_server_starts_the_owner_while_pygls_loads(home, tmp_path):
    """No owner running: the pre-handshake starts it (for the home of `initializationOptions`) as soon as
    `initialize` is answered, and the server's first connection uses that process (one owner start, no second
    spawn); a command sent at once is answered by it. With `owner.autostart` off nothing is started."""
    from mnemo.daemon.client import owner_lock_free

    root = make_workspace(tmp_path)
    assert owner_lock_free(home)
    client = await start(root, home, wait_ready=False)
    try:
        uri = open_doc(client, root / "src" / "client.py")
        mem = (await command(client, "mnemo.rememberSelection", {  # waits for the first connection, then answers
            "uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33), "text": "post sends an idempotency key"}))["memory"]
        text = await hover(client, uri, POST_LINE, POST_COL)
        assert text is not None and mem["id"] in text and "payments-python" in text
        status = await request(client, "mnemo/status")
        assert status["lsp"]["preinit"]["ownerStart"] == "started"
        assert status["state"] == "ready"
        log = (home / "logs" / "daemon.log").read_text()
        assert log.count("owner started:") == 1, log
    finally:
        await stop(client)

    off_home = tmp_path / "off-home"
    client = await start(root, off_home, wait_ready=False, init_options={"owner": {"autostart": False}})
    try:
        await wait_for(lambda: any(s.get("state") == "unavailable" for s in client.states), 30, "no unavailable")
        status = await request(client, "mnemo/status")
        assert status["lsp"]["preinit"]["ownerStart"] == "autostart off"
        assert status["state"] == "unavailable" and owner_lock_free(off_home)
    finally:
        await stop(client)
        stop_owner(off_home)
