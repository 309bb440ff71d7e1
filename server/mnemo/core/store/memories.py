"""The `memories` table (with its FTS rows and tombstones): every statement that reads or writes a memory.

Writes take the connection of the caller's `store.write()` transaction; reads use this thread's connection, so a
read inside a write sees the write's own changes. Every change of a memory's visibility or vector is logged to
`changes` (`reindex=True`), so the dense and keyword indexes follow.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from mnemo.core.api_types import records
from mnemo.core.errors import NotFound
from mnemo.core.models import Memory
from mnemo.core.store.codec import memory_fts_text, partition_for, vec_to_blob
from mnemo.core.store.schema import JSON_COLUMNS, MEMORY_COLUMNS, VISIBILITY_COLUMNS

# The memories one project sees: its own project-scope memories and the global ones.
PROJECT_OR_GLOBAL = "((scope='project' AND project_id=?) OR scope='global')"
LIVE = "status='active' AND superseded_by IS NULL AND deprecated=0"
VISIBILITY_SELECT = ", ".join(VISIBILITY_COLUMNS)
VISIBILITY_COLUMNS_SET = frozenset(VISIBILITY_COLUMNS)
SHARED_AFTER = VISIBILITY_COLUMNS.index("content_hash")  # the columns before it repeat across rows (type, branch...)


# `get_memories` reads these columns as plain tuples and makes each a `Memory` from its values in order (the
# dataclass's fields are the table's columns but `part`, in the same order): ~2x quicker than `Memory.from_row` of a
# `sqlite3.Row` (no Row, no dict of it, no keyword arguments), for the ~10 neighbours a write loads (issue 22,
# sixth pass). Should the two orders ever differ, `from_row` serves instead.
MEMORY_FIELDS = tuple(c for c in MEMORY_COLUMNS if c != "part")
FIELDS_SELECT = ", ".join(MEMORY_FIELDS)
FIELDS_IN_ORDER = MEMORY_FIELDS == tuple(f for f in Memory.__dataclass_fields__)
_JSON_AT = tuple((i, c == "provenance") for i, c in enumerate(MEMORY_FIELDS) if c in JSON_COLUMNS)
_DEPRECATED_AT = MEMORY_FIELDS.index("deprecated")


def memory_of(values: Sequence[Any]) -> Memory:
    """The memory of a row of `FIELDS_SELECT` (a plain tuple), decoded as `Memory.from_row` decodes a row."""
    v = list(values)
    for i, is_dict in _JSON_AT:
        x = v[i]
        if not x:
            v[i] = {} if is_dict else []
        elif x == "[]":
            v[i] = []
        elif x == "{}":
            v[i] = {}
        else:
            v[i] = json.loads(x)
    v[_DEPRECATED_AT] = bool(v[_DEPRECATED_AT])
    return Memory(*v)


# The visibility rows of at most this many memories are kept in memory (~0.5 kB each): all of a store up to this
# size, read once in the owner's background thread (`warm_visibility`), else those recall asked for last.
VISIBILITY_CACHE_ROWS = 20000


class VisibilityCache:
    """The `VISIBILITY_COLUMNS` of memories as recall last read them, kept exactly current: every statement that
    inserts, changes or deletes a memory row goes through `MemoryTable` and drops that row here at once (`changed`)
    and again when its transaction has ended (`settled`, called by `Database.write`): a reader that read the row
    before the commit, and stores it after the first drop, loses it at the second. A reader stores what it read only
    when no change came in between (`gen`), and never what it read inside a transaction (it may be uncommitted).
    Recall reads these columns for each of its ~80 candidates: from SQLite ~8 us each on a 10k store once the query
    embedding has evicted the CPU caches, ~0.6 ms per recall (issue 22, fourth pass)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple] = {}
        self.gen = 0
        self._pending: set[str] = set()
        self._lock = threading.Lock()

    def changed(self, ids: Iterable[str]) -> None:
        with self._lock:
            for i in ids:
                self.rows.pop(i, None)
                self._pending.add(i)
            self.gen += 1

    def settled(self) -> None:
        if not self._pending:
            return
        with self._lock:
            for i in self._pending:
                self.rows.pop(i, None)
            self._pending.clear()
            self.gen += 1

    def fill(self, gen: int, rows: dict[str, tuple]) -> None:
        with self._lock:
            if gen != self.gen:
                return
            if len(self.rows) + len(rows) > VISIBILITY_CACHE_ROWS:
                self.rows = {}
            if len(rows) <= VISIBILITY_CACHE_ROWS:
                self.rows.update(rows)

    def clear(self) -> None:
        with self._lock:
            self.rows = {}
            self._pending.clear()
            self.gen += 1


