"""The `vectors` table: one float32 vector per memory or block, with the id of the model that made it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence

from mnemo.core.store.codec import vec_to_blob
from mnemo.core.store.memories import chunked, marks


class VectorTable:
    """Mixed into `Store`: needs `conn()` and `log_change()`."""

    def set_vector(self, conn: sqlite3.Connection, item_id: str, part: str, vec, model_id: str) -> None:
        conn.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                     (item_id, part, model_id, vec_to_blob(vec)))
        self.log_change(conn, item_id, part, "upsert")

    def vectors(self, ids: Sequence[str], parts: Sequence[str] | None = None,
                model_id: str | None = None) -> dict[str, bytes]:
        """Stored vectors of the given items (only those in `parts`, when given; only those `model_id` made, when
        given: vectors of two models are never compared)."""
        out = {}
        wanted = set(parts) if parts else None
        for chunk in chunked(ids):
            # filter the partition here: `part IN (...)` in SQL makes the planner scan the partition's index
            for r in self.conn().execute(f"SELECT item_id, part, model_id, vec FROM vectors WHERE item_id IN "
                                         f"({marks(len(chunk))})", chunk):
                if (wanted is None or r["part"] in wanted) and (model_id is None or r["model_id"] == model_id):
                    out[r["item_id"]] = r["vec"]
        return out

    def replace_foreign_vector(self, conn: sqlite3.Connection, item_id: str, vec, model_id: str) -> bool:
        """The re-embedding of an item whose vector another model made: written only while it is still foreign
        (an item forgotten or edited meanwhile keeps what that did); logged for the indexes. True when written."""
        row = conn.execute("SELECT part FROM vectors WHERE item_id=? AND model_id != ?", (item_id, model_id)).fetchone()
        if row is None:
            return False
        conn.execute("UPDATE vectors SET vec=?, model_id=? WHERE item_id=?", (vec_to_blob(vec), model_id, item_id))
        self.log_change(conn, item_id, row["part"], "upsert")
        return True

    def vector_rows(self, ids: Sequence[str]) -> dict[str, sqlite3.Row]:
        """`item_id, part, model_id, vec` of the given items."""
        out = {}
        for chunk in chunked(ids):
            for r in self.conn().execute(
                    f"SELECT item_id, part, model_id, vec FROM vectors WHERE item_id IN ({marks(len(chunk))})", chunk):
                out[r["item_id"]] = r
        return out

    def iter_vectors(self, part: str | None = None, batch: int = 2000) -> Iterator[list[sqlite3.Row]]:
        last = ""
        while True:
            if part is None:
                rows = self.conn().execute(
                    "SELECT item_id, part, model_id, vec FROM vectors WHERE item_id > ? ORDER BY item_id LIMIT ?",
                    (last, batch)).fetchall()
            else:
                rows = self.conn().execute(
                    "SELECT item_id, part, model_id, vec FROM vectors WHERE part=? AND item_id > ? ORDER BY item_id"
                    " LIMIT ?", (part, last, batch)).fetchall()
            if not rows:
                return
            yield rows
            last = rows[-1]["item_id"]

    def count_vectors(self, part: str | None = None) -> int:
        if part is None:
            return int(self.conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
        return int(self.conn().execute("SELECT COUNT(*) FROM vectors WHERE part=?", (part,)).fetchone()[0])

    def parts(self) -> list[str]:
        return [r[0] for r in self.conn().execute("SELECT DISTINCT part FROM vectors ORDER BY part")]

    def vector_models(self) -> list[str]:
        """Every model id a stored vector was made with."""
        return [r[0] for r in self.conn().execute("SELECT DISTINCT model_id FROM vectors")]

    def foreign_vectors(self, model_id: str) -> list[sqlite3.Row]:
        """`item_id, part` of the vectors another model made (re-embedded at owner start)."""
        return self.conn().execute("SELECT item_id, part FROM vectors WHERE model_id != ?", (model_id,)).fetchall()
