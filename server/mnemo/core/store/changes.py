"""The `changes` table: the numbered change log that the dense and keyword indexes replay."""

from __future__ import annotations

import sqlite3
import time

RECENT_LIMIT = 100000  # `changes_after`'s default: the rows `recent_changes` holds at most


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
        read again only when the log grew since the last read, and then only its new rows. The log only grows
        (`seq` AUTOINCREMENT, written in commit order by one writer at a time, never deleted), so its largest
        committed `seq` (one lookup in its primary key) says whether the rows after `seq` are still the ones read,
        and the rows after the last one read are exactly what was committed since: other writes (the indexer's
        access counts, a setting) do not make it read again. Inside a transaction (what it reads may not be
        committed) it is read every time and not kept. The rows are shared: read them, do not change the list; a
        grown log gives a new list that starts with the same row objects (`VectorFile.tail_scores` extends what it
        made of the old one)."""
        conn = self.conn()
        if conn.in_transaction:
            return self.changes_after(seq)
        key = (seq, conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])
        kept = getattr(self, "_recent", None)
        if kept is not None and kept[0] == key:
            return kept[1]
        old = kept[1] if kept is not None and kept[0][0] == seq and kept[0][1] < key[1] else None
        if old is not None and len(old) < RECENT_LIMIT and (not old or self.change_at(old[-1]["seq"]) == (
                old[-1]["item_id"], float(old[-1]["at"]))):  # the same history (not a store rebuilt under it)
            # read after the last row held (not after the old key: a commit between that key and its read is in it)
            rows = old + self.changes_after(old[-1]["seq"] if old else seq, RECENT_LIMIT - len(old))
        else:  # read after the key: a commit in between is among the rows, and the next call reads after them
            rows = self.changes_after(seq, RECENT_LIMIT)
        self._recent = (key, rows)
        return rows

    def change_at(self, seq: int) -> tuple[str, float] | None:
        """(item id, time) of change `seq`: the identity of a point in this store's history (derived files
        remember it, so a restored or rebuilt store is not matched with a file written after it)."""
        row = self.conn().execute("SELECT item_id, at FROM changes WHERE seq=?", (seq,)).fetchone()
        return (row["item_id"], float(row["at"])) if row else None
