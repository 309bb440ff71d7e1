"""The team level inside the chain branch > project > team > global (issue 13, item 7): a note that restates a team
note confirms it instead of becoming a second copy, a note that contradicts one overrides it inside the project, and
recall never shows a team note next to the local note that says the same. Real Chroma server, real model."""

from __future__ import annotations

import time
import uuid

import pytest
from team_server import chroma_server  # noqa: F401 - fixture

from mnemo.core import review
from mnemo.core.engine import Engine
from mnemo.core.identity import detect_context
from mnemo.core.memory.manage import list_memories, promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.team.address import save_settings

pytestmark = pytest.mark.team

TEAM_NOTE = "The payments API requires idempotency keys on every POST"
RESTATED = "payments API requires an idempotency key on every POST request"


@pytest.fixture
def people(tmp_path, git_repo, real_embedder, chroma_server, monkeypatch):  # noqa: F811
    """Two stores on one team namespace (a fresh one per test), the same checkout; in-process engines."""
    for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    ns = "chain-" + uuid.uuid4().hex[:8]
    engines = []

    def make(name: str):
        home = tmp_path / f"store-{name}"
        save_settings(home, chroma_server.url, None, ns)
        e = Engine(home, embedder=real_embedder, start_indexer=False)
        engines.append(e)
        ctx = detect_context(git_repo)
        return e, type(ctx)(**{**ctx.to_dict(), "user": name})

    yield make
    for e in engines:
        e.close()


def share(engine, ctx, text: str) -> str:
    m = remember(engine, ctx, text)["memory"]
    res = promote(engine, ctx, m["id"], to="team")
    assert res["status"] == "promoted", res
    return res["team"]["record_id"]


def recall_ids(engine, ctx, query: str) -> list[str]:
    return [c["item_id"] for c in recall(engine, ctx, query, limit=10, include_docs=False)["cards"]]


def test_a_project_note_restating_a_team_note_is_not_a_second_copy(people):
    """Failed before: the project note was created and recall showed both."""
    alice, actx = people("alice")
    bob, bctx = people("bob")
    rid = share(alice, actx, TEAM_NOTE)
    r = remember(bob, bctx, RESTATED)
    assert r["status"] == "confirmed" and r["memory"]["id"] == rid, r
    assert "already known to the team" in r["message"]
    assert list_memories(bob, bctx)["total"] == 0  # nothing stored twice
    assert recall_ids(bob, bctx, "idempotency keys for POST requests") == [rid]


def test_a_contradicting_project_note_overrides_the_team_note_here(people):
    """Failed before: the team level was outside the override check; recall showed both notes."""
    alice, actx = people("alice")
    bob, bctx = people("bob")
    rid = share(alice, actx, "The API timeout is 30 seconds")
    r = remember(bob, bctx, "The API timeout is 60 seconds")
    assert r["status"] == "created" and [(c["id"], c["relation"]) for c in r["conflicts"]] == [(rid, "override")]
    assert recall_ids(bob, bctx, "API timeout seconds") == [r["memory"]["id"]]
    items = review.review_list(bob, bctx, kind="override")["items"]
    assert items[0]["other_id"] == rid and "30 seconds" in items[0]["summary"]
    # keep_both lifts the override: both show again
    review.review_resolve(bob, bctx, items[0]["id"], "keep_both")
    assert set(recall_ids(bob, bctx, "API timeout seconds")) == {r["memory"]["id"], rid}
    # the override is Bob's: Alice still sees the team's 30 seconds
    cards = recall(alice, actx, "API timeout seconds", include_docs=False)["cards"]
    assert cards[0]["compressed_summary"] == "The API timeout is 30 seconds"


def test_a_team_note_arriving_after_the_local_one_is_not_shown_twice(people):
    """Failed before: a team note restating a local note (written before it, or while the server was away)
    appeared next to it in recall."""
    alice, actx = people("alice")
    bob, bctx = people("bob")
    mine = remember(bob, bctx, RESTATED)["memory"]
    rid = share(alice, actx, TEAM_NOTE)
    assert bob.team() is not None
    deadline = time.monotonic() + 10
    while rid not in [h.id for h in bob.team().query(bob.embed([TEAM_NOTE])[0], bob.model_id, 5)]:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert recall_ids(bob, bctx, "idempotency keys for POST requests") == [mine["id"]]
