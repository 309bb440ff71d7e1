"""The language server end to end over stdio (pytest-lsp): hover, code lens + resolve, every code action, the
custom requests, settings. Every test has its own store (MNEMO_HOME) and owner process (hash embedder: plumbing),
its own project (a fresh git repo with a unique origin) and its own language server process."""

from __future__ import annotations

import time

import lsp_helpers
import pytest
from lsp_helpers import (
    BANNER_COL,
    BANNER_LINE,
    KEY_COL,
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
from pygls.exceptions import JsonRpcException

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)

EXPECTED_COMMANDS = {
    "mnemo.rememberSelection", "mnemo.remember", "mnemo.anchorMemory", "mnemo.promote", "mnemo.deprecate",
    "mnemo.forget", "mnemo.restore", "mnemo.openMemory", "mnemo.showInjection", "mnemo.indexDocs",
    "mnemo.checkAnchors", "mnemo.snapshotExport", "mnemo.snapshotDiff", "mnemo.snapshotMerge", "mnemo.branchDiff",
    "mnemo.branchMerge", "mnemo.branchDelete", "mnemo.runDecay", "mnemo.compact", "mnemo.resolveReview",
    "mnemo.reconnect",
}


async def remember_on_post(lsp, text="post must send an idempotency key on every retry"):
    uri = lsp.py.as_uri()
    return await command(lsp, "mnemo.rememberSelection", {"uri": uri, "range": rng(KEY_LINE, 8, KEY_LINE, 33),
                                                          "text": text, "kind": "decision"})


@pytest.mark.asyncio
async def test_initialize_capabilities_and_status(lsp):
    caps = lsp.init_result.capabilities
    assert caps.hover_provider
    assert caps.code_lens_provider.resolve_provider is True
    assert set(caps.code_action_provider.code_action_kinds) >= {"refactor.mnemo.remember", "source.mnemo.showInjection"}
    assert EXPECTED_COMMANDS <= set(caps.execute_command_provider.commands)
    assert lsp.init_result.server_info.name == "mnemo"
    status = await request(lsp, "mnemo/status")
    assert status["state"] == "ready"
    assert status["branch"] == "main" and status["project"]["root"] == str(lsp.root)
    assert status["lsp"]["heavyModules"] == [], "the language server must not import numpy/chromadb/onnxruntime"
    # `initialize` was answered before pygls loaded, and pygls' own answer agreed (tests/e2e/test_lsp_preinit.py)
    preinit = dict(status["lsp"]["preinit"])
    assert isinstance(preinit.pop("answeredAfterMs"), int)
    assert preinit.pop("ownerStart") in ("started", "owner running")  # the owner started while pygls loaded
    assert preinit.pop("earlyHover")["answered"] == 0  # no hover before pygls was loaded in this session
    assert preinit == {"answered": True, "agreed": True, "differences": [], "droppedCapabilities": []}
    assert status["lsp"]["rssMb"] < 150
    assert status["supported"]["review_list"] and status["supported"]["anchor"]
    assert status["settings"]["mnemo.hover.maxMemories"] == 3


@pytest.mark.asyncio
async def test_hover_shows_anchored_memory_and_skills(lsp):
    uri = open_doc(lsp, lsp.py)
    res = await remember_on_post(lsp)
    assert res["status"] == "created"
    anchor = res["memory"]["anchors"][0]
    assert anchor["symbol"] == "PaymentsClient.post" and anchor["path"] == "src/client.py"
    assert anchor["kind"] == "method" and len(anchor["hash"]) == 64 and anchor["start_line"] == POST_LINE
    text = await hover(lsp, uri, POST_LINE, POST_COL)
    assert text is not None
    assert "`PaymentsClient.post`" in text
    assert "idempotency key" in text
    assert "anchored here" in text and "project" in text and "`main`" in text and "decision" in text
    assert "just now" in text and res["memory"]["id"] in text
    assert "payments-python" in text  # the skill active for src/**/*.py
    # an Edit link for the memory (this client declared it runs mnemo.editMemory links)
    assert f"[Edit](command:mnemo.editMemory?%5B%7B%22id%22%3A%22{res['memory']['id']}%22%7D%5D" in text
    # whitespace: no identifier, no hover
    assert await hover(lsp, uri, 5, 0) is None


