"""The `decay_state` table: when each memory last decayed, and its importance before the first decay."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from mnemo.core.store.memories import chunked, marks


class DecayState:
    """Mixed into `Store`: needs `conn()`."""

    def decayed_at(self, ids: Sequence[str]) -> dict[str, float]:
        out = {}
        for chunk in chunked(ids):
            for r in self.conn().execute(f"SELECT id, decayed_at FROM decay_state WHERE id IN ({marks(len(chunk))})",
                                         chunk):
                out[r[0]] = float(r[1])
        return out

    @staticmethod
    def record_decay(conn: sqlite3.Connection, mem_id: str, at: float, importance: float) -> None:
        """A decay run aged `mem_id` at `at`; the importance before its first decay is kept."""
        conn.execute("INSERT INTO decay_state(id, decayed_at, base_importance) VALUES(?, ?, ?) ON CONFLICT(id)"
                     " DO UPDATE SET decayed_at=excluded.decayed_at,"
                     " base_importance=COALESCE(decay_state.base_importance, excluded.base_importance)",
                     (mem_id, at, importance))

    @staticmethod
    def set_decayed_at(conn: sqlite3.Connection, mem_id: str, at: float) -> None:
        """An imported memory's decay clock (its base importance, if any, is kept)."""
        conn.execute("INSERT INTO decay_state(id, decayed_at) VALUES(?, ?) ON CONFLICT(id) DO UPDATE SET"
                     " decayed_at=excluded.decayed_at", (mem_id, at))

    @staticmethod
    def replace_decay(conn: sqlite3.Connection, mem_id: str, at: float) -> None:
        """A copy's decay clock (a branch merge): the copy starts where the original's clock is."""
        conn.execute("INSERT OR REPLACE INTO decay_state(id, decayed_at) VALUES(?, ?)", (mem_id, at))

    def base_importance(self, mem_id: str) -> float | None:
        row = self.conn().execute("SELECT base_importance FROM decay_state WHERE id=?", (mem_id,)).fetchone()
        return float(row[0]) if row is not None and row[0] is not None else None

    @staticmethod
    def clear_decay(conn: sqlite3.Connection, mem_id: str) -> None:
        conn.execute("DELETE FROM decay_state WHERE id=?", (mem_id,))
