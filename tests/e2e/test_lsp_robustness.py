"""The language server under stress, over stdio: live branch switching, malformed input, a 10 MB document,
cancellation, and the degraded mode when the store is unavailable (and its recovery)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future

import lsp_helpers
import pytest
from lsp_helpers import (
    KEY_COL,
    KEY_LINE,
    POST_COL,
    POST_LINE,
    PY_SOURCE,
    command,
    git,
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
from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)


@pytest.mark.asyncio
async def test_branch_switch_applies_live(lsp):
    root = lsp.root
    uri = open_doc(lsp, root / "src" / "client.py")
    git(root, "checkout", "-q", "-b", "feature/retry")
    await wait_for(lambda: lsp.states[-1]["branch"] == "feature/retry", 10, "stateChanged to feature/retry")
    mem = (await command(lsp, "mnemo.rememberSelection", {
        "uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33), "text": "on this branch post retries are capped at 3"}))
    assert mem["memory"]["branch"] == "feature/retry"
    assert "capped at 3" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")

    git(root, "checkout", "-q", "main")
    # no restart and no wait: every request reads .git/HEAD
    assert await hover(lsp, uri, POST_LINE, POST_COL) is None
    listed = await request(lsp, "mnemo/listMemories", {})
    assert listed["branch"] == "main" and listed["total"] == 0
    await wait_for(lambda: lsp.states[-1]["branch"] == "main", 10, "stateChanged back to main")
    assert any(c["reason"] == "branch" for c in lsp.changes)

    git(root, "checkout", "-q", "feature/retry")
    assert "capped at 3" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")


@pytest.mark.asyncio
async def test_malformed_requests(lsp):
    # a body that is not JSON: the server logs it and keeps serving
    body = b"{this is not json"
    lsp.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    # params of the wrong shape
    with pytest.raises(JsonRpcException) as err:
        await request(lsp, "mnemo/listMemories", "not an object")
    assert err.value.code == -32602
    with pytest.raises(JsonRpcException) as err:
        await request(lsp, "mnemo/listMemories", {"limit": "many"})
    assert err.value.code == -32602 and "limit" in err.value.message
    with pytest.raises(JsonRpcException) as err:
        await lsp.workspace_execute_command_async(t.ExecuteCommandParams(
            command="mnemo.promote", arguments=["mem-1", "global"]))
    assert err.value.code == -32602
    with pytest.raises(JsonRpcException) as err:
        await command(lsp, "mnemo.rememberSelection", {"uri": (lsp.root / "src" / "client.py").as_uri(),
                                                       "range": {"start": 3}})
    assert err.value.data["code"] == "invalid_input"
    # an LSP request whose params do not fit the LSP types gets an InvalidParams answer (not silence)
    answer: Future = Future()
    lsp.protocol._request_futures["bad-hover"] = answer  # the client never sent it: register the wait ourselves
    raw = b'{"jsonrpc": "2.0", "id": "bad-hover", "method": "textDocument/hover", "params": {"textDocument": 5}}'
    lsp.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(raw), raw))
    with pytest.raises(JsonRpcException) as err:
        await asyncio.wait_for(asyncio.wrap_future(answer), 10)
    assert err.value.code == -32602
    with pytest.raises(JsonRpcException) as err:
        await request(lsp, "mnemo/noSuchRequest", {})
    assert err.value.code == -32601
    # a hover on a document the client never opened and that does not exist
    assert await hover(lsp, (lsp.root / "nope.py").as_uri(), 0, 0) is None
    # still healthy
    status = await request(lsp, "mnemo/status")
    assert status["state"] == "ready"


def _big_python(target_bytes: int) -> str:
    parts, size, i = [], 0, 0
    while size < target_bytes:
        chunk = PY_SOURCE.replace("PaymentsClient", f"PaymentsClient{i}").replace("render_banner", f"banner_{i}")
        parts.append(chunk)
        size += len(chunk)
        i += 1
    return "".join(parts)


@pytest.mark.asyncio
async def test_ten_megabyte_document(lsp):
    root = lsp.root
    small_uri = open_doc(lsp, root / "src" / "client.py")
    await command(lsp, "mnemo.remember", {"text": "post sends an idempotency key with every retry"})
    big = _big_python(10 * 1024 * 1024)
    big_path = root / "src" / "big.py"
    big_path.write_text(big)
    lines = big.count("\n")
    t0 = time.perf_counter()
    big_uri = open_doc(lsp, big_path, text=big)
    # the server stays responsive while it takes the 10 MB in
    small = await asyncio.wait_for(hover(lsp, small_uri, POST_LINE, POST_COL), 20)
    assert small and "idempotency" in small
    mid = (lines // 2) // PY_SOURCE.count("\n") * PY_SOURCE.count("\n") + POST_LINE
    big_hover = await asyncio.wait_for(hover(lsp, big_uri, mid, POST_COL), 30)
    assert big_hover is not None and "PaymentsClient" in big_hover and ".post`" in big_hover
    took = time.perf_counter() - t0
    lenses = await lsp.text_document_code_lens_async(t.CodeLensParams(
        text_document=t.TextDocumentIdentifier(uri=big_uri)))
    assert not lenses  # larger than mnemo.maxParseBytes: no lenses
    lsp.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=big_uri, version=2),
        content_changes=[t.TextDocumentContentChangePartial(
            range=t.Range(start=t.Position(line=0, character=0), end=t.Position(line=0, character=0)),
            text="# edited\n")]))
    t1 = time.perf_counter()
    small_again = await asyncio.wait_for(hover(lsp, small_uri, POST_LINE, POST_COL), 20)
    assert small_again and time.perf_counter() - t1 < 10
    assert took < 30
    lsp.text_document_did_close(t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=big_uri)))
    assert (await request(lsp, "mnemo/status"))["lsp"]["rssMb"] < 400


@pytest.mark.asyncio
async def test_cancellation(home, tmp_path):
    root = make_workspace(tmp_path)
    client = await start(root, home, env={"MNEMO_LSP_TEST_DELAY_MS": "1500"})
    try:
        uri = open_doc(client, root / "src" / "client.py")
        # a command cancelled before it reaches the store changes nothing
        fut = asyncio.ensure_future(client.protocol.send_request_async(t.WORKSPACE_EXECUTE_COMMAND, t.ExecuteCommandParams(
            command="mnemo.remember", arguments=[{"text": "this write is cancelled"}]), msg_id="cancel-cmd"))
        await asyncio.sleep(0.3)
        client.protocol.notify(t.CANCEL_REQUEST, t.CancelParams(id="cancel-cmd"))
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(fut, 10)
        # a cancelled hover answers RequestCancelled
        fut = asyncio.ensure_future(client.protocol.send_request_async(t.TEXT_DOCUMENT_HOVER, t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=KEY_LINE, character=KEY_COL)),
            msg_id="cancel-hover"))
        await asyncio.sleep(0.3)
        client.protocol.notify(t.CANCEL_REQUEST, t.CancelParams(id="cancel-hover"))
        with pytest.raises(JsonRpcRequestCancelled) as err:
            await asyncio.wait_for(fut, 10)
        assert err.value.code == -32800
        # and the same request uncancelled completes; the cancelled write never landed
        await asyncio.sleep(1.5)
        listed = await request(client, "mnemo/listMemories", {})
        assert listed["total"] == 0
        assert (await command(client, "mnemo.remember", {"text": "this write lands"}))["status"] == "created"
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_degraded_mode_and_recovery(tmp_path):
    root = make_workspace(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the store's parent directory should be")
    home = blocker / "home"
    client = await start(root, home, init_options={"owner": {"retrySeconds": 1}}, wait_ready=False)
    try:
        await wait_for(lambda: any(s.get("state") == "unavailable" for s in client.states), 20, "unavailable")
        state = next(s for s in client.states if s.get("state") == "unavailable")
        assert str(home) in state["reason"] and "mnemo.home" in state["hint"]
        warnings = [m for m in client.messages if m.type == t.MessageType.Warning]
        assert len(warnings) == 1 and warnings[0].message.startswith("Mnemo unavailable:")
        uri = open_doc(client, root / "src" / "client.py")
        first = await hover(client, uri, POST_LINE, POST_COL)
        assert first is not None and "Mnemo unavailable" in first
        assert await hover(client, uri, POST_LINE, POST_COL) is None  # said once per document and outage
        lenses = await client.text_document_code_lens_async(t.CodeLensParams(
            text_document=t.TextDocumentIdentifier(uri=uri)))
        assert not lenses
        with pytest.raises(JsonRpcException) as err:
            await command(client, "mnemo.remember", {"text": "cannot land"})
        assert err.value.code == -32803 and err.value.data["code"] == "unavailable"
        status = await request(client, "mnemo/status")
        assert status["state"] == "unavailable" and status["reason"]
        # still one warning after several retries
        await asyncio.sleep(2.5)
        assert len([m for m in client.messages if m.type == t.MessageType.Warning]) == 1

        # the user fixes it: the server recovers by itself
        blocker.unlink()
        blocker.mkdir()
        await wait_for(lambda: client.states[-1].get("state") == "ready", 60, "recovery")
        assert any("available again" in m.message for m in client.messages)
        res = await command(client, "mnemo.remember", {"text": "post sends an idempotency key"})
        assert res["status"] == "created"
        assert "idempotency" in (await hover(client, uri, POST_LINE, POST_COL) or "")
    finally:
        await stop(client)
        stop_owner(home)


@pytest.mark.asyncio
async def test_first_hover_waits_for_the_owner_it_starts(home, tmp_path):
    """A hover sent right after `initialized`, while the language server is still starting the owner, is answered
    with the memories once the link is up (it used to be answered empty)."""
    root = make_workspace(tmp_path)
    client = await start(root, home)
    try:
        res = await command(client, "mnemo.remember", {"text": "post sends an idempotency key"})
        assert res["status"] == "created"
    finally:
        await stop(client)
    stop_owner(home)
    client = await start(root, home, wait_ready=False)  # no owner: the server starts one
    try:
        uri = open_doc(client, root / "src" / "client.py")
        assert not any(s.get("state") == "ready" for s in client.states)
        assert "idempotency" in (await hover(client, uri, POST_LINE, POST_COL) or "")
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_owner_killed_mid_session_is_restarted(lsp):
    import os
    import signal

    uri = open_doc(lsp, lsp.root / "src" / "client.py")
    await command(lsp, "mnemo.remember", {"text": "post sends an idempotency key with every retry"})
    assert "idempotency" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")
    pid = (await request(lsp, "mnemo/status"))["owner"]["pid"]
    os.kill(pid, signal.SIGKILL)
    # the next calls notice, the server starts a new owner by itself and recovers
    for _ in range(3):
        try:
            await request(lsp, "mnemo/listMemories", {})
        except JsonRpcException:
            break
    await wait_for(lambda: lsp.states[-1].get("state") == "ready" and
                   any(s.get("state") == "unavailable" for s in lsp.states), 60, "a restarted owner")
    status = await request(lsp, "mnemo/status")
    assert status["state"] == "ready" and status["owner"]["pid"] != pid
    assert "idempotency" in (await hover(lsp, uri, POST_LINE, POST_COL) or "")


@pytest.mark.asyncio
async def test_commands_sent_while_the_owner_starts_are_answered(home, tmp_path):
    """A command and a recall sent right after `initialized`, while the language server is still starting the owner,
    wait for the link and are answered (they were refused with "Mnemo unavailable: connecting to the store": the CI
    soak met it when its first writer beat the first connection)."""
    root = make_workspace(tmp_path)
    client = await start(root, home, wait_ready=False)  # no owner: the server starts one
    try:
        assert not any(s.get("state") == "ready" for s in client.states)
        res = await command(client, "mnemo.remember", {"text": "retries back off exponentially with jitter"})
        assert res["status"] == "created", res
        found = await request(client, "mnemo/recall", {"query": "retries back off", "limit": 3, "includeDocs": False})
        assert any(c["item_id"] == res["memory"]["id"] for c in found["cards"]), found
    finally:
        await stop(client)
        stop_owner(home)