@pytest.mark.asyncio
async def test_hover_nothing_relevant_enough(home, tmp_path):
    root = make_workspace(tmp_path)
    client = await start(root, home, init_options={"hover": {"minConfidence": 0.99}})
    try:
        uri = open_doc(client, root / "src" / "client.py")
        await command(client, "mnemo.remember", {"text": "frontend buttons use the tailwind primary color"})
        assert await hover(client, uri, BANNER_LINE, BANNER_COL) is None
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_code_lens_and_resolve(lsp):
    uri = open_doc(lsp, lsp.py)
    mem = (await remember_on_post(lsp))["memory"]
    await wait_for(lambda: lsp.lens_refreshes > 0, 10, "workspace/codeLens/refresh after the write")
    params = t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))

    async def lenses():
        return [lens for lens in await lsp.text_document_code_lens_async(params)
                if lens.data["symbol"] == "PaymentsClient.post"]

    found = []
    for _ in range(100):
        found = await lenses()
        if found:
            break
        await __import__("asyncio").sleep(0.1)
    assert len(found) == 1
    lens = found[0]
    assert lens.range.start.line == POST_LINE and lens.command is None  # resolved lazily
    assert lens.data["anchored"] == [mem["id"]]
    resolved = await lsp.code_lens_resolve_async(lens)
    assert resolved.command.title == "1 memory · 1 skill"
    assert resolved.command.command == "mnemo.openMemory"
    opened = await command(lsp, resolved.command.command, resolved.command.arguments[0])
    assert [m["id"] for m in opened["memories"]] == [mem["id"]]
    assert "idempotency key" in opened["markdown"]


@pytest.mark.asyncio
async def test_every_code_action(lsp):
    uri = open_doc(lsp, lsp.py)
    loose = await command(lsp, "mnemo.remember", {"text": "post idempotency key must be reused on retry"})
    mid = loose["memory"]["id"]
    params = t.CodeActionParams(text_document=t.TextDocumentIdentifier(uri=uri),
                                range=t.Range(start=t.Position(line=KEY_LINE, character=8),
                                              end=t.Position(line=KEY_LINE, character=33)),
                                context=t.CodeActionContext(diagnostics=[]))
    actions = await lsp.text_document_code_action_async(params)
    assert all(isinstance(a, t.CodeAction) for a in actions), actions
    # at most four, the most useful first: remember the selection, anchor the relevant note here, ..., the file's
    assert len(actions) <= 4
    assert actions[0].kind == "refactor.mnemo.remember" and actions[-1].kind == "source.mnemo.showInjection"
    assert actions[1].kind == "refactor.mnemo.anchor" and actions[1].command.arguments[0]["id"] == mid
    by_kind = {}
    for kind in ("refactor.mnemo.remember", "refactor.mnemo.anchor", "refactor.mnemo.promote",
                 "refactor.mnemo.deprecate", "source.mnemo.showInjection", "refactor.mnemo.edit"):
        params.context = t.CodeActionContext(diagnostics=[], only=[kind])  # every kind is one request away
        by_kind[kind] = await lsp.text_document_code_action_async(params)
        assert by_kind[kind] and {a.kind for a in by_kind[kind]} == {kind} and len(by_kind[kind]) <= 4, kind
    params.context = t.CodeActionContext(diagnostics=[])
    assert "anchored to `PaymentsClient.post`" in by_kind["refactor.mnemo.remember"][0].title

    async def run(action):
        return await command(lsp, action.command.command, action.command.arguments[0])

    remembered = await run(by_kind["refactor.mnemo.remember"][0])
    assert remembered["memory"]["text"] == "key = os.urandom(8).hex()"
    assert remembered["memory"]["anchors"][0]["symbol"] == "PaymentsClient.post"

    anchor = next(a for a in by_kind["refactor.mnemo.anchor"] if a.command.arguments[0]["id"] == mid)
    anchored = await run(anchor)
    assert {"path": "src/client.py", "symbol": "PaymentsClient.post"}.items() <= anchored["memory"]["anchors"][0].items()

    injected = await run(by_kind["source.mnemo.showInjection"][0])
    assert injected["file"] == "src/client.py"
    assert [s["name"] for s in injected["skills"]] == ["payments-python"]
    assert injected["skills"][0]["token_cost"] > 0 and injected["skills"][0]["score"] > 0
    assert injected["memories"] and injected["totalTokens"] == injected["skillTokens"] + injected["memoryTokens"]
    assert "payments-python" in injected["markdown"] and "tokens" in injected["markdown"]

    # Edit: the action names the memory; the client adds the new text (VS Code asks for it) and a reason
    edit = next(a for a in by_kind["refactor.mnemo.edit"] if a.command.arguments[0]["id"] == mid)
    assert edit.command.command == "mnemo.editMemory" and edit.title.startswith("Mnemo: Edit")
    edited = await command(lsp, edit.command.command, {**edit.command.arguments[0],
                                                       "text": "post idempotency keys are reused on every retry",
                                                       "tags": ["payments"], "reason": "clearer"})
    assert edited["status"] == "updated" and edited["memory"]["tags"] == ["payments"]
    assert edited["memory"]["id"] == mid and edited["version"] == 2

    promote = next(a for a in by_kind["refactor.mnemo.promote"] if a.command.arguments[0]["id"] == mid)
    assert (await run(promote))["memory"]["scope"] == "global"
    deprecate = next(a for a in by_kind["refactor.mnemo.deprecate"] if a.command.arguments[0]["id"] == mid)
    assert (await run(deprecate))["memory"]["deprecated"] is True
    assert {c["reason"] for c in lsp.changes} >= {"remember", "anchor", "update", "promote", "deprecate"}
    assert (await request(lsp, "mnemo/status"))["lsp"]["heavyModules"] == []  # still none after real work

    # context.only narrows the list
    params.context = t.CodeActionContext(diagnostics=[], only=[t.CodeActionKind.Source])
    only_source = await lsp.text_document_code_action_async(params)
    assert [a.kind for a in only_source] == ["source.mnemo.showInjection"]
    # an empty selection offers no "remember selection"
    params.context = t.CodeActionContext(diagnostics=[])
    params.range = t.Range(start=t.Position(line=KEY_LINE, character=9), end=t.Position(line=KEY_LINE, character=9))
    kinds = {a.kind for a in await lsp.text_document_code_action_async(params)}
    assert "refactor.mnemo.remember" not in kinds


