"""The skill embedding cache on disk (`<home>/skill_vectors.sqlite`, a file of its own): vectors keyed by (model
id, content hash). Errors are the caller's to count: a broken cache only costs re-embedding."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

Error = sqlite3.Error


class SkillVectorFile:
    def __init__(self, path: Path):
        """Open (creating) the cache file; raises `Error` when it cannot be used."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), timeout=5.0, check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS skill_vectors (model TEXT NOT NULL, hash TEXT NOT NULL, "
                             "dim INTEGER NOT NULL, vec BLOB NOT NULL, PRIMARY KEY (model, hash))")
            self._db.commit()
        except sqlite3.Error:
            self._db.close()
            raise

    def get(self, model: str, hashes: Sequence[str]) -> Iterator[tuple[str, int, bytes]]:
        """(hash, dim, float32 blob) of the cached vectors among `hashes`."""
        for i in range(0, len(hashes), 500):
            chunk = list(hashes[i:i + 500])
            q = f"SELECT hash, dim, vec FROM skill_vectors WHERE model=? AND hash IN ({','.join('?' * len(chunk))})"
            yield from self._db.execute(q, [model, *chunk])

    def put(self, model: str, rows: Sequence[tuple[str, int, bytes]]) -> None:
        """Store (hash, dim, float32 blob) rows in one transaction."""
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO skill_vectors (model, hash, dim, vec) VALUES (?, ?, ?, ?)",
                                 [(model, h, dim, blob) for h, dim, blob in rows])

    def close(self) -> None:
        self._db.close()
