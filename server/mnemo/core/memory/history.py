"""Edits and undo: `update` (a memory's new text or metadata, re-checked like a new memory, the previous version
kept), `history` (its versions with who wrote each, when and why), `unforget` (a forgotten memory back from its
tombstone) and `purge_forgotten` (the forget retention: after it the text is gone for good)."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any, cast

from mnemo.core import store_settings as config
from mnemo.core.api_types.results import (
    Forgotten,
    MemoryChange,
    MemoryEvent,
    MemoryHistory,
    MemoryVersion,
    UpdateResult,
)
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.memory import manage as memories
from mnemo.core.memory.manage import get
from mnemo.core.memory.neighbours import relate
from mnemo.core.memory.write import draft, find_duplicate
from mnemo.core.models import BRANCH_INDEPENDENT_TYPES, Context, Memory, with_event
from mnemo.core.policy import check_on_conflict
from mnemo.core.safety import screen as safety
from mnemo.core.store import partition_for

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

EDITED_FIELDS = ("text", "type", "kind", "importance", "tags")


# -- update ----------------------------------------------------------------------------------------------------
def update(engine: Engine, ctx: Context, mem_id: str, *, text: str | None = None, type: str | None = None,
           kind: str | None = None, importance: float | None = None, tags: list[str] | None = None,
           reason: str | None = None, source: str = "user", on_conflict: str | None = None) -> UpdateResult:
    """Edit a memory in place (same id): the new version is checked like a new memory (text, secrets, poisoning,
    the same text elsewhere, conflicts with its neighbours), the previous version is kept in its history.
    Returns `{"status": updated | unchanged | conflict | pending | kept_existing, "memory", "message",
    "conflicts", "version", "same_as"?}`."""
    on_conflict = check_on_conflict(on_conflict if on_conflict is not None else ctx.on_conflict)
    if reason is not None and (not isinstance(reason, str) or len(reason) > 2000):
        raise InvalidInput("the reason must be a short text (at most 2000 characters)")
    reason = safety.screen_field(reason, "reason", f"edit {mem_id}", mode=ctx.secrets)  # kept in the history
    old = _editable(engine, ctx, mem_id)
    if all(v is None for v in (text, type, kind, importance, tags)):
        raise InvalidInput("nothing to change", hint="give a new --text, --type, --kind, --importance or --tags")
    new = _drafted(ctx, old, text, type, kind, importance, tags, source)
    if all(getattr(new, f) == getattr(old, f) for f in EDITED_FIELDS):
        return {"status": "unchanged", "memory": old.to_dict(), "message": "nothing changed", "conflicts": [],
                "version": engine.store.last_version(old.id) + 1}
    if new.content_hash != old.content_hash:
        dup = find_duplicate(engine, ctx, new.content_hash, new.branch)
        if dup is not None and dup.id != old.id:
            raise InvalidInput(f"memory {dup.id} already says exactly this; {old.id} was not changed",
                               hint=f"forget one of them (`mnemo forget {old.id}`), or word the edit differently")
    vec = engine.embed([new.text])[0] if new.text != old.text else None
    found = relate(engine, ctx, new, vec) if vec is not None else []
    conflicts = [f for f in found if f.relation == "conflict"]
    if conflicts and on_conflict == "keep_existing":
        return {"status": "kept_existing", "memory": old.to_dict(), "conflicts": [f.to_dict("keep_existing")
                                                                                  for f in conflicts],
                "message": f"not changed: the new text conflicts with {conflicts[0].memory.id} and keep_existing was"
                           " asked", "version": engine.store.last_version(old.id) + 1}
    if conflicts and on_conflict == "review":
        new = dataclasses.replace(new, status="pending")
    version = _write(engine, ctx, old, new, vec, found, on_conflict, reason)
    return _result(engine, old.id, new, found, on_conflict, version)


def _editable(engine: Engine, ctx: Context, mem_id: str) -> Memory:
    if not isinstance(mem_id, str) or mem_id.startswith("team-"):
        raise InvalidInput(f"{mem_id!r} cannot be edited here",
                           hint="team memories are edited on the team server; local ids start with mem-")
    old = get(engine, ctx, mem_id)
    if old.superseded_by:
        raise InvalidInput(f"memory {old.id} was superseded by {old.superseded_by}",
                           hint=f"edit the newer one: `mnemo edit {old.superseded_by} --text ...`")
    return old


PLACE_FLAGS = ("stale_anchor",)  # flags about where the memory points, not its text: an edit keeps them (a new
#                                 text settles a stale anchor in the service, core/edits.settle_rewritten)


def _drafted(ctx: Context, old: Memory, text, type, kind, importance, tags, source: str) -> Memory:
    """The edited memory: the new fields through every check of a new memory (core/write.draft), on the old
    memory's identity, place and history."""
    d, suspicious = draft(ctx, old.text if text is None else text, type=type or old.type, kind=kind or old.kind,
                          tags=old.tags if tags is None else tags,
                          importance=old.importance if importance is None else importance, source=source,
                          anchors=old.anchors, provenance=old.provenance, trust=old.trust, status=old.status)
    if d.type in BRANCH_INDEPENDENT_TYPES:
        branch = None
    else:
        branch = old.branch if old.type not in BRANCH_INDEPENDENT_TYPES else ctx.branch
    return dataclasses.replace(
        old, text=d.text, type=d.type, kind=d.kind, importance=d.importance, tags=d.tags, anchors=d.anchors,
        provenance=d.provenance, content_hash=d.content_hash,
        flags=[*d.flags, *(f for f in old.flags if f in PLACE_FLAGS and f not in d.flags)], trust=d.trust,
        status=d.status,
        branch=branch if old.scope == "project" else None, updated_at=time.time())


