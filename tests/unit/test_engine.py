"""The memory core in-process: model, scopes, visibility, bad input, index rebuilds (hash embedder: plumbing)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from dataclasses import replace

import pytest

from mnemo.core.documents.indexing import index_docs
from mnemo.core.engine import Engine
from mnemo.core.errors import InvalidInput, NotFound, ScopeError, StoreLocked, StoreNotWritable
from mnemo.core.memory.manage import deprecate, forget, list_memories, promote
from mnemo.core.memory.manage import get as get_memory
from mnemo.core.memory.recall import hydrate, recall
from mnemo.core.memory.write import remember


def snapshot_rows(engine):
    conn = engine.store.conn()
    return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("memories", "vectors", "changes", "fts", "tombstones")}


def test_remember_recall_card_contract(engine, ctx):
    r = remember(engine, ctx, "payments API requires idempotency keys on every POST", kind="decision")
    assert r["status"] == "created"
    m = r["memory"]
    assert (m["scope"], m["type"], m["branch"], m["project_id"]) == ("project", "project", "main", ctx.project_id)
    res = recall(engine, ctx, "idempotency keys POST")
    card = res["cards"][0]
    from mnemo.core.models import CARD_FIELDS

    assert set(CARD_FIELDS) <= set(card)
    assert card["item_id"] == m["id"] and card["source_kind"] == "note" and card["can_hydrate"]
    assert card["confidence_state"] in ("high", "medium", "low")
    assert 0 < card["score"] <= 1


def test_dedup_confirms_instead_of_copying(engine, ctx):
    a = remember(engine, ctx, "Use ruff for linting")
    b = remember(engine, ctx, "  use RUFF for linting. ")
    c = remember(engine, ctx, "use ruff for linting")
    assert b["status"] == c["status"] == "confirmed"
    assert c["memory"]["id"] == a["memory"]["id"] and c["memory"]["confirmations"] == 3
    assert "confirmed 3x" in c["message"]
    assert list_memories(engine, ctx)["total"] == 1


def test_direct_write_to_global_is_refused_with_promote_hint(engine, ctx):
    before = snapshot_rows(engine)
    with pytest.raises(ScopeError) as exc:
        remember(engine, ctx, "tabs everywhere", scope="global")
    assert "promote" in exc.value.hint
    assert snapshot_rows(engine) == before


@pytest.mark.parametrize("kw, err", [
    ({"text": ""}, "empty"),
    ({"text": "   \u200b  "}, "empty"),
    ({"text": "x" * 1_000_000}, "limit"),
    ({"text": "ok", "scope": "planet"}, "scope"),
    ({"text": "ok", "type": "gossip"}, "type"),
    ({"text": "ok", "importance": 7}, "range"),
    ({"text": "ok", "scope": "hybrid"}, "read-only"),
])
def test_bad_input_is_a_clear_error_and_changes_nothing(engine, ctx, kw, err):
    before = snapshot_rows(engine)
    text = kw.pop("text")
    with pytest.raises(InvalidInput) as exc:
        remember(engine, ctx, text, **kw)
    assert err in str(exc.value)
    assert exc.value.hint
    assert snapshot_rows(engine) == before


def test_types_and_branch_visibility(engine, ctx):
    main_note = remember(engine, ctx, "FastAPI backend")["memory"]
    pref = remember(engine, ctx, "I like short answers", type="user")["memory"]
    assert pref["branch"] is None  # user/feedback hold on every branch
    feature = replace(ctx, branch="feature/auth")
    f_note = remember(engine, feature, "OAuth2 with PKCE for mobile clients")["memory"]
    assert f_note["branch"] == "feature/auth"
    on_feature = {m["id"] for m in list_memories(engine, feature)["memories"]}
    on_main = {m["id"] for m in list_memories(engine, ctx)["memories"]}
    assert on_feature == {main_note["id"], pref["id"], f_note["id"]}
    assert on_main == {main_note["id"], pref["id"]}
    assert f_note["id"] not in {c["item_id"] for c in recall(engine, ctx, "OAuth2 PKCE mobile", limit=10)["cards"]}
    assert recall(engine, feature, "OAuth2 PKCE mobile")["cards"][0]["item_id"] == f_note["id"]


def test_promote_deprecate_forget(engine, ctx):
    m = remember(engine, ctx, "Always pin torch to the CPU wheel")["memory"]
    other = replace(ctx, project_id="other-project", project_name="other", branch="dev", default_branch="dev")
    assert not recall(engine, other, "pin torch CPU wheel", scope="project")["cards"]
    p = promote(engine, ctx, m["id"])["memory"]
    assert p["scope"] == "global" and p["branch"] is None
    prov = p["provenance"]["promoted_from"]
    assert (prov["scope"], prov["project_id"], prov["note_id"]) == ("project", ctx.project_id, m["id"])
    # global is visible from another project, in the hybrid and global views
    cards = recall(engine, other, "pin torch CPU wheel")["cards"]
    assert cards[0]["item_id"] == m["id"] and cards[0]["scope"] == "global"
    assert cards[0]["promoted_from"]["project_name"] == ctx.project_name
    with pytest.raises(InvalidInput):
        promote(engine, ctx, m["id"])
    d = deprecate(engine, other, m["id"], "we moved to uv")["memory"]
    assert d["deprecated"] and d["deprecated_reason"] == "we moved to uv"
    assert not recall(engine, other, "pin torch CPU wheel")["cards"]
    assert list_memories(engine, other, include_deprecated=True)["total"] == 1
    f = forget(engine, ctx, m["id"], "explicit")
    assert f["tombstone"]
    assert engine.store.conn().execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] == 1
    with pytest.raises(NotFound):
        get_memory(engine, ctx, m["id"])


def test_project_memory_is_invisible_from_another_project(engine, ctx):
    m = remember(engine, ctx, "secret sauce recipe lives in sauce.py")["memory"]
    other = replace(ctx, project_id="p-b", project_name="b")
    with pytest.raises(NotFound):
        get_memory(engine, other, m["id"])
    assert not recall(engine, other, "secret sauce recipe", limit=10)["cards"]
    with pytest.raises(NotFound):
        hydrate(engine, other, m["id"])


def test_markdown_blocks_heading_paths_and_bounded_hydration(engine, ctx, git_repo):
    doc = git_repo / "docs" / "guide.md"
    doc.parent.mkdir()
    sections = ["# Guide", "Intro text."]
    for i in range(8):
        sections += [f"## Part {i}", f"Details about topic{i} " * 40]
    sections += ["```python", "# not a heading", "```"]
    doc.write_text("\n\n".join(sections))
    res = index_docs(engine, ctx)
    assert res["added"] == 2 and res["blocks_written"] >= 9
    cards = recall(engine, ctx, "topic5 details", limit=3)["cards"]
    top = cards[0]
    assert top["source_kind"] == "markdown" and top["heading_path"] == ["Guide", "Part 5"]
    assert top["source_path"] == "docs/guide.md"
    h = hydrate(engine, ctx, top["item_id"])
    assert [b["heading_path"][-1] for b in h["blocks"]] == ["Part 4", "Part 5", "Part 6"]
    hr = hydrate(engine, ctx, top["item_id"], mode="related")
    assert [b["heading_path"][-1] for b in hr["blocks"]] == ["Part 2", "Part 3", "Part 4", "Part 5", "Part 6", "Part 7"]
    assert sum(len(b["text"]) for b in hr["blocks"]) <= 12000 + len(h["blocks"][1]["text"])
    assert all(b["block_id"].startswith("blk-") for b in hr["blocks"])
    # unchanged files are skipped; edits replace the file's blocks
    assert index_docs(engine, ctx)["unchanged"] == 2
    doc.write_text("# Guide\n\nOnly one part now.\n")
    again = index_docs(engine, ctx)
    assert again["updated"] == 1
    assert len(engine.store.file_blocks(ctx.project_id, "docs/guide.md")) == 1
    (git_repo / "docs" / "guide.md").unlink()
    assert index_docs(engine, ctx)["removed"] == 1


def test_second_engine_on_same_store_is_refused(engine, home, hash_embedder):
    with pytest.raises(StoreLocked) as exc:
        Engine(home, embedder=hash_embedder)
    assert "daemon" in exc.value.hint


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_store_directory(tmp_path, hash_embedder):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(StoreNotWritable) as exc:
            Engine(d / "store", embedder=hash_embedder)
        assert "MNEMO_HOME" in exc.value.hint
    finally:
        d.chmod(0o700)


def test_unwritable_store_directory_even_as_root(tmp_path, hash_embedder):
    f = tmp_path / "file"
    f.write_text("not a directory")
    with pytest.raises(StoreNotWritable) as exc:
        Engine(f / "store", embedder=hash_embedder)
    assert "MNEMO_HOME" in exc.value.hint


def _fill(engine, ctx, n=30):
    ids = [remember(engine, ctx, f"note number {i} about subsystem{i}", on_conflict="keep_both")["memory"]["id"]
           for i in range(n)]
    assert engine.wait_indexed(60)
    return ids


@pytest.mark.parametrize("damage", ["delete", "garbage", "state"])
def test_damaged_chroma_directory_is_rebuilt_without_reembedding(home, ctx, hash_embedder, damage):
    e = Engine(home, embedder=hash_embedder)
    ids = _fill(e, ctx)
    e.close()
    chroma = home / "chroma"
    if damage == "delete":
        shutil.rmtree(chroma)
    elif damage == "garbage":
        for p in chroma.rglob("*"):
            if p.is_file() and p.name != "mnemo-index.json":
                p.write_bytes(b"\x00garbage" * 100)
    else:  # state says fully indexed, but the collections were emptied behind its back
        shutil.rmtree(chroma)
        chroma.mkdir()
        (chroma / "mnemo-index.json").write_text(
            json.dumps({"format": 1, "seq": 999999, "model_id": hash_embedder.model_id}))

    class CountingEmbedder:
        model_id, dim = hash_embedder.model_id, hash_embedder.dim
        calls = 0

        def embed(self, texts):
            CountingEmbedder.calls += len(texts)
            return hash_embedder.embed(texts)

    e = Engine(home, embedder=CountingEmbedder())
    try:
        assert e.wait_indexed(60)
        assert e.index.ready and e.index.rebuilds >= 1
        assert sum(e.index.counts().values()) == len(ids)
        for i in (0, 17, 29):
            assert recall(e, ctx, f"note number {i} about subsystem{i}", limit=1)["cards"][0]["item_id"] == ids[i]
        assert CountingEmbedder.calls == 3  # the three queries; nothing re-embedded
    finally:
        e.close()


def test_model_change_reembeds_and_rebuilds(home, ctx, hash_embedder):
    from mnemo.core.embedding.embedder import HashEmbedder

    e = Engine(home, embedder=hash_embedder)
    ids = _fill(e, ctx, 10)
    e.close()
    other = HashEmbedder(dim=384)
    other.model_id = "hash-384-other"
    e = Engine(home, embedder=other)
    try:
        assert e.wait_indexed(60)
        models = {r[0] for r in e.store.conn().execute("SELECT DISTINCT model_id FROM vectors")}
        assert models == {"hash-384-other"}
        assert e.index.rebuilds >= 1
        assert recall(e, ctx, "note number 3 about subsystem3", limit=1)["cards"][0]["item_id"] == ids[3]
    finally:
        e.close()


def test_recall_is_deterministic_and_prefers_project_on_ties(engine, ctx):
    a = remember(engine, ctx, "the build uses make")["memory"]
    b = remember(engine, replace(ctx, project_id="x", project_name="x"), "the build uses make")["memory"]
    promote(engine, replace(ctx, project_id="x", project_name="x"), b["id"])
    runs = [[c["item_id"] for c in recall(engine, ctx, "build make", limit=5)["cards"]] for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert runs[0][0] == a["id"]  # same fact in project and global: the project copy is kept, global hidden
    assert b["id"] not in runs[0]


def test_sqlite_pragmas(engine):
    conn = engine.store.conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert isinstance(conn, sqlite3.Connection)
