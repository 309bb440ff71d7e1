"""Operations on stored memories by id: get, promote (to global or the team), deprecate, forget; the list view and
the store's statistics."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, cast

from mnemo.core.api_types.results import Forgotten, MemoryChange, MemoryList, Stats
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.memory.filters import Filter, matches
from mnemo.core.models import Context, Memory, check_read_scope, check_status, check_type, with_event
from mnemo.core.safety import screen as safety
from mnemo.core.search import memory_visible
from mnemo.core.team.ops import deprecate_team, promote_to_team

if TYPE_CHECKING:
    from mnemo.core.engine import Engine


def get(engine: Engine, ctx: Context, mem_id: str) -> Memory:
    """A memory of this project (or a global one), whatever its state; NotFound otherwise."""
    m = engine.store.get_memory(mem_id)
    if m is None or (m.scope == "project" and m.project_id != ctx.project_id):
        raise NotFound(f"no memory {mem_id} in this project",
                       hint="list ids with `mnemo list`; project memories are only visible from their project")
    return m


def promote(engine: Engine, ctx: Context, mem_id: str, to: str = "global") -> MemoryChange:
    """A project memory moves to the global scope (every project sees it) or is shared with the team."""
    if to not in ("global", "team"):
        raise InvalidInput(f"cannot promote to {to!r}", hint="promote to 'global' (or 'team')")
    m = get(engine, ctx, mem_id)
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
        return promote_to_team(engine, ctx, m)
    # a memory stored before the secret check existed must not spread either
    safety.screen_secrets({"text": m.text, "tags": m.tags}, f"promote {m.id}", mode="block")
    prov = dict(m.provenance)
    prov["promoted_from"] = {"scope": m.scope, "project_id": m.project_id, "project_name": m.project_name,
                             "note_id": m.id, "branch": m.branch,
                             "source_path": m.anchors[0].get("path") if m.anchors else None,
                             "promoted_at": time.time(), "promoted_by": ctx.user}
    with engine.store.write() as c:
        engine.store.move_to_scope(c, m, to, prov, time.time())
    engine.changed()
    return {"status": "promoted", "scope": to, "memory": engine.store.record(m.id)}


def deprecate(engine: Engine, ctx: Context, mem_id: str, reason: str | None = None) -> MemoryChange:
    """Out of recall, kept in history (a team record: deprecated on the server, for everyone). The reason goes
    through the secrets policy of a note (refused, or redacted under MNEMO_SECRETS=redact)."""
    reason = safety.screen_field(reason, "reason", f"deprecate {mem_id}", mode=ctx.secrets)
    if mem_id.startswith("team-"):
        return deprecate_team(engine, ctx, mem_id, reason)
    m = get(engine, ctx, mem_id)
    with engine.store.write() as c:
        engine.store.update_memory(c, m.id, deprecated=True, deprecated_reason=reason or "deprecated",
                                   updated_at=time.time())
    engine.changed()
    return {"status": "deprecated", "scope": m.scope, "memory": engine.store.record(m.id),
            "message": deprecated_message(m)}


def store_bytes(home, db) -> dict[str, Any]:
    """The store's size on disk: the database file, its write-ahead log (committed writes not yet checkpointed
    into the file: megabytes of them right after a burst of writes) and their total."""
    def size(path) -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    main, wal = size(db), size(db.with_name(db.name + "-wal"))
    return {"home": str(home), "db_bytes": main, "wal_bytes": wal, "total_bytes": main + wal}


def deprecated_message(m: Memory) -> str:
    """Where the deprecation took effect, and the team copy it did not touch (a promote to the team shares a copy:
    deprecating the local memory leaves that copy in everyone's recall)."""
    text = f"deprecated in the {m.scope} scope (kept in history, out of recall)"
    shared = (m.provenance or {}).get("promoted_to_team") or {}
    if shared.get("record_id"):
        text += (f"; its team copy {shared['record_id']} is still shared: `mnemo deprecate {shared['record_id']}` "
                 "takes it out of the team's recall")
    return text


def forget(engine: Engine, ctx: Context, mem_id: str, reason: str | None = None) -> Forgotten:
    """Deleted, with a tombstone (a snapshot merge never brings it back) that keeps the memory for `restore` until
    the forget retention (`forget_retention_days`) has passed. The reason goes through the secrets policy."""
    reason = safety.screen_field(reason, "reason", f"forget {mem_id}", mode=ctx.secrets)
    m = get(engine, ctx, mem_id)
    now = time.time()
    detail, _found = safety.redact_secrets(reason) if reason else (None, [])
    kept = dataclasses.replace(m, provenance=with_event(m.provenance, "forgotten", ctx.user, detail, now))
    with engine.store.write() as c:
        engine.store.forget_memory(c, m, reason, now)
        engine.store.keep_forgotten(c, kept)  # `history` and `restore` read it
    engine.changed()
    return {"status": "forgotten", "id": m.id, "tombstone": True, "restorable": True}


def list_memories(engine: Engine, ctx: Context, *, scope: str = "hybrid", branch: str | None = None,
                  type: str | None = None, kind: str | None = None, include_deprecated: bool = False,
                  include_cold: bool = False, status: str | None = "active", all_branches: bool = False,
                  limit: int = 200, offset: int = 0, filters: Filter | None = None) -> MemoryList:
    """The memories of the scope, newest first; `branch`: written there or branch-independent; `status` None:
    any; `filters` (core/memory/filters.py): tags, times, author, source, words."""
    check_read_scope(scope)
    if type is not None:
        check_type(type)
    if status is not None:
        check_status(status)
    if int(limit) < 1 or int(offset) < 0:  # -1 used to drop the last row, 0 to list nothing
        raise InvalidInput(f"limit {limit} is out of range" if int(offset) >= 0 else f"offset {offset} is negative",
                           hint="use a limit of 1 or more and an offset of 0 or more")
    scopes = {"hybrid": ("project", "global"), "project": ("project",), "global": ("global",),
              "team": ("team",)}[scope]
    rows = engine.store.listed(ctx.project_id, scopes, type=type, kind=kind, status=status, branch=branch)
    filters = filters or Filter()
    out = [m.to_dict() for m in rows
           if memory_visible(m, ctx, include_cold=include_cold, include_deprecated=include_deprecated,
                             any_status=True, all_branches=all_branches or bool(branch)) and matches(m, filters)]
    return {"total": len(out), "memories": out[offset: offset + limit]}


def stats(engine: Engine, ctx: Context, tiers: dict[str, dict[str, Any]]) -> Stats:
    """Counts of this project's store, the index's state, the model and the store file; with `tiers`, the tier
    index (`lifecycle.tier_index`, a floor above)."""
    index = engine.index
    index_info = {"ready": bool(index and index.ready), "indexed_seq": index.indexed_seq if index else 0,
                  "ann": bool(index and index.ready and not index.dormant),  # False: the exact scan serves all
                  "store_seq": engine.store.max_seq(), "rebuilds": index.rebuilds if index else 0,
                  "last_error": index.last_error if index else None,
                  "reembed": engine.reembed}  # a re-embedding after a model change: how far it got
    db = engine.home / "mnemo.db"
    loaded = engine.loaded_embedder
    return cast(Stats, {  # the store's counts (`memory_counts`: memories, by_type, ..., of the declared shapes)
        "project": {"id": ctx.project_id, "name": ctx.project_name, "branch": ctx.branch,
                    "default_branch": ctx.default_branch, "root": ctx.root},
        **engine.store.memory_counts(ctx.project_id),
        "tags": engine.store.tag_counts(ctx.project_id),
        "index": index_info,
        "model_id": loaded.model_id if loaded is not None else None,
        "store": store_bytes(engine.home, db),
        "tiers": tiers,
    })
