"""The `team_outbox` table: team promotions written in the same transaction as the local memory's mark, sent by
the owner when the team server answers (core/team/client.py)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from typing import Any


class Outbox:
    """Mixed into `Store`: needs `conn()`."""

    @staticmethod
    def enqueue(conn: sqlite3.Connection, record: dict[str, Any], memory_id: str) -> None:
        conn.execute(
            "INSERT INTO team_outbox(record_id, memory_id, namespace, payload, created_at) VALUES(?,?,?,?,?)"
            " ON CONFLICT(record_id) DO UPDATE SET payload=excluded.payload, namespace=excluded.namespace",
            (record["id"], memory_id, record["namespace"], json.dumps(record), time.time()))

    def outbox_summary(self) -> dict[str, Any]:
        conn = self.conn()
        row = conn.execute("SELECT COUNT(*), MIN(created_at), MAX(attempts) FROM team_outbox").fetchone()
        err = conn.execute("SELECT last_error FROM team_outbox WHERE last_error IS NOT NULL"
                           " ORDER BY last_attempt DESC LIMIT 1").fetchone()
        return {"pending": int(row[0]), "oldest_at": row[1], "max_attempts": int(row[2] or 0),
                "last_error": err[0] if err else None}

    def outbox_pending(self) -> int:
        return int(self.conn().execute("SELECT COUNT(*) FROM team_outbox").fetchone()[0])

    def outbox_rows(self, only: Sequence[str] | None = None) -> list[sqlite3.Row]:
        """`record_id, memory_id, payload` of the queued records (all, or `only` these), oldest first."""
        conn = self.conn()
        if only:
            return conn.execute(f"SELECT record_id, memory_id, payload FROM team_outbox WHERE record_id IN"
                                f" ({','.join('?' * len(only))}) ORDER BY created_at", list(only)).fetchall()
        return conn.execute("SELECT record_id, memory_id, payload FROM team_outbox ORDER BY created_at").fetchall()

    @staticmethod
    def outbox_failed(conn: sqlite3.Connection, record_id: str, error: str, at: float) -> None:
        conn.execute("UPDATE team_outbox SET attempts=attempts+1, last_error=?, last_attempt=? WHERE record_id=?",
                     (error, at, record_id))

    @staticmethod
    def outbox_sent(conn: sqlite3.Connection, record_id: str) -> None:
        conn.execute("DELETE FROM team_outbox WHERE record_id=?", (record_id,))