@pytest.mark.asyncio
async def test_custom_requests(lsp):
    uri = open_doc(lsp, lsp.py)
    lsp.protocol.notify("mnemo/didChangeActiveEditor", {"uri": uri})
    await wait_for(lambda: any(s.get("activeFile") == "src/client.py" and s.get("activeSkillCount") == 1
                               for s in lsp.states), 10, "stateChanged with the active file's skills")
    a = (await remember_on_post(lsp))["memory"]
    b = (await command(lsp, "mnemo.remember", {"text": "the user prefers small pull requests", "type": "user",
                                               "kind": "feedback"}))["memory"]
    listed = await request(lsp, "mnemo/listMemories", {"scope": "project"})
    assert {m["id"] for m in listed["memories"]} == {a["id"], b["id"]}
    assert listed["branch"] == "main" and listed["total"] == 2
    only_user = await request(lsp, "mnemo/listMemories", {"type": "user"})
    assert [m["id"] for m in only_user["memories"]] == [b["id"]] and only_user["memories"][0]["branch"] is None
    got = await request(lsp, "mnemo/getMemory", {"id": a["id"], "hydrate": True})
    assert got["memory"]["text"] == a["text"] and got["hydrated"] is not None
    recalled = await request(lsp, "mnemo/recall", {"query": "idempotency key retry", "limit": 3})
    assert recalled["cards"][0]["item_id"] == a["id"]
    # the filters (issue 15): the same fields as the CLI and MCP; an unknown value is refused, naming the accepted
    only_feedback = await request(lsp, "mnemo/recall", {"query": "pull requests idempotency", "kind": "feedback",
                                                        "minConfidence": 0})
    assert [c["item_id"] for c in only_feedback["cards"]] == [b["id"]]
    found = await request(lsp, "mnemo/listMemories", {"search": "small pull requests", "since": "1h"})
    assert [m["id"] for m in found["memories"]] == [b["id"]]
    with pytest.raises(JsonRpcException, match="unknown source"):
        await request(lsp, "mnemo/listMemories", {"source": "robot"})
    skills = await request(lsp, "mnemo/activeSkills", {"uri": uri})
    assert skills["file"] == "src/client.py"
    act = skills["activations"][0]
    assert act["name"] == "payments-python" and "glob" in act["activated_by"] and act["token_cost"] > 0
    ts_skills = await request(lsp, "mnemo/activeSkills", {"uri": (lsp.root / "src" / "retry.ts").as_uri()})
    assert [x["name"] for x in ts_skills["activations"]] != ["payments-python"] or \
        "glob" not in ts_skills["activations"][0]["activated_by"]
    listed_skills = await request(lsp, "mnemo/skills", {"check": True})
    assert any(s["name"] == "payments-python" for s in listed_skills["skills"]) and "check" in listed_skills
    preview = await request(lsp, "mnemo/injectionPreview", {"uri": uri, "position": {"line": KEY_LINE,
                                                                                    "character": KEY_COL}})
    assert preview["memories"][0]["item_id"] == a["id"] and preview["skills"][0]["name"] == "payments-python"
    stats = await request(lsp, "mnemo/stats")
    assert stats["memories"]["project"] == 2
    queue = await request(lsp, "mnemo/reviewQueue")
    assert queue["total"] == 0 and queue["items"] == []
    merged = await request(lsp, "mnemo/mergedBranches")
    assert merged["default_branch"] == "main" and merged["branches"] == []  # no other branch has memories


