"""The `memory_versions` table (the earlier versions of edited memories) and the forgotten memories a tombstone
keeps for `restore` until the forget retention has passed."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from mnemo.core.models import Memory
from mnemo.core.store.memories import chunked, marks

VERSION_COLUMNS = ("memory_id", "version", "text", "type", "kind", "importance", "tags", "content_hash",
                   "written_at", "written_by", "why", "replaced_at")


class VersionTable:
    """Mixed into `Store`: needs `conn()`."""

    @staticmethod
    def add_version(conn: sqlite3.Connection, version: dict[str, Any]) -> None:
        """Keep one earlier version of a memory (`version`: the `VERSION_COLUMNS`); an existing
        (memory_id, version) is left as it is (a snapshot merge brings the same history again)."""
        vals = [json.dumps(version[c], sort_keys=True) if c == "tags" else version[c] for c in VERSION_COLUMNS]
        conn.execute(f"INSERT OR IGNORE INTO memory_versions({', '.join(VERSION_COLUMNS)})"
                     f" VALUES({marks(len(VERSION_COLUMNS))})", vals)

    def versions(self, memory_id: str) -> list[dict[str, Any]]:
        """The earlier versions of a memory, oldest first."""
        rows = self.conn().execute(f"SELECT {', '.join(VERSION_COLUMNS)} FROM memory_versions WHERE memory_id=?"
                                   " ORDER BY version", (memory_id,))
        return [{**dict(r), "tags": json.loads(r["tags"])} for r in rows]

    def versions_of(self, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The earlier versions of each of `ids` that has some (a snapshot's history), oldest first."""
        out: dict[str, list[dict[str, Any]]] = {}
        for chunk in chunked(ids):
            for r in self.conn().execute(f"SELECT {', '.join(VERSION_COLUMNS)} FROM memory_versions WHERE memory_id"
                                         f" IN ({marks(len(chunk))}) ORDER BY memory_id, version", chunk):
                out.setdefault(r["memory_id"], []).append({**dict(r), "tags": json.loads(r["tags"])})
        return out

    def last_version(self, memory_id: str) -> int:
        row = self.conn().execute("SELECT MAX(version) FROM memory_versions WHERE memory_id=?",
                                  (memory_id,)).fetchone()
        return int(row[0] or 0)

    # -- forgotten memories ----------------------------------------------------------------------------------
    @staticmethod
    def keep_forgotten(conn: sqlite3.Connection, mem: Memory) -> None:
        """The tombstone of `mem` (written just before, in the same transaction) keeps the memory for `restore`."""
        conn.execute("UPDATE tombstones SET memory=? WHERE id=?", (json.dumps(mem.to_dict(), sort_keys=True), mem.id))

    def forgotten(self, memory_id: str) -> dict[str, Any] | None:
        """The tombstone of `memory_id`: `{id, project_id, scope, forgotten_at, reason, memory}` (`memory` None
        once its text was purged); None without one."""
        row = self.conn().execute("SELECT id, project_id, scope, forgotten_at, reason, memory FROM tombstones"
                                  " WHERE id=?", (memory_id,)).fetchone()
        if row is None:
            return None
        return {**dict(row), "memory": json.loads(row["memory"]) if row["memory"] else None}

    @staticmethod
    def drop_tombstone(conn: sqlite3.Connection, memory_id: str) -> None:
        conn.execute("DELETE FROM tombstones WHERE id=?", (memory_id,))

    @staticmethod
    def purge_forgotten(conn: sqlite3.Connection, before: float) -> int:
        """The text of memories forgotten before `before` is purged (the tombstone itself stays, so a snapshot
        merge never brings them back), and so is their history. Returns how many were purged."""
        ids = [r[0] for r in conn.execute("SELECT id FROM tombstones WHERE memory IS NOT NULL AND forgotten_at<?",
                                          (before,))]
        for chunk in chunked(ids):
            conn.execute(f"UPDATE tombstones SET memory=NULL WHERE id IN ({marks(len(chunk))})", chunk)
            conn.execute(f"DELETE FROM memory_versions WHERE memory_id IN ({marks(len(chunk))})", chunk)
        return len(ids)

    def tag_counts(self, project_id: str) -> dict[str, int]:
        """How many of this project's (and global) memories carry each tag, most used first."""
        rows = self.conn().execute(
            "SELECT j.value, COUNT(*) FROM memories, json_each(memories.tags) AS j WHERE"
            " ((memories.scope='project' AND memories.project_id=?) OR memories.scope='global')"
            " GROUP BY j.value ORDER BY COUNT(*) DESC, j.value", (project_id,))
        return {str(r[0]): int(r[1]) for r in rows}

    def purgeable(self, before: float) -> bool:
        """Whether a tombstone forgotten before `before` still holds its memory's text."""
        return self.conn().execute("SELECT 1 FROM tombstones WHERE memory IS NOT NULL AND forgotten_at<? LIMIT 1",
                                   (before,)).fetchone() is not None
