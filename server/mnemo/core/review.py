"""The review queue: what waits for a person (conflicts, overrides, pending writes, stale anchors, merged branches,
snapshot imports, held skills, lines deleted from a published agent file), each item with a one-line summary and the answers it allows, and what each answer
does. A `branch_merge` answered `merge` runs the branch merge (core/sharing), which is why this module sits above
sharing."""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.records import Anchor, ReviewItem
from mnemo.core.api_types.results import ReviewList, ReviewResolution
from mnemo.core.cards import summarize
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.lifecycle.anchors import anchor_key, reanchor, refresh_stale_flag
from mnemo.core.models import Context, Memory, with_event
from mnemo.core.search import branch_visible
from mnemo.core.sharing.branches import branch_merge

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store

REVIEW_KINDS = ("conflict", "override", "pending", "stale_anchor", "branch_merge", "snapshot_merge", "skill_held",
                "publish_removed")
# What a person can answer for each kind of review item.
RESOLUTIONS: dict[str, tuple[str, ...]] = {
    "conflict": ("supersede", "keep_both", "keep_existing"),
    "override": ("accept", "keep_both", "keep_existing"),
    "pending": ("accept", "reject"),
    "stale_anchor": ("update", "deprecate", "dismiss"),
    "branch_merge": ("merge", "dismiss"),
    "snapshot_merge": ("accept",),
    "skill_held": ("accept", "reject"),
    "publish_removed": ("deprecate", "keep"),
}
REVIEW_HELP = {
    "conflict": "supersede: the new memory replaces the old one (kept in history); keep_both; keep_existing: "
                "the new one is rejected",
    "override": "accept: the specific memory keeps hiding the general one here; keep_both: show both; "
                "keep_existing: deprecate the specific one so the general one shows again",
    "pending": "accept: the memory lands; reject: it stays out of recall (kept in history)",
    "stale_anchor": "update: re-anchor to the current code (or drop a vanished anchor); deprecate; dismiss; or "
                    "edit the note (an edit of its text moves the anchor to the current code and closes the item)",
    "branch_merge": "merge: copy the branch's memories into the default branch (the branch's own give way to the "
                    "copies, so the branch shows each once); dismiss: leave them on the branch",
    "snapshot_merge": "accept: acknowledge the import",
    "skill_held": "accept: the skill file may activate (until it changes); reject: it stays held, never injected",
    "publish_removed": "deprecate: the memory a person deleted from a published agent file goes out of recall (kept "
                       "in history); keep: it stays, and the next `mnemo publish` writes it back",
}


def _review_dict(row: sqlite3.Row, store) -> ReviewItem:
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
    if kind == "pending" and payload.get("source") == "repair":
        guessed = [str(g) for g in payload.get("guessed") or []]
        return (f"salvaged by `mnemo doctor --repair` from {payload.get('salvaged_from', 'the damaged store')}: "
                f"“{_short(item)}”" + (f" (guessed: {', '.join(guessed)})" if guessed else "") + ": accept or reject")
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
        n = payload.get("unmerged", "?")
        return (f"{payload.get('source')} was merged: bring its {n} {'memory' if n == 1 else 'memories'} to "
                f"{payload.get('target')}?")
    if kind == "skill_held":
        flags = ", ".join(str(f).split(":", 1)[-1] for f in payload.get("flags") or [])
        return (f"skill {payload.get('name')} ({payload.get('path')}) reads like a prompt injection ({flags}): "
                "held, not injected, until accepted")
    if kind == "publish_removed":
        return f"“{_short(item)}” was deleted by hand from {payload.get('file', 'a published file')}: deprecate?"
    if kind == "snapshot_merge":
        s = payload.get("summary") or {}
        return (f"imported {s.get('imported', 0)} from {payload.get('file', 'a snapshot')} "
                f"({s.get('conflicts', 0)} conflicts, strategy {payload.get('strategy')})")
    return kind


