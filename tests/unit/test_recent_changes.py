"""Issue 22, sixth pass: the change log past the vector file, read by every recall (twice) and every write's
neighbour search, is read again only when the log grew (`Store.recent_changes`). Every commit that logs a change
shows at once, from this connection or any other; nothing read inside a transaction is kept."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid

import numpy as np

from mnemo.core.models import Memory
from mnemo.core.store import Store


def _note(i: int) -> Memory:
    now = time.time()
    return Memory(id="mem-" + uuid.uuid4().hex[:20], text=f"note {i}", type="project", kind="fact", scope="project",
                  project_id="p1", project_name="p1", branch="main", importance=0.5, confirmations=1, created_at=now,
                  updated_at=now, last_accessed=now, access_count=0, content_hash=f"h{i}", source="user",
                  author="test")


def _add(store: Store, i: int) -> str:
    m = _note(i)
    with store.write() as c:
        store.insert_memory(c, m, np.ones(4, dtype=np.float32) / 2, "test-model")
    return m.id


def _ids(rows) -> list[str]:
    return [r["item_id"] for r in rows]


def test_a_commit_on_this_connection_shows_at_once(tmp_path):
    store = Store(tmp_path / "mnemo.db")
    a = _add(store, 1)
    assert _ids(store.recent_changes(0)) == [a]
    assert store.recent_changes(0) is store.recent_changes(0)  # kept while nothing was committed
    b = _add(store, 2)
    assert _ids(store.recent_changes(0)) == [a, b] == _ids(store.changes_after(0))


def test_a_commit_on_another_connection_shows_at_once(tmp_path):
    store = Store(tmp_path / "mnemo.db")
    a = _add(store, 1)
    assert _ids(store.recent_changes(0)) == [a]
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(_add(store, 2)))  # another thread: its own connection
    t.start()
    t.join()
    assert _ids(store.recent_changes(0)) == [a, got[0]]
    # another process's commit too (a second connection to the file)
    other = sqlite3.connect(tmp_path / "mnemo.db", isolation_level=None)
    other.execute("INSERT INTO changes(item_id, part, op, at) VALUES('blk-x', 'p', 'delete', 0)")
    other.close()
    assert _ids(store.recent_changes(0))[-1] == "blk-x"


def test_nothing_read_inside_a_transaction_is_kept(tmp_path):
    store = Store(tmp_path / "mnemo.db")
    a = _add(store, 1)
    try:
        with store.write() as c:
            store.insert_memory(c, _note(2), np.ones(4, dtype=np.float32) / 2, "test-model")
            inside = store.recent_changes(0)
            assert len(inside) == 2  # this transaction's own change, uncommitted
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    assert _ids(store.recent_changes(0)) == [a]  # the rolled-back change is not served from a cache
    assert _ids(store.recent_changes(1)) == []


def test_a_write_that_logs_no_change_keeps_the_rows_read(tmp_path):
    """The indexer's access counts (a recall's hits, written about once a second) change no vector and log no
    change: the rows past the file are not read again for them."""
    store = Store(tmp_path / "mnemo.db")
    a = _add(store, 1)
    rows = store.recent_changes(0)
    with store.write() as c:
        store.record_accesses(c, {a: time.time()})
    assert store.recent_changes(0) is rows
    b = _add(store, 2)
    assert _ids(store.recent_changes(0)) == [a, b]


def test_a_grown_log_reads_only_its_new_rows(tmp_path, monkeypatch):
    """When the log grew, only the rows after the last one held are read: the new list starts with the same row
    objects (what the tail's matrix and changed set are extended from) and holds what `changes_after` reads."""
    store = Store(tmp_path / "mnemo.db")
    a = _add(store, 1)
    rows = store.recent_changes(0)
    b = _add(store, 2)
    other = Store(tmp_path / "mnemo.db")  # another connection's commit too
    c = _add(other, 3)
    asked: list[int] = []
    real = Store.changes_after
    monkeypatch.setattr(Store, "changes_after", lambda self, seq, *a: asked.append(seq) or real(self, seq, *a))
    grown = store.recent_changes(0)
    assert _ids(grown) == [a, b, c] == _ids(real(store, 0))
    assert grown[0] is rows[0] and asked == [rows[-1]["seq"]]  # read after the last row held, not from 0
    assert store.recent_changes(0) is grown
    other.close()


def test_a_history_that_is_not_the_one_held_is_read_whole(tmp_path):
    """The rows held are extended only while the last of them is still in the log as it was read (a store put
    back under a running process would otherwise keep rows it no longer has)."""
    store = Store(tmp_path / "mnemo.db")
    _add(store, 1)
    last = _add(store, 2)
    rows = store.recent_changes(0)
    with store.write() as c:  # not something Mnemo does: the log rewritten from the held row on
        c.execute("DELETE FROM changes WHERE item_id=?", (last,))
        c.execute("INSERT INTO changes(seq, item_id, part, op, at) VALUES(?, 'mem-other', 'p-p1', 'upsert', 1.0)",
                  (rows[-1]["seq"],))
    d = _add(store, 3)
    got = store.recent_changes(0)
    assert _ids(got) == _ids(store.changes_after(0)) and _ids(got)[-2:] == ["mem-other", d]
