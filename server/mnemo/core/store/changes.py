"""The `changes` table: the numbered change log that the dense and keyword indexes replay."""

from __future__ import annotations

import sqlite3
import time


class ChangeLog:
    """Mixed into `Store`: needs `conn()`."""

    @staticmethod
    def log_change(conn: sqlite3.Connection, item_id: str, part: str, op: str) -> None:
        conn.execute("INSERT INTO changes(item_id, part, op, at) VALUES(?,?,?,?)", (item_id, part, op, time.time()))

    def max_seq(self) -> int:
        row = self.conn().execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
        return int(row[0])

    def changes_after(self, seq: int, limit: int = 100000) -> list[sqlite3.Row]:
        return self.conn().execute(
            "SELECT seq, item_id, part, op, at FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()

    def recent_changes(self, seq: int) -> list[sqlite3.Row]:
        """`changes_after(seq)` for the reads that ask it at every query (recall's dense search and its keyword-only
        hits' cosines, a write's neighbour search: up to 200 rows at 10k and 2,000 at 100k past the vector file),
        read again only when something was committed since the last read: this connection's own changes
        (`total_changes`) or another connection's (`PRAGMA data_version`, SQLite's own counter of them). Inside a
        transaction (what it reads may not be committed) it is read every time and not kept. The rows are shared:
        read them, do not change the list."""
        conn = self.conn()
        if conn.in_transaction:
            return self.changes_after(seq)
        key = (id(conn), conn.total_changes, conn.execute("PRAGMA data_version").fetchone()[0], seq)
        kept = getattr(self, "_recent", None)
        if kept is not None and kept[0] == key:
            return kept[1]
        rows = self.changes_after(seq)
        self._recent = (key, rows)
        return rows

    def change_at(self, seq: int) -> tuple[str, float] | None:
        """(item id, time) of change `seq`: the identity of a point in this store's history (derived files
        remember it, so a restored or rebuilt store is not matched with a file written after it)."""
        row = self.conn().execute("SELECT item_id, at FROM changes WHERE seq=?", (seq,)).fetchone()
        return (row["item_id"], float(row["at"])) if row else None