def _write(engine: Engine, ctx: Context, old: Memory, new: Memory, vec, found, on_conflict: str,
           reason: str | None) -> int:
    """One transaction: the old version into the history, the memory rewritten (its vector too), the review rows
    of what the new text conflicts with or overrides. Returns the new version's number."""
    store, now = engine.store, new.updated_at
    with store.write() as c:
        version = store.last_version(old.id) + 1
        store.add_version(c, _version_row(old, version, now))
        edited = {"version": version + 1, "at": now, "by": ctx.user, "why": reason or "edited"}
        fields = {f: getattr(new, f) for f in (*EDITED_FIELDS, "content_hash", "flags", "trust", "status",
                                                "branch", "anchors", "updated_at")}
        if vec is not None:
            store.set_vector(c, old.id, partition_for(old.scope, old.project_id), vec, engine.model_id)
        store.update_memory(c, old.id, reindex=True, provenance={**new.provenance, "edited": edited}, **fields)
        _review_rows(c, store, ctx, new, found, on_conflict, now)
    engine.changed()
    return version + 1


def _version_row(m: Memory, version: int, now: float) -> dict[str, Any]:
    edited = m.provenance.get("edited") or {}
    return {"memory_id": m.id, "version": version, "text": m.text, "type": m.type, "kind": m.kind,
            "importance": m.importance, "tags": list(m.tags), "content_hash": m.content_hash,
            "written_at": float(edited.get("at") or m.created_at), "written_by": str(edited.get("by") or m.author),
            "why": str(edited.get("why") or "created"), "replaced_at": now}


def _review_rows(c, store, ctx: Context, new: Memory, found, on_conflict: str, now: float) -> None:
    for f in found:
        payload = {"similarity": round(f.similarity, 4), "new_text": new.text, "existing_text": f.memory.text,
                   "reasons": f.reasons, "edit": True}
        if f.relation == "conflict" and on_conflict == "review":
            store.add_review(c, "conflict", new.id, f.memory.id, ctx.project_id, payload, now=now)
        elif f.relation == "conflict":
            if on_conflict == "supersede":
                store.update_memory(c, f.memory.id, reindex=True, superseded_by=new.id, updated_at=now)
            store.add_review(c, "conflict", new.id, f.memory.id, ctx.project_id, payload, resolution=on_conflict,
                             now=now)
        elif f.relation == "override":
            store.add_review(c, "override", new.id, f.memory.id, ctx.project_id,
                             {**payload, "level": f.level, "branch": new.branch, "overridden_scope": f.memory.scope,
                              "overridden_text": f.memory.text}, now=now)


def _result(engine: Engine, mem_id: str, new: Memory, found, on_conflict: str, version: int) -> UpdateResult:
    m = engine.store.record(mem_id)
    conflicts = [f for f in found if f.relation in ("conflict", "override")]
    same = [f for f in found if f.relation == "duplicate"]
    ids = ", ".join(f.memory.id for f in conflicts if f.relation == "conflict")
    if ids and on_conflict == "review":
        status, message = "conflict", f"edited; it now conflicts with {ids}: waiting in Review"
    elif m["status"] == "pending":
        status, message = "pending", "edited; waiting in Review (it reads like instructions to the agent)"
    else:
        status, message = "updated", f"edited (version {version})" + (f"; {on_conflict} for {ids}" if ids else "")
    out: UpdateResult = {"status": status, "memory": m, "message": message, "version": version,
                           "conflicts": [f.to_dict(on_conflict if f.relation == "conflict" else "override")
                                         for f in conflicts]}
    if same:
        out["same_as"] = {"id": same[0].memory.id, "scope": same[0].memory.scope,
                          "similarity": round(same[0].similarity, 4), "refines": same[0].refines,
                          "reasons": same[0].reasons}
        out["message"] += f"; it now says what {same[0].memory.id} says (consider forgetting one)"
    return out


