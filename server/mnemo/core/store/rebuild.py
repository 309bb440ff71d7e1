"""Reading a backup's tables and writing a rebuilt store: the SQL side of `mnemo doctor --repair`
(core/recovery/repair.py decides which rows to keep; store/salvage.py reads the damaged file page by page)."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mnemo.core.models import Memory
from mnemo.core.store import Store
from mnemo.core.store.codec import block_fts_text, memory_fts_text

log = logging.getLogger("mnemo.repair")

ITEMS = ("memories", "blocks")  # rows with a vector: merged by id and time


def read_backup(path: str | None) -> tuple[dict[str, list[dict[str, Any]]], list[tuple[str, str, str]]]:
    """Every row of every plain table of a backup (`_rank` 0, `_rowid`), and its schema (type, name, sql)."""
    if path is None:
        return {}, []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        schema = [(r[0], r[1], r[2]) for r in
                  conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL")]
        tables = {}
        for typ, name, sql in schema:
            if typ == "table" and not name.startswith(("sqlite_", "fts")) and "VIRTUAL" not in sql.upper():
                tables[name] = [dict(r, _rank=0) for r in conn.execute(f'SELECT rowid AS _rowid, * FROM "{name}"')]
    finally:
        conn.close()
    return tables, schema


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")').fetchall()]


def _insert(conn: sqlite3.Connection, table: str, rows: list[dict[str, Any]], cols: list[str] | None = None) -> int:
    cols = cols or _columns(conn, table)
    n = 0
    for r in rows:
        use = [c for c in cols if c in r]
        try:
            conn.execute(f'INSERT OR REPLACE INTO "{table}"({",".join(use)}) VALUES({",".join("?" * len(use))})',
                         [r[c] for c in use])
            n += 1
        except sqlite3.Error as exc:  # a row that breaks a constraint of today's schema is reported, not kept
            log.warning("repair: dropped a %s row: %s", table, exc)
    return n


def _create_extra_tables(conn: sqlite3.Connection, schemas: Iterable[tuple[str, str, str]]) -> None:
    have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    for typ, name, sql in sorted(set(schemas), key=lambda e: e[0] != "table"):  # tables before their indexes
        if typ in ("table", "index") and name not in have and not name.startswith(("sqlite_", "fts")) and sql:
            with contextlib.suppress(sqlite3.Error):
                conn.execute(sql)
                have.add(name)


def _indexed_text(table: str, row: dict[str, Any]) -> str:
    if table == "memories":
        return memory_fts_text(Memory.from_row({k: v for k, v in row.items() if k[0] != "_"}))
    return block_fts_text(json.loads(row["heading_path"]), row["text"], row["source_path"])


def write_store(path: Path, schemas: list, plain: dict[str, list], chosen: dict[str, tuple[str, dict]],
                vectors: dict[str, tuple[str, bytes]], last_seq: int = 0) -> dict[str, int]:
    """The new store: every kept row, its FTS entry and vector, and a change log that continues after `last_seq`
    (sequence numbers never go back)."""
    store = Store(path)
    counts: dict[str, int] = {}
    try:
        _create_extra_tables(store.conn(), schemas)
        with store.write() as c:
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for table, rows in plain.items():
                if table in tables:
                    counts[table] = _insert(c, table, rows)
            c.execute("DELETE FROM sqlite_sequence WHERE name='changes'")
            c.execute("INSERT INTO sqlite_sequence(name, seq) VALUES('changes', ?)", (last_seq,))
            order = sorted(chosen.items(), key=lambda kv: (kv[1][1].get("updated_at") or 0, kv[0]))
            cols = {t: _columns(c, t) for t in ITEMS}
            for item_id, (table, row) in order:
                if not _insert(c, table, [row], cols[table]):
                    continue
                counts[table] = counts.get(table, 0) + 1
                c.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)",
                          (_indexed_text(table, row), item_id, row["part"]))
                model_id, blob = vectors[item_id]
                c.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                          (item_id, row["part"], model_id, blob))
                store.log_change(c, item_id, row["part"], "upsert")
        store.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        store.close()
    return counts