def chunked(ids: Iterable[str], size: int = 500) -> Iterable[list[str]]:
    ids = list(ids)
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


class MemoryTable:
    """Mixed into `Store` (store/__init__.py): needs `conn()` and `log_change()`."""

    # -- writes ----------------------------------------------------------------------------------------------
    @staticmethod
    def _memory_values(mem: Memory, part: str) -> list[Any]:
        d = mem.__dict__  # the values themselves (a frozen dataclass): each is written as SQL or as JSON text
        vals = []
        for col in MEMORY_COLUMNS:
            v = part if col == "part" else d[col]
            if col in JSON_COLUMNS:
                v = json.dumps(v, sort_keys=True)
            elif col == "deprecated":
                v = int(bool(v))
            vals.append(v)
        return vals

    def insert_memory(self, conn: sqlite3.Connection, mem: Memory, vec, model_id: str) -> None:
        part = partition_for(mem.scope, mem.project_id)
        cols = ",".join(MEMORY_COLUMNS)
        self.visibility_cache.changed([mem.id])
        conn.execute(f"INSERT INTO memories({cols}) VALUES({marks(len(MEMORY_COLUMNS))})",
                     self._memory_values(mem, part))
        conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)", (memory_fts_text(mem), mem.id, part))
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
        if not VISIBILITY_COLUMNS_SET.isdisjoint(fields):
            self.visibility_cache.changed([mem_id])
        conn.execute(f"UPDATE memories SET {', '.join(sets)} WHERE id=?", vals)
        if "text" in fields or "tags" in fields or "kind" in fields:
            row = conn.execute("SELECT * FROM memories WHERE id=?", (mem_id,)).fetchone()
            if row is not None:
                m = Memory.from_row(row)
                conn.execute("DELETE FROM fts WHERE item_id=?", (mem_id,))
                conn.execute("INSERT INTO fts(text, item_id, part) VALUES(?,?,?)", (memory_fts_text(m), m.id,
                                                                                    row["part"]))
                reindex = True  # the keyword index replays the change log too
        if reindex:
            row = conn.execute("SELECT part FROM memories WHERE id=?", (mem_id,)).fetchone()
            if row is not None:
                self.log_change(conn, mem_id, row["part"], "upsert")

    def move_to_scope(self, conn: sqlite3.Connection, mem: Memory, scope: str, provenance: dict[str, Any],
                      now: float) -> None:
        """A promotion: the memory (its vector and FTS row too) moves to `scope`'s partition, branch-free. The
        change is logged under the old partition, so the index drops the old copy and adds the new one."""
        new_part = partition_for(scope, mem.project_id)
        self.visibility_cache.changed([mem.id])
        conn.execute("UPDATE memories SET scope=?, branch=NULL, part=?, provenance=?, updated_at=? WHERE id=?",
                     (scope, new_part, json.dumps(provenance, sort_keys=True), now, mem.id))
        conn.execute("UPDATE vectors SET part=? WHERE item_id=?", (new_part, mem.id))
        conn.execute("UPDATE fts SET part=? WHERE item_id=?", (new_part, mem.id))
        self.log_change(conn, mem.id, partition_for(mem.scope, mem.project_id), "upsert")

    def record_accesses(self, conn: sqlite3.Connection, accessed: dict[str, float]) -> None:
        """Recall reinforcement: the last access time (never moved back) and one more access per memory."""
        for mem_id, at in accessed.items():
            conn.execute("UPDATE memories SET last_accessed=MAX(last_accessed, ?), access_count=access_count+1"
                         " WHERE id=?", (at, mem_id))

    def trust_imported(self, conn: sqlite3.Connection, snapshot_sha256: str) -> int:
        """A person accepted a snapshot import: its active, untrusted memories become trusted. Returns how many."""
        cur = conn.execute("UPDATE memories SET trust='trusted' WHERE trust='untrusted' AND status='active' AND"
                           " json_extract(provenance, '$.imported_from.snapshot_sha256')=?", (snapshot_sha256,))
        return cur.rowcount

    def delete_item(self, conn: sqlite3.Connection, item_id: str) -> None:
        """Remove a memory or a Markdown block with its FTS row and vector (logged: the indexes drop it)."""
        row = conn.execute("SELECT part FROM vectors WHERE item_id=?", (item_id,)).fetchone()
        part = row["part"] if row else ""
        self.visibility_cache.changed([item_id])
        conn.execute("DELETE FROM memories WHERE id=?", (item_id,))
        conn.execute("DELETE FROM blocks WHERE id=?", (item_id,))
        conn.execute("DELETE FROM fts WHERE item_id=?", (item_id,))
        conn.execute("DELETE FROM vectors WHERE item_id=?", (item_id,))
        conn.execute("DELETE FROM note_parses WHERE id=?", (item_id,))
        self.log_change(conn, item_id, part, "delete")

    def forget_memory(self, conn: sqlite3.Connection, mem: Memory, reason: str | None, now: float) -> None:
        """Delete a memory for good, leaving a tombstone (a snapshot merge never brings it back)."""
        conn.execute("INSERT OR REPLACE INTO tombstones(id, content_hash, project_id, scope, forgotten_at, reason)"
                     " VALUES(?,?,?,?,?,?)", (mem.id, mem.content_hash, mem.project_id, mem.scope, now, reason))
        self.delete_item(conn, mem.id)

    def seen_ids(self, ids: Sequence[str]) -> set[str]:
        """The ids among `ids` this store has held: a change-log entry, a history row, a tombstone, a review item,
        or a memory a repair listed as lost (meta `repair_lost_memories`). A Markdown import restores only these
        with their ids; any other id is a new memory."""
        conn = self.conn()
        out: set[str] = set()
        for chunk in chunked(ids):
            m = marks(len(chunk))
            for sql in (f"SELECT item_id FROM changes WHERE item_id IN ({m})",
                        f"SELECT memory_id FROM memory_versions WHERE memory_id IN ({m})",
                        f"SELECT id FROM tombstones WHERE id IN ({m})",
                        f"SELECT item_id FROM review WHERE item_id IN ({m})"):
                out |= {r[0] for r in conn.execute(sql, chunk)}
        row = conn.execute("SELECT value FROM meta WHERE key='repair_lost_memories'").fetchone()
        try:
            lost = set(json.loads(row[0])) if row else set()
        except (ValueError, TypeError):
            lost = set()
        return out | (lost & set(ids))

    def tombstoned(self, ids: Sequence[str]) -> set[str]:
        out: set[str] = set()
        for chunk in chunked(ids):
            out |= {r[0] for r in self.conn().execute(
                f"SELECT id FROM tombstones WHERE id IN ({marks(len(chunk))})", chunk)}
        return out

    # -- reads by id -----------------------------------------------------------------------------------------
    def get_memory(self, mem_id: str) -> Memory | None:
        row = self.conn().execute("SELECT * FROM memories WHERE id=?", (mem_id,)).fetchone()
        return Memory.from_row(row) if row else None

    def record(self, mem_id: str) -> records.Memory:
        """The API record of a memory that exists (one the caller just wrote); a missing one is a `NotFound`."""
        m = self.get_memory(mem_id)
        if m is None:
            raise NotFound(f"no memory {mem_id}", hint="it was forgotten meanwhile; check with `mnemo list`")
        return m.to_dict()

    def memory_part(self, mem_id: str) -> str | None:
        row = self.conn().execute("SELECT part FROM memories WHERE id=?", (mem_id,)).fetchone()
        return row[0] if row else None

    def get_memories(self, ids: Iterable[str]) -> dict[str, Memory]:
        out: dict[str, Memory] = {}
        if not FIELDS_IN_ORDER:
            for chunk in chunked(ids):
                for r in self.conn().execute(f"SELECT * FROM memories WHERE id IN ({marks(len(chunk))})", chunk):
                    out[r["id"]] = Memory.from_row(r)
            return out
        cur = self.conn().cursor()
        cur.row_factory = None
        for chunk in chunked(ids):
            for r in cur.execute(f"SELECT {FIELDS_SELECT} FROM memories WHERE id IN ({marks(len(chunk))})", chunk):
                out[r[0]] = memory_of(r)
        return out

    def visibility_rows(self, ids: Iterable[str]) -> dict[str, tuple]:
        """The few columns recall filters on (`VISIBILITY_COLUMNS`, in that order: `id` first), without building
        full `Memory` objects: plain tuples, read on every recall for each of its candidates (through
        `VisibilityCache`: the rows it holds are those SQLite holds now)."""
        cache = self.visibility_cache
        held = cache.rows
        out: dict[str, tuple] = {}
        missing: list[str] = []
        for i in ids:
            r = held.get(i)
            if r is None:
                missing.append(i)
            else:
                out[i] = r
        if missing:
            gen = cache.gen
            conn = self.conn()
            read = self._visibility_read(conn, missing)
            if read and not conn.in_transaction:
                cache.fill(gen, read)
            out.update(read)
        return out

    @staticmethod
    def _visibility_read(conn: sqlite3.Connection, ids: list[str]) -> dict[str, tuple]:
        out: dict[str, tuple] = {}
        cur = conn.cursor()
        cur.row_factory = None
        for chunk in chunked(ids):
            for r in cur.execute(f"SELECT {VISIBILITY_SELECT} FROM memories WHERE id IN ({marks(len(chunk))})",
                                 chunk):
                out[r[0]] = r
        return out

    def warm_visibility(self) -> int:
        """Read the visibility rows of every memory into the cache when the store holds no more than
        `VISIBILITY_CACHE_ROWS` (the owner's background thread, at start); the repeated column values are shared.
        Returns how many rows it holds now."""
        cache = self.visibility_cache
        conn = self.conn()
        if conn.in_transaction:
            return len(cache.rows)
        (count,) = conn.execute("SELECT COUNT(*) FROM memories").fetchone()
        if count > VISIBILITY_CACHE_ROWS:
            return len(cache.rows)
        gen = cache.gen
        shared: dict[Any, Any] = {}
        read: dict[str, tuple] = {}
        cur = conn.cursor()
        cur.row_factory = None
        for r in cur.execute(f"SELECT {VISIBILITY_SELECT} FROM memories"):
            read[r[0]] = (r[0], *(shared.setdefault(v, v) if isinstance(v, str) and i < SHARED_AFTER else v
                                  for i, v in enumerate(r[1:], 1)))
        cache.fill(gen, read)
        return len(cache.rows)

    def query_memories(self, where: str = "1=1", params: Sequence[Any] = (), order: str = "updated_at DESC, id",
                       limit: int | None = None, offset: int = 0) -> list[Memory]:
        """Memories matching a WHERE clause (the named queries below, tests, and one-off tools)."""
        sql = f"SELECT * FROM memories WHERE {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)} OFFSET {int(offset)}"
        return [Memory.from_row(r) for r in self.conn().execute(sql, tuple(params)).fetchall()]

    # -- named queries ---------------------------------------------------------------------------------------
    def same_content(self, content_hash: str, project_id: str) -> list[Memory]:
        """This project's memories holding exactly this text (content-hash dedup on write)."""
        return self.query_memories("content_hash=? AND project_id=? AND scope='project'", (content_hash, project_id))

    def held_hashes(self, hashes: Iterable[str], project_id: str) -> set[str]:
        """The hashes among `hashes` that a memory `same_content` finds holds: a `remember_batch` chunk looks its
        notes' texts up at once and asks `same_content` only for these (and the texts the chunk itself writes)."""
        out: set[str] = set()
        for chunk in chunked(set(hashes)):
            out |= {r[0] for r in self.conn().execute(
                f"SELECT content_hash FROM memories WHERE content_hash IN ({marks(len(chunk))}) AND project_id=?"
                " AND scope='project'", (*chunk, project_id))}
        return out

    def learned_feedback(self, project_id: str, limit: int = 500) -> list[Memory]:
        """This project's corrections learned from prompts (kind `feedback`), active or pending, not superseded or
        deprecated, newest first (core/agent/corrections.py looks for the same one again among them)."""
        return self.query_memories("scope='project' AND project_id=? AND kind='feedback' AND status IN ('active',"
                                   " 'pending') AND deprecated=0 AND superseded_by IS NULL", (project_id,),
                                   limit=limit)

    def with_hashes(self, hashes: Sequence[str]) -> list[Memory]:
        out: list[Memory] = []
        for chunk in chunked(hashes):
            out += [Memory.from_row(r) for r in self.conn().execute(
                f"SELECT * FROM memories WHERE content_hash IN ({marks(len(chunk))})", chunk)]
        return out

    def listed(self, project_id: str, scopes: Sequence[str], *, type: str | None = None, kind: str | None = None,
               status: str | None = None, branch: str | None = None) -> list[Memory]:
        """`list_memories`: the given scopes (project = this project's), filtered by the given columns."""
        clause, params = [], []
        if "project" in scopes:
            clause.append("(scope='project' AND project_id=?)")
            params.append(project_id)
        if "global" in scopes:
            clause.append("scope='global'")
        if "team" in scopes:
            clause.append("scope='team'")
        where = ["(" + " OR ".join(clause) + ")"]
        for col, value in (("type", type), ("kind", kind), ("status", status)):
            if value:
                where.append(f"{col}=?")
                params.append(value)
        if branch:
            where.append("(branch=? OR branch IS NULL)")
            params.append(branch)
        return self.query_memories(" AND ".join(where), params)

    def recent_in(self, project_id: str, since: float, limit: int) -> list[Memory]:
        """This project's active or pending memories updated since `since`, newest first."""
        return self.query_memories(
            "scope='project' AND project_id=? AND updated_at>=? AND status IN ('active', 'pending')",
            (project_id, since), limit=limit)

    def live_memories(self, project_id: str) -> list[Memory]:
        """Active, not superseded, not deprecated: this project's and global memories (any tier), by id."""
        return self.query_memories(f"{PROJECT_OR_GLOBAL} AND {LIVE}", (project_id,), order="id")

    def decaying(self, project_id: str) -> list[Memory]:
        """What a decay run ages: live memories of this project and global, not archived yet."""
        return self.query_memories(f"{PROJECT_OR_GLOBAL} AND {LIVE} AND tier != 'cold'", (project_id,), order="id")

    def hot_or_warm(self, project_id: str | None) -> list[Memory]:
        """This project's memories (project_id None: the global ones) in the hot or warm tier, in table order."""
        where = "scope='project' AND project_id=?" if project_id is not None else "scope='global'"
        params = (project_id,) if project_id is not None else ()
        rows = self.conn().execute(f"SELECT * FROM memories WHERE {where} AND tier IN ('hot','warm')", params)
        return [Memory.from_row(r) for r in rows.fetchall()]

    def live_in_tier(self, project_id: str, tier: str) -> list[Memory]:
        return self.query_memories(f"{PROJECT_OR_GLOBAL} AND tier=? AND {LIVE}", (project_id, tier),
                                   order="importance DESC, updated_at DESC, id")

    def tier_counts(self, project_id: str) -> dict[str, int]:
        rows = self.conn().execute(
            f"SELECT tier, COUNT(*) FROM memories WHERE {PROJECT_OR_GLOBAL} AND {LIVE} GROUP BY tier", (project_id,))
        return {str(t): int(n) for t, n in rows}

    def hot(self, project_id: str) -> list[Memory]:
        return self.query_memories(f"tier='hot' AND {PROJECT_OR_GLOBAL}", (project_id,), order="importance DESC, id")

    def anchored_memories(self, project_id: str, path: str,
                          branches: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The project memories with an anchor into `path` (relative to the project root), on `branches` (plus the
        branch-independent ones; None: every branch), newest first: each one's `VISIBILITY_COLUMNS` and its
        `anchors` (parsed), not the whole record (`get_memories` for those). Any status, tier or deprecation: the
        caller's visibility rule decides (the hover's and the anchor check's). The partial index
        `memories_anchored` keeps this to the project's anchored memories; `LIKE` narrows on the JSON text and the
        exact path is compared here (LIKE ignores ASCII case)."""
        literal = ('"path": ' + json.dumps(path)).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        cols = ", ".join((*VISIBILITY_COLUMNS, "anchors"))
        sql = (f"SELECT {cols} FROM memories WHERE project_id=? AND scope='project' AND anchors != '[]'"
               " AND anchors LIKE ? ESCAPE '\\'")
        params: list[Any] = [project_id, f"%{literal}%"]
        if branches is not None:
            sql += f" AND (branch IS NULL OR branch IN ({marks(len(branches))}))" if branches else \
                " AND branch IS NULL"
            params.extend(branches)
        out = []
        for row in self.conn().execute(sql + " ORDER BY updated_at DESC, id", params):
            anchors = json.loads(row["anchors"])
            if any(isinstance(a, dict) and a.get("path") == path for a in anchors):
                out.append({**{k: row[k] for k in VISIBILITY_COLUMNS}, "anchors": anchors})
        return out

    def anchored_paths(self, project_id: str, branches: Sequence[str] | None = None) -> set[str]:
        """Every file path a project memory (on `branches` plus the branch-independent ones; None: every branch) is
        anchored into (`mnemo anchors check --all`)."""
        sql = "SELECT anchors FROM memories WHERE project_id=? AND scope='project' AND anchors != '[]'"
        params: list[Any] = [project_id]
        if branches is not None:
            sql += f" AND (branch IS NULL OR branch IN ({marks(len(branches))}))" if branches else \
                " AND branch IS NULL"
            params.extend(branches)
        out: set[str] = set()
        for row in self.conn().execute(sql, params):
            out.update(a["path"] for a in json.loads(row["anchors"])
                       if isinstance(a, dict) and isinstance(a.get("path"), str))
        return out

    def on_branch(self, project_id: str, branch: str, *, live_only: bool = False) -> list[Memory]:
        """This project's memories written on `branch` (oldest first); `live_only`: not superseded, deprecated or
        rejected."""
        if live_only:
            return self.query_memories("scope='project' AND project_id=? AND branch=? AND superseded_by IS NULL AND"
                                       " deprecated=0 AND status!='rejected'", (project_id, branch),
                                       order="created_at, id")
        return self.query_memories("scope='project' AND project_id=? AND branch=?", (project_id, branch))

    def seen_on_branch(self, project_id: str, branch: str, *, with_rejected: bool = True) -> list[Memory]:
        """This project's memories a checkout of `branch` holds: written there or branch-independent."""
        extra = "" if with_rejected else " AND status!='rejected'"
        return self.query_memories(f"scope='project' AND project_id=? AND (branch=? OR branch IS NULL){extra}",
                                   (project_id, branch))

    def branch_counts(self, project_id: str, default_branch: str) -> list[tuple[str, int]]:
        """(branch, live memories) of every branch but the default one that holds live memories of this project."""
        rows = self.conn().execute(
            f"SELECT branch, COUNT(*) FROM memories WHERE scope='project' AND project_id=? AND branch IS NOT NULL AND"
            f" branch != ? AND {LIVE} GROUP BY branch ORDER BY branch", (project_id, default_branch))
        return [(r[0], int(r[1])) for r in rows]

    def for_export(self, project_id: str, scopes: Sequence[str], branches: Sequence[str]) -> list[Memory]:
        """A snapshot's selection: `all` (every project and global), or this project's and/or global memories;
        with `branches`, only project memories written on those branches."""
        clause, params = [], []
        if "all" in scopes:
            clause.append("scope IN ('project','global')")
        else:
            if "project" in scopes:
                clause.append("(scope='project' AND project_id=?)")
                params.append(project_id)
            if "global" in scopes:
                clause.append("scope='global'")
        where = "(" + " OR ".join(clause) + ")"
        if branches:
            where += f" AND scope='project' AND branch IN ({marks(len(branches))})"
            params += list(branches)
        return self.query_memories(where, params, order="id")

    def memory_counts(self, project_id: str) -> dict[str, Any]:
        """What `stats` shows about one project's store: counts by scope, type, tier, branch and status."""
        conn = self.conn()
        proj = (project_id,)

        def one(sql: str, params=()) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        def grouped(sql: str) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in conn.execute(sql, proj)}

        mine = "(project_id=? AND scope='project') OR scope='global'"
        return {
            "memories": {"project": one("SELECT COUNT(*) FROM memories WHERE scope='project' AND project_id=?", proj),
                         "global": one("SELECT COUNT(*) FROM memories WHERE scope='global'"),
                         "all_projects": one("SELECT COUNT(*) FROM memories")},
            "by_type": grouped(f"SELECT type, COUNT(*) FROM memories WHERE {mine} GROUP BY type"),
            "by_tier": grouped(f"SELECT tier, COUNT(*) FROM memories WHERE {mine} GROUP BY tier"),
            "by_branch": grouped("SELECT COALESCE(branch, '(all branches)'), COUNT(*) FROM memories WHERE"
                                 " project_id=? AND scope='project' GROUP BY branch"),
            "by_status": grouped(f"SELECT status, COUNT(*) FROM memories WHERE {mine} GROUP BY status"),
            "deprecated": one(f"SELECT COUNT(*) FROM memories WHERE deprecated=1 AND ({mine})", proj),
            "tombstones": one("SELECT COUNT(*) FROM tombstones WHERE project_id=?", proj),
            "docs": {"blocks": one("SELECT COUNT(*) FROM blocks WHERE project_id=?", proj),
                     "files": one("SELECT COUNT(DISTINCT source_path) FROM blocks WHERE project_id=?", proj)},
            "review_open": one("SELECT COUNT(*) FROM review WHERE resolved_at IS NULL"),
        }

    def item_text(self, item_id: str) -> str:
        """The text of a memory or a Markdown block ("" when it is gone)."""
        conn = self.conn()
        row = conn.execute("SELECT text FROM memories WHERE id=?", (item_id,)).fetchone()
        if row is None:
            row = conn.execute("SELECT text FROM blocks WHERE id=?", (item_id,)).fetchone()
        return row[0] if row else ""
