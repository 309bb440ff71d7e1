"""Recall's work beside the query embedding (issue 22, fifth pass): what needs no vector (the keyword hits, the
visibility of each, the store-wide minimum confidence, whether a team server is configured) is judged in the engine's
helper thread while the request's thread embeds the query; the answers are the ones the sequential path gives
(`bench/recall_same.py` compares whole answers of two trees through real owners). Real model, real store."""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest

from mnemo.core.memory.filters import make_filter
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.models import Memory


def note(engine, ctx, text: str, **options) -> str:
    res = remember(engine, ctx, text, on_conflict="keep_both", **options)
    assert res["status"] == "created", res
    return res["memory"]["id"]


NOTES = ["payments API requires idempotency keys on every POST", "Run the tests with pytest -x from the repo root",
         "The frontend is built with Vite", "Deploys go through Argo CD", "Use structlog for logging"]


def test_keyword_hits_are_judged_in_the_helper_thread(real_engine, ctx, monkeypatch):
    """Failed before: every visibility row and the minimum-confidence setting were read by the request's thread
    after the embedding."""
    from mnemo.core.memory import recall as recall_mod

    ids = [note(real_engine, ctx, n) for n in NOTES]
    store = real_engine.store
    reads: list[tuple[str, list[str]]] = []
    floors: list[str] = []
    real_rows, real_floor = store.visibility_rows, recall_mod.check_min_confidence

    def rows(wanted):
        wanted = list(wanted)
        reads.append((threading.current_thread().name, wanted))
        return real_rows(wanted)

    def floor(value):
        floors.append(threading.current_thread().name)
        return real_floor(value)

    monkeypatch.setattr(store, "visibility_rows", rows)
    monkeypatch.setattr(recall_mod, "check_min_confidence", floor)
    res = recall(real_engine, ctx, "idempotency keys for payments POST", include_docs=False)
    assert res["cards"][0]["item_id"] == ids[0]
    beside = [w for name, w in reads if name.startswith("mnemo-beside")]
    assert beside and ids[0] in beside[0], reads  # the keyword hit, judged beside the embedding
    assert all(i not in w for name, w in reads if not name.startswith("mnemo-beside") for i in beside[0]), reads
    assert floors and all(name.startswith("mnemo-beside") for name in floors), floors
    # a call's own floor is checked at once, in the caller's thread (a bad value is refused before any work)
    floors.clear()
    assert recall(real_engine, ctx, "idempotency keys", include_docs=False, min_confidence=0.5)["min_confidence"] == 0.5
    assert floors == [threading.current_thread().name]


def test_visibility_and_filters_beside_the_embedding(real_engine, ctx):
    """A keyword hit of another project, a deprecated one and one filtered out stay out; filters still apply."""
    from mnemo.core.memory import manage

    ids = [note(real_engine, ctx, n) for n in NOTES]
    other = dataclasses.replace(ctx, project_id="another-project", project_name="another")
    theirs = note(real_engine, other, "payments idempotency keys are checked by the gateway")
    gone = note(real_engine, ctx, "payments retries reuse the idempotency key of the first POST")
    manage.deprecate(real_engine, ctx, gone, reason="superseded by the gateway")
    got = [c["item_id"] for c in recall(real_engine, ctx, "payments idempotency keys", include_docs=False,
                                        min_confidence=0)["cards"]]
    assert got[0] == ids[0] and theirs not in got and gone not in got, got
    assert [c["item_id"] for c in recall(real_engine, other, "payments idempotency keys", include_docs=False)["cards"]
            ][:1] == [theirs]
    tagged = note(real_engine, ctx, "payments: POST bodies are validated with pydantic", tags=["payments"],
                  kind="decision")
    filt = recall(real_engine, ctx, "payments idempotency keys", include_docs=False, filters=make_filter(tags=["payments"]))
    assert [c["item_id"] for c in filt["cards"]] == [tagged]


def test_team_warnings_as_before(real_engine, ctx, monkeypatch):
    """Hybrid recall without a team server says nothing; the team scope says none is configured; a team setting
    that cannot be used is named (the helper thread only decides whether to ask)."""
    for name in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_NAMESPACE", "MNEMO_TEAM_CA"):
        monkeypatch.delenv(name, raising=False)
    note(real_engine, ctx, NOTES[0])
    assert recall(real_engine, ctx, "idempotency", include_docs=False)["warnings"] == []
    assert any("no team server is configured" in w
               for w in recall(real_engine, ctx, "idempotency", scope="team")["warnings"])
    monkeypatch.setenv("MNEMO_TEAM_URL", "http://[::1")  # not a URL: asked (and failing), as before
    warned = recall(real_engine, ctx, "idempotency", include_docs=False)["warnings"]
    assert len(warned) == 1 and "team server" in warned[0], warned


@pytest.mark.parametrize("fields", [
    {},
    {"tags": ["payments", "api"], "anchors": [{"path": "src/pay.py", "symbol": "charge"}],
     "provenance": {"imported_from": "team"}, "flags": ["stale_anchor"], "deprecated": True,
     "deprecated_reason": "old", "superseded_by": "mem-2"},
])
def test_from_row_builds_what_the_constructor_builds(real_engine, fields):
    """`Memory.from_row` fills the instance directly when the row has every field: equal to `Memory(**...)`, frozen,
    from a `sqlite3.Row` or a mapping; JSON columns parsed whatever they hold."""
    m = Memory(id="mem-1", text="t", type="project", kind="fact", scope="project", project_id="p", project_name="p",
               branch="main", importance=0.5, confirmations=1, created_at=1.0, updated_at=2.0, last_accessed=3.0,
               access_count=0, content_hash="h", source="cli", **fields)
    row = {**dataclasses.asdict(m), "part": "p-p"}
    for key in ("provenance", "anchors", "tags", "flags"):
        row[key] = json.dumps(row[key])
    row["deprecated"] = int(row["deprecated"])
    conn = real_engine.store.conn()
    sql_row = conn.execute("SELECT " + ", ".join(f":{k} AS {k}" for k in row), row).fetchone()
    for got in (Memory.from_row(row), Memory.from_row(sql_row)):
        assert got == m and got.to_dict() == m.to_dict() and type(got.tags) is list
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.text = "changed"  # type: ignore[misc]
    missing = {k: v for k, v in row.items() if k not in ("trust", "status")}  # an older row: defaults fill in
    assert Memory.from_row(missing) == m
