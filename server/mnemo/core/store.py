"""SQLite source of truth: memories, Markdown blocks, vectors (with the model id), tombstones, a change log, FTS5.

WAL with `synchronous=FULL`; every write runs in `BEGIN IMMEDIATE` and is acknowledged only after COMMIT. The
numbered change log (`changes.seq`) is what the dense index replays; FTS5 gives BM25 inside the same transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mnemo.core.errors import StoreCorrupt, StoreError, StoreNotWritable
from mnemo.core.models import Memory

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    type TEXT NOT NULL,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    project_id TEXT NOT NULL,
    project_name TEXT NOT NULL,
    branch TEXT,
    importance REAL NOT NULL,
    confirmations INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_accessed REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    content_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    provenance TEXT NOT NULL DEFAULT '{}',
    anchors TEXT NOT NULL DEFAULT '[]',
    superseded_by TEXT,
    deprecated INTEGER NOT NULL DEFAULT 0,
    deprecated_reason TEXT,
    tier TEXT NOT NULL DEFAULT 'warm',
    tags TEXT NOT NULL DEFAULT '[]',
    trust TEXT NOT NULL DEFAULT 'trusted',
    status TEXT NOT NULL DEFAULT 'active',
    author TEXT NOT NULL DEFAULT 'local',
    flags TEXT NOT NULL DEFAULT '[]',
    part TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_hash_project ON memories(content_hash, project_id, scope);
CREATE INDEX IF NOT EXISTS memories_part ON memories(part, scope, branch);
CREATE INDEX IF NOT EXISTS memories_project ON memories(project_id, scope);
-- only anchored memories (few): `Store.anchored_memories` reads this, not every memory of the project
CREATE INDEX IF NOT EXISTS memories_anchored ON memories(project_id, scope) WHERE anchors != '[]';
CREATE TABLE IF NOT EXISTS blocks (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL,
    source_path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    title TEXT NOT NULL,
    heading_path TEXT NOT NULL,
    text TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    file_hash TEXT NOT NULL,
    updated_at REAL NOT NULL,
    part TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS blocks_file ON blocks(project_id, source_path, ordinal);
CREATE TABLE IF NOT EXISTS vectors (
    item_id TEXT PRIMARY KEY,
    part TEXT NOT NULL,
    model_id TEXT NOT NULL,
    vec BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS vectors_part ON vectors(part);
CREATE TABLE IF NOT EXISTS tombstones (
    id TEXT PRIMARY KEY,
    content_hash TEXT NOT NULL,
    project_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    forgotten_at REAL NOT NULL,
    reason TEXT
);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    item_id TEXT NOT NULL,
    part TEXT NOT NULL,
    op TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS review (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    item_id TEXT,
    other_id TEXT,
    project_id TEXT,
    payload TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    resolved_at REAL,
    resolution TEXT
);
CREATE INDEX IF NOT EXISTS review_open ON review(resolved_at, project_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    text, item_id UNINDEXED, part UNINDEXED, tokenize = 'porter unicode61'
);
"""

MEMORY_COLUMNS = (
    "id", "text", "type", "kind", "scope", "project_id", "project_name", "branch", "importance", "confirmations",
    "created_at", "updated_at", "last_accessed", "access_count", "content_hash", "source", "provenance", "anchors",
    "superseded_by", "deprecated", "deprecated_reason", "tier", "tags", "trust", "status", "author", "flags", "part",
)
JSON_COLUMNS = frozenset({"provenance", "anchors", "tags", "flags"})


def repair_command(db_path: Path) -> str:
    """The exact command that repairs the store holding `db_path` (with `--home` unless it is the default)."""
    import shlex

    home = Path(db_path).parent
    default = Path(os.environ.get("MNEMO_HOME") or Path.home() / ".mnemo")
    with contextlib.suppress(OSError):
        if home.resolve() == default.resolve():
            return "mnemo doctor --repair"
    return f"mnemo doctor --repair --home {shlex.quote(str(home))}"