def edit_anchored_method(lsp, uri: str) -> None:
    """Change the key line of `post` (the anchored method) in the editor and write the file, as an editor writes it
    when it saves; the save itself is the caller's to announce."""
    lsp.text_document_did_change(t.DidChangeTextDocumentParams(
        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[t.TextDocumentContentChangePartial(
            range=t.Range(start=t.Position(line=KEY_LINE, character=14), end=t.Position(line=KEY_LINE, character=24)),
            text="secrets.token_hex(8)")]))
    lines = lsp.py.read_text().split("\n")
    lines[KEY_LINE] = lines[KEY_LINE][:14] + "secrets.token_hex(8)" + lines[KEY_LINE][24:]
    lsp.py.write_text("\n".join(lines))


@pytest.mark.asyncio
async def test_stale_anchor_review_and_resolve(lsp):
    uri = open_doc(lsp, lsp.py)
    mem = (await remember_on_post(lsp))["memory"]
    # edit the anchored method and save: the memory is flagged for review
    edit_anchored_method(lsp, uri)
    lsp.text_document_did_save(t.DidSaveTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))
    await wait_for(lambda: any(c["reason"] == "review" for c in lsp.changes), 10, "a stale-anchor review")
    queue = await request(lsp, "mnemo/reviewQueue", {"kind": "stale_anchor"})
    assert queue["total"] == 1
    item = queue["items"][0]
    assert item["item_id"] == mem["id"] and item["payload"]["reason"] == "changed"
    assert "update" in item["resolutions"]
    stale = await hover(lsp, uri, POST_LINE, POST_COL)  # the hover says so, with the date the note was written
    day = time.strftime("%Y-%m-%d", time.gmtime(mem["updated_at"]))
    assert stale is not None and f"code changed since this was written** ({day})" in stale and mem["id"] in stale
    checked = await command(lsp, "mnemo.checkAnchors", {"uri": uri})
    assert checked["path"] == "src/client.py" and checked["checked"] == 1
    done = await command(lsp, "mnemo.resolveReview", {"id": item["id"], "resolution": "update"})
    assert done["resolution"] == "update"
    assert (await request(lsp, "mnemo/reviewQueue", {"kind": "stale_anchor"}))["total"] == 0
    fresh = await hover(lsp, uri, POST_LINE, POST_COL)
    assert fresh is not None and mem["id"] in fresh and "code changed" not in fresh


