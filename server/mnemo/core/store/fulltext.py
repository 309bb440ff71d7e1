"""The `fts` table (FTS5, porter tokenizer): the durable full-text index, and the texts the keyword index reads."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence

from mnemo.core.store.codec import block_fts_text, memory_text


class FullText:
    """Mixed into `Store`: needs `conn()`."""

    def fts_search(self, parts: Sequence[str], query: str, limit: int) -> list[tuple[str, float]]:
        """BM25 over the given partitions; scores are positive (higher is better)."""
        if not parts:
            return []
        marks = ",".join("?" * len(parts))
        try:
            rows = self.conn().execute(
                f"SELECT item_id, bm25(fts) AS s FROM fts WHERE fts MATCH ? AND part IN ({marks})"
                f" ORDER BY s LIMIT ?", (query, *parts, limit)).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(r["item_id"], -float(r["s"])) for r in rows]

    def keyword_texts(self, part: str) -> Iterator[tuple[str, str]]:
        """(item id, indexed text) of every memory and block in one partition (builds the keyword index)."""
        conn = self.conn()
        for r in conn.execute("SELECT id, text, tags, kind FROM memories WHERE part=?", (part,)):
            yield r["id"], memory_text(r["text"], json.loads(r["tags"] or "[]"), r["kind"])
        for r in conn.execute("SELECT id, heading_path, text, source_path FROM blocks WHERE part=?", (part,)):
            yield r["id"], block_fts_text(json.loads(r["heading_path"]), r["text"], r["source_path"])

    def keyword_text(self, item_id: str) -> tuple[str, str] | None:
        """(partition, indexed text) of one memory or block; None when it is gone."""
        conn = self.conn()
        if item_id.startswith("blk-"):
            r = conn.execute("SELECT part, heading_path, text, source_path FROM blocks WHERE id=?",
                             (item_id,)).fetchone()
            return r and (r["part"], block_fts_text(json.loads(r["heading_path"]), r["text"], r["source_path"]))
        r = conn.execute("SELECT part, text, tags, kind FROM memories WHERE id=?", (item_id,)).fetchone()
        return r and (r["part"], memory_text(r["text"], json.loads(r["tags"] or "[]"), r["kind"]))