def summarize_check(rows: Sequence[str]) -> str:
    """SQLite's integrity/quick check output in one line: how many problems, and the first."""
    msgs = [m for m in rows if m and not m.startswith("*** in database")]
    if msgs == ["ok"] or not msgs:
        return "ok"
    first = " ".join(msgs[0].split())
    more = "100+" if len(rows) >= 100 else str(len(msgs))
    return first if len(msgs) == 1 else f"{more} problems, the first: {first}"


def repair_hint(db_path: Path) -> str:
    return (f"run `{repair_command(db_path)}`: it keeps the damaged file aside, salvages every row that can still be "
            "read, merges the newest good backup and lists what could not be recovered")


def partition_for(scope: str, project_id: str) -> str:
    """Memories and blocks of one project share a partition; global has one of its own (team lives remotely)."""
    return "g" if scope == "global" else f"p-{project_id}"


def vec_to_blob(vec) -> bytes:
    import numpy as np

    return np.asarray(vec, dtype=np.float32).tobytes()


def blob_to_vec(blob: bytes):
    import numpy as np

    return np.frombuffer(blob, dtype=np.float32)


def fts_query(tokens: Sequence[str]) -> str | None:
    """An OR query of quoted terms; FTS5's porter tokenizer stems them the same way as the documents."""
    terms = []
    seen = set()
    for t in tokens:
        t = t.replace('"', "")
        if t and t not in seen:
            seen.add(t)
            terms.append(f'"{t}"')
    return " OR ".join(terms[:64]) if terms else None