@pytest.mark.asyncio
async def test_a_stale_anchor_a_read_filed_before_the_save_still_reaches_the_client(lsp):
    """The editor writes the file, then says it saved it; a hover (or a lens pass) in between reads the new file and
    files the review item itself (anchors are checked on read). The check on save then files nothing new, and the
    client must still be told its Review changed (it failed in a real VS Code under load: the Review view never
    showed the stale anchor)."""
    uri = open_doc(lsp, lsp.py)
    mem = (await remember_on_post(lsp))["memory"]
    edit_anchored_method(lsp, uri)  # written by the editor, not yet announced
    stale = await hover(lsp, uri, POST_LINE, POST_COL)  # the read files the review item
    assert stale is not None and "code changed since this was written" in stale and mem["id"] in stale
    assert (await request(lsp, "mnemo/reviewQueue", {"kind": "stale_anchor"}))["total"] == 1
    lsp.changes.clear()
    lsp.text_document_did_save(t.DidSaveTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))
    told = await wait_for(lambda: [c for c in lsp.changes if c["reason"] == "review"], 10, "Review changed")
    assert mem["id"] in told[0]["ids"]
    lsp.changes.clear()  # saved again, nothing changed: the client is not told again
    lsp.text_document_did_save(t.DidSaveTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))
    checked = await command(lsp, "mnemo.checkAnchors", {"uri": uri})  # after the save's own check
    assert checked["flagged"] == [] and [f["memory_id"] for f in checked["stale"]] == [mem["id"]]
    assert not [c for c in lsp.changes if c["reason"] == "review"]


@pytest.mark.asyncio
async def test_lifecycle_and_sharing_commands(lsp, tmp_path):
    mem = (await command(lsp, "mnemo.remember", {"text": "retries use exponential backoff with jitter"}))["memory"]
    future = "2100-01-01T00:00:00+00:00"
    with pytest.raises(JsonRpcException, match="in the future"):  # cannot be undone: refused without force
        await command(lsp, "mnemo.runDecay", {"now": future})
    dry = await command(lsp, "mnemo.runDecay", {"now": future, "dryRun": True})
    assert dry["dry_run"] and [m["id"] for m in dry["moved_to_cold"]] == [mem["id"]]
    listed = await request(lsp, "mnemo/listMemories", {"includeCold": True})
    assert [m["tier"] for m in listed["memories"]] != ["cold"]  # the dry run wrote nothing
    decayed = await command(lsp, "mnemo.runDecay", {"now": future, "force": True})
    assert decayed["dry_run"] is False
    listed = await request(lsp, "mnemo/listMemories", {"includeCold": True})
    assert [m["tier"] for m in listed["memories"]] == ["cold"]
    restored = await command(lsp, "mnemo.restore", {"id": mem["id"]})
    assert restored["status"] == "restored" and restored["memory"]["importance"] == mem["importance"]
    compacted = await command(lsp, "mnemo.compact")
    assert compacted["merged"] == [] and compacted["summarized"] == []  # one memory: nothing to merge
    assert sum(compacted["tiers"].values()) == 1

    snap = tmp_path / "snap.mnemo"
    exported = await command(lsp, "mnemo.snapshotExport", {"path": str(snap)})
    assert snap.exists() and exported["memories"] == 1 and exported["bytes"] == snap.stat().st_size
    diff = await command(lsp, "mnemo.snapshotDiff", {"path": str(snap)})
    assert diff["dry_run"] is True and diff["imported"] == 0 and diff["changes"] == 0  # its own memory, already here
    merged = await command(lsp, "mnemo.snapshotMerge", {"path": str(snap), "strategy": "local_wins"})
    assert merged["dry_run"] is False and merged["imported"] == 0 and merged["changes"] == 0
    assert any(reports for reports in lsp.progress_reports.values())

    forgotten = await command(lsp, "mnemo.forget", {"id": mem["id"], "reason": "test"})
    assert forgotten["status"] == "forgotten"
    with pytest.raises(JsonRpcException) as err:
        await request(lsp, "mnemo/getMemory", {"id": mem["id"]})
    assert err.value.code == -32803 and err.value.data["code"] == "not_found"
    assert (await command(lsp, "mnemo.reconnect"))["state"] == "ready"


