"""Recall's visibility columns held in memory (`store.memories.VisibilityCache`, issue 22 fourth pass): what it
serves is what SQLite holds now, whatever changed a memory, whenever a reader read it."""

from __future__ import annotations

import time

import numpy as np
import pytest

from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.models import Memory
from mnemo.core.store import Store
from mnemo.core.store import memories as memories_mod
from mnemo.core.text import content_hash
from mnemo.service import LocalService


def _memory(i: int) -> Memory:
    now = time.time()
    text = f"note {i}: the billing worker retries with exponential backoff"
    return Memory(id=f"mem-{i}", text=text, type="project", kind="fact", scope="project", project_id="p1",
                  project_name="p", branch="main", importance=0.5, confirmations=1, created_at=now, updated_at=now,
                  last_accessed=now, access_count=0, content_hash=content_hash(text), source="cli", author="me")


@pytest.fixture
def store(home):
    s = Store(home / "mnemo.db")
    with s.write() as c:
        for i in range(4):
            s.insert_memory(c, _memory(i), np.ones(4, dtype=np.float32) / 2, "m")
    yield s
    s.close()


def _status(store: Store, mem_id: str):
    row = store.visibility_rows([mem_id]).get(mem_id)
    return None if row is None else row[5]  # VISIBILITY_COLUMNS: id, type, scope, project_id, branch, status, ...


def test_every_change_of_a_row_is_seen_at_once(store):
    assert store.warm_visibility() == 4 and set(store.visibility_cache.rows) == {f"mem-{i}" for i in range(4)}
    assert store.visibility_rows(["mem-0"]) == {"mem-0": store._visibility_read(store.conn(), ["mem-0"])["mem-0"]}
    with store.write() as c:
        store.update_memory(c, "mem-0", status="pending")
    assert _status(store, "mem-0") == "pending"
    with store.write() as c:
        store.update_memory(c, "mem-1", deprecated=True)
        store.delete_item(c, "mem-2")
        store.move_to_scope(c, store.get_memory("mem-3"), "global", {}, time.time())
    rows = store.visibility_rows([f"mem-{i}" for i in range(5)])
    assert rows["mem-1"][6] == 1 and "mem-2" not in rows and rows["mem-3"][2] == "global"
    with store.write() as c:
        store.insert_memory(c, _memory(4), np.ones(4, dtype=np.float32) / 2, "m")
    assert _status(store, "mem-4") == "active"
    # every row it serves equals SQLite's
    ids = [f"mem-{i}" for i in range(5)]
    assert store.visibility_rows(ids) == store._visibility_read(store.conn(), ids)


def test_a_read_from_before_a_change_is_not_kept(store):
    """A reader that read a row, then a writer changed and committed it, then the reader stores what it read: the
    stored row would be stale; it is dropped (the change moved `gen`)."""
    cache = store.visibility_cache
    gen = cache.gen
    before = store._visibility_read(store.conn(), ["mem-0"])
    with store.write() as c:
        store.update_memory(c, "mem-0", status="pending")
    cache.fill(gen, before)
    assert "mem-0" not in cache.rows and _status(store, "mem-0") == "pending"
    # a column recall does not read changes nothing here
    gen = cache.gen
    with store.write() as c:
        store.record_accesses(c, {"mem-1": time.time()})
        store.update_memory(c, "mem-1", importance=0.9)
    assert cache.gen == gen


def test_what_a_transaction_read_of_its_own_changes_is_not_kept(store):
    """Inside a write a reader sees the write's uncommitted rows: they are never stored, so a rollback leaves the
    rows as they were."""
    assert _status(store, "mem-0") == "active"
    with pytest.raises(RuntimeError), store.write() as c:
        store.update_memory(c, "mem-0", status="pending")
        assert _status(store, "mem-0") == "pending"  # its own change, from SQLite
        raise RuntimeError("rolled back")
    assert _status(store, "mem-0") == "active" and store.visibility_cache.rows["mem-0"][5] == "active"


def test_a_store_larger_than_the_cache_is_not_read_whole(store, monkeypatch):
    monkeypatch.setattr(memories_mod, "VISIBILITY_CACHE_ROWS", 3)
    assert store.warm_visibility() == 0
    store.visibility_rows(["mem-0", "mem-1"])
    store.visibility_rows(["mem-2", "mem-3"])  # over the bound: what was held is dropped first
    assert set(store.visibility_cache.rows) == {"mem-2", "mem-3"}


def test_recall_sees_a_deprecation_a_promotion_and_a_forget_at_once(real_engine, ctx):
    """Through the service, the real model: each change shows in the very next recall."""
    svc = LocalService(real_engine)
    texts = ["payments API requires idempotency keys on every POST", "the payments API retries POSTs twice",
             "payments webhooks are verified with HMAC signatures"]
    ids = [remember(real_engine, ctx, t)["memory"]["id"] for t in texts]
    real_engine.store.warm_visibility()
    query = "how does the payments API handle POST requests?"
    first = [c["item_id"] for c in recall(real_engine, ctx, query, include_docs=False, min_confidence=0)["cards"]]
    assert set(ids) <= set(first) and set(ids) <= set(real_engine.store.visibility_cache.rows)
    svc.deprecate(ctx.to_dict(), ids[0], reason="superseded")
    svc.promote(ctx.to_dict(), ids[1], to="global")
    svc.forget(ctx.to_dict(), ids[2])
    cards = recall(real_engine, ctx, query, include_docs=False, min_confidence=0)["cards"]
    assert ids[0] not in [c["item_id"] for c in cards] and ids[2] not in [c["item_id"] for c in cards]
    assert [c["scope"] for c in cards if c["item_id"] == ids[1]] == ["global"]
