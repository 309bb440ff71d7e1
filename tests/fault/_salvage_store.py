"""A store with a known history for the repair tests: bulk notes, forgets, a backup, more notes and edits after
it, a dense index in sync; then 64 KiB of it overwritten. The hash embedder: plumbing only, nothing here is about
relevance.

Ground truth is read from the store file before it is damaged: the live memories (every column), and the ids
forgotten before the backup (tombstoned in it, so they must neither come back nor be listed as lost).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.memory.manage import forget
from mnemo.core.models import Context, Memory
from mnemo.core.recovery import backup
from mnemo.core.store import Store
from mnemo.core.text import content_hash

# Every byte of randomness in a built store (the notes, their ids, what is forgotten and edited) and in the damage
# comes from this seed, so a failure can be replayed: MNEMO_SALVAGE_SEED=<the seed the failure names> (the
# timestamps still come from the clock).
SEED = int(os.environ.get("MNEMO_SALVAGE_SEED", "7"))
CTX = Context(project_id="git-salvage", project_name="salvage", branch="main", default_branch="main")
PARTS = ["payments API", "auth service", "billing worker", "search indexer", "CI pipeline", "database layer",
         "message queue", "feature flags", "rate limiter", "upload handler", "scheduler", "config loader"]
VERBS = ["requires", "must use", "should avoid", "relies on", "was migrated to", "retries with", "logs through"]
OBJECTS = ["idempotency keys", "exponential backoff", "structured logging", "a read replica", "Postgres 16",
           "short-lived JWTs", "pydantic models", "a circuit breaker", "UTC timestamps", "signed URLs"]


@dataclass
class Truth:
    live: dict[str, tuple]  # id -> the full row as it was before the damage
    in_backup: dict[str, tuple]  # id -> the row in the backup
    forgotten: set[str]  # forgotten before the backup
    backup_name: str


def note(rng: random.Random, i: int) -> str:
    return (f"{rng.choice(PARTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (ticket {rng.randrange(99999)}-{i}; "
            f"decided in review {rng.randrange(999)})")


def _memory(rng: random.Random, text: str, now: float, i: int) -> Memory:
    return Memory(id=f"mem-{rng.getrandbits(80):020x}", text=text, type="project", kind="fact", scope="project",
                  project_id=CTX.project_id, project_name=CTX.project_name, branch="main", importance=0.5,
                  confirmations=1, created_at=now - i, updated_at=now - i, last_accessed=now - i, access_count=0,
                  content_hash=content_hash(text), source="user", author="test",
                  provenance={"origin": "salvage-test", "n": i}, tags=["salvage", f"t{i % 7}"])


def _insert(rng: random.Random, store: Store, emb: HashEmbedder, texts: list[str], now: float,
            first: int) -> list[str]:
    ids = []
    vecs = emb.embed(texts)
    with store.write() as c:
        for k, text in enumerate(texts):
            m = _memory(rng, text, now, first + k)
            store.insert_memory(c, m, vecs[k], emb.model_id)
            ids.append(m.id)
    return ids


def rows(db: Path, table: str = "memories") -> dict[str, tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0]: tuple(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY id")}
    finally:
        conn.close()


def build(home: Path, n: int, seed: int = SEED, backup_at: float = 0.3) -> Truth:
    """n memories: `backup_at` of them before the backup (1 % of those forgotten before it), the rest after it, and
    2 % of the older ones edited after it; the dense index replayed to the end. A backup early in the history is
    the hard case (a daily backup, a busy day): most rows exist only in the damaged file."""
    from mnemo.core.engine import Engine

    rng = random.Random(seed)
    emb = HashEmbedder()
    home.mkdir(parents=True, exist_ok=True)
    store = Store(home / "mnemo.db")
    before = int(n * backup_at)
    now = time.time() - 3600
    ids: list[str] = []
    for start in range(0, before, 2000):
        ids += _insert(rng, store, emb, [note(rng, i) for i in range(start, min(before, start + 2000))], now, start)
    store.close()
    eng = Engine(home, embedder=emb, start_indexer=False)
    forgotten = set(rng.sample(ids, max(1, before // 100)))
    for i in forgotten:
        forget(eng, CTX, i, "salvage test")
    eng.close()
    taken = backup.take_backup(home, now=time.time() - 60)
    store = Store(home / "mnemo.db")
    _insert(rng, store, emb, [note(rng, i) for i in range(before, n)], time.time(), 0)
    with store.write() as c:
        for i in rng.sample(sorted(set(ids) - forgotten), max(1, n // 50)):
            store.update_memory(c, i, deprecated=True, deprecated_reason="edited after the backup",
                                updated_at=time.time())
    store.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    eng = Engine(home, embedder=emb)  # the dense index, caught up: the witness a real owner leaves behind
    assert eng.wait_indexed(timeout=300)
    eng.close()
    return Truth(rows(home / "mnemo.db"), rows(Path(taken["path"])), forgotten, taken["name"])


def columns(db: Path, table: str = "memories") -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    finally:
        conn.close()


def readable_texts(files: list[Path], texts: dict[str, str]) -> set[str]:
    """Ids whose text (UTF-8, whole) still stands somewhere in these files: what a repair can bring back."""
    blobs = [f.read_bytes() for f in files if f.exists()]
    return {i for i, t in texts.items() if any(t.encode() in b for b in blobs)}


def damage(db: Path, fraction: float, nbytes: int = 64 * 1024, seed: int = 0) -> int:
    """Overwrite `nbytes` with random bytes at `fraction` of the file (not page-aligned), as a bad disk would."""
    size = db.stat().st_size
    offset = int(size * fraction) - nbytes // 2 + 1000
    with open(db, "r+b") as f:
        f.seek(offset)
        f.write(random.Random(seed).randbytes(nbytes))
    return offset


def copy_home(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.sock", "owner.lock", "logs"))
    return dst
