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

    def change_at(self, seq: int) -> tuple[str, float] | None:
        """(item id, time) of change `seq`: the identity of a point in this store's history (derived files
        remember it, so a restored or rebuilt store is not matched with a file written after it)."""
        row = self.conn().execute("SELECT item_id, at FROM changes WHERE seq=?", (seq,)).fetchone()
        return (row["item_id"], float(row["at"])) if row else None