class Store:
    """Thread-safe access to the SQLite truth: thread-local connections, one writer at a time."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self.damage: str | None = None  # what SQLite said when it found the file damaged (then nothing is served)
        self._check_dir()
        try:
            with self._write_lock:
                self.conn().executescript(SCHEMA)  # executescript manages its own transaction
            with self.write() as conn:
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                self.damage = str(exc)
                raise StoreCorrupt(f"the store at {self.path} is damaged: {exc}", hint=repair_hint(self.path),
                                   sqlite=str(exc)) from exc
            raise StoreError(f"cannot open the store at {self.path}: {exc}",
                             hint="check the disk and permissions, then run `mnemo doctor`") from exc

    def _check_dir(self) -> None:
        d = self.path.parent
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreNotWritable(f"cannot create the store directory {d}: {exc.strerror}",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
        if not os.access(d, os.W_OK | os.X_OK) or (self.path.exists() and not os.access(self.path, os.W_OK)):
            raise StoreNotWritable(f"the store directory {d} is not writable",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions")

    # -- connections -----------------------------------------------------------------------------------------
    def conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            try:
                c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            except sqlite3.OperationalError as exc:
                raise StoreNotWritable(f"cannot open {self.path}: {exc}",
                                       hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
            c.row_factory = sqlite3.Row
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA foreign_keys=ON")
            c.execute("PRAGMA busy_timeout=30000")
            self._local.conn = c
            with self._conns_lock:
                self._conns.append(c)
        return c

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One all-or-nothing write transaction; acknowledged only after COMMIT returns.

        SQLite errors (disk full, I/O error, a busy or damaged database) become `StoreError`s that say what to do.
        A failed COMMIT is rolled back here: otherwise the transaction would stay open on this thread's
        connection, the next write would join it as "nested", and nothing after it would ever be committed.
        """
        with self._write_lock:
            c = self.conn()
            if c.in_transaction:  # nested use: join the outer transaction
                yield c
                return
            try:
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self.store_error(exc, "start a write") from exc
            try:
                yield c
            except BaseException as exc:
                self._rollback(c)
                if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError) \
                        and not isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
                    raise self.store_error(exc, "write") from exc
                raise
            else:
                try:
                    c.execute("COMMIT")
                except sqlite3.DatabaseError as exc:
                    self._rollback(c)
                    raise self.store_error(exc, "commit") from exc

    @staticmethod
    def _rollback(c: sqlite3.Connection) -> None:
        try:
            if c.in_transaction:
                c.execute("ROLLBACK")
        except sqlite3.Error:  # SQLite may have rolled back already (after SQLITE_FULL / IOERR)
            pass

    def store_error(self, exc: sqlite3.DatabaseError, what: str) -> StoreError:
        """A user-fixable error for a SQLite failure (nothing of this write was stored)."""
        msg = str(exc)
        low = msg.lower()
        if "full" in low:
            return StoreError(f"the disk holding {self.path.parent} is full: could not {what}; this change was not "
                              "stored (everything acknowledged before is safe)",
                              hint="free some disk space, then retry", sqlite=msg)
        if "i/o" in low or "disk" in low:
            return StoreError(f"disk I/O error on {self.path}: could not {what}; this change was not stored "
                              "(everything acknowledged before is safe)",
                              hint="check the disk (space, quota, file size limit `ulimit -f`, permissions), then "
                                   "retry; `mnemo doctor` checks the store", sqlite=msg)
        if "locked" in low or "busy" in low:
            return StoreError(f"the store at {self.path} stayed busy: could not {what}",
                              hint="another program holds a long write lock on mnemo.db; close it and retry",
                              sqlite=msg)
        if "malformed" in low or "not a database" in low or "corrupt" in low:
            self.damage = self.damage or msg
            return StoreCorrupt(f"the store at {self.path} is damaged ({msg}): could not {what}",
                                hint=repair_hint(self.path), sqlite=msg)
        return StoreError(f"the store at {self.path} failed: could not {what} ({msg})",
                          hint="run `mnemo doctor`", sqlite=msg)

    def close(self) -> None:
        with self._conns_lock:
            for c in self._conns:
                with contextlib.suppress(Exception):
                    c.close()
            self._conns.clear()
        self._local = threading.local()

    # -- meta ------------------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (key, value))

    # -- change log ------------------------------------------------------------------------------------------
    @staticmethod
    def log_change(conn: sqlite3.Connection, item_id: str, part: str, op: str) -> None:
        conn.execute("INSERT INTO changes(item_id, part, op, at) VALUES(?,?,?,?)", (item_id, part, op, time.time()))

    def max_seq(self) -> int:
        row = self.conn().execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
        return int(row[0])

    def changes_after(self, seq: int, limit: int = 100000) -> list[sqlite3.Row]:
        return self.conn().execute(
            "SELECT seq, item_id, part, op FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit)
        ).fetchall()

    # -- memories --------------------------------------------------------------------------------------------
    @staticmethod
    def _memory_values(mem: Memory, part: str) -> list[Any]:
        d = mem.to_dict()
        d["part"] = part
        vals = []
        for col in MEMORY_COLUMNS:
            v = d[col]
            if col in JSON_COLUMNS:
                v = json.dumps(v, sort_keys=True)
            elif col == "deprecated":
                v = int(bool(v))
            vals.append(v)
        return vals

    @staticmethod
    def memory_fts_text(mem: Memory) -> str:
        return " ".join([mem.text, " ".join(mem.tags), mem.kind])

    def insert_memory(self, conn: sqlite3.Connection, mem: Memory, vec, model_id: str) -> None:
        part = partition_for(mem.scope, mem.project_id)
        cols = ",".join(MEMORY_COLUMNS)
        marks = ",".join("?" * len(MEMORY_COLUMNS))
        conn.execute(f"INSERT INTO memories({cols}) VALUES({marks})", self._memory_values(mem, part))
        conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)", (self.memory_fts_text(mem), mem.id, part))
        conn.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                     (mem.id, part, model_id, vec_to_blob(vec)))
        self.log_change(conn, mem.id, part, "upsert")

    def update_memory(self, conn: sqlite3.Connection, mem_id: str, reindex: bool = False, **fields: Any) -> None:
        """Update columns of one memory. `reindex` re-logs it for the dense index (visibility changed)."""
        if not fields:
            return
        sets, vals = [], []
        for k, v in fields.items():
            if k not in MEMORY_COLUMNS or k == "id":
                raise ValueError(f"unknown memory column {k}")
            if k in JSON_COLUMNS:
                v = json.dumps(v, sort_keys=True)
            elif k == "deprecated":
                v = int(bool(v))
            sets.append(f"{k}=?")
            vals.append(v)
        vals.append(mem_id)
        conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id=?", vals)
        if "text" in fields or "tags" in fields or "kind" in fields:
            row = conn.execute("SELECT * FROM memories WHERE id=?", (mem_id,)).fetchone()
            if row is not None:
                m = Memory.from_row(row)
                conn.execute("DELETE FROM fts WHERE item_id=?", (mem_id,))
                conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)", (self.memory_fts_text(m), m.id, row["part"]))
                reindex = True  # the keyword index replays the change log too
        if reindex:
            row = conn.execute("SELECT part FROM memories WHERE id=?", (mem_id,)).fetchone()
            if row is not None:
                self.log_change(conn, mem_id, row["part"], "upsert")

    def set_vector(self, conn: sqlite3.Connection, item_id: str, part: str, vec, model_id: str) -> None:
        conn.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                     (item_id, part, model_id, vec_to_blob(vec)))
        self.log_change(conn, item_id, part, "upsert")

    def delete_item(self, conn: sqlite3.Connection, item_id: str) -> None:
        row = conn.execute("SELECT part FROM vectors WHERE item_id=?", (item_id,)).fetchone()
        part = row["part"] if row else ""
        conn.execute("DELETE FROM memories WHERE id=?", (item_id,))
        conn.execute("DELETE FROM blocks WHERE id=?", (item_id,))
        conn.execute("DELETE FROM fts WHERE item_id=?", (item_id,))
        conn.execute("DELETE FROM vectors WHERE item_id=?", (item_id,))
        self.log_change(conn, item_id, part, "delete")

    def get_memory(self, mem_id: str) -> Memory | None:
        row = self.conn().execute("SELECT * FROM memories WHERE id=?", (mem_id,)).fetchone()
        return Memory.from_row(row) if row else None

    def get_memories(self, ids: Iterable[str]) -> dict[str, Memory]:
        ids = list(ids)
        out: dict[str, Memory] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            rows = self.conn().execute(
                f"SELECT * FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall()
            for r in rows:
                out[r["id"]] = Memory.from_row(r)
        return out

    VISIBILITY_COLUMNS = ("id", "type", "scope", "project_id", "branch", "status", "deprecated", "superseded_by",
                          "tier", "content_hash", "updated_at")

    def visibility_rows(self, ids: Iterable[str]) -> dict[str, sqlite3.Row]:
        """The few columns recall filters on, without building full `Memory` objects."""
        ids = list(ids)
        out: dict[str, sqlite3.Row] = {}
        cols = ", ".join(self.VISIBILITY_COLUMNS)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self.conn().execute(
                    f"SELECT {cols} FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk):
                out[r["id"]] = r
        return out

    def query_memories(self, where: str = "1=1", params: Sequence[Any] = (), order: str = "updated_at DESC, id",
                       limit: int | None = None, offset: int = 0) -> list[Memory]:
        sql = f"SELECT * FROM memories WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        return [Memory.from_row(r) for r in self.conn().execute(sql, tuple(params)).fetchall()]

    # -- memories anchored to a file (the language server's hovers and lenses) -----------------------------------
    # One query, kept in its own block so it moves with the rest of the store's SQL.
    def anchored_memories(self, project_id: str, path: str,
                          branches: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The project memories with an anchor into `path` (relative to the project root), on `branches` (plus the
        branch-independent ones; None: every branch), newest first: each one's `VISIBILITY_COLUMNS` and its
        `anchors` (parsed), not the whole record (`get_memories` for those). Any status, tier or deprecation: the
        caller's visibility rule decides. The partial index `memories_anchored` keeps this to the project's anchored
        memories; `LIKE` narrows on the JSON text and the exact path is compared here (LIKE ignores ASCII case)."""
        literal = ('"path": ' + json.dumps(path)).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        cols = ", ".join((*self.VISIBILITY_COLUMNS, "anchors"))
        sql = (f"SELECT {cols} FROM memories WHERE project_id=? AND scope='project' AND anchors != '[]'"
               " AND anchors LIKE ? ESCAPE '\\'")
        params: list[Any] = [project_id, f"%{literal}%"]
        if branches is not None:
            sql += f" AND (branch IS NULL OR branch IN ({','.join('?' * len(branches))}))" if branches else \
                " AND branch IS NULL"
            params.extend(branches)
        out = []
        for row in self.conn().execute(sql + " ORDER BY updated_at DESC, id", params):
            anchors = json.loads(row["anchors"])
            if any(isinstance(a, dict) and a.get("path") == path for a in anchors):
                out.append({**{k: row[k] for k in self.VISIBILITY_COLUMNS}, "anchors": anchors})
        return out

    # -- blocks ----------------------------------------------------------------------------------------------
    def get_block(self, block_id: str) -> sqlite3.Row | None:
        return self.conn().execute("SELECT * FROM blocks WHERE id=?", (block_id,)).fetchone()

    def get_blocks(self, ids: Iterable[str]) -> dict[str, sqlite3.Row]:
        ids = list(ids)
        out = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self.conn().execute(
                    f"SELECT * FROM blocks WHERE id IN ({','.join('?' * len(chunk))})", chunk).fetchall():
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
        part = f"p-{block['project_id']}"
        conn.execute(
            "INSERT OR REPLACE INTO blocks(id, project_id, source_path, ordinal, title, heading_path, text, start_line,"
            " end_line, file_hash, updated_at, part) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
            (block["id"], block["project_id"], block["source_path"], block["ordinal"], block["title"],
             json.dumps(block["heading_path"]), block["text"], block["start_line"], block["end_line"],
             block["file_hash"], block["updated_at"], part))
        conn.execute("DELETE FROM fts WHERE item_id=?", (block["id"],))
        conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)",
                     (self.block_fts_text(block["heading_path"], block["text"], block["source_path"]), block["id"],
                      part))
        conn.execute("INSERT OR REPLACE INTO vectors(item_id, part, model_id, vec) VALUES(?,?,?,?)",
                     (block["id"], part, model_id, vec_to_blob(vec)))
        self.log_change(conn, block["id"], part, "upsert")

    @staticmethod
    def block_fts_text(heading_path: Sequence[str], text: str, source_path: str) -> str:
        return " ".join([" ".join(heading_path), text, source_path])

    # -- search helpers --------------------------------------------------------------------------------------
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

    def vectors(self, ids: Sequence[str], parts: Sequence[str] | None = None) -> dict[str, bytes]:
        """Stored vectors of the given items (only those in `parts`, when given)."""
        out = {}
        ids = list(ids)
        wanted = set(parts) if parts else None
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            # filter the partition here: `part IN (...)` in SQL makes the planner scan the partition's index
            for r in self.conn().execute(
                    f"SELECT item_id, part, vec FROM vectors WHERE item_id IN ({','.join('?' * len(chunk))})", chunk):
                if wanted is None or r["part"] in wanted:
                    out[r["item_id"]] = r["vec"]
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

    def integrity_check(self) -> str:
        """`ok`, or a one-line summary of what SQLite's integrity_check found."""
        return summarize_check([str(r[0]) for r in self.conn().execute("PRAGMA integrity_check(100)")])

    # -- damage ----------------------------------------------------------------------------------------------
    def check_damage(self) -> str | None:
        """Run SQLite's `quick_check` (every page read once: ~0.1 s per 10,000 memories); remember and return what
        it found wrong, None when the file is sound."""
        try:
            rows = [str(r[0]) for r in self.conn().execute("PRAGMA quick_check(100)")]
            found = None if rows == ["ok"] else summarize_check(rows)
        except sqlite3.DatabaseError as exc:
            found = str(exc)
        if found:
            self.damage = self.damage or f"SQLite quick_check: {found}"
        return found

    def damage_error(self) -> StoreCorrupt | None:
        """The error every request gets while the file is known to be damaged (writing on would spread it)."""
        if self.damage is None:
            return None
        return StoreCorrupt(f"the store at {self.path} is damaged ({self.damage}); nothing can be read or written "
                            "until it is repaired", hint=repair_hint(self.path), sqlite=self.damage)
