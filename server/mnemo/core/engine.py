"""The memory engine of one store: owns SQLite, the dense index, the embedder; implements every operation.

Exactly one process opens an engine on a store at a time (the owner lock); everything else goes through that
process (see `mnemo.daemon`). The indexer thread replays the change log into chroma in the background so a
remember is acknowledged after the SQLite commit only.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mnemo.core import markdown as md
from mnemo.core.errors import InvalidInput, NotFound, StoreLocked
from mnemo.core.index import DenseIndex
from mnemo.core.keyword import KeywordIndex
from mnemo.core.models import (
    BRANCH_INDEPENDENT_TYPES,
    MEMORY_TYPES,
    SOURCES,
    Context,
    Memory,
    check_read_scope,
    check_status,
    check_type,
    check_write_scope,
)
from mnemo.core.recall import hydrate as _hydrate
from mnemo.core.recall import memory_visible
from mnemo.core.recall import recall as _recall
from mnemo.core.store import Store, partition_for
from mnemo.core.text import content_hash

log = logging.getLogger("mnemo.engine")

MAX_TEXT_CHARS = int(os.environ.get("MNEMO_MAX_TEXT_CHARS", "20000"))
# Anchors + provenance + tags of one memory, as JSON (a memory's metadata is small; a huge one is an attack or a bug).
MAX_META_BYTES = int(os.environ.get("MNEMO_MAX_META_BYTES", str(64 * 1024)))
MAX_ANCHORS = int(os.environ.get("MNEMO_MAX_ANCHORS", "64"))

ProgressFn = Callable[[dict[str, Any]], None]


def default_home() -> Path:
    from mnemo.core.config import default_home as home

    return home()


def clean_text(text: str) -> tuple[str, list[str]]:
    """Strip invisible and control characters, flag text that reads like instructions to the agent; returns the text
    and flags (`invisible_unicode_stripped`, `hidden_text`, `bidi_control`, `injection:<category>`, see
    core/safety.py)."""
    from mnemo.core.safety import injection_flags, strip_invisible

    text, flags, hidden = strip_invisible(text)
    text = "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    return text, flags + injection_flags(text, hidden)


class OwnerLock:
    """The exclusive owner lock of a store. The kernel drops it when the process dies: no stale pid files."""

    def __init__(self, home: Path):
        from filelock import FileLock, Timeout

        self.path = home / "owner.lock"
        self._lock = FileLock(str(self.path), timeout=0)
        self._timeout = Timeout

    def acquire(self) -> None:
        try:
            self._lock.acquire()
        except self._timeout as exc:
            raise StoreLocked(
                f"another process owns the store at {self.path.parent}",
                hint="use the running owner (`mnemo daemon status`), or stop it with `mnemo daemon stop`",
            ) from exc

    def release(self) -> None:
        self._lock.release(force=True)


class Engine:
    def __init__(self, home: Path | None = None, embedder=None, *, lock: bool = True, start_indexer: bool = True):
        self.home = Path(home or default_home())
        self._owner_lock: OwnerLock | None = None
        try:
            self.home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            from mnemo.core.errors import StoreNotWritable

            raise StoreNotWritable(f"cannot create the store directory {self.home}: {exc.strerror}",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
        if lock:
            self._owner_lock = OwnerLock(self.home)
            self._owner_lock.acquire()
        from mnemo.core import config

        config.bind(self.home)  # store-wide settings of this process: `<home>/config.json`
        self.store = Store(self.home / "mnemo.db")
        self._reflag()
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        self._embedder_ready = threading.Event()
        if embedder is not None:
            self._embedder_ready.set()
        self.index: DenseIndex | None = None
        self.keywords = KeywordIndex(self.store)
        self._access_lock = threading.Lock()
        self._pending_access: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._repair = threading.Event()
        self._warnings: list[str] = []
        self._threads: list[threading.Thread] = []
        self.skills = None  # set by the service layer (skills engine per project root)
        self._store_checked = threading.Event()
        if start_indexer:
            t = threading.Thread(target=self._check_store, name="mnemo-store-check", daemon=True)
            t.start()
            self._threads.append(t)
        else:
            self._store_checked.set()
        if start_indexer:
            import numpy  # noqa: F401 - import here, not first in two threads at once (partial-import race)

            t = threading.Thread(target=self._background, name="mnemo-indexer", daemon=True)
            t.start()
            self._threads.append(t)

    def _reflag(self) -> None:
        """Give every stored note its injection flags, once per version of the patterns (a store written before
        they existed, or with older ones): flags are shown on every surface, whoever wrote the note."""
        from mnemo.core import safety

        if self.store.get_meta("injection_flags_version") == safety.INJECTION_FLAGS_VERSION:
            return
        changed = 0
        with self.store.write() as c:
            for m in self.store.query_memories():
                flags = safety.reflag(m.text, m.flags)
                if flags != m.flags:
                    self.store.update_memory(c, m.id, flags=flags)
                    changed += 1
            self.store.set_meta(c, "injection_flags_version", safety.INJECTION_FLAGS_VERSION)
        if changed:
            log.info("injection flags added to %d stored notes", changed)
    # -- store damage ----------------------------------------------------------------------------------------
    def _check_store(self) -> None:
        try:
            found = self.store.check_damage()
            if found:
                log.error("the store is damaged: %s", found)
        finally:
            self._store_checked.set()

    def store_problem(self, wait: float = 5.0):
        """A `StoreCorrupt` when the file is known to be damaged (the start-up `quick_check`, waited for up to `wait`
        seconds, or a read that hit a damaged page since), else None."""
        self._store_checked.wait(wait)
        return self.store.damage_error()

    # -- embedder --------------------------------------------------------------------------------------------
    @property
    def embedder(self):
        if self._embedder is None:
            with self._embedder_lock:
                if self._embedder is None:
                    from mnemo.core.embeddings import get_embedder

                    self._embedder = get_embedder()
                    self._embedder_ready.set()
        return self._embedder

    def warm_up(self) -> None:
        """Load the model (and run one embedding) so the first caller does not pay for it."""
        self.embedder.embed(["warm up"])

    def embed(self, texts: list[str]):
        return self.embedder.embed(texts)

    def embed_query(self, text: str):
        return self.embedder.embed([text])[0]

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    # -- background: index replay, access reinforcement ------------------------------------------------------
    def _background(self) -> None:
        # A failed preparation or replay (disk full, I/O error, a damaged chroma directory) is retried with a
        # growing pause (2 s .. 5 min): the index must come back once the disk does, without spinning meanwhile.
        backoff, retry_at = 2.0, 0.0
        try:
            self.embedder  # noqa: B018 - load once, off the caller's path
            self._reembed_foreign_vectors()
            self.index = DenseIndex(self.home / "chroma", self.store, self.model_id)
            self.index.ensure_ready()
            self.keywords.build_all()
        except Exception as exc:  # noqa: BLE001
            log.exception("dense index could not be prepared; recall uses exact scans")
            if self.index is not None:
                self.index.mark_broken(exc)
                self._repair.set()
                retry_at = time.monotonic() + backoff
        while not self._stop.is_set():
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if self.store.damage:  # nothing is read or written until `mnemo doctor --repair`
                continue
            try:
                self.flush_access()
            except Exception as exc:  # noqa: BLE001 - the store is failing (disk full?): keep them for next time
                log.warning("could not record recall accesses: %s", exc)
            try:
                if self.index is not None:
                    if self._repair.is_set():
                        if time.monotonic() >= retry_at:
                            self._repair.clear()
                            self.index.ensure_ready()
                            if self.index.ready:
                                backoff = 2.0
                    elif self.index.ready:
                        self.index.catch_up()
            except Exception as exc:  # noqa: BLE001
                log.warning("indexer: %s; will rebuild in %.0f s", exc, backoff)
                if self.index is not None:
                    self.index.mark_broken(exc)
                    self._repair.set()
                    retry_at = time.monotonic() + backoff
                    backoff = min(backoff * 2, 300.0)

    def _reembed_foreign_vectors(self) -> None:
        """Vectors made by another model are re-embedded from the stored text (model change)."""
        mid = self.model_id
        conn = self.store.conn()
        rows = conn.execute("SELECT item_id, part FROM vectors WHERE model_id != ?", (mid,)).fetchall()
        if not rows:
            return
        log.info("re-embedding %d items for model %s", len(rows), mid)
        for i in range(0, len(rows), 256):
            chunk = rows[i:i + 256]
            texts = []
            for r in chunk:
                m = conn.execute("SELECT text FROM memories WHERE id=?", (r["item_id"],)).fetchone()
                if m is None:
                    m = conn.execute("SELECT text FROM blocks WHERE id=?", (r["item_id"],)).fetchone()
                texts.append(m[0] if m else "")
            vecs = self.embed(texts)
            with self.store.write() as c:
                for r, v in zip(chunk, vecs, strict=True):
                    self.store.set_vector(c, r["item_id"], r["part"], v, mid)

    def schedule_index_repair(self) -> None:
        self._repair.set()
        self._wake.set()

    def wait_indexed(self, timeout: float = 30.0) -> bool:
        """Block until the dense index has replayed every change (tests, benchmarks)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.index is not None and self.index.ready and self.index.indexed_seq >= self.store.max_seq():
                return True
            self._wake.set()
            time.sleep(0.05)
        return False

    def note_access(self, ids: list[str]) -> None:
        if not ids:
            return
        now = time.time()
        with self._access_lock:
            for i in ids:
                self._pending_access[i] = now

    def flush_access(self) -> None:
        with self._access_lock:
            pending, self._pending_access = self._pending_access, {}
        if not pending:
            return
        try:
            with self.store.write() as c:
                for mem_id, at in pending.items():
                    c.execute("UPDATE memories SET last_accessed=MAX(last_accessed, ?), access_count=access_count+1"
                              " WHERE id=?", (at, mem_id))
        except Exception:
            with self._access_lock:  # not recorded: keep them for the next flush
                for mem_id, at in pending.items():
                    self._pending_access[mem_id] = max(at, self._pending_access.get(mem_id, at))
            raise

    def warnings(self) -> list[str]:
        return list(self._warnings)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            t.join(timeout=10)
        try:
            self.flush_access()
        except Exception:  # noqa: BLE001
            pass
        if self.index is not None:
            with self.index._lock:
                self.index.close()
        self.store.close()
        if self._owner_lock is not None:
            self._owner_lock.release()

    # -- memories --------------------------------------------------------------------------------------------
    def _validate_text(self, text: str) -> tuple[str, list[str]]:
        if not isinstance(text, str):
            raise InvalidInput("memory text must be a string", hint="pass the note as text")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInput(
                f"memory text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}",
                hint="keep memories short (a decision, a lesson); put long material in a Markdown doc and run"
                     " `mnemo index`, or raise MNEMO_MAX_TEXT_CHARS")
        text, flags = clean_text(text)
        if not text:
            raise InvalidInput("memory text is empty", hint="say what should be remembered, e.g. "
                               "`mnemo remember \"payments API requires idempotency keys\"`")
        return text, flags

    def remember(self, ctx: Context, text: str, *, type: str = "project", kind: str = "fact",
                 scope: str = "project", tags: list[str] | None = None, importance: float = 0.5,
                 source: str = "user", anchors: list[dict] | None = None, trust: str = "trusted",
                 status: str = "active", provenance: dict | None = None, vec=None,
                 on_conflict: str | None = None) -> dict[str, Any]:
        from mnemo.core import lifecycle  # conflicts, overrides, review queue (SPEC §4)

        # the caller's own resolution: an explicit argument, else its Context's (MNEMO_ON_CONFLICT of the client)
        on_conflict = lifecycle.check_on_conflict(on_conflict if on_conflict is not None else ctx.on_conflict)
        text, flags = self._validate_text(text)
        check_type(type)
        check_write_scope(scope)
        if source not in SOURCES:
            raise InvalidInput(f"unknown source {source!r}", hint=f"use one of: {', '.join(SOURCES)}")
        if not isinstance(kind, str) or not kind.strip() or len(kind) > 64:
            raise InvalidInput("kind must be a short word (1..64 characters)",
                               hint="e.g. decision, lesson, pattern, handoff, fact")
        try:
            importance = float(importance)
        except (TypeError, ValueError) as exc:
            raise InvalidInput("importance must be a number between 0 and 1") from exc
        if not 0.0 <= importance <= 1.0:
            raise InvalidInput(f"importance {importance} is out of range", hint="use a value between 0 and 1")
        tags = [str(t)[:64] for t in (tags or [])][:32]
        anchors, provenance = self._check_meta(anchors, provenance)
        # Secrets never reach the store (SPEC §7): blocked, or redacted with MNEMO_SECRETS=redact.
        from mnemo.core import safety

        fields, redacted = safety.screen_secrets(
            {"text": text, "kind": kind, "tags": tags, "anchors": anchors, "provenance": provenance}, "remember",
            mode=ctx.secrets)  # the caller's MNEMO_SECRETS, carried by its Context
        if redacted:
            text, kind, tags = fields["text"], fields["kind"], fields["tags"]
            anchors, provenance = fields["anchors"], fields["provenance"]
            flags.append("secret_redacted")
        # Poisoning: a note from an agent (or an import) that reads like instructions to the agent, or hides text,
        # is untrusted and waits in Review; a person's own write lands, with its flags shown.
        if safety.is_suspicious(flags) and source != "user":
            trust = "untrusted"
            if status == "active":
                status = "pending"
        branch = None if type in BRANCH_INDEPENDENT_TYPES else ctx.branch
        h = content_hash(text)
        now = time.time()

        # Dedup: the same fact again in the same place is a confirmation, not a copy.
        existing = self._find_duplicate(ctx, h, type, branch)
        if existing is not None:
            with self.store.write() as c:
                lifecycle.confirm(c, self.store, existing.id, importance, now)
            mem = self.store.get_memory(existing.id)
            return {"status": "confirmed", "memory": mem.to_dict(),
                    "message": f"already known: confirmed {mem.confirmations}x", "conflicts": []}

        if vec is None:
            vec = self.embed([text])[0]
        mem = Memory(
            id="mem-" + uuid.uuid4().hex[:20], text=text, type=type, kind=kind.strip(), scope=scope,
            project_id=ctx.project_id, project_name=ctx.project_name, branch=branch, importance=importance,
            confirmations=1, created_at=now, updated_at=now, last_accessed=now, access_count=0, content_hash=h,
            source=source, provenance=provenance or {}, anchors=anchors or [], tags=tags, trust=trust,
            status=status, author=ctx.user, flags=flags, tier="warm",
        )
        # The same claim on any level (a paraphrase, a refinement) confirms; a contradiction conflicts or overrides.
        related = lifecycle.relate(self, ctx, mem, vec)
        found = [f for f in related if f.relation != "duplicate"]
        same = [f for f in related if f.relation == "duplicate" and not (f.refines and status == "pending")]
        if same and not found:
            res = lifecycle.write_same_claim(self, ctx, mem, vec, same[0])
            self._wake.set()
            return res
        if found or status == "pending":
            res = lifecycle.write_new(self, ctx, mem, vec, found, on_conflict)
            self._wake.set()
            suspicious = [f for f in flags if safety.is_suspicious([f])]
            if suspicious and source != "user":
                res["message"] += (f" (untrusted: it reads like instructions to the agent or hides text: "
                                   f"{', '.join(suspicious)}; a person accepts or rejects it in Review)")
            return res
        with self.store.write() as c:
            self.store.insert_memory(c, mem, vec, self.model_id)
        self._wake.set()
        return {"status": "created" if status == "active" else status, "memory": mem.to_dict(),
                "message": "remembered" if status == "active" else "waiting in Review", "conflicts": []}

    @staticmethod
    def _check_meta(anchors: Any, provenance: Any) -> tuple[list[dict], dict]:
        from mnemo.core.safety import json_size

        anchors = anchors or []
        provenance = provenance or {}
        if not isinstance(anchors, list) or not all(isinstance(a, dict) for a in anchors):
            raise InvalidInput("anchors must be a list of objects", hint='e.g. [{"path": "src/app.py", "symbol": "f"}]')
        if len(anchors) > MAX_ANCHORS:
            raise InvalidInput(f"{len(anchors)} anchors; the limit is {MAX_ANCHORS}",
                               hint="anchor the memory to the few places it is about, or raise MNEMO_MAX_ANCHORS")
        if not isinstance(provenance, dict):
            raise InvalidInput("provenance must be an object")
        size = json_size(anchors) + json_size(provenance)
        if size > MAX_META_BYTES:
            raise InvalidInput(f"the memory's metadata (anchors, provenance) is {size:,} bytes; the limit is "
                               f"{MAX_META_BYTES:,}", hint="keep metadata small, or raise MNEMO_MAX_META_BYTES")
        return anchors, provenance

    def _find_duplicate(self, ctx: Context, h: str, type: str, branch: str | None) -> Memory | None:
        rows = self.store.query_memories("content_hash=? AND project_id=? AND scope='project'", (h, ctx.project_id))
        for m in rows:
            if m.status == "rejected":
                continue
            if m.branch == branch or m.branch is None or (branch and m.branch in ctx.visible_branches()):
                if not m.deprecated and not m.superseded_by:
                    return m
        return None

    def get(self, ctx: Context, mem_id: str) -> Memory:
        m = self.store.get_memory(mem_id)
        if m is None or (m.scope == "project" and m.project_id != ctx.project_id):
            raise NotFound(f"no memory {mem_id} in this project",
                           hint="list ids with `mnemo list`; project memories are only visible from their project")
        return m

    def promote(self, ctx: Context, mem_id: str, to: str = "global") -> dict[str, Any]:
        if to not in ("global", "team"):
            raise InvalidInput(f"cannot promote to {to!r}", hint="promote to 'global' (or 'team')")
        m = self.get(ctx, mem_id)
        if m.scope != "project":
            raise InvalidInput(f"memory {mem_id} is already in the {m.scope} scope",
                               hint="only project memories can be promoted")
        if m.status != "active" or m.trust != "trusted":
            why = f"it is {m.status}" if m.status != "active" else "it is untrusted (" + (
                ", ".join(f for f in m.flags if f.startswith("injection:") or f in ("hidden_text", "bidi_control"))
                or "imported or written by someone else") + ")"
            raise InvalidInput(f"memory {mem_id} cannot be promoted: {why}",
                               hint="a person accepts it in Review first (`mnemo review`), then promote it")
        if to == "team":  # secret check, team record (or the outbox), `promoted_to_team` on the local memory
            from mnemo.core.team import promote_to_team

            return promote_to_team(self, ctx, m)
        from mnemo.core import safety  # a memory stored before the check existed must not spread either

        safety.screen_secrets({"text": m.text, "tags": m.tags}, f"promote {m.id}", mode="block")
        prov = dict(m.provenance)
        prov["promoted_from"] = {"scope": m.scope, "project_id": m.project_id, "project_name": m.project_name,
                                 "note_id": m.id, "branch": m.branch,
                                 "source_path": m.anchors[0].get("path") if m.anchors else None,
                                 "promoted_at": time.time(), "promoted_by": ctx.user}
        new_part = partition_for(to, m.project_id)
        with self.store.write() as c:
            c.execute("UPDATE memories SET scope=?, branch=NULL, part=?, provenance=?, updated_at=? WHERE id=?",
                      (to, new_part, json.dumps(prov, sort_keys=True), time.time(), m.id))
            c.execute("UPDATE vectors SET part=? WHERE item_id=?", (new_part, m.id))
            c.execute("UPDATE fts SET part=? WHERE item_id=?", (new_part, m.id))
            self.store.log_change(c, m.id, partition_for("project", m.project_id), "upsert")
        self._wake.set()
        return {"status": "promoted", "memory": self.store.get_memory(m.id).to_dict()}

    def deprecate(self, ctx: Context, mem_id: str, reason: str | None = None) -> dict[str, Any]:
        if mem_id.startswith("team-"):  # a team record: deprecated on the server, for everyone
            from mnemo.core.team import deprecate_team

            return deprecate_team(self, ctx, mem_id, reason)
        m = self.get(ctx, mem_id)
        with self.store.write() as c:
            self.store.update_memory(c, m.id, deprecated=True, deprecated_reason=reason or "deprecated",
                                     updated_at=time.time())
        return {"status": "deprecated", "memory": self.store.get_memory(m.id).to_dict()}

    def forget(self, ctx: Context, mem_id: str, reason: str | None = None) -> dict[str, Any]:
        m = self.get(ctx, mem_id)
        with self.store.write() as c:
            c.execute("INSERT OR REPLACE INTO tombstones(id, content_hash, project_id, scope, forgotten_at, reason)"
                      " VALUES(?,?,?,?,?,?)", (m.id, m.content_hash, m.project_id, m.scope, time.time(), reason))
            self.store.delete_item(c, m.id)
        self._wake.set()
        return {"status": "forgotten", "id": m.id, "tombstone": True}

    def list_memories(self, ctx: Context, *, scope: str = "hybrid", branch: str | None = None,
                      type: str | None = None, kind: str | None = None, include_deprecated: bool = False,
                      include_cold: bool = False, status: str | None = "active", all_branches: bool = False,
                      limit: int = 200, offset: int = 0) -> dict[str, Any]:
        check_read_scope(scope)
        if type is not None:
            check_type(type)
        if status is not None:
            check_status(status)
        where, params = [], []
        scopes = {"hybrid": ("project", "global"), "project": ("project",), "global": ("global",),
                  "team": ("team",)}[scope]
        clause = []
        if "project" in scopes:
            clause.append("(scope='project' AND project_id=?)")
            params.append(ctx.project_id)
        if "global" in scopes:
            clause.append("scope='global'")
        if "team" in scopes:
            clause.append("scope='team'")
        where.append("(" + " OR ".join(clause) + ")")
        if type:
            where.append("type=?")
            params.append(type)
        if kind:
            where.append("kind=?")
            params.append(kind)
        if status:
            where.append("status=?")
            params.append(status)
        if branch:
            where.append("(branch=? OR branch IS NULL)")
            params.append(branch)
        rows = self.store.query_memories(" AND ".join(where), params)
        out = []
        for m in rows:
            if not all_branches and not branch and m.scope == "project" and m.branch is not None \
                    and m.branch not in ctx.visible_branches():
                continue
            if not include_deprecated and (m.deprecated or m.superseded_by):
                continue
            if not include_cold and m.tier == "cold":
                continue
            out.append(m.to_dict())
        return {"total": len(out), "memories": out[offset: offset + limit]}

    def stats(self, ctx: Context) -> dict[str, Any]:
        conn = self.store.conn()

        def grouped(sql: str, params=()) -> dict[str, int]:
            return {str(r[0]): int(r[1]) for r in conn.execute(sql, params)}

        proj = (ctx.project_id,)
        index_info = {"ready": bool(self.index and self.index.ready),
                      "indexed_seq": self.index.indexed_seq if self.index else 0,
                      "store_seq": self.store.max_seq(),
                      "rebuilds": self.index.rebuilds if self.index else 0,
                      "last_error": self.index.last_error if self.index else None}
        db = self.home / "mnemo.db"
        return {
            "project": {"id": ctx.project_id, "name": ctx.project_name, "branch": ctx.branch,
                        "default_branch": ctx.default_branch, "root": ctx.root},
            "memories": {
                "project": int(conn.execute("SELECT COUNT(*) FROM memories WHERE scope='project' AND project_id=?",
                                            proj).fetchone()[0]),
                "global": int(conn.execute("SELECT COUNT(*) FROM memories WHERE scope='global'").fetchone()[0]),
                "all_projects": int(conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0]),
            },
            "by_type": grouped("SELECT type, COUNT(*) FROM memories WHERE (project_id=? AND scope='project')"
                               " OR scope='global' GROUP BY type", proj),
            "by_tier": grouped("SELECT tier, COUNT(*) FROM memories WHERE (project_id=? AND scope='project')"
                               " OR scope='global' GROUP BY tier", proj),
            "by_branch": grouped("SELECT COALESCE(branch, '(all branches)'), COUNT(*) FROM memories WHERE"
                                 " project_id=? AND scope='project' GROUP BY branch", proj),
            "by_status": grouped("SELECT status, COUNT(*) FROM memories WHERE (project_id=? AND scope='project')"
                                 " OR scope='global' GROUP BY status", proj),
            "deprecated": int(conn.execute("SELECT COUNT(*) FROM memories WHERE deprecated=1 AND"
                                           " ((project_id=? AND scope='project') OR scope='global')",
                                           proj).fetchone()[0]),
            "tombstones": int(conn.execute("SELECT COUNT(*) FROM tombstones WHERE project_id=?", proj).fetchone()[0]),
            "docs": {"blocks": int(conn.execute("SELECT COUNT(*) FROM blocks WHERE project_id=?", proj).fetchone()[0]),
                     "files": int(conn.execute("SELECT COUNT(DISTINCT source_path) FROM blocks WHERE project_id=?",
                                               proj).fetchone()[0])},
            "review_open": int(conn.execute("SELECT COUNT(*) FROM review WHERE resolved_at IS NULL").fetchone()[0]),
            "index": index_info,
            "model_id": self._embedder.model_id if self._embedder is not None else None,
            "store": {"home": str(self.home), "db_bytes": db.stat().st_size if db.exists() else 0},
        }

    # -- recall ----------------------------------------------------------------------------------------------
    def recall(self, ctx: Context, query: str, **kw) -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("the query is empty", hint="ask in words, e.g. `mnemo recall \"how do we retry POSTs?\"`")
        if len(query) > MAX_TEXT_CHARS:
            raise InvalidInput(f"the query is {len(query):,} characters; the limit is {MAX_TEXT_CHARS:,}",
                               hint="ask a shorter question")
        scope = check_read_scope(kw.pop("scope", "hybrid"))
        types = kw.pop("types", None)
        for t in types or []:
            check_type(t)
        limit = int(kw.pop("limit", 5))
        if not 1 <= limit <= 100:
            raise InvalidInput(f"limit {limit} is out of range", hint="use 1..100")
        return _recall(self, ctx, query, scope=scope, types=types, limit=limit, **kw)

    def hydrate(self, ctx: Context, item_id: str, mode: str = "default") -> dict[str, Any]:
        return _hydrate(self, ctx, item_id, mode)

    # -- markdown docs ---------------------------------------------------------------------------------------
    def index_docs(self, ctx: Context, root: str | None = None, progress: ProgressFn | None = None) -> dict[str, Any]:
        base = Path(root or ctx.root or ".").resolve()
        if not base.is_dir():
            raise InvalidInput(f"{base} is not a directory", hint="pass the repository root")
        files = md.find_markdown_files(base)
        known = self.store.file_hashes(ctx.project_id)
        seen: set[str] = set()
        added = updated = unchanged = skipped = blocks_total = 0
        problems = []
        now = time.time()
        for i, path in enumerate(files, start=1):
            rel = path.relative_to(base).as_posix()
            seen.add(rel)
            if progress:
                progress({"done": i - 1, "total": len(files), "path": rel})
            try:
                data = path.read_bytes()
            except OSError as exc:
                problems.append({"path": rel, "reason": str(exc)})
                skipped += 1
                continue
            if len(data) > md.MAX_DOC_BYTES:
                problems.append({"path": rel, "reason": f"larger than {md.MAX_DOC_BYTES:,} bytes; skipped (raise "
                                                        "MNEMO_MAX_DOC_BYTES to index it)"})
                skipped += 1
                continue
            fh = md.file_hash(data)
            if known.get(rel) == fh:
                unchanged += 1
                continue
            text = data.decode("utf-8", errors="replace")
            blocks = md.split_blocks(text, rel)
            vecs = self.embed([" > ".join(b.heading_path) + "\n" + b.text for b in blocks]) if blocks else []
            with self.store.write() as c:
                for old in self.store.file_blocks(ctx.project_id, rel):
                    self.store.delete_item(c, old["id"])
                for b, v in zip(blocks, vecs, strict=True):
                    self.store.insert_block(c, {
                        "id": md.block_id(ctx.project_id, rel, b.ordinal, b.text), "project_id": ctx.project_id,
                        "source_path": rel, "ordinal": b.ordinal, "title": b.title,
                        "heading_path": list(b.heading_path), "text": b.text, "start_line": b.start_line,
                        "end_line": b.end_line, "file_hash": fh, "updated_at": now}, v, self.model_id)
            blocks_total += len(blocks)
            if rel in known:
                updated += 1
            else:
                added += 1
        removed = 0
        for rel in set(known) - seen:
            with self.store.write() as c:
                for old in self.store.file_blocks(ctx.project_id, rel):
                    self.store.delete_item(c, old["id"])
            removed += 1
        if progress:
            progress({"done": len(files), "total": len(files), "path": None})
        self._wake.set()
        return {"root": str(base), "files": len(files), "added": added, "updated": updated, "unchanged": unchanged,
                "removed": removed, "skipped": skipped, "blocks_written": blocks_total, "problems": problems}

    def visible(self, ctx: Context, m: Memory) -> bool:
        return memory_visible(m, ctx)


__all__ = ["Engine", "OwnerLock", "default_home", "clean_text", "MEMORY_TYPES"]
