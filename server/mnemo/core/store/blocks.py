"""The `blocks` table: the sections of indexed Markdown files (with their FTS rows and vectors)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from mnemo.core.store.codec import block_fts_text, partition_for, vec_to_blob
from mnemo.core.store.memories import chunked, marks


class BlockTable:
    """Mixed into `Store`: needs `conn()` and `log_change()`."""

    def get_block(self, block_id: str) -> sqlite3.Row | None:
        return self.conn().execute("SELECT * FROM blocks WHERE id=?", (block_id,)).fetchone()

    def get_blocks(self, ids: Iterable[str]) -> dict[str, sqlite3.Row]:
        out = {}
        for chunk in chunked(ids):
            for r in self.conn().execute(f"SELECT * FROM blocks WHERE id IN ({marks(len(chunk))})", chunk):
                out[r["id"]] = r
        return out

    def file_blocks(self, project_id: str, source_path: str) -> list[sqlite3.Row]:
        return self.conn().execute(
            "SELECT * FROM blocks WHERE project_id=? AND source_path=? ORDER BY ordinal", (project_id, source_path)
        ).fetchall()

    def file_hashes(self, project_id: str) -> dict[str, str]:
        rows = self.conn().execute(
            "SELECT source_path, MIN(file_hash) AS h FROM blocks WHERE project_id=? GROUP BY source_path",
            (project_id,)).fetchall()
        return {r["source_path"]: r["h"] for r in rows}

    def insert_block(self, conn: sqlite3.Connection, block: dict[str, Any], vec, model_id: str) -> None:
        part = partition_for("project", block["project_id"])
        conn.execute(
            "INSERT OR REPLACE INTO blocks(id, project_id, source_path, ordinal, title, heading_path, text, start_line,"
            " end_line, file_hash, updated_at, part) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
            (block["id"], block["project_id"], block["source_path"], block["ordinal"], block["title"],
             json.dumps(block["heading_path"]), block["text"], block["start_line"], block["end_line"],
             block["file_hash"], block["updated_at"], part))
        conn.execute("DELETE FROM fts WHERE item_id=?", (block["id"],))
        conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)",
                     (block_fts_text(block["heading_path"], block["text"], block["source_path"]), block["id"], part))
        conn.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                     (block["id"], part, model_id, vec_to_blob(vec)))
        self.log_change(conn, block["id"], part, "upsert")
