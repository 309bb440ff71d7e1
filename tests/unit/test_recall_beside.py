"""Recall's work beside the query embedding (issue 22, fifth pass): what needs no vector (the keyword hits, the
store-wide minimum confidence, whether a team server is configured) is found in the engine's helper thread while the
request's thread embeds the query; the answers are the ones the sequential path gives (`bench/recall_same.py`
compares whole answers of two trees through real owners). Real model, real store."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

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


def test_the_settings_a_recall_reads_are_read_in_the_helper_thread(real_engine, ctx, monkeypatch):
    """Failed before: the store-wide minimum confidence and the team settings were read by the request's thread
    (after the embedding: ~0.1 ms of a 10k recall). The visibility of the hits stays in the request's thread: judged
    beside the embedding, it made the embedding as much slower as it saved (docs/benchmarks.md, fifth pass)."""
    from mnemo.core.memory import recall as recall_mod

    ids = [note(real_engine, ctx, n) for n in NOTES]
    floors: list[str] = []
    teams: list[str] = []
    real_floor, real_team = recall_mod.check_min_confidence, real_engine.team

    def floor(value):
        floors.append(threading.current_thread().name)
        return real_floor(value)

    def team():
        teams.append(threading.current_thread().name)
        return real_team()

    monkeypatch.setattr(recall_mod, "check_min_confidence", floor)
    monkeypatch.setattr(real_engine, "team", team)
    real_embed = real_engine.embed_cached

    def embed_slowly(texts):  # the helper thread surely starts first (a loaded box may not schedule it within a
        time.sleep(0.05)  # short embedding, and then the request's thread does the work itself: the next test)
        return real_embed(texts)

    monkeypatch.setattr(real_engine, "embed_cached", embed_slowly)
    res = recall(real_engine, ctx, "idempotency keys for payments POST", include_docs=False)
    assert res["cards"][0]["item_id"] == ids[0] and res["min_confidence"] == recall_mod.MIN_CONFIDENCE
    assert floors and all(name.startswith("mnemo-beside") for name in floors), floors
    assert teams and all(name.startswith("mnemo-beside") for name in teams), teams
    # a call's own floor is checked at once, in the caller's thread (a bad value is refused before any work)
    floors.clear()
    assert recall(real_engine, ctx, "idempotency keys", include_docs=False, min_confidence=0.5)["min_confidence"] == 0.5
    assert floors == [threading.current_thread().name]


def test_a_busy_helper_thread_is_not_waited_for(real_engine, ctx, monkeypatch):
    """Another request's work holds the helper thread (another recall's keyword side, on an owner serving several
    clients): the recall's keyword side runs in the request's thread once the query is embedded, the same answer."""
    from mnemo.core.memory import recall as recall_mod

    ids = [note(real_engine, ctx, n) for n in NOTES]
    want = recall(real_engine, ctx, "idempotency keys for payments POST", include_docs=False)
    sides: list[str] = []
    real_side = recall_mod._keyword_side

    def side(*a):
        sides.append(threading.current_thread().name)
        return real_side(*a)

    monkeypatch.setattr(recall_mod, "_keyword_side", side)
    release = threading.Event()
    busy = real_engine.beside(release.wait, 10)
    try:
        got = recall(real_engine, ctx, "idempotency keys for payments POST", include_docs=False)
    finally:
        release.set()
    busy.result(timeout=10)
    assert sides == [threading.current_thread().name]
    assert [c["item_id"] for c in got["cards"]] == [c["item_id"] for c in want["cards"]]
    assert got["cards"][0]["item_id"] == ids[0]


def test_visibility_and_filters_as_before(real_engine, ctx):
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
    """`Memory.from_row` (its quicker reading of a row) builds what the constructor builds: equal, frozen,
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