@pytest.mark.asyncio
async def test_index_docs_reports_progress(lsp):
    (lsp.root / "docs").mkdir()
    for i in range(3):
        (lsp.root / "docs" / f"guide{i}.md").write_text(f"# Guide {i}\n\nRetry POST requests with care.\n")
    res = await command(lsp, "mnemo.indexDocs", {"uri": lsp.root.as_uri()})
    assert res["added"] >= 4 and not res["problems"]  # README + 3 guides (+ the skill file)
    kinds = [[type(v).__name__ for v in values] for values in lsp.progress_reports.values()]
    assert any(k[0] == "WorkDoneProgressBegin" and k[-1] == "WorkDoneProgressEnd" and "WorkDoneProgressReport" in k
               for k in kinds)


@pytest.mark.asyncio
async def test_command_errors_are_clear(lsp):
    with pytest.raises(JsonRpcException) as err:
        await command(lsp, "mnemo.promote", {"id": "mem-does-not-exist"})
    assert err.value.code == -32803 and err.value.data["code"] == "not_found"
    assert "—" in err.value.message  # what happened — what to do
    with pytest.raises(JsonRpcException) as err:
        await command(lsp, "mnemo.promote", {})
    assert err.value.code == -32602 and "`id` is required" in err.value.message
    with pytest.raises(JsonRpcException) as err:
        await command(lsp, "mnemo.nope", {})
    assert err.value.code == -32602
    with pytest.raises(JsonRpcException) as err:
        await command(lsp, "mnemo.remember", {"text": "x" * 30000})
    assert err.value.data["code"] == "invalid_input"


@pytest.mark.asyncio
async def test_settings_from_configuration_and_bad_input(home, tmp_path):
    root = make_workspace(tmp_path)
    client = await start(root, home, init_options={"hover": {"maxMemories": "lots"}, "bogus": 1},
                         configuration={"mnemo": {"codeLens": {"enabled": False}, "skills": {"maxActive": 2}}})
    try:
        await wait_for(lambda: client.messages, 10, "a settings warning")
        msg = client.messages[0]
        assert msg.type == t.MessageType.Warning
        assert "mnemo.hover.maxMemories" in msg.message and "mnemo.bogus" in msg.message
        status = await request(client, "mnemo/status")
        assert status["settings"]["mnemo.hover.maxMemories"] == 3  # the default, after bad input
        assert status["settings"]["mnemo.codeLens.enabled"] is False  # from workspace/configuration
        assert status["settings"]["mnemo.skills.maxActive"] == 2
        uri = open_doc(client, root / "src" / "client.py")
        lenses = await client.text_document_code_lens_async(t.CodeLensParams(
            text_document=t.TextDocumentIdentifier(uri=uri)))
        assert not lenses
    finally:
        await stop(client)


@pytest.mark.asyncio
async def test_branch_memory_commands(lsp):
    from lsp_helpers import git

    git(lsp.root, "checkout", "-q", "-b", "feature/jitter")
    mem = (await command(lsp, "mnemo.remember", {"text": "retries add random jitter to the backoff"}))["memory"]
    assert mem["branch"] == "feature/jitter"
    git(lsp.root, "checkout", "-q", "main")
    diff = await request(lsp, "mnemo/branchDiff", {"branch": "feature/jitter"})
    assert diff["source"] == "feature/jitter" and diff["target"] == "main" and diff["imported"] == 1
    assert diff["dry_run"] is True
    assert (await command(lsp, "mnemo.branchDiff", {"branch": "feature/jitter"}))["imported"] == 1
    assert (await request(lsp, "mnemo/listMemories", {}))["total"] == 0  # main does not see the branch yet
    merged = await command(lsp, "mnemo.branchMerge", {"branch": "feature/jitter"})
    assert merged["imported"] == 1 and merged["dry_run"] is False
    on_main = await request(lsp, "mnemo/listMemories", {})
    assert [m["text"] for m in on_main["memories"]] == [mem["text"]] and on_main["memories"][0]["branch"] == "main"
    deleted = await command(lsp, "mnemo.branchDelete", {"branch": "feature/jitter"})
    assert deleted["branch"] == "feature/jitter" and deleted["deleted"] == 1 and deleted["unmerged"] == 0
    assert {"branch"} <= {c["reason"] for c in lsp.changes}
