"""`hover_context`: what an editor shows at a position in one owner call (recall cards, the memories anchored to
the symbol with their stale state, the file's anchors, the file's skills), and `memory_cards` (the one card of
memories opened by id). Real store and engine; the hash embedder is plumbing here (relevance is not asserted)."""

from __future__ import annotations

import dataclasses

import pytest

from mnemo.core.errors import InvalidInput
from mnemo.service import LocalService

PATH = "src/pay.py"


def _anchor(symbol: str | None, path: str = PATH, start: int = 3, end: int = 9, h: str = "h1") -> dict:
    a = {"path": path, "start_line": start, "end_line": end, "hash": h}
    if symbol:
        a.update(symbol=symbol, kind="method")
    return a


def _remember(svc, ctx, text, anchors=None, **kw) -> dict:
    r = svc.remember(ctx.to_dict(), text, anchors=anchors or [], source="user", **kw)
    assert r["status"] == "created", r
    return r["memory"]


@pytest.fixture
def svc(engine):
    return LocalService(engine)


def test_anchored_memories_of_the_symbol_as_recall_cards_with_the_files_anchors(svc, ctx):
    ctx = dataclasses.replace(ctx, root=None)  # src/pay.py is not on disk: no check against a working tree here
    a = _remember(svc, ctx, "post must send an idempotency key", [_anchor("Client.post")])
    b = _remember(svc, ctx, "send retries use exponential backoff", [_anchor("Client._send", start=11, end=14)])
    c = _remember(svc, ctx, "the banner is upper case", [_anchor(None, start=20, end=22)])
    _remember(svc, ctx, "other files have their own anchors", [_anchor("Client.post", path="src/other.py")])
    _remember(svc, ctx, "a memory without anchors about idempotency keys")
    res = svc.hover_context(ctx.to_dict(), PATH, 5, "Client.post", "idempotency key", limit=5, include_docs=False,
                            skills=False)
    assert [x["item_id"] for x in res["anchored"]] == [a["id"]]
    card = res["anchored"][0]
    assert card["anchor"]["symbol"] == "Client.post" and card["stale"] is False
    assert card["confidence"] is None and card["score"] is None and card["confidence_state"] is None
    assert res["file_anchors"] == {"Client.post": [a["id"]], "Client._send": [b["id"]], "": [c["id"]]}
    assert res["path"] == PATH and res["skills"] is None
    # one card: an anchored memory's card has the keys of a recall card (plus where it is anchored)
    recalled = svc.recall(ctx.to_dict(), "idempotency key", include_docs=False)["cards"]
    assert recalled and set(card) - {"anchor"} == set(recalled[0])  # recall cards carry `stale` too
    assert res["cards"] and all(set(x) == set(recalled[0]) for x in res["cards"])
    assert card["compressed_summary"] == "post must send an idempotency key" and card["item_id"] == a["id"]
    # outside any symbol: a file + lines anchor covering the line
    outside = svc.hover_context(ctx.to_dict(), PATH, 21, None, None, skills=False)
    assert [x["item_id"] for x in outside["anchored"]] == [c["id"]] and outside["cards"] == []
    assert svc.hover_context(ctx.to_dict(), PATH, 30, None, None, skills=False)["anchored"] == []


def test_visibility_is_recalls(svc, engine, ctx):
    """Deprecated, cold, another branch's or another project's memories are not anchored here."""
    keep = _remember(svc, ctx, "kept: the visible one", [_anchor("f")])
    gone = _remember(svc, ctx, "deprecated: no longer true", [_anchor("f")])
    svc.deprecate(ctx.to_dict(), gone["id"], "old")
    cold = _remember(svc, ctx, "cold: decayed long ago", [_anchor("f")])
    with engine.store.write() as conn:
        engine.store.update_memory(conn, cold["id"], tier="cold")
    feature = dataclasses.replace(ctx, branch="feature/x")
    on_branch = _remember(svc, feature, "branch only: a feature branch note", [_anchor("f")])
    other = dataclasses.replace(ctx, project_id="git-other", project_name="other")
    _remember(svc, other, "another project: same path and symbol", [_anchor("f")])

    def ids(c) -> list[str]:
        return [x["item_id"] for x in svc.hover_context(c.to_dict(), PATH, 4, "f", None, skills=False)["anchored"]]

    assert ids(ctx) == [keep["id"]]
    assert sorted(ids(feature)) == sorted([keep["id"], on_branch["id"]])  # a branch sees the default branch's too


def test_stale_state_follows_the_saved_code(svc, ctx):
    ctx = dataclasses.replace(ctx, root=None)  # the editor's save check alone (the working tree: test_context_fresh)
    m = _remember(svc, ctx, "post must send an idempotency key", [_anchor("Client.post", h="h1")])
    c = ctx.to_dict()
    svc.check_anchors(c, PATH, [{"name": "Client.post", "hash": "h2", "start_line": 3, "end_line": 9}])
    assert svc.hover_context(c, PATH, 4, "Client.post", None, skills=False)["anchored"][0]["stale"] is True
    svc.check_anchors(c, PATH, [{"name": "Client.post", "hash": "h1", "start_line": 3, "end_line": 9}])
    card = svc.hover_context(c, PATH, 4, "Client.post", None, skills=False)["anchored"][0]
    assert card["item_id"] == m["id"] and card["stale"] is False


