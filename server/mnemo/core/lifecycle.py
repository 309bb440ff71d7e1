"""Memory lifecycle: dedup, conflicts and overrides on write, the review queue, decay, tiers, compaction, anchors.

Every multi-record change runs inside ONE `store.write()` transaction (BEGIN IMMEDIATE), so a crash leaves the
store as before or as after; every change to a memory's visibility or vector goes through the store helpers that
log to the change log (`update_memory(reindex=True)`, `insert_memory`, `delete_item`, `set_vector`), so the dense
index follows.

Conflicts (SPEC §4): a new memory whose cosine to a visible memory is >= the threshold (0.80) but whose content
differs. When the existing memory is *more general* than the new one (global < team < project < feature branch),
the new one is an **override**: it lands, hides the general one wherever it is itself visible, and the pair is
logged in Review. Otherwise it is a **conflict**, resolved by `on_conflict`: `review` (default: the new memory waits
as `pending`, a review item links both), `supersede` (the old one gets `superseded_by`), `keep_both`,
`keep_existing` (the new one is not stored).

Decay (SPEC §4): `importance * 2^(-hours / half_life)` where the hours are counted from the later of the last
access and the last decay run (kept in the `decay_state` table), so two runs at the same moment equal one, and runs
at t1 then t2 equal one run at t2. Access resets the clock (reinforcement). Below the tombstone threshold a memory
moves to the cold tier: out of recall, still searchable with `include_cold`, restorable; nothing is deleted.

Tiers: hot (a small set always offered: the most important memories), warm (recalled on match), cold (archive).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sqlite3
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.models import Context, Memory
from mnemo.core.recall import key_points, memory_visible, summarize
from mnemo.core.relation import SIGNAL_MIN_COSINE
from mnemo.core.text import content_hash

if TYPE_CHECKING:
    from pathlib import Path

    from mnemo.core.engine import Engine

ON_CONFLICT = ("review", "supersede", "keep_both", "keep_existing")
REVIEW_KINDS = ("conflict", "override", "pending", "stale_anchor", "branch_merge", "snapshot_merge", "skill_held")
# What a person can answer for each kind of review item.
RESOLUTIONS: dict[str, tuple[str, ...]] = {
    "conflict": ("supersede", "keep_both", "keep_existing"),
    "override": ("accept", "keep_both", "keep_existing"),
    "pending": ("accept", "reject"),
    "stale_anchor": ("update", "deprecate", "dismiss"),
    "branch_merge": ("merge", "dismiss"),
    "snapshot_merge": ("accept",),
    "skill_held": ("accept", "reject"),
}
REVIEW_HELP = {
    "conflict": "supersede: the new memory replaces the old one (kept in history); keep_both; keep_existing: "
                "the new one is rejected",
    "override": "accept: the specific memory keeps hiding the general one here; keep_both: show both; "
                "keep_existing: deprecate the specific one so the general one shows again",
    "pending": "accept: the memory lands; reject: it stays out of recall (kept in history)",
    "stale_anchor": "update: re-anchor to the current code (or drop a vanished anchor); deprecate; dismiss",
    "branch_merge": "merge: copy the branch's memories into the default branch; dismiss",
    "snapshot_merge": "accept: acknowledge the import",
    "skill_held": "accept: the skill file may activate (until it changes); reject: it stays held, never injected",
}

# base_importance: the importance before the first decay, given back by `restore`
DECAY_SCHEMA = ("CREATE TABLE IF NOT EXISTS decay_state (id TEXT PRIMARY KEY, decayed_at REAL NOT NULL,"
                " base_importance REAL)")


@dataclass(frozen=True)
class Settings:
    conflict_threshold: float = SIGNAL_MIN_COSINE  # nearby notes from this cosine on are compared (core/relation)
    half_life_hours: float = 168.0
    tombstone_threshold: float = 0.05
    hot_max: int = 10
    hot_min_importance: float = 0.7
    compact_dup_threshold: float = 0.95
    verbose_chars: int = 1500
    summary_chars: int = 400
    restore_importance: float = 0.5


def settings(home: Path | None = None) -> Settings:
    """The store-wide values (`<home>/config.json`, `mnemo config set`; `MNEMO_CONFLICT_THRESHOLD`,
    `MNEMO_HALF_LIFE_HOURS`, ... override them for this process), re-read when the file changes."""
    from mnemo.core import config

    names = ("conflict_threshold", "half_life_hours", "tombstone_threshold", "hot_max", "hot_min_importance",
             "compact_dup_threshold", "verbose_chars")
    return Settings(**{n: config.value(n, home) for n in names})


def default_on_conflict() -> str:
    """This process's MNEMO_ON_CONFLICT (a client's own value travels in its Context: `Context.on_conflict`)."""
    return os.environ.get("MNEMO_ON_CONFLICT", "").strip().lower() or "review"


def check_on_conflict(value: str | None) -> str:
    if value is None:
        value = default_on_conflict()
    if value not in ON_CONFLICT:
        raise InvalidInput(f"unknown conflict resolution {value!r}; nothing was stored",
                           hint=f"use one of: {', '.join(ON_CONFLICT)} (MNEMO_ON_CONFLICT or on_conflict)")
    return value


def ensure_schema(store) -> None:
    if getattr(store, "_mnemo_decay_schema", False):
        return
    with store.write() as c:
        c.execute(DECAY_SCHEMA)
        if "base_importance" not in {r[1] for r in c.execute("PRAGMA table_info(decay_state)")}:
            c.execute("ALTER TABLE decay_state ADD COLUMN base_importance REAL")  # stores made before it
        # overrides are looked up by the overridden id on every recall; conflicts by the new memory's id
        c.execute("CREATE INDEX IF NOT EXISTS review_other ON review(kind, other_id)")
        c.execute("CREATE INDEX IF NOT EXISTS review_item ON review(kind, item_id)")
    store._mnemo_decay_schema = True


def parse_now(now: Any) -> float:
    """`now` as epoch seconds or an ISO 8601 string (tests, replays); None is the wall clock."""
    if now is None:
        return time.time()
    if isinstance(now, bool):
        raise InvalidInput("now must be a time", hint="epoch seconds or ISO 8601, e.g. 2026-01-31T12:00:00+00:00")
    if isinstance(now, int | float):
        if not math.isfinite(now):
            raise InvalidInput("now must be finite")
        return float(now)
    if isinstance(now, str):
        try:
            return float(now)
        except ValueError:
            pass
        try:
            dt = datetime.fromisoformat(now.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidInput(f"cannot read the time {now!r}",
                               hint="epoch seconds or ISO 8601, e.g. 2026-01-31T12:00:00+00:00") from exc
        return dt.timestamp()
    raise InvalidInput("now must be a time", hint="epoch seconds or ISO 8601")


# -- review queue ----------------------------------------------------------------------------------------------
def add_review(conn: sqlite3.Connection, kind: str, item_id: str | None, other_id: str | None,
               project_id: str | None, payload: dict[str, Any] | None = None, *, resolution: str | None = None,
               now: float | None = None) -> int:
    now = time.time() if now is None else now
    cur = conn.execute(
        "INSERT INTO review(kind, item_id, other_id, project_id, payload, created_at, resolved_at, resolution)"
        " VALUES(?,?,?,?,?,?,?,?)",
        (kind, item_id, other_id, project_id, json.dumps(payload or {}, sort_keys=True), now,
         now if resolution else None, resolution))
    return int(cur.lastrowid)


def _resolve_rows(conn: sqlite3.Connection, ids: list[int], resolution: str, now: float | None = None) -> None:
    now = time.time() if now is None else now
    for rid in ids:
        conn.execute("UPDATE review SET resolved_at=?, resolution=? WHERE id=? AND resolved_at IS NULL",
                     (now, resolution, rid))


def _review_dict(row: sqlite3.Row, store) -> dict[str, Any]:
    payload = json.loads(row["payload"] or "{}")
    item = store.get_memory(row["item_id"]) if row["item_id"] else None
    other = store.get_memory(row["other_id"]) if row["other_id"] else None
    kind = row["kind"]
    return {
        "id": int(row["id"]), "kind": kind, "created_at": row["created_at"], "project_id": row["project_id"],
        "item_id": row["item_id"], "other_id": row["other_id"],
        "item": item.to_dict() if item else None, "other": other.to_dict() if other else None,
        "payload": payload, "summary": _review_summary(kind, item, other, payload),
        "resolutions": list(RESOLUTIONS.get(kind, ())), "help": REVIEW_HELP.get(kind, ""),
        "resolved_at": row["resolved_at"], "resolution": row["resolution"],
    }


def _short(m: Memory | None, n: int = 60) -> str:
    return summarize(m.text, n) if m else "(gone)"


def _review_summary(kind: str, item: Memory | None, other: Memory | None, payload: dict) -> str:
    sim = payload.get("similarity")
    why = [str(r) for r in payload.get("reasons") or []][:3]
    if isinstance(sim, int | float):
        why.append(f"similarity {sim:.2f}")
    sim_s = f" ({'; '.join(why)})" if why else ""
    # a team record lives on the server: its text travels in the payload
    other_s = _short(other) if other or not payload.get("overridden_text") else summarize(payload["overridden_text"],
                                                                                         60)
    if kind == "conflict":
        return f"new “{_short(item)}” conflicts with “{_short(other)}”{sim_s}"
    if kind == "override":
        where = f"on branch {item.branch}" if item and item.branch and payload.get("level") == "branch" \
            else "in this project"
        scope = other.scope if other else payload.get("overridden_scope", "")
        verb = "refines" if payload.get("refines") else "overrides"
        return f"“{_short(item)}” {verb} {scope} “{other_s}” {where}{sim_s}"
    if kind == "pending":
        src = payload.get("source") or "agent"
        who = "imported" if src == "import" else f"{src} wrote"
        flagged = [f for f in payload.get("flags") or [] if f.startswith("injection:") or f in ("hidden_text",
                                                                                               "bidi_control")]
        return f"{who} “{_short(item)}”: accept or reject" + (f" (flagged: {', '.join(flagged)})" if flagged else "")
    if kind == "stale_anchor":
        a = payload.get("anchor") or {}
        what = a.get("symbol") or a.get("path")
        return f"“{_short(item)}” is anchored to {what}, which {payload.get('reason', 'changed')}"
    if kind == "branch_merge":
        return (f"branch {payload.get('source')} was merged into {payload.get('target')} in git: merge its "
                f"{payload.get('unmerged', '?')} memories too?")
    if kind == "skill_held":
        flags = ", ".join(str(f).split(":", 1)[-1] for f in payload.get("flags") or [])
        return (f"skill {payload.get('name')} ({payload.get('path')}) reads like a prompt injection ({flags}): "
                "held, not injected, until accepted")
    if kind == "snapshot_merge":
        s = payload.get("summary") or {}
        return (f"imported {s.get('imported', 0)} from {payload.get('file', 'a snapshot')} "
                f"({s.get('conflicts', 0)} conflicts, strategy {payload.get('strategy')})")
    return kind


def review_list(engine: Engine, ctx: Context, kind: str | None = None, include_resolved: bool = False,
                limit: int = 500) -> dict[str, Any]:
    if kind is not None and kind not in REVIEW_KINDS:
        raise InvalidInput(f"unknown review kind {kind!r}", hint=f"use one of: {', '.join(REVIEW_KINDS)}")
    where = ["(project_id=? OR project_id IS NULL)"]
    params: list[Any] = [ctx.project_id]
    if not include_resolved:
        where.append("resolved_at IS NULL")
    if kind:
        where.append("kind=?")
        params.append(kind)
    rows = engine.store.conn().execute(
        f"SELECT * FROM review WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT ?",
        (*params, int(limit))).fetchall()
    items = []
    for r in rows:
        d = _review_dict(r, engine.store)
        # Items about memories on another branch belong to that branch's view.
        mem = d["item"]
        if mem and mem["scope"] == "project" and mem["branch"] and mem["branch"] not in ctx.visible_branches() \
                and r["kind"] not in ("branch_merge",):
            continue
        items.append(d)
    by_kind: dict[str, int] = {}
    for it in items:
        by_kind[it["kind"]] = by_kind.get(it["kind"], 0) + 1
    return {"total": len(items), "by_kind": by_kind, "items": items}


def review_resolve(engine: Engine, ctx: Context, review_id: int | str, resolution: str) -> dict[str, Any]:
    try:
        rid = int(review_id)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"review id {review_id!r} is not a number", hint="see ids with `mnemo review`") from exc
    store = engine.store
    row = store.conn().execute("SELECT * FROM review WHERE id=?", (rid,)).fetchone()
    if row is None or (row["project_id"] is not None and row["project_id"] != ctx.project_id):
        raise NotFound(f"no review item {rid} in this project", hint="list open items with `mnemo review`")
    if row["resolved_at"] is not None:
        raise InvalidInput(f"review item {rid} is already resolved ({row['resolution']})",
                           hint="list open items with `mnemo review`")
    kind = row["kind"]
    allowed = RESOLUTIONS.get(kind, ())
    if resolution not in allowed:
        raise InvalidInput(f"{resolution!r} is not a resolution for a {kind} item",
                           hint=f"use one of: {', '.join(allowed)} ({REVIEW_HELP.get(kind, '')})")
    now = time.time()
    payload = json.loads(row["payload"] or "{}")
    changed: list[str] = []
    extra: dict[str, Any] = {}
    if kind == "branch_merge":
        if resolution == "merge":
            from mnemo.core import sharing

            target = payload.get("target") or ctx.default_branch
            tctx = dataclasses.replace(ctx, branch=target)
            extra["merge"] = sharing.branch_merge(engine, tctx, payload["source"], _review_id=rid)
        else:
            with store.write() as c:
                _resolve_rows(c, [rid], resolution, now)
        engine._wake.set()
        return {"id": rid, "kind": kind, "resolution": resolution, **extra}

    with store.write() as c:
        if kind == "skill_held":  # the answer is the record: skills.holds reads it on the next activation
            _resolve_rows(c, [rid], resolution, now)
        elif kind == "conflict":
            new_id = row["item_id"]
            group = c.execute("SELECT id, other_id FROM review WHERE kind='conflict' AND item_id=? AND"
                              " resolved_at IS NULL", (new_id,)).fetchall()
            ids = [g["id"] for g in group]
            if resolution == "keep_existing":
                store.update_memory(c, new_id, reindex=True, status="rejected", updated_at=now)
                changed.append(new_id)
            else:  # a person chose to keep the new memory: it is trusted from now on
                store.update_memory(c, new_id, reindex=True, status="active", trust="trusted", updated_at=now)
                changed.append(new_id)
                if resolution == "supersede":
                    for g in group:
                        if g["other_id"]:
                            store.update_memory(c, g["other_id"], reindex=True, superseded_by=new_id,
                                                updated_at=now)
                            changed.append(g["other_id"])
            _resolve_rows(c, ids, resolution, now)
        elif kind == "override":
            if resolution == "keep_existing":
                store.update_memory(c, row["item_id"], reindex=True, deprecated=True,
                                    deprecated_reason="override declined in review", updated_at=now)
                changed.append(row["item_id"])
            else:  # accept keeps the override active; keep_both lifts it (resolution is checked at recall)
                changed += [row["other_id"]]
            _resolve_rows(c, [rid], resolution, now)
        elif kind == "pending":
            status = "active" if resolution == "accept" else "rejected"
            # accepted by a person: trusted from now on (flags stay, for the record)
            extra_fields = {"trust": "trusted"} if resolution == "accept" else {}
            store.update_memory(c, row["item_id"], reindex=True, status=status, updated_at=now, **extra_fields)
            changed.append(row["item_id"])
            _resolve_rows(c, [rid], resolution, now)
        elif kind == "stale_anchor":
            mid = row["item_id"]
            m = _get_in(c, mid)
            if m is not None:
                if resolution == "update":
                    anchors = _reanchor(m.anchors, payload)
                    store.update_memory(c, mid, anchors=anchors, updated_at=now)
                elif resolution == "deprecate":
                    store.update_memory(c, mid, reindex=True, deprecated=True,
                                        deprecated_reason="anchored code changed or vanished", updated_at=now)
                changed.append(mid)
            _resolve_rows(c, [rid], resolution, now)
            if m is not None:
                _refresh_stale_flag(c, store, mid)
        else:  # snapshot_merge: accepting the import makes its (unflagged) memories trusted
            sha = payload.get("sha256")
            if sha:
                cur = c.execute("UPDATE memories SET trust='trusted' WHERE trust='untrusted' AND status='active' AND"
                                " json_extract(provenance, '$.imported_from.snapshot_sha256')=?", (sha,))
                extra["trusted"] = cur.rowcount
            _resolve_rows(c, [rid], resolution, now)
    engine._wake.set()
    return {"id": rid, "kind": kind, "resolution": resolution, "changed": [i for i in changed if i], **extra}


def skill_holds(engine: Engine, ctx: Context, flagged: list[dict[str, Any]]) -> set[str]:
    """The review queue's side of held skills. ``flagged``: ``{key, path, name, flags}`` for each skill file that
    reads like a prompt injection, ``key`` naming the file and its content (an edit is a new key). Adds a
    ``skill_held`` item for each key never queued in this project; returns the keys a person accepted."""
    if not flagged:
        return set()
    rows = engine.store.conn().execute(
        "SELECT json_extract(payload, '$.key') AS key, resolution FROM review WHERE kind='skill_held' AND "
        "(project_id=? OR project_id IS NULL)", (ctx.project_id,)).fetchall()
    known = {r["key"] for r in rows}
    new = [f for f in flagged if f["key"] not in known]
    if new:
        with engine.store.write() as c:
            for f in new:  # checked again inside the transaction: another window may have queued it meanwhile
                if c.execute("SELECT 1 FROM review WHERE kind='skill_held' AND json_extract(payload, '$.key')=? "
                             "AND (project_id=? OR project_id IS NULL)", (f["key"], ctx.project_id)).fetchone():
                    continue
                add_review(c, "skill_held", None, None, ctx.project_id, dict(f))
        engine._wake.set()
    return {r["key"] for r in rows if r["resolution"] == "accept"}


def _get_in(conn: sqlite3.Connection, mem_id: str) -> Memory | None:
    row = conn.execute("SELECT * FROM memories WHERE id=?", (mem_id,)).fetchone()
    return Memory.from_row(row) if row else None


# -- conflicts and overrides on write --------------------------------------------------------------------------
@dataclass
class Found:
    memory: Memory
    similarity: float
    relation: str  # "conflict" | "override" | "duplicate" (the same claim: a paraphrase or a refinement)
    level: str  # "scope" | "branch" | "same"
    refines: bool = False  # a duplicate whose new text adds detail
    reasons: list[str] = field(default_factory=list)  # what core/relation.py saw (e.g. "number 30 -> 60")

    def to_dict(self, resolution: str | None = None) -> dict[str, Any]:
        m = self.memory
        return {"id": m.id, "text": m.text, "scope": m.scope, "branch": m.branch, "type": m.type,
                "similarity": round(self.similarity, 4), "relation": self.relation, "level": self.level,
                "reasons": self.reasons, "resolution": resolution}


def specificity(m: Memory, ctx: Context) -> int:
    """branch over project over team over global: global 0, team 1, project 2, feature-branch 3."""
    if m.scope == "global":
        return 0
    if m.scope == "team":
        return 1
    if m.branch is None or m.branch == ctx.default_branch:
        return 2
    return 3


def nearest_memories(engine: Engine, ctx: Context, vec, k: int = 10) -> list[tuple[Memory, float]]:
    """Visible memories nearest to `vec` (project partition + global), with exact cosines."""
    from mnemo.core.index import exact_scores

    store = engine.store
    parts = [f"p-{ctx.project_id}", "g"]
    scores: dict[str, float] = {}
    index = engine.index
    used = False
    if index is not None and index.ready:
        try:
            seq = index.indexed_seq
            for part in parts:
                for item_id, cos in index.query(part, vec, max(20, k * 4)):
                    scores[item_id] = cos
            tail = [c["item_id"] for c in store.changes_after(seq) if c["op"] == "upsert"]
            for item_id, cos in exact_scores(store, parts, vec, ids=tail) if tail else []:
                scores[item_id] = cos
            used = True
        except Exception:  # noqa: BLE001 - fall back to the truth
            scores.clear()
    if not used:
        scores = dict(exact_scores(store, parts, vec))
    ids = [i for i, _ in sorted(scores.items(), key=lambda kv: -kv[1]) if not i.startswith("blk-")][: k * 4]
    if not ids:
        return []
    exact = dict(exact_scores(store, parts, vec, ids=ids))
    mems = store.get_memories(ids)
    out = [(mems[i], float(exact.get(i, scores[i]))) for i in ids if i in mems]
    out = [(m, s) for m, s in out if memory_visible(m, ctx)]
    out.sort(key=lambda ms: (-ms[1], ms[0].id))
    return out[:k]


def neighbours(engine: Engine, ctx: Context, vec, k: int = 10) -> list[tuple[Memory, float]]:
    """Visible memories nearest to `vec` on every level: this project (and branch), global, and the team server
    (when one is configured and answers); the most similar first, the most specific first on ties."""
    from mnemo.core.team import team_neighbours

    out = nearest_memories(engine, ctx, vec, k) + team_neighbours(engine, ctx, vec, k)
    out.sort(key=lambda ms: (-round(ms[1], 4), -specificity(ms[0], ctx), ms[0].id))
    return out


def relate(engine: Engine, ctx: Context, mem: Memory, vec, threshold: float | None = None) -> list[Found]:
    """How the new memory relates to the visible memories near it (cosine >= threshold) on every level
    (core/relation.py): a contradiction is a `conflict`, or an `override` of a more general memory; the same claim
    (a paraphrase, a refinement) is a `duplicate` of a memory at its own level or a more general one. Other
    nearby memories are other facts and are not returned."""
    from mnemo.core import relation

    thr = settings().conflict_threshold if threshold is None else threshold
    cands = [(m, sim) for m, sim in neighbours(engine, ctx, vec, k=10)
             if sim >= thr and m.id != mem.id and not (m.scope == "project" and m.project_id != mem.project_id)]
    if not cands:
        return []
    decisions = relation.decide_many([(m.text, mem.text, sim) for m, sim in cands], engine.embed,
                                     relation.vocabulary_of(engine.embedder))
    found: list[Found] = []
    mine = specificity(mem, ctx)
    for (m, sim), d in zip(cands, decisions, strict=True):
        theirs = specificity(m, ctx)
        level = "same" if theirs == mine else "scope" if theirs < 2 else "branch"
        if d.relation == "conflict":
            found.append(Found(m, sim, "override" if theirs < mine else "conflict", level, reasons=d.reasons))
        elif d.relation == "duplicate" and theirs <= mine:
            found.append(Found(m, sim, "duplicate", level, refines=d.refines, reasons=d.reasons))
    return found


def check_conflicts(engine: Engine, ctx: Context, mem: Memory, vec, threshold: float | None = None) -> list[Found]:
    """Visible memories that contradict the new one (conflicts, and overrides of more general memories)."""
    return [f for f in relate(engine, ctx, mem, vec, threshold) if f.relation != "duplicate"]


def confirm(conn: sqlite3.Connection, store, mem_id: str, importance: float, now: float) -> None:
    """The same fact stated again: one more confirmation, importance up a little, back from the archive."""
    row = conn.execute("SELECT confirmations, importance, tier FROM memories WHERE id=?", (mem_id,)).fetchone()
    store.update_memory(conn, mem_id, confirmations=row[0] + 1, updated_at=now, last_accessed=now,
                        importance=min(1.0, max(row[1], importance) + 0.05),
                        reindex=row[2] == "cold", tier="warm" if row[2] == "cold" else row[2])


def write_same_claim(engine: Engine, ctx: Context, mem: Memory, vec, dup: Found) -> dict[str, Any]:
    """The new memory says what `dup.memory` says. A paraphrase confirms it (a team record: nothing is stored); a
    refinement at the same level replaces it (the old one stays in history, its confirmations carry over); a
    refinement of a more general memory lands and is shown instead of it here (an accepted override)."""
    store, old, now = engine.store, dup.memory, time.time()
    same_as = {"id": old.id, "scope": old.scope, "similarity": round(dup.similarity, 4), "refines": dup.refines,
               "reasons": dup.reasons}
    base = {"same_as": same_as, "conflicts": []}
    if not dup.refines and old.scope == "team":
        return {**base, "status": "confirmed", "memory": old.to_dict(),
                "message": f"already known to the team as {old.id} (the same claim, cosine {dup.similarity:.2f});"
                           " not stored again"}
    if not dup.refines:
        with store.write() as c:
            confirm(c, store, old.id, mem.importance, now)
        m = store.get_memory(old.id)
        return {**base, "status": "confirmed", "memory": m.to_dict(),
                "message": f"already known: confirmed {m.confirmations}x (the same claim as {old.id}, cosine "
                           f"{dup.similarity:.2f})"}
    if dup.level != "same":
        with store.write() as c:
            store.insert_memory(c, mem, vec, engine.model_id)
            add_review(c, "override", mem.id, old.id, ctx.project_id,
                       {"similarity": round(dup.similarity, 4), "level": dup.level, "branch": mem.branch,
                        "overridden_scope": old.scope, "overridden_text": old.text, "refines": True},
                       resolution="accept", now=now)
        where = f"on branch {mem.branch}" if dup.level == "branch" else "in this project"
        return {**base, "status": "created", "memory": store.get_memory(mem.id).to_dict(),
                "message": f"remembered; it refines {old.scope} {old.id} and is shown instead of it {where}"}
    new = dataclasses.replace(
        mem, confirmations=old.confirmations + 1, importance=min(1.0, max(old.importance, mem.importance) + 0.05),
        tags=list(dict.fromkeys(mem.tags + old.tags)), anchors=mem.anchors or old.anchors,
        provenance={**mem.provenance, "refines": old.id})
    with store.write() as c:
        store.insert_memory(c, new, vec, engine.model_id)
        store.update_memory(c, old.id, reindex=True, superseded_by=new.id, updated_at=now)
    return {**base, "status": "confirmed", "memory": store.get_memory(new.id).to_dict(),
            "message": f"confirmed {new.confirmations}x: it refines {old.id}, and the more detailed text replaces it"
                       " (the old one stays in history)"}


def write_new(engine: Engine, ctx: Context, mem: Memory, vec, found: list[Found],
              on_conflict: str | None = None) -> dict[str, Any]:
    """Store a new memory given what `check_conflicts` found, in one transaction; returns the remember result."""
    on_conflict = check_on_conflict(on_conflict)
    store = engine.store
    now = time.time()
    found = [f for f in found if f.relation in ("conflict", "override")]
    same = [f for f in found if f.relation == "conflict"]
    over = [f for f in found if f.relation == "override"]
    if found and on_conflict == "keep_existing":
        first = found[0].memory
        return {"status": "kept_existing", "memory": first.to_dict(),
                "message": f"not stored: it conflicts with {first.id} and keep_existing was asked",
                "conflicts": [f.to_dict("keep_existing") for f in found]}
    status = mem.status
    if same and on_conflict == "review":
        status = "pending"
    mem = dataclasses.replace(mem, status=status)
    with store.write() as c:
        store.insert_memory(c, mem, vec, engine.model_id)
        for f in same:
            payload = {"similarity": round(f.similarity, 4), "new_text": mem.text, "existing_text": f.memory.text,
                       "reasons": f.reasons}
            if on_conflict == "review":
                add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, now=now)
            elif on_conflict == "supersede":
                store.update_memory(c, f.memory.id, reindex=True, superseded_by=mem.id, updated_at=now)
                add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, resolution="supersede",
                           now=now)
            else:  # keep_both: logged as decided, so compaction never merges the pair behind the person's back
                add_review(c, "conflict", mem.id, f.memory.id, ctx.project_id, payload, resolution="keep_both",
                           now=now)
        for f in over:
            add_review(c, "override", mem.id, f.memory.id, ctx.project_id,
                       {"similarity": round(f.similarity, 4), "level": f.level, "branch": mem.branch,
                        "overridden_scope": f.memory.scope, "overridden_text": f.memory.text,
                        "reasons": f.reasons}, now=now)
        if mem.status == "pending" and not same:
            add_review(c, "pending", mem.id, None, ctx.project_id,
                       {"source": mem.source, **({"flags": mem.flags} if mem.flags else {})}, now=now)
    parts = []
    if same:
        ids = ", ".join(f.memory.id for f in same)
        parts.append({"review": f"conflicts with {ids}: waiting in Review",
                      "supersede": f"remembered; supersedes {ids}",
                      "keep_both": f"remembered; similar to {ids} (kept both)"}[on_conflict])
    elif mem.status == "pending":
        parts.append("waiting in Review")
    else:
        parts.append("remembered")
    for f in over:
        where = f"on branch {mem.branch}" if f.level == "branch" else "in this project"
        parts.append(f"overrides {f.memory.scope} {f.memory.id} {where}")
    if same and on_conflict == "review":
        res_status = "conflict"
    else:
        res_status = "created" if mem.status == "active" else mem.status
    res_for = {"review": "review", "supersede": "supersede", "keep_both": "keep_both"}[on_conflict]
    return {"status": res_status, "memory": store.get_memory(mem.id).to_dict(), "message": "; ".join(parts),
            "conflicts": [f.to_dict(res_for if f.relation == "conflict" else "override") for f in found]}


def hidden_by_overrides(store, ctx: Context, candidate_ids: list[str]) -> set[str]:
    """Ids among `candidate_ids` hidden in `ctx` by a more specific memory that overrides them and is visible."""
    if not candidate_ids:
        return set()
    ensure_schema(store)
    out: set[str] = set()
    ids = list(candidate_ids)
    rows = []
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        rows += store.conn().execute(
            f"SELECT item_id, other_id FROM review WHERE kind='override' AND other_id IN"
            f" ({','.join('?' * len(chunk))}) AND (resolution IS NULL OR resolution='accept')", chunk).fetchall()
    if not rows:
        return out
    overriding = store.get_memories({r["item_id"] for r in rows})
    for r in rows:
        m = overriding.get(r["item_id"])
        if m is not None and memory_visible(m, ctx):
            out.add(r["other_id"])
    return out


# -- decay and tiers -------------------------------------------------------------------------------------------
def _scope_where(ctx: Context) -> tuple[str, list[Any]]:
    return "((scope='project' AND project_id=?) OR scope='global')", [ctx.project_id]


def check_decay_time(now: Any, force: bool = False, slack: float = 60.0) -> float:
    """`now` for a decay run, refused when it lies in the future (aging notes ahead of time cannot be undone)
    unless `force` (a dry run passes force: it writes nothing)."""
    at = parse_now(now)
    if at > time.time() + slack and not force:
        when = datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")
        raise InvalidInput(f"the decay time {when} is in the future: it would age memories ahead of time, and that "
                           "cannot be undone",
                           hint="see what it would do first with a dry run (`mnemo decay --now ... --dry-run`), "
                                "then pass --force to run it anyway")
    return at


def decay(engine: Engine, ctx: Context, now: Any = None, dry_run: bool = False) -> dict[str, Any]:
    """Exponential decay of this project's (and global) memories; cold below the threshold. Idempotent.
    `dry_run`: the same report, computed inside a savepoint that is rolled back (nothing is written)."""
    now = parse_now(now)
    ensure_schema(engine.store)
    s = settings()
    report = {"now": now, "half_life_hours": s.half_life_hours, "tombstone_threshold": s.tombstone_threshold,
              "scanned": 0, "decayed": 0, "untouched": 0, "moved_to_cold": [], "tier_moves": [],
              "dry_run": bool(dry_run)}
    with engine.store.write() as c:
        if dry_run:
            c.execute("SAVEPOINT decay_dry_run")
        _decay_rows(c, engine.store, ctx, now, report)
        report["tier_moves"] = retier(c, engine.store, ctx)
        report["tiers"] = tier_counts(engine, ctx)  # this thread's connection: sees the run's changes
        if dry_run:
            c.execute("ROLLBACK TO decay_dry_run")
            c.execute("RELEASE decay_dry_run")
    if not dry_run:
        engine._wake.set()
    return report


def _decay_rows(c: sqlite3.Connection, store, ctx: Context, now: float, report: dict[str, Any]) -> None:
    s = settings()
    hl = s.half_life_hours * 3600.0
    where, params = _scope_where(ctx)
    rows = c.execute(f"SELECT * FROM memories WHERE {where} AND status='active' AND superseded_by IS NULL"
                     " AND deprecated=0 AND tier != 'cold' ORDER BY id", params).fetchall()
    mems = [Memory.from_row(r) for r in rows]
    state = _decay_state(c, [m.id for m in mems])
    for m in mems:
        report["scanned"] += 1
        ref = max(m.last_accessed, m.created_at, state.get(m.id, -math.inf))
        elapsed = now - ref
        if elapsed <= 0:
            report["untouched"] += 1
            continue
        new = min(m.importance * math.pow(2.0, -elapsed / hl), m.importance)
        if m.importance - new < 1e-6 and new >= s.tombstone_threshold:
            report["untouched"] += 1  # negligible: keep the clock where it was (path independence holds)
            continue
        c.execute("INSERT INTO decay_state(id, decayed_at, base_importance) VALUES(?, ?, ?) ON CONFLICT(id)"
                  " DO UPDATE SET decayed_at=excluded.decayed_at,"
                  " base_importance=COALESCE(decay_state.base_importance, excluded.base_importance)",
                  (m.id, now, m.importance))
        if new < s.tombstone_threshold:
            store.update_memory(c, m.id, reindex=True, importance=new, tier="cold")
            report["moved_to_cold"].append({
                "id": m.id, "title": summarize(m.text, 60), "from_tier": m.tier, "importance": round(new, 4),
                "reason": f"importance {new:.3f} < {s.tombstone_threshold} after "
                          f"{elapsed / 3600:.0f} h without access"})
        elif new != m.importance:
            store.update_memory(c, m.id, importance=new)
            report["decayed"] += 1
        else:
            report["untouched"] += 1


def _decay_state(conn: sqlite3.Connection, ids: list[str]) -> dict[str, float]:
    out = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i:i + 500]
        for r in conn.execute(f"SELECT id, decayed_at FROM decay_state WHERE id IN ({','.join('?' * len(chunk))})",
                              chunk):
            out[r[0]] = float(r[1])
    return out


def hot_score(m: Memory) -> float:
    return m.importance * (1.0 + 0.1 * min(max(m.confirmations - 1, 0), 10))


def retier(conn: sqlite3.Connection, store, ctx: Context) -> list[dict[str, Any]]:
    """Hot = the few most important active memories of the project (and of global); the rest warm. Cold stays."""
    s = settings()
    moves = []
    for where, params in (("scope='project' AND project_id=?", [ctx.project_id]), ("scope='global'", [])):
        rows = conn.execute(f"SELECT * FROM memories WHERE {where} AND tier IN ('hot','warm')", params).fetchall()
        mems = [Memory.from_row(r) for r in rows]
        eligible = [m for m in mems if m.status == "active" and not m.superseded_by and not m.deprecated
                    and m.importance >= s.hot_min_importance]
        eligible.sort(key=lambda m: (-hot_score(m), -m.last_accessed, m.id))
        hot = {m.id for m in eligible[: max(0, s.hot_max)]}
        for m in mems:
            want = "hot" if m.id in hot else "warm"
            if m.tier != want:
                store.update_memory(conn, m.id, tier=want)
                why = (f"among the {s.hot_max} most important (importance {m.importance:.2f}, "
                       f"confirmed {m.confirmations}x)" if want == "hot" else
                       "no longer among the most important active memories")
                moves.append({"id": m.id, "title": summarize(m.text, 60), "from_tier": m.tier, "to_tier": want,
                              "reason": why})
    return moves


TIER_MEANING = {"hot": "always offered (small)", "warm": "recalled on match", "cold": "archive: search with --cold"}


def tier_counts(engine: Engine, ctx: Context) -> dict[str, int]:
    where, params = _scope_where(ctx)
    rows = engine.store.conn().execute(
        f"SELECT tier, COUNT(*) FROM memories WHERE {where} AND status='active' AND superseded_by IS NULL AND"
        " deprecated=0 GROUP BY tier", params).fetchall()
    out = {"hot": 0, "warm": 0, "cold": 0}
    for t, n in rows:
        out[str(t)] = int(n)
    return out


def tier_index(engine: Engine, ctx: Context, top: int = 5) -> dict[str, Any]:
    """`mnemo stats`: the tiers like an index of the memory (count, meaning, the top entries)."""
    where, params = _scope_where(ctx)
    out: dict[str, Any] = {}
    conn = engine.store.conn()
    for tier in ("hot", "warm", "cold"):
        rows = conn.execute(
            f"SELECT * FROM memories WHERE {where} AND tier=? AND status='active' AND superseded_by IS NULL AND"
            " deprecated=0 ORDER BY importance DESC, updated_at DESC, id", (*params, tier)).fetchall()
        mems = [Memory.from_row(r) for r in rows]
        mems = [m for m in mems if m.scope != "project" or m.branch is None or m.branch in ctx.visible_branches()]
        out[tier] = {"count": len(mems), "meaning": TIER_MEANING[tier],
                     "top": {m.id: f"{summarize(m.text, 60)} (importance {m.importance:.2f})" for m in mems[:top]}}
    return out


def hot_memories(engine: Engine, ctx: Context) -> list[dict[str, Any]]:
    rows = engine.store.query_memories("tier='hot' AND ((scope='project' AND project_id=?) OR scope='global')",
                                       (ctx.project_id,), order="importance DESC, id")
    return [m.to_dict() for m in rows if memory_visible(m, ctx)]


def restore(engine: Engine, ctx: Context, memory_id: str) -> dict[str, Any]:
    """Bring a cold (archived) memory back to warm, with its decay clock reset and the importance it had before it
    decayed (memories archived before that was recorded get at least `restore_importance`)."""
    m = engine.get(ctx, memory_id)
    if m.tier != "cold":
        return {"status": "unchanged", "memory": m.to_dict(), "message": f"{m.id} is {m.tier}, not archived"}
    ensure_schema(engine.store)
    now = time.time()
    with engine.store.write() as c:
        row = c.execute("SELECT base_importance FROM decay_state WHERE id=?", (m.id,)).fetchone()
        base = row[0] if row is not None and row[0] is not None else settings().restore_importance
        engine.store.update_memory(c, m.id, reindex=True, tier="warm", last_accessed=now,
                                   importance=max(m.importance, float(base)))  # as it was before it decayed
        c.execute("DELETE FROM decay_state WHERE id=?", (m.id,))
    engine._wake.set()
    return {"status": "restored", "memory": engine.store.get_memory(m.id).to_dict(), "message": "back in recall"}


# -- compaction ------------------------------------------------------------------------------------------------
def kept_apart_pairs(conn: sqlite3.Connection) -> set[frozenset]:
    """Pairs a person (or a merge strategy they chose) decided to keep apart: `keep_both` on a conflict or an
    override, on write or in Review, and the remote/local pairs of a snapshot merge with `keep_both`."""
    rows = conn.execute("SELECT item_id, other_id FROM review WHERE kind IN ('conflict','override') AND"
                        " resolution='keep_both' AND item_id IS NOT NULL AND other_id IS NOT NULL").fetchall()
    return {frozenset((r[0], r[1])) for r in rows}


def _cosines(store, ids: list[str]):
    import numpy as np

    blobs = store.vectors(ids)
    keep = [i for i in ids if i in blobs]
    if not keep:
        return keep, np.zeros((0, 0), dtype=np.float32)
    mat = np.frombuffer(b"".join(blobs[i] for i in keep), dtype=np.float32).reshape(len(keep), -1)
    return keep, mat


def summarize_verbose(text: str, limit: int) -> str:
    """Extractive summary: the first sentence plus key points, within `limit` characters."""
    flat = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s+", flat, maxsplit=1)[0]
    out = summarize(first, limit)
    for kp in key_points(text, 5):
        if kp in out:
            continue
        cand = out + ("; " if out and not out.endswith((".", ":")) else " ") + kp
        if len(cand) > limit:
            break
        out = cand
    return out


def compact(engine: Engine, ctx: Context) -> dict[str, Any]:
    """Merge near-duplicates (adding their confirmations), summarize verbose notes, re-tier; report what moved."""
    s = settings()
    store = engine.store
    import numpy as np

    where, params = _scope_where(ctx)
    mems = store.query_memories(f"{where} AND status='active' AND superseded_by IS NULL AND deprecated=0",
                                params, order="id")
    # 1) near-duplicates, within one (scope, project, branch, type)
    groups: dict[tuple, list[Memory]] = {}
    for m in mems:
        groups.setdefault((m.scope, m.project_id, m.branch, m.type), []).append(m)
    with store.write() as c:
        keep_both = kept_apart_pairs(c)
    from mnemo.core import relation

    vocab = relation.vocabulary_of(engine.embedder)
    merges: list[tuple[Memory, list[tuple[Memory, float]]]] = []
    absorbed: set[str] = set()
    for group in groups.values():
        if len(group) < 2:
            continue
        group.sort(key=lambda m: (-m.confirmations, -m.importance, m.created_at, m.id))
        ids, mat = _cosines(store, [m.id for m in group])
        by_id = {m.id: m for m in group}
        pos = {i: k for k, i in enumerate(ids)}
        for keeper in group:
            if keeper.id in absorbed or keeper.id not in pos:
                continue
            absorbed.add(keeper.id)  # processed: a later (weaker) keeper never absorbs it
            sims = mat @ mat[pos[keeper.id]]
            took = []
            for j in np.argsort(-sims, kind="stable"):
                other_id = ids[int(j)]
                sim = float(sims[int(j)])
                if sim < s.compact_dup_threshold:
                    break
                if other_id in absorbed or any(frozenset((x, other_id)) in keep_both
                                               for x in [keeper.id, *(m.id for m, _ in took)]):
                    continue
                # close is not enough: "PostgreSQL 14" / "PostgreSQL 16" is a contradiction, never merged
                if not relation.same_claim(keeper.text, by_id[other_id].text, sim, vocab):
                    continue
                took.append((by_id[other_id], sim))
                absorbed.add(other_id)
            if took:
                merges.append((keeper, took))
    # 2) verbose notes -> an extractive summary that supersedes the original (kept in history)
    touched = {k.id for k, _ in merges} | {m.id for _, took in merges for m, _ in took}
    verbose = [m for m in mems if m.id not in touched and len(m.text) > s.verbose_chars]
    summaries = []
    for m in verbose:
        short = summarize_verbose(m.text, s.summary_chars)
        if len(short) >= len(m.text) or not short:
            continue
        summaries.append((m, short))
    vecs = engine.embed([t for _, t in summaries]) if summaries else []
    now = time.time()
    report: dict[str, Any] = {"merged": [], "summarized": [], "tier_moves": []}
    with store.write() as c:
        for keeper, took in merges:
            cur = _get_in(c, keeper.id)
            if cur is None or cur.superseded_by:
                continue
            conf = cur.confirmations + sum(m.confirmations for m, _ in took)
            imp = max([cur.importance] + [m.importance for m, _ in took])
            prov = dict(cur.provenance)
            prov["merged_from"] = sorted(set(prov.get("merged_from", [])) | {m.id for m, _ in took})
            store.update_memory(c, keeper.id, confirmations=conf, importance=imp, provenance=prov, updated_at=now)
            for m, _sim in took:
                store.update_memory(c, m.id, reindex=True, superseded_by=keeper.id, updated_at=now)
            report["merged"].append({
                "kept": keeper.id, "title": summarize(keeper.text, 60), "merged": [m.id for m, _ in took],
                "confirmations": conf,
                "reason": "near-duplicates (cosine " + ", ".join(f"{sim:.2f}" for _, sim in took) + ")"})
        for (m, short), vec in zip(summaries, vecs, strict=True):
            prov = dict(m.provenance)
            prov["summarized_from"] = m.id
            new = dataclasses.replace(
                m, id="mem-" + uuid.uuid4().hex[:20], text=short, content_hash=content_hash(short), provenance=prov,
                updated_at=now, source=m.source)
            store.insert_memory(c, new, vec, engine.model_id)
            store.update_memory(c, m.id, reindex=True, superseded_by=new.id, updated_at=now)
            report["summarized"].append({"from": m.id, "to": new.id, "chars_before": len(m.text),
                                         "chars_after": len(short),
                                         "reason": f"longer than {s.verbose_chars} characters"})
        report["tier_moves"] = retier(c, store, ctx)
    engine._wake.set()
    report["tiers"] = tier_counts(engine, ctx)
    return report


# -- anchors ---------------------------------------------------------------------------------------------------
def rel_path(ctx: Context, path: str) -> str:
    if not isinstance(path, str) or not path.strip():
        raise InvalidInput("an anchor needs a file path", hint="pass the path of the anchored file")
    p = path.strip().replace("\\", "/")
    if os.path.isabs(p) and ctx.root:
        root = os.path.realpath(ctx.root)
        real = os.path.realpath(p)
        if real == root or real.startswith(root + os.sep):
            p = os.path.relpath(real, root).replace(os.sep, "/")
    if os.path.isabs(p) or any(part == ".." for part in p.split("/")):
        raise InvalidInput(f"anchor path {path!r} is outside the project",
                           hint="anchor to a file inside the workspace (a path relative to its root)")
    return p.lstrip("./") if p.startswith("./") else p


def check_anchor(ctx: Context, anchor: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(anchor, dict):
        raise InvalidInput("an anchor is an object", hint='e.g. {"path": "src/pay.py", "symbol": "charge", '
                                                          '"hash": "..."}')
    out: dict[str, Any] = {"path": rel_path(ctx, anchor.get("path"))}
    for key in ("symbol", "hash"):
        v = anchor.get(key)
        if v is not None:
            if not isinstance(v, str) or len(v) > 512:
                raise InvalidInput(f"anchor {key} must be a short string")
            out[key] = v
    for key in ("start_line", "end_line"):
        v = anchor.get(key)
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidInput(f"anchor {key} must be a line number")
            out[key] = v
    return out


def _anchor_key(a: dict[str, Any]) -> tuple:
    return (a.get("path"), a.get("symbol"))


def anchor(engine: Engine, ctx: Context, memory_id: str, anchor_: dict[str, Any]) -> dict[str, Any]:
    """Anchor a memory to code (file, symbol, line range, hash of the code); replaces an anchor on the same spot."""
    m = engine.get(ctx, memory_id)
    a = check_anchor(ctx, anchor_)
    anchors = [x for x in m.anchors if _anchor_key(x) != _anchor_key(a)] + [a]
    with engine.store.write() as c:
        engine.store.update_memory(c, m.id, anchors=anchors, updated_at=time.time())
        stale = c.execute("SELECT id, payload FROM review WHERE kind='stale_anchor' AND item_id=? AND"
                          " resolved_at IS NULL", (m.id,)).fetchall()
        _resolve_rows(c, [r["id"] for r in stale
                          if _anchor_key(json.loads(r["payload"]).get("anchor", {})) == _anchor_key(a)], "update")
        _refresh_stale_flag(c, engine.store, m.id)
    return {"status": "anchored", "memory": engine.store.get_memory(m.id).to_dict()}


def _reanchor(anchors: list[dict], payload: dict) -> list[dict]:
    old = payload.get("anchor") or {}
    out = []
    for a in anchors:
        if _anchor_key(a) == _anchor_key(old):
            if payload.get("reason") == "vanished":
                continue
            a = dict(a)
            cur = payload.get("current") or {}
            if cur.get("hash"):
                a["hash"] = cur["hash"]
            for k in ("start_line", "end_line"):
                if cur.get(k) is not None:
                    a[k] = cur[k]
        out.append(a)
    return out


def _refresh_stale_flag(conn: sqlite3.Connection, store, mem_id: str) -> None:
    m = _get_in(conn, mem_id)
    if m is None:
        return
    open_ = conn.execute("SELECT COUNT(*) FROM review WHERE kind='stale_anchor' AND item_id=? AND resolved_at IS NULL",
                         (mem_id,)).fetchone()[0]
    flags = [f for f in m.flags if f != "stale_anchor"] + (["stale_anchor"] if open_ else [])
    if flags != m.flags:
        store.update_memory(conn, mem_id, flags=flags)


def check_anchors(engine: Engine, ctx: Context, path: str, symbols: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Flag memories anchored into `path` whose symbol changed (other hash) or vanished; `symbols` is what the
    file holds now (`[{"name", "hash", "start_line", "end_line"}]`; None = the file is gone). A symbol that is
    back to its anchored hash clears its flag."""
    rel = rel_path(ctx, path)
    if symbols is not None and not isinstance(symbols, list):
        raise InvalidInput("symbols must be a list", hint='[{"name": "charge", "hash": "..."}]')
    current: dict[str | None, dict] = {}
    for sdef in symbols or []:
        if isinstance(sdef, dict):
            name = sdef.get("name") or sdef.get("symbol")
            current[name if name else None] = sdef
    like = f'%"path": {json.dumps(rel)}%'
    mems = engine.store.query_memories("scope='project' AND project_id=? AND anchors LIKE ? AND status!='rejected'"
                                       " AND superseded_by IS NULL AND deprecated=0", (ctx.project_id, like))
    mems = [m for m in mems if m.branch is None or m.branch in ctx.visible_branches()]
    flagged, cleared, ok = [], [], 0
    now = time.time()
    with engine.store.write() as c:
        for m in mems:
            open_rows = c.execute("SELECT id, payload FROM review WHERE kind='stale_anchor' AND item_id=? AND"
                                  " resolved_at IS NULL", (m.id,)).fetchall()
            open_by_key = {_anchor_key(json.loads(r["payload"]).get("anchor", {})): r["id"] for r in open_rows}
            for a in m.anchors:
                if a.get("path") != rel:
                    continue
                sym = a.get("symbol")
                cur = None if symbols is None else current.get(sym if sym else None)
                if symbols is None or (sym and cur is None):
                    reason = "vanished"
                elif cur is not None and a.get("hash") and cur.get("hash") and cur["hash"] != a["hash"]:
                    reason = "changed"
                else:
                    reason = None
                key = _anchor_key(a)
                if reason is None:
                    ok += 1
                    if key in open_by_key:
                        _resolve_rows(c, [open_by_key[key]], "fixed", now)
                        cleared.append({"memory_id": m.id, "anchor": a})
                    continue
                if key not in open_by_key:
                    cur_info = {k: cur.get(k) for k in ("hash", "start_line", "end_line")} if cur else None
                    rid = add_review(c, "stale_anchor", m.id, None, ctx.project_id,
                                     {"anchor": a, "reason": reason, "current": cur_info}, now=now)
                    flagged.append({"memory_id": m.id, "review_id": rid, "anchor": a, "reason": reason,
                                    "title": summarize(m.text, 60)})
            _refresh_stale_flag(c, engine.store, m.id)
    return {"path": rel, "checked": len(mems), "ok": ok, "flagged": flagged, "cleared": cleared}


__all__ = [
    "ON_CONFLICT", "RESOLUTIONS", "Settings", "settings", "check_conflicts", "write_new", "hidden_by_overrides",
    "decay", "retier", "tier_index", "tier_counts", "compact", "restore", "anchor", "check_anchors",
    "review_list", "review_resolve", "add_review", "nearest_memories", "hot_memories", "relate", "confirm",
    "write_same_claim", "kept_apart_pairs", "neighbours",
]