# -- history ---------------------------------------------------------------------------------------------------
def history(engine: Engine, ctx: Context, mem_id: str) -> MemoryHistory:
    """Every version of a memory, oldest first, the current one last: its text and fields, who wrote it, when and
    why (`created` for the first)."""
    forgotten = False
    try:
        m = get(engine, ctx, mem_id)
    except NotFound:
        gone = _from_tombstone(engine, ctx, mem_id)  # forgotten: its history is kept until the retention passes
        if gone is None:
            raise
        m, forgotten = gone, True
    earlier = engine.store.versions(m.id)
    current = _version_row(m, len(earlier) + 1, 0.0)
    current.pop("replaced_at")
    versions = [{k: v for k, v in row.items() if k != "memory_id"} for row in earlier]
    versions.append({**{k: v for k, v in current.items() if k != "memory_id"}, "current": True})
    for v in versions:  # a reason stored before side fields were screened never leaves in clear
        if isinstance(v.get("why"), str):
            v["why"] = safety.redact_secrets(v["why"])[0]
    events = [e for e in (m.provenance or {}).get("events") or [] if isinstance(e, dict)]
    # the store's rows and the provenance's events, of the declared shapes
    return {"id": m.id, "versions": cast("list[MemoryVersion]", versions),
            "events": cast("list[MemoryEvent]", events), "forgotten": forgotten}


def _from_tombstone(engine: Engine, ctx: Context, mem_id: str) -> Memory | None:
    tomb = engine.store.forgotten(mem_id) if isinstance(mem_id, str) else None
    if tomb is None or tomb["memory"] is None or (tomb["scope"] == "project"
                                                  and tomb["project_id"] != ctx.project_id):
        return None
    names = {f.name for f in dataclasses.fields(Memory)}
    return Memory(**{k: v for k, v in tomb["memory"].items() if k in names})


# -- undo a forget ---------------------------------------------------------------------------------------------
def retention_seconds(engine: Engine) -> float:
    return float(config.value("forget_retention_days", engine.home)) * 86400.0


def purge_forgotten(engine: Engine, now: float | None = None) -> int:
    """Purge the text (and history) of memories forgotten longer ago than the retention; returns how many."""
    before = (time.time() if now is None else now) - retention_seconds(engine)
    if not engine.store.purgeable(before):
        return 0
    with engine.store.write() as c:
        n = engine.store.purge_forgotten(c, before)
    return n


def forget(engine: Engine, ctx: Context, mem_id: str, reason: str | None = None) -> Forgotten:
    """`memories.forget`, then the retention applied: `restorable` says whether `restore` can bring it back (not
    with a retention of 0 days)."""
    res = memories.forget(engine, ctx, mem_id, reason)
    purge_forgotten(engine)
    tomb = engine.store.forgotten(res["id"])
    res["restorable"] = bool(tomb and tomb["memory"] is not None)
    return res


def is_forgotten(engine: Engine, mem_id: str) -> bool:
    return engine.store.get_memory(mem_id) is None and engine.store.forgotten(mem_id) is not None


def unforget(engine: Engine, ctx: Context, mem_id: str) -> MemoryChange:
    """A forgotten memory back, as it was (re-embedded), while the retention keeps its text."""
    purge_forgotten(engine)
    tomb = engine.store.forgotten(mem_id)
    if tomb is None or (tomb["scope"] == "project" and tomb["project_id"] != ctx.project_id):
        raise NotFound(f"no forgotten memory {mem_id} in this project", hint="`mnemo list` shows the ids kept")
    if tomb["memory"] is None:
        days = float(config.value("forget_retention_days", engine.home))
        raise InvalidInput(f"memory {mem_id} was forgotten longer ago than the retention ({days:g} days): its text"
                           " is purged and cannot come back",
                           hint="raise `mnemo config set forget_retention_days N` to keep forgotten text longer")
    names = {f.name for f in dataclasses.fields(Memory)}
    m = Memory(**{k: v for k, v in tomb["memory"].items() if k in names})
    m = dataclasses.replace(m, provenance=with_event(m.provenance, "restored", ctx.user, "from its tombstone"))
    vec = engine.embed([m.text])[0]
    with engine.store.write() as c:
        engine.store.insert_memory(c, m, vec, engine.model_id)
        engine.store.drop_tombstone(c, m.id)
    engine.changed()
    return {"status": "restored", "memory": engine.store.record(m.id),
            "message": "brought back from its tombstone"}