def test_paths_match_exactly(svc, ctx, git_repo):
    """LIKE narrows the store query; the path itself must match exactly (case, `_` and `%` are not wildcards)."""
    exact = _remember(svc, ctx, "invoices are rounded to cents", [_anchor("f", path="src/a_b.py")])
    _remember(svc, ctx, "webhooks retry three times", [_anchor("f", path="src/aXb.py")])
    _remember(svc, ctx, "upper case files are generated", [_anchor("f", path="src/A_B.PY")])
    pct = _remember(svc, ctx, "percent signs in names are legal", [_anchor("f", path="src/100%.py")])
    c = ctx.to_dict()
    assert [x["item_id"] for x in svc.hover_context(c, "src/a_b.py", 4, "f", skills=False)["anchored"]] == [exact["id"]]
    assert [x["item_id"] for x in svc.hover_context(c, "src/100%.py", 4, "f", skills=False)["anchored"]] == \
        [pct["id"]]
    assert svc.hover_context(c, "src/1000.py", 4, "f", skills=False)["file_anchors"] == {}
    # an absolute path inside the project is the same file; a path outside it has no anchors (and no error)
    inside = svc.hover_context(c, str(git_repo / "src" / "a_b.py"), 4, "f", skills=False)
    assert [x["item_id"] for x in inside["anchored"]] == [exact["id"]] and inside["path"] == "src/a_b.py"
    for outside in ("/etc/passwd", "../src/a_b.py"):
        assert svc.hover_context(c, outside, 4, "f", skills=False)["anchored"] == []


def test_the_store_query_reads_only_anchored_memories(engine, ctx):
    """The partial index keeps a hover's anchor lookup to the anchored memories of the project."""
    plan = " ".join(str(r[3]) for r in engine.store.conn().execute(
        "EXPLAIN QUERY PLAN SELECT * FROM memories WHERE project_id=? AND scope='project' AND anchors != '[]'"
        " AND anchors LIKE ? ESCAPE '\\' AND (branch IS NULL OR branch IN (?))", ("p", "%x%", "main")))
    assert "memories_anchored" in plan, plan


def test_skills_come_with_the_hover_unless_not_asked_for(svc, ctx, git_repo):
    skills_dir = git_repo / ".mnemo" / "skills"
    skills_dir.mkdir(parents=True)
    (skills_dir / "payments.md").write_text("---\nname: payments-python\ndescription: Payments client code.\n"
                                            "globs: [\"src/**/*.py\"]\n---\nSend an idempotency key.\n")
    res = svc.hover_context(ctx.to_dict(), PATH, 4, "f", None, max_skills=3)
    names = [a["name"] for a in res["skills"]["activations"]]
    assert "payments-python" in names
    assert names == [a["name"] for a in svc.activate_skills(ctx.to_dict(), PATH, max_skills=3)["activations"]]
    assert svc.hover_context(ctx.to_dict(), PATH, 4, "f", None, skills=False)["skills"] is None


def test_bad_arguments_are_refused_clearly(svc, ctx):
    c = ctx.to_dict()
    for kw in ({"line": -1}, {"line": "3"}, {"line": True}, {"symbol": 3}, {"path": ["a"]}, {"query": 1}):
        with pytest.raises(InvalidInput, match="hover_context"):
            svc.hover_context(c, **{"path": PATH, **kw})
    with pytest.raises(InvalidInput, match="query is empty"):
        svc.hover_context(c, PATH, 1, None, "  ")
    with pytest.raises(InvalidInput, match="project context"):
        svc.hover_context({}, PATH)


def test_memory_cards_for_memories_opened_by_id(svc, ctx):
    a = _remember(svc, ctx, "post must send an idempotency key " + "and more words " * 30, [_anchor("Client.post")])
    other = dataclasses.replace(ctx, project_id="git-other", project_name="other")
    hidden = _remember(svc, other, "another project's memory")
    res = svc.memory_cards(ctx.to_dict(), [a["id"], hidden["id"], "mem-nope", a["id"]])
    assert [x["item_id"] for x in res["cards"]] == [a["id"]]
    assert [x["id"] for x in res["memories"]] == [a["id"]] and res["memories"][0]["text"] == a["text"]
    assert res["missing"] == [hidden["id"], "mem-nope"]
    card = res["cards"][0]
    assert card["confidence"] is None and card["anchors"][0]["symbol"] == "Client.post"
    assert len(card["compressed_summary"]) < len(a["text"])  # the card's summary; the record keeps the text
    with pytest.raises(InvalidInput, match="ids must be a list"):
        svc.memory_cards(ctx.to_dict(), a["id"])
    with pytest.raises(InvalidInput, match="the limit is"):
        svc.memory_cards(ctx.to_dict(), [f"mem-{i}" for i in range(201)])


def test_an_opened_memory_shows_its_card_then_its_whole_text(svc, ctx):
    """`mnemo.openMemory`: the core's card (as a hover shows it), then the whole text when the card's summary cut
    it; a short memory is not repeated."""
    from mnemo.lsp import convert

    tail = "the last words only the whole text has"
    long = _remember(svc, ctx, "payments retries reuse the idempotency key. " * 8 + tail, [_anchor("Client.post")])
    short = _remember(svc, ctx, "the banner is upper case")
    res = svc.memory_cards(ctx.to_dict(), [long["id"], short["id"]])
    md = convert.memories_markdown(res["cards"], res["memories"], "Client.post")
    assert md.startswith("### Mnemo · `Client.post`")
    assert tail not in res["cards"][0]["compressed_summary"]  # the card's summary is cut ...
    assert md.count(tail) == 1  # ... the whole text follows it
    assert md.count("the banner is upper case") == 1
    assert long["id"] in md and short["id"] in md
    assert convert.memories_markdown([], [], None) == "### Mnemo\n\n---\n\n_no memories_"