def review_list(engine: Engine, ctx: Context, kind: str | None = None, include_resolved: bool = False,
                limit: int = 500) -> ReviewList:
    if kind is not None and kind not in REVIEW_KINDS:
        raise InvalidInput(f"unknown review kind {kind!r}", hint=f"use one of: {', '.join(REVIEW_KINDS)}")
    rows = engine.store.review_items(ctx.project_id, kind, include_resolved, limit)
    items: list[ReviewItem] = []
    for r in rows:
        d = _review_dict(r, engine.store)
        # Items about memories on another branch belong to that branch's view.
        mem = d["item"]
        if mem and mem["scope"] == "project" and not branch_visible(mem["branch"], ctx) \
                and r["kind"] not in ("branch_merge",):
            continue
        items.append(d)
    by_kind: dict[str, int] = {}
    for it in items:
        by_kind[it["kind"]] = by_kind.get(it["kind"], 0) + 1
    return {"total": len(items), "by_kind": by_kind, "items": items}


def review_resolve(engine: Engine, ctx: Context, review_id: int | str, resolution: str) -> ReviewResolution:
    """Answer one review item; the answer applies in one transaction. Returns what changed."""
    try:
        rid = int(review_id)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"review id {review_id!r} is not a number", hint="see ids with `mnemo review`") from exc
    store = engine.store
    row = store.review_item(rid)
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
    out: ReviewResolution = {"id": rid, "kind": kind, "resolution": resolution}
    if kind == "branch_merge":
        if resolution == "merge":
            payload = json.loads(row["payload"] or "{}")
            tctx = dataclasses.replace(ctx, branch=payload.get("target") or ctx.default_branch)
            out["merge"] = branch_merge(engine, tctx, payload["source"], _review_id=rid)
        else:
            with store.write() as c:
                store.resolve_reviews(c, [rid], resolution, time.time())
        engine.changed()
        return out
    now = time.time()
    changed: list[str] = []
    resolver = _RESOLVERS[kind]
    if kind == "stale_anchor":  # what it drops is recorded with who answered
        resolver = functools.partial(_stale_anchor, by=ctx.user)
    with store.write() as c:
        resolver(c, store, row, resolution, now, changed, out)
    engine.changed()
    out["changed"] = [i for i in changed if i]
    return out


