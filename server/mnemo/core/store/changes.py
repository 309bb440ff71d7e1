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
        read again only when the log grew since the last read. The log only grows (`seq` AUTOINCREMENT, written in
        commit order, never deleted), so its largest committed `seq` (one lookup in its primary key) says whether
        the rows after `seq` are still the ones read: other writes (the indexer's access counts, a setting) do not
        make it read again. Inside a transaction (what it reads may not be committed) it is read every time and not
        kept. The rows are shared: read them, do not change the list."""
        conn = self.conn()
        if conn.in_transaction:
            return self.changes_after(seq)
        key = (seq, conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])
        kept = getattr(self, "_recent", None)
        if kept is not None and kept[0] == key:
            return kept[1]
        rows = self.changes_after(seq)  # read after the key: a commit in between only makes the next call read again
        self._recent = (key, rows)
        return rows

    def change_at(self, seq: int) -> tuple[str, float] | None:
        """(item id, time) of change `seq`: the identity of a point in this store's history (derived files
        remember it, so a restored or rebuilt store is not matched with a file written after it)."""
        row = self.conn().execute("SELECT item_id, at FROM changes WHERE seq=?", (seq,)).fetchone()
        return (row["item_id"], float(row["at"])) if row else None
