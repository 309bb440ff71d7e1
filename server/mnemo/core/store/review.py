"""The `review` table: the review queue (conflicts, overrides, pending writes, stale anchors, branch merges,
snapshot imports, held skills) and the decisions people made in it."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from mnemo.core.store.memories import chunked, marks

OPEN = "resolved_at IS NULL"
OVERRIDE_IN_FORCE = "kind='override' AND (resolution IS NULL OR resolution='accept')"


class ReviewTable:
    """Mixed into `Store`: needs `conn()`."""

    # -- writes ----------------------------------------------------------------------------------------------
    @staticmethod
    def add_review(conn: sqlite3.Connection, kind: str, item_id: str | None, other_id: str | None,
                   project_id: str | None, payload: dict[str, Any] | None = None, *, resolution: str | None = None,
                   now: float | None = None) -> int:
        """One review item; with `resolution` it is recorded as already decided."""
        now = time.time() if now is None else now
        cur = conn.execute(
            "INSERT INTO review(kind, item_id, other_id, project_id, payload, created_at, resolved_at, resolution)"
            " VALUES(?,?,?,?,?,?,?,?)",
            (kind, item_id, other_id, project_id, json.dumps(payload or {}, sort_keys=True), now,
             now if resolution else None, resolution))
        return int(cur.lastrowid or 0)  # an INSERT always has one

    @staticmethod
    def resolve_reviews(conn: sqlite3.Connection, ids: Sequence[int], resolution: str,
                        now: float | None = None) -> None:
        """Close the open items among `ids` with `resolution` (closed ones stay as they were)."""
        now = time.time() if now is None else now
        for rid in ids:
            conn.execute("UPDATE review SET resolved_at=?, resolution=? WHERE id=? AND resolved_at IS NULL",
                         (now, resolution, rid))

    @staticmethod
    def resolve_reviews_of(conn: sqlite3.Connection, mem_id: str, resolution: str, now: float) -> None:
        """Close every open item about `mem_id` (as the new or as the other memory)."""
        conn.execute("UPDATE review SET resolved_at=?, resolution=? WHERE resolved_at IS NULL AND"
                     " (item_id=? OR other_id=?)", (now, resolution, mem_id, mem_id))

    # -- reads -----------------------------------------------------------------------------------------------
    def review_item(self, rid: int) -> sqlite3.Row | None:
        return self.conn().execute("SELECT * FROM review WHERE id=?", (rid,)).fetchone()

    def review_items(self, project_id: str, kind: str | None = None, include_resolved: bool = False,
                     limit: int = 500) -> list[sqlite3.Row]:
        """The items of this project (and those of no project), newest first."""
        where = ["(project_id=? OR project_id IS NULL)"]
        params: list[Any] = [project_id]
        if not include_resolved:
            where.append(OPEN)
        if kind:
            where.append("kind=?")
            params.append(kind)
        return self.conn().execute(
            f"SELECT * FROM review WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT ?",
            (*params, int(limit))).fetchall()

    def open_items_about(self, kind: str, item_id: str) -> list[sqlite3.Row]:
        """Open items of `kind` whose (new / anchored) memory is `item_id`: `id, other_id, payload`."""
        return self.conn().execute(f"SELECT id, other_id, payload FROM review WHERE kind=? AND item_id=? AND {OPEN}",
                                   (kind, item_id)).fetchall()

    def overriders(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """`item_id` (the specific memory), `other_id` (the general one among `ids`) of the overrides in force."""
        rows: list[sqlite3.Row] = []
        for chunk in chunked(ids):
            rows += self.conn().execute(
                f"SELECT item_id, other_id FROM review WHERE kind='override' AND other_id IN ({marks(len(chunk))})"
                f" AND (resolution IS NULL OR resolution='accept')", chunk).fetchall()
        return rows

    def overrides_by(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """`id, item_id, other_id` of the overrides in force that the memories `ids` make."""
        if not ids:
            return []
        return self.conn().execute(
            f"SELECT id, item_id, other_id FROM review WHERE {OVERRIDE_IN_FORCE} AND item_id IN ({marks(len(ids))})",
            list(ids)).fetchall()

    def kept_apart_pairs(self) -> set[frozenset]:
        """Pairs a person (or a merge strategy they chose) decided to keep apart: `keep_both` on a conflict or an
        override, on write or in Review, and the remote/local pairs of a snapshot merge with `keep_both`."""
        rows = self.conn().execute("SELECT item_id, other_id FROM review WHERE kind IN ('conflict','override') AND"
                                   " resolution='keep_both' AND item_id IS NOT NULL AND other_id IS NOT NULL")
        return {frozenset((r[0], r[1])) for r in rows.fetchall()}

    def skill_hold_answers(self, project_id: str) -> list[sqlite3.Row]:
        """`key, resolution` of every held-skill item of this project (`key`: path + content of the skill)."""
        return self.conn().execute(
            "SELECT json_extract(payload, '$.key') AS key, resolution FROM review WHERE kind='skill_held' AND "
            "(project_id=? OR project_id IS NULL)", (project_id,)).fetchall()

    def skill_hold_queued(self, key: str, project_id: str) -> bool:
        return self.conn().execute(
            "SELECT 1 FROM review WHERE kind='skill_held' AND json_extract(payload, '$.key')=? "
            "AND (project_id=? OR project_id IS NULL)", (key, project_id)).fetchone() is not None

    def branch_merge_items(self, project_id: str, *, open_only: bool = True) -> list[sqlite3.Row]:
        """`id, payload, resolved_at` of this project's branch-merge items (the open ones, or all)."""
        extra = f" AND {OPEN}" if open_only else ""
        return self.conn().execute(f"SELECT id, payload, resolved_at FROM review WHERE kind='branch_merge' AND"
                                   f" project_id=?{extra}", (project_id,)).fetchall()