def _conflict(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    """One answer settles every open conflict of the new memory."""
    new_id = row["item_id"]
    group = store.open_items_about("conflict", new_id)
    if resolution == "keep_existing":
        store.update_memory(c, new_id, reindex=True, status="rejected", updated_at=now)
        changed.append(new_id)
    else:  # a person chose to keep the new memory: it is trusted from now on
        store.update_memory(c, new_id, reindex=True, status="active", trust="trusted", updated_at=now)
        changed.append(new_id)
        if resolution == "supersede":
            for g in group:
                if g["other_id"]:
                    store.update_memory(c, g["other_id"], reindex=True, superseded_by=new_id, updated_at=now)
                    changed.append(g["other_id"])
    store.resolve_reviews(c, [g["id"] for g in group], resolution, now)


def _override(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    if resolution == "keep_existing":
        store.update_memory(c, row["item_id"], reindex=True, deprecated=True,
                            deprecated_reason="override declined in review", updated_at=now)
        changed.append(row["item_id"])
    else:  # accept keeps the override active; keep_both lifts it (resolution is checked at recall)
        changed += [row["other_id"]]
    store.resolve_reviews(c, [row["id"]], resolution, now)


def _pending(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    status = "active" if resolution == "accept" else "rejected"
    # accepted by a person: trusted from now on (flags stay, for the record)
    extra_fields = {"trust": "trusted"} if resolution == "accept" else {}
    store.update_memory(c, row["item_id"], reindex=True, status=status, updated_at=now, **extra_fields)
    changed.append(row["item_id"])
    store.resolve_reviews(c, [row["id"]], resolution, now)


def _stale_anchor(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution,
                  by: str | None = None) -> None:
    mid = row["item_id"]
    m = store.get_memory(mid)
    if m is not None:
        if resolution == "update":
            anchors = reanchor(m.anchors, json.loads(row["payload"] or "{}"))
            dropped = dropped_anchors(m.anchors, anchors)
            prov = m.provenance
            for a in dropped:  # the symbol vanished: the anchor goes; said in the answer and kept in `history`
                prov = with_event(prov, "anchor dropped", by, f"{a['where']}: the symbol is no longer in the file "
                                                              f"(review #{row['id']})", now)
            if dropped:
                store.update_memory(c, mid, anchors=anchors, updated_at=now, provenance=prov)
            else:
                store.update_memory(c, mid, anchors=anchors, updated_at=now)
            if dropped:
                extra["dropped_anchors"] = [a["where"] for a in dropped]
                extra["message"] = (f"dropped the anchor {', '.join(a['where'] for a in dropped)} of {mid}: the "
                                    "symbol is no longer in the file; the note stays, unanchored (`mnemo anchor "
                                    f"{mid} --file F --symbol S` ties it to the code again)")
        elif resolution == "deprecate":
            store.update_memory(c, mid, reindex=True, deprecated=True,
                                deprecated_reason="anchored code changed or vanished", updated_at=now)
        changed.append(mid)
    store.resolve_reviews(c, [row["id"]], resolution, now)
    if m is not None:
        refresh_stale_flag(c, store, mid)


def dropped_anchors(before: list[Anchor], after: list[Anchor]) -> list[dict[str, str]]:
    """The anchors `update` removed (their symbol vanished), each with where it pointed ("path › symbol")."""
    kept = {anchor_key(a) for a in after}
    return [{"where": " › ".join(str(x) for x in anchor_key(a) if x)} for a in before if anchor_key(a) not in kept]


def _snapshot_merge(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    """Accepting the import makes its (unflagged) memories trusted."""
    sha = json.loads(row["payload"] or "{}").get("sha256")
    if sha:
        extra["trusted"] = store.trust_imported(c, sha)
    store.resolve_reviews(c, [row["id"]], resolution, now)


def _skill_held(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    """The answer is the record: `skill_holds` reads it on the next activation."""
    store.resolve_reviews(c, [row["id"]], resolution, now)


def _publish_removed(c, store: Store, row, resolution: str, now: float, changed: list, extra: ReviewResolution) -> None:
    """A line deleted from a published file: deprecate the memory, or keep it (published again)."""
    mid = row["item_id"]
    if resolution == "deprecate" and store.get_memory(mid) is not None:
        file = json.loads(row["payload"] or "{}").get("file") or "a published file"
        store.update_memory(c, mid, reindex=True, deprecated=True, deprecated_reason=f"deleted from {file} by hand",
                            updated_at=now)
        changed.append(mid)
    store.resolve_reviews(c, [row["id"]], resolution, now)


_RESOLVERS = {"publish_removed": _publish_removed, "conflict": _conflict, "override": _override, "pending": _pending, "stale_anchor": _stale_anchor,
              "snapshot_merge": _snapshot_merge, "skill_held": _skill_held}


def project_skills(engine: Engine, ctx: Context) -> tuple[Any, list[dict[str, Any]]]:
    """The project's skill engine (`engine.skill_engine`), current (an edited skill file is re-read and gets its
    new content's hold state at once) and with its holds applied: a skill file that reads like a prompt injection
    stays held until a person accepts it in Review (`skill_held` items, keyed by path and content). Returns the
    engine and each flagged file with its state (held | accepted)."""
    from mnemo.core.skills import hold_key

    eng = engine.skill_engine(ctx)
    eng.maybe_refresh()
    flagged = [{"key": hold_key(s), "path": s.source_path, "name": s.name, "flags": list(s.flags)}
               for s in eng.skills() if s.flags]
    accepted = frozenset(skill_holds(engine, ctx, flagged))
    eng.accepted = lambda skill: hold_key(skill) in accepted
    return eng, [{**f, "state": "accepted" if f["key"] in accepted else "held"} for f in flagged]


def skill_holds(engine: Engine, ctx: Context, flagged: list[dict[str, Any]]) -> set[str]:
    """The review queue's side of held skills. ``flagged``: ``{key, path, name, flags}`` for each skill file that
    reads like a prompt injection, ``key`` naming the file and its content (an edit is a new key). Adds a
    ``skill_held`` item for each key never queued in this project; returns the keys a person accepted."""
    if not flagged:
        return set()
    store = engine.store
    rows = store.skill_hold_answers(ctx.project_id)
    known = {r["key"] for r in rows}
    new = [f for f in flagged if f["key"] not in known]
    if new:
        with store.write() as c:
            for f in new:  # checked again inside the transaction: another window may have queued it meanwhile
                if not store.skill_hold_queued(f["key"], ctx.project_id):
                    store.add_review(c, "skill_held", None, None, ctx.project_id, dict(f))
        engine.changed()
    return {r["key"] for r in rows if r["resolution"] == "accept"}
