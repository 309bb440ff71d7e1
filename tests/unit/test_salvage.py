"""Page-level salvage (core/salvage.py) and the repair's merge rules (core/recovery/repair.py), on small real SQLite files.

Each case damages a file the way a bad disk does and checks what SQL itself can no longer read is salvaged, and that
nothing deleted comes back."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from mnemo.core.recovery.repair import deleted_ids, merge_items, pick_vectors
from mnemo.core.store import salvage as sv


def make_db(path: Path, n: int = 3000, wal: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    if wal:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, text TEXT NOT NULL, at REAL NOT NULL, blob BLOB)")
    conn.execute("BEGIN")
    for i in range(n):
        conn.execute("INSERT INTO notes VALUES(?,?,?,?)", (f"n-{i:05d}", f"note number {i} " + "x" * (i % 90),
                                                            float(i), os.urandom(i % 50)))
    conn.execute("COMMIT")
    return conn


def ids(s: sv.Salvage, table: str = "notes") -> set[str]:
    return {r.values[0] for r in s.rows.get(table, [])}


def interior_pages(path: Path, table: str) -> list[int]:
    conn = sqlite3.connect(path)
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name=?", (table,)).fetchone()[0]
    conn.close()
    pages = sv.Pages(path)
    try:
        out, stack = [], [root]
        while stack:
            n = stack.pop()
            data = pages.page(n)
            hdr = 100 if n == 1 else 0
            if data[hdr] == sv.TABLE_INTERIOR:
                out.append(n)
                offs = [int.from_bytes(data[hdr + 12 + 2 * k:hdr + 14 + 2 * k], "big")
                        for k in range(int.from_bytes(data[hdr + 3:hdr + 5], "big"))]
                stack += [int.from_bytes(data[o:o + 4], "big") for o in offs]
        return out
    finally:
        pages.close()


def overwrite_page(path: Path, n: int, page_size: int = 4096) -> None:
    with open(path, "r+b") as f:
        f.seek((n - 1) * page_size)
        f.write(os.urandom(page_size))


def test_records_decode_and_every_value_type_round_trips(tmp_path):
    db = tmp_path / "t.db"
    conn = sqlite3.connect(db)
    vals = (None, 0, 1, -7, 300, 2**40, -(2**63), 1.5, "tëxt", b"\x00\x01", "y" * 5000)
    conn.execute(f"CREATE TABLE t ({', '.join(f'c{i}' for i in range(len(vals)))})")
    conn.execute(f"INSERT INTO t VALUES({','.join('?' * len(vals))})", vals)
    conn.commit()
    conn.close()
    s = sv.salvage(db)
    assert [r.values for r in s.rows["t"]] == [list(vals)]  # an overflow chain (the 5,000-byte text) included
    with pytest.raises(sv.BadCell):
        sv.decode_record(b"\x03\x01\x01\x05")  # header promises two 1-byte ints, body has one


def test_a_destroyed_interior_page_costs_nothing_but_its_own_cells(tmp_path):
    db = tmp_path / "t.db"
    make_db(db).close()
    inner = interior_pages(db, "notes")
    assert inner
    overwrite_page(db, inner[0])  # the table's root: the parent of every leaf
    conn = sqlite3.connect(db)
    with pytest.raises(sqlite3.DatabaseError):
        conn.execute("SELECT text FROM notes").fetchall()  # SQL cannot reach a single row
    conn.close()
    s = sv.salvage(db)
    assert ids(s) == {f"n-{i:05d}" for i in range(3000)}  # every leaf survived: all found as orphans
    assert s.stats["orphan_rows"] > 0 and s.stats["bad_pages"] >= 1


def test_a_destroyed_leaf_loses_only_its_rows(tmp_path):
    db = tmp_path / "t.db"
    make_db(db).close()
    conn = sqlite3.connect(db)
    size = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.close()
    overwrite_page(db, size // 2)
    s = sv.salvage(db)
    got = ids(s)
    assert 2900 < len(got) < 3000 and got <= {f"n-{i:05d}" for i in range(3000)}
    for r in s.rows["notes"]:  # what is salvaged is exactly what was written
        i = int(r.values[0][2:])
        assert r.values[1] == f"note number {i} " + "x" * (i % 90) and r.values[2] == float(i)


def test_committed_wal_frames_are_read_uncommitted_ones_are_not(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db, n=200, wal=True)  # every row is only in the WAL (no checkpoint)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO notes VALUES('late', 'never committed', 0, NULL)")
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(db, copy / "t.db")
    shutil.copy(f"{db}-wal", copy / "t.db-wal")  # a crash: the files as they are on disk right now
    conn.execute("ROLLBACK")
    conn.close()
    s = sv.salvage(copy / "t.db")
    assert ids(s) == {f"n-{i:05d}" for i in range(200)} and s.stats["wal_pages"] > 0


def test_free_pages_do_not_resurrect_deleted_rows(tmp_path):
    db = tmp_path / "t.db"
    conn = make_db(db)
    conn.execute("DELETE FROM notes WHERE id >= 'n-01000'")  # whole leaves go to the free list, content intact
    conn.close()
    s = sv.salvage(db)
    assert ids(s) == {f"n-{i:05d}" for i in range(1000)}


# -- merge rules -------------------------------------------------------------------------------------------------
def mem(mid: str, text: str, updated: float, rank: int) -> dict:
    from mnemo.core.text import content_hash

    return {"id": mid, "text": text, "type": "project", "kind": "fact", "scope": "project", "project_id": "p",
            "project_name": "p", "branch": None, "importance": 0.5, "confirmations": 1, "created_at": 1.0,
            "updated_at": updated, "last_accessed": updated, "access_count": 0, "content_hash": content_hash(text),
            "source": "user", "provenance": "{}", "anchors": "[]", "superseded_by": None, "deprecated": 0,
            "deprecated_reason": None, "tier": "warm", "tags": "[]", "trust": "trusted", "status": "active",
            "author": "t", "flags": "[]", "part": "p-p", "_rank": rank, "_rowid": 1}


def test_merge_keeps_the_newest_intact_copy_and_no_deleted_id():
    salv = {"memories": [mem("mem-a", "salvaged newer", 20, 2), mem("mem-b", "stale orphan", 5, 1),
                         {**mem("mem-c", "bit rot", 30, 2), "content_hash": "0" * 32}],
            "tombstones": [{"id": "mem-gone", "_rank": 2}],
            "changes": [{"seq": 9, "item_id": "mem-del", "op": "delete", "_rank": 2}]}
    back = {"memories": [mem("mem-a", "backup older", 10, 0), mem("mem-b", "backup newer", 8, 0),
                         mem("mem-c", "backup intact", 3, 0), mem("mem-gone", "forgotten after the backup", 1, 0),
                         mem("mem-del", "deleted after the backup", 1, 0)],
            "changes": [{"seq": 3, "item_id": "mem-del", "op": "upsert", "_rank": 0}]}
    deleted = deleted_ids(salv, back)
    assert deleted == {"mem-gone", "mem-del"}
    chosen = merge_items("memories", salv, back, deleted)
    assert {i: r["text"] for i, r in chosen.items()} == {
        "mem-a": "salvaged newer",  # salvaged and newer
        "mem-b": "backup newer",  # a stale orphan copy loses to a newer backup
        "mem-c": "backup intact",  # a salvaged row whose text no longer matches its hash loses to an intact one
    }


def test_a_vector_is_kept_only_with_the_text_it_was_made_for():
    vec = bytes(range(16)) * 96  # 1,536 bytes, any values: the length and norm checks need a majority
    import numpy as np

    unit = (np.ones(384, dtype=np.float32) / np.sqrt(384)).tobytes()
    salv = {"memories": [mem("mem-a", "new text", 20, 2)], "vectors": [{"item_id": "mem-b", "model_id": "m",
                                                                        "vec": unit, "_rank": 2}]}
    back = {"memories": [mem("mem-a", "old text", 10, 0), mem("mem-b", "same", 10, 0)],
            "vectors": [{"item_id": "mem-a", "model_id": "m", "vec": unit, "_rank": 0},
                        {"item_id": "mem-b", "model_id": "m", "vec": unit, "_rank": 0},
                        {"item_id": "mem-x", "model_id": "m", "vec": vec, "_rank": 0}]}
    chosen = {"mem-a": ("memories", salv["memories"][0]), "mem-b": ("memories", back["memories"][1])}
    vectors, missing = pick_vectors(chosen, salv, back)
    assert missing == ["mem-a"]  # its backup vector is for the old text: re-embedded
    assert set(vectors) == {"mem-b"}
