"""Store files that are not open as the live store: backups (an online copy, its check, its change-log height)
and the check of a file before an owner opens it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mnemo.core.store.db import summarize_check


def check_db(path: Path) -> str:
    """`ok`, `missing`, or what SQLite says is wrong with the store file at `path` (never raises)."""
    if not Path(path).exists():
        return "missing"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = conn.execute("PRAGMA integrity_check(100)").fetchall()
            if conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name='memories'").fetchone()[0] != 1:
                return "not a Mnemo store (no memories table)"
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return f"cannot read: {exc}"
    return summarize_check([str(r[0]) for r in rows])


def copy_db(src_path: Path, dst_path: Path) -> str:
    """Copy the store at `src_path` to `dst_path` with SQLite's online backup API (one step: a consistent copy of
    the last committed state while the owner keeps writing); returns the copy's `quick_check` answer."""
    src = sqlite3.connect(src_path, timeout=30)
    try:
        dst = sqlite3.connect(dst_path)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
            return dst.execute("PRAGMA quick_check").fetchone()[0]
        finally:
            dst.close()
    finally:
        src.close()


def last_change(db: Path) -> int | None:
    """The change log's last sequence number in a store or backup file (None: unreadable)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
