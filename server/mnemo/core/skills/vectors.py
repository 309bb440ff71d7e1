"""Skill embedding cache: vectors keyed by (model id, content hash), in memory and optionally in SQLite.

Activation embeds only the query; a skill is embedded once per content change (and once per machine with a
disk cache, so a fresh CLI process does not re-embed hundreds of rule files).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from mnemo.core.store.skill_vectors import Error, SkillVectorFile

MAX_MEMORY_ENTRIES = 50_000


class VectorCache:
    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else None
        self._mem: dict[tuple[str, str], np.ndarray] = {}
        self._lock = threading.Lock()
        self._db: SkillVectorFile | None = None
        self.disk_errors = 0

    def _conn(self) -> SkillVectorFile | None:
        if self.path is None:
            return None
        if self._db is None:
            try:
                self._db = SkillVectorFile(self.path)
            except Error:
                self.disk_errors += 1
                self.path = None  # a broken cache only costs re-embedding
                return None
        return self._db

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        missing: list[str] = []
        with self._lock:
            for h in hashes:
                v = self._mem.get((model, h))
                if v is not None:
                    out[h] = v
                else:
                    missing.append(h)
            db = self._conn() if missing else None
            if db is not None:
                try:
                    for h, dim, blob in db.get(model, missing):
                        v = np.frombuffer(blob, dtype=np.float32)
                        if v.shape[0] == dim:
                            out[h] = v
                            self._remember(model, h, v)
                except Error:
                    self.disk_errors += 1
        return out

    def _remember(self, model: str, h: str, v: np.ndarray) -> None:
        if len(self._mem) >= MAX_MEMORY_ENTRIES:
            self._mem.clear()
        self._mem[(model, h)] = v

    def put_many(self, model: str, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        with self._lock:
            for h, v in items.items():
                self._remember(model, h, np.asarray(v, dtype=np.float32))
            db = self._conn()
            if db is not None:
                try:
                    db.put(model, [(h, int(v.shape[0]), np.asarray(v, dtype=np.float32).tobytes())
                                   for h, v in items.items()])
                except Error:
                    self.disk_errors += 1

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
